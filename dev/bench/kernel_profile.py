#!/usr/bin/env python3
"""kernel_profile.py: where one training step's GPU time goes, kernel by kernel, for one or
more trainers side by side, from Nsight Compute's per-kernel durations.

Each input is the CSV that `ncu --csv --metrics gpu__time_duration.sum --log-file F`
writes for a training run of a few steps: one row per profiled kernel launch, in launch
order. A step ends with the optimizer's update (a run of AdamW kernels), so the last whole
step profiled is the kernels after one update's last AdamW launch up to and including the
next update's. The first step is left out when a later one is whole: it pays one-time
costs (cuDNN plans, cuBLASLt's first calls).

Prints a markdown report: per kind of kernel (matmul, attention, LayerNorm, ...) the
microseconds and launches a step for each trainer, and the ratio of each trainer's time to
the first's; with --model, the rates the matmuls and attention reach; then each trainer's
heaviest kernels. Times are kernels alone, one after
the other as ncu serializes them: launch gaps and host waits are not in them.

An input that cannot be read (no file, no ncu table, no whole step) is named in the report
and on stderr, and the others are reported. Exit status 1 when one of them is not
--optional, else 0.

usage: kernel_profile.py [--top N] [--title TEXT] [--model L,C,Vp,B,T] [--optional LABEL,...]
                         LABEL=CSV [LABEL=CSV ...]
"""
import argparse
import csv
import io
import re
import sys

# (kind, pattern) in order: the first that matches a kernel's lower-cased name wins.
# The names are what each library and trainer call their kernels (cuBLASLt's sm90_xmma_*,
# nvjet_*, cutlass_*, whose fused epilogues put "bias" or "bgradb" in the name; cuDNN's
# fused attention; llm.c's and ours).
KINDS = [
    ("attention", r"sdpa|flash|fmha|attention|attn|cudnn|fort_native|permute|causal_softmax|softmax_forward|softmax_autoregressive"),
    ("bias gradient", r"matmul_backward_bias|bias_grad|reduce_add_sum"),
    ("matmul", r"gemm|nvjet|cutlass|xmma|gemv|splitk|cublas|matmul"),
    ("layernorm", r"layernorm|layer_norm|rmsnorm|fused_residual"),  # llm.c's residual add + LayerNorm
    ("residual", r"residual"),
    ("gelu", r"gelu"),
    ("classifier and loss", r"classifier|cross_?entropy|logits|loss"),
    ("encoder", r"encoder|wte|wpe|embedding"),
    ("adamw", r"adamw"),
    ("roundings, ZeRO's sums", r"round_stochastic|refresh|reduce_parts|reduce_slices|reduce_pack|quantize|dequant|pack_kernel"),
    ("gradient norm", r"norm|sumsq|grad_block_sums"),
    ("casts, copies, sums", r"cast|copy|fill|accumulate|memset|zero"),
    ("other", r""),
]
UPDATE = re.compile(r"adamw", re.I)   # on the function's own name, not its template arguments
UNITS_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9}


class Unreadable(Exception):
    """An input that gives no step: the file, and what is wrong with it."""


def base_name(name):
    """A kernel's name without 'void ' and its parameter list: the first '(' outside the
    template arguments (which may hold casts, as in kernel<(int)3>) starts that list.
    Namespaces and template arguments stay: cutlass::Kernel2<...gemm...> is a matmul."""
    n = name.strip()
    if n.startswith("void "):
        n = n[5:]
    depth = 0
    for i, ch in enumerate(n):
        if ch == "<":
            depth += 1
        elif ch == ">" and depth > 0:
            depth -= 1
        elif ch == "(" and depth == 0 and i > 0:
            return n[:i].strip()
    return n


def kind_of(name):
    low = name.lower()
    for kind, pat in KINDS:
        if re.search(pat, low):
            return kind
    return "other"


def number(text, path):
    """A value as ncu prints it: digits, thousands separated by ',' and a '.' before the
    fraction. Anything else (a locale's '1.234,5') is refused, never misread."""
    t = text.strip()
    if not re.fullmatch(r"[0-9]{1,3}(,[0-9]{3})*(\.[0-9]+)?|[0-9]+(\.[0-9]+)?", t):
        raise Unreadable(f"{path}: '{text}' is not a number as ncu writes them (1,234.5)")
    return float(t.replace(",", ""))


def read_launches(path):
    """[(name, ns)] in launch order from ncu's CSV (the details page: a row per metric, or
    the raw page: a column per metric, its units in the row after the header)."""
    try:
        with open(path, newline="", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise Unreadable(f"{path}: {e.strerror}")
    # ncu's own lines (==PROF==, ==WARNING==) and the program's output come before the table
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        raise Unreadable(f"{path}: no ncu CSV table (no header line starting with \"ID\"); its last lines: "
            + " / ".join(l[:100] for l in lines[-3:] if l.strip()))
    rows = list(csv.reader(io.StringIO("\n".join(l for l in lines[start:] if l.startswith('"')))))
    head = rows[0]
    col = {h: i for i, h in enumerate(head)}
    if "Kernel Name" not in col or "ID" not in col:
        raise Unreadable(f"{path}: the header has no 'ID' or 'Kernel Name' column: {head}")
    by_id = {}
    if "Metric Name" in col and "Metric Value" in col:
        # the metric by its name, or by its label ("Duration", ncu's --print-metric-name label)
        body = [r for r in rows[1:] if len(r) == len(head)]
        names = {r[col["Metric Name"]] for r in body}
        want = next((m for m in ("gpu__time_duration.sum", "Duration") if m in names), None)
        if want is None:
            raise Unreadable(f"{path}: no gpu__time_duration.sum (or its label Duration) among the metrics {sorted(names)[:5]}")
        for r in body:
            if r[col["Metric Name"]] != want:
                continue
            unit = r[col["Metric Unit"]] if "Metric Unit" in col else "nsecond"
            if unit not in UNITS_NS:
                raise Unreadable(f"{path}: unknown unit '{unit}' for {want}")
            by_id[int(number(r[col["ID"]], path))] = (r[col["Kernel Name"]],
                                                      number(r[col["Metric Value"]], path) * UNITS_NS[unit])
    elif "gpu__time_duration.sum" in col:
        c = col["gpu__time_duration.sum"]
        unit = "nsecond"
        for r in rows[1:]:
            if len(r) != len(head):
                continue
            if not r[col["ID"]].strip():  # the units row
                unit = r[c] or unit
                if unit not in UNITS_NS:
                    raise Unreadable(f"{path}: unknown unit '{unit}' for gpu__time_duration.sum")
                continue
            by_id[int(number(r[col["ID"]], path))] = (r[col["Kernel Name"]], number(r[c], path) * UNITS_NS[unit])
    else:
        raise Unreadable(f"{path}: no gpu__time_duration.sum (neither a 'Metric Name' row nor a column): {head}")
    if not by_id:
        raise Unreadable(f"{path}: the table has no kernel with gpu__time_duration.sum")
    return [(base_name(n), ns) for _, (n, ns) in sorted(by_id.items())]


def last_step(launches, path):
    """The last whole step: after one update's last AdamW kernel, through the next's.
    An update is a run of AdamW launches with at most 2 other kernels between two of them.
    An update with fewer AdamW launches than the one before was cut off by ncu's
    --launch-count, and is left out."""
    ends, counts, prev = [], [], None
    for i, (name, _) in enumerate(launches):
        if UPDATE.search(name.split("<", 1)[0]):
            if prev is not None and i - prev <= 3:
                ends[-1] = i
                counts[-1] += 1
            else:
                ends.append(i)
                counts.append(1)
            prev = i
    if len(counts) >= 2 and counts[-1] < counts[-2]:
        ends.pop()
    if len(ends) < 2:
        raise Unreadable(f"{path}: {len(ends)} optimizer update(s) among {len(launches)} profiled kernels: no whole step "
            "(profile more launches or steps)")
    return launches[ends[-2] + 1:ends[-1] + 1], len(ends)


def step_flops(L, C, Vp, B, T):
    """A training step's matmul and attention FLOPs, forward and backward. The linears: 6 N
    per token, N = 12 C^2 L + Vp C their weights (forward 2 N, backward 4 N: the input's and
    the weights' gradients). Attention, counting the causal half that flash kernels compute:
    forward QK^T and PV, 2 B T^2 C a layer; backward five such products (QK^T again, dV, dP,
    dQ, dK), 5 B T^2 C."""
    return 6 * (12 * C * C * L + Vp * C) * B * T, 7 * B * T * T * C * L


def report(runs, top, title, model=None, unreadable=()):
    out = [f"## {title}", ""]
    out += [f"- No profile: {label}: {why}" for label, why in unreadable]
    if not runs:
        return "\n".join(out) + "\n"
    for label, (step, step_no, total) in runs.items():
        us = sum(ns for _, ns in step) / 1e3
        out.append(f"- {label}: {len(step)} kernels in step {step_no}, the last whole one profiled "
                   f"({total} kernels profiled), {us:,.0f} us of kernel time")
    out.append("")
    labels = list(runs)
    hdr = "| kind |" + "".join(f" {l} us | {l} launches |" for l in labels)
    if len(labels) > 1:
        hdr += "".join(f" {l} / {labels[0]} |" for l in labels[1:])
    out += [hdr, "|" + " --- |" * (1 + 2 * len(labels) + max(0, len(labels) - 1))]
    sums = {l: {} for l in labels}
    for l in labels:
        for name, ns in runs[l][0]:
            k = kind_of(name)
            t, n = sums[l].get(k, (0.0, 0))
            sums[l][k] = (t + ns, n + 1)
    kinds = [k for k, _ in KINDS if any(k in sums[l] for l in labels)]
    for k in kinds + ["all kernels"]:
        vals = [(sum(t for t, _ in sums[l].values()), sum(n for _, n in sums[l].values())) if k == "all kernels"
                else sums[l].get(k, (0.0, 0)) for l in labels]
        line = f"| {k} |" + "".join(f" {t / 1e3:,.1f} | {n} |" for t, n in vals)
        for t, _ in vals[1:]:
            line += f" {t / vals[0][0]:.2f} |" if vals[0][0] > 0 else " - |"
        out.append(line)
    if model:
        L, C, Vp, B, T = model
        fl = dict(zip(("matmul", "attention"), step_flops(L, C, Vp, B, T)))
        out += ["", f"Rates (L={L}, C={C}, Vp={Vp}, B={B}, T={T}): a step's matmuls do {fl['matmul']:.3e} FLOP "
                "(6 N B T, N = 12 C^2 L + Vp C), its attention {:.3e} (7 B T^2 C L, the causal half).".format(fl["attention"]),
                "", "| trainer | matmul TFLOP/s | attention TFLOP/s |", "| --- | --- | --- |"]
        for l in labels:
            rate = [f"{fl[k] / (sums[l][k][0] * 1e-9) / 1e12:.3g}" if sums[l].get(k, (0, 0))[0] > 0 else "-"
                    for k in ("matmul", "attention")]
            out.append(f"| {l} | {rate[0]} | {rate[1]} |")
    for l in labels:
        step = runs[l][0]
        total = sum(ns for _, ns in step) or 1.0
        per = {}
        for name, ns in step:
            t, n = per.get(name, (0.0, 0))
            per[name] = (t + ns, n + 1)
        out += ["", f"{l}: the {min(top, len(per))} heaviest kernels of the step", "",
                "| kernel | kind | launches | us | share |", "| --- | --- | --- | --- | --- |"]
        for name, (t, n) in sorted(per.items(), key=lambda kv: -kv[1][0])[:top]:
            shown = name if len(name) <= 72 else name[:69] + "..."
            out.append(f"| `{shown}` | {kind_of(name)} | {n} | {t / 1e3:,.1f} | {100 * t / total:.1f}% |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", metavar="LABEL=CSV", help="a trainer's label and its ncu CSV log")
    ap.add_argument("--top", type=int, default=12, help="heaviest kernels listed per trainer (12)")
    ap.add_argument("--title", default="Kernel time of one training step (ncu)", help="the report's heading")
    ap.add_argument("--model", metavar="L,C,Vp,B,T", help="layers, channels, padded vocabulary, batch and sequence "
                    "length: adds the matmuls' and attention's TFLOP/s")
    ap.add_argument("--optional", default="", metavar="LABEL,...", help="inputs whose absence leaves the exit "
                    "status 0 (each is still named in the report)")
    a = ap.parse_args()
    model = None
    if a.model:
        try:
            model = [int(x) for x in a.model.split(",")]
        except ValueError:
            model = []
        if len(model) != 5 or min(model) <= 0:
            sys.exit(f"kernel_profile: --model '{a.model}': want five positive integers L,C,Vp,B,T")
    specs = [spec.partition("=") for spec in a.runs]
    for label, sep, path in specs:
        if not sep or not label or not path:
            sys.exit(f"kernel_profile: '{label}{sep}{path}': want LABEL=CSV")
    runs, unreadable = {}, []
    for label, _, path in specs:
        try:
            launches = read_launches(path)
            step, step_no = last_step(launches, path)
        except Unreadable as e:
            unreadable.append((label, str(e)))
            print(f"kernel_profile: {e}", file=sys.stderr)
            continue
        runs[label] = (step, step_no, len(launches))
    sys.stdout.write(report(runs, a.top, a.title, model, unreadable))
    optional = set(a.optional.split(","))
    sys.exit(1 if any(label not in optional for label, _ in unreadable) else 0)


if __name__ == "__main__":
    main()
