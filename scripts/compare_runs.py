#!/usr/bin/env python3
"""compare_runs.py RUN_DIR...: compares training runs of this project's trainers.

Reads each run folder's main.log (llm.c lines "s:STEP trl:LOSS" and "s:STEP tel:LOSS"),
run.json (what the trainer ran: data, seed, batch, world, stage, step times), the per-rank
memory by kind (zero_report.json from a ZeRO run, memory_report.json from an unsharded one:
the same accounting) and model_final.bin. Writes a plot, compare.png: train and validation
loss against step for every run, below it each run's train loss minus the first run's at
the same step, and beside them each run's memory per rank by kind. Prints a table per run:
steps, final train and validation loss, the largest |train-loss difference| against the
first run and its step, tokens/s; then whether each run is bit-identical to the first (every
logged loss digit for digit and model_final.bin byte for byte) or the first step and tensor
that differ; then the memory of the largest rank of each run side by side, with its share
of the first run's, and each run's per-rank bytes by kind.

Runs that saw different data, seed or batch are refused unless --force: their curves
would differ for reasons other than the trainer.
"""
import argparse
import decimal
import json
import os
import re
import struct
import sys

# The figure's size is fixed so that a test can check the file: 12 x 9 inches at 100 dpi.
FIG_INCHES = (12, 9)
FIG_DPI = 100

# run.json fields that must agree for a comparison to mean something.
SAME_FIELDS = [
    ("train_data", "-i"),
    ("val_data", "-j"),
    ("val_batches", "-m"),
    ("shuffle", "--shuffle"),
    ("seed", "--seed"),
    ("seq_len", "-t"),
    ("total_batch_tokens", "-d, the global batch in tokens"),
    ("overfit_batch", "-a, one batch over and over"),
]

MEMORY_KINDS = [("parameters", "params"), ("gradients", "grads"), ("optimizer_states", "optimizer"),
                ("activations", "activations"), ("buffers", "buffers"), ("total", "total")]

# llm.c's model file: a header of 256 int32 (magic, version, maxT, V, L, NH, C, Vp), then
# the parameters in this order, fp32 (version 3) or bf16 (version 5).
MODEL_MAGIC, MODEL_HEADER_BYTES = 20240326, 1024
MODEL_ELEM_BYTES = {3: 4, 5: 2}
TENSORS = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
           "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]

LINE = re.compile(r"^s:(\d+) (trl|tel):(\S+)")


class Refused(Exception):
    pass


def load_plotting():
    """numpy and matplotlib (Agg: no display). Debian installs them for /usr/bin/python3;
    a different python3 first in PATH (pyenv, a venv) may lack them, so try that one."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np
        return plt, np
    except ImportError as e:
        system = "/usr/bin/python3"
        if os.path.realpath(sys.executable) != os.path.realpath(system) and os.access(system, os.X_OK) \
                and not os.environ.get("COMPARE_RUNS_REEXEC"):
            os.environ["COMPARE_RUNS_REEXEC"] = "1"
            os.execv(system, [system] + sys.argv)
        raise Refused(f"{sys.executable} cannot import {e.name}: the plot needs numpy and matplotlib "
                      "(bash scripts/install_deps.sh installs Debian's python3-numpy and python3-matplotlib)")


def read_log(path):
    """{step: (loss, text)} for train and validation lines; a later line of a step wins."""
    train, val = {}, {}
    with open(path, encoding="utf-8", errors="replace") as f:   # a damaged byte spoils its line only
        for n, line in enumerate(f, 1):
            m = LINE.match(line)
            if not m:
                continue
            try:
                loss = float(m.group(3))
            except ValueError:
                raise Refused(f"{path}:{n}: the loss '{m.group(3)}' is not a number")
            (train if m.group(2) == "trl" else val)[int(m.group(1))] = (loss, m.group(3))
    return train, val


def read_json(path):
    """The JSON object in path (run.json and the reports are objects), or Refused naming it."""
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise Refused(f"{path} is not valid JSON: {e}")
    if not isinstance(d, dict):
        raise Refused(f"{path} holds a JSON {type(d).__name__}, not an object")
    ranks = d.get("ranks")
    if ranks is not None and not (isinstance(ranks, list) and all(isinstance(r, dict) for r in ranks)):
        raise Refused(f"{path}: 'ranks' is not a list of objects")
    for r in ranks or []:   # the memory table reads these as numbers
        for where in ("device", "host"):
            tier = r.get(where, {})
            if not isinstance(tier, dict) or not all(isinstance(v, (int, float)) for v in tier.values()):
                raise Refused(f"{path}: rank {r.get('rank')}'s '{where}' is not an object of numbers")
        if not isinstance(r.get("rank", 0), int):
            raise Refused(f"{path}: a rank's 'rank' is {r.get('rank')!r}, not a number")
    return d


def settings_now(record):
    """run.json's settings as its last part ran them: the first part's at the top, with every
    resume's changes ("resumes": [{"changed": {KEY: {"from": A, "to": B}}}]) applied in order."""
    if record is None:
        return None
    now = dict(record)
    for part in record.get("resumes") or []:
        for key, change in (part.get("changed") or {}).items():
            now[key] = change.get("to")
    return now


class Run:
    def __init__(self, folder):
        if not os.path.isdir(folder):
            raise Refused(f"no run folder '{folder}'")
        self.folder = folder
        log = os.path.join(folder, "main.log")
        if not os.path.isfile(log):
            raise Refused(f"'{folder}' has no main.log: not a run folder, or the run did not start")
        self.train, self.val = read_log(log)
        if not self.train:
            raise Refused(f"{log} has no train-loss lines (s:STEP trl:LOSS)")
        info = os.path.join(folder, "run.json")
        self.record = read_json(info) if os.path.isfile(info) else None
        self.info = settings_now(self.record)
        self.name = os.path.basename(os.path.normpath(os.path.abspath(folder)))
        # per-rank memory: a ZeRO run's zero_report.json, an unsharded run's memory_report.json
        self.report, self.report_file, self.report_note = None, None, None
        for fname in ("zero_report.json", "memory_report.json"):
            path = os.path.join(folder, fname)
            if not os.path.isfile(path):
                continue
            rep = read_json(path)
            note = self.stale_report(fname, rep)
            if note is None:
                self.report, self.report_file = rep, fname
                break
            self.report_note = self.report_note or note
        model = os.path.join(folder, "model_final.bin")
        self.model = model if os.path.isfile(model) else None

    def stale_report(self, fname, rep):
        """Why a memory report does not describe this run (a dry run's prediction, or the
        report of an earlier run in the same folder), or None."""
        stage = (self.info or {}).get("zero_stage")
        if rep.get("source") != "live":
            return f"its {fname} is a {rep.get('source')} prediction, not this run's measurement"
        if fname == "memory_report.json":
            if self.info is not None and stage != "unsharded":
                return f"its memory_report.json is from an unsharded run: run.json says stage {stage}"
            return None
        if self.info is None:
            return None
        world = self.info.get("world_size")
        if stage != rep.get("stage") or world != rep.get("world_size"):
            return (f"its zero_report.json (stage {rep.get('stage')}, {rep.get('world_size')} ranks) is from "
                    f"another run: run.json says stage {stage}, {world} ranks")
        return None

    def largest_rank(self):
        """The report's entry of the rank holding the most device memory (ties: the lowest rank)."""
        ranks = (self.report or {}).get("ranks") or []
        if not ranks:
            return None
        return max(ranks, key=lambda e: ((e.get("device") or {}).get("total", 0), -e.get("rank", 0)))

    def label(self):
        if not self.info:
            return self.name
        stage = self.info.get("zero_stage")
        how = "unsharded" if stage == "unsharded" else f"ZeRO-{stage}"
        world = self.info.get("world_size", 1)
        return f"{self.name} ({self.info.get('trainer', '?')}, {how}, {world} rank{'s' if world != 1 else ''})"

    def tokens_per_second(self):
        """The run's tokens/s; over a resumed run's parts, each part's steps after its first
        (as run.json times a part) over their seconds together."""
        record = self.record or {}
        parts = [record.get("timing")] + [p.get("timing") for p in record.get("resumes") or []]
        parts = [t for t in parts if t]
        if len(parts) == 1 and len(parts[0].get("step_seconds") or []) >= 1:
            return parts[0].get("tokens_per_second")
        tokens = seconds = 0.0
        for t in parts:
            steps = t.get("step_seconds") or []
            timed = steps[1:] if len(steps) > 1 else steps
            tokens += (t.get("tokens_per_step") or 0) * len(timed)
            seconds += sum(timed)
        return tokens / seconds if seconds > 0 else None


def check_same(runs, force):
    """Raises Refused naming every field in which a run differs from the first run (and every
    run without run.json); with force prints them as warnings instead."""
    problems = []
    for r in runs:
        if r.info is None:
            problems.append(f"{r.folder}/run.json is missing: cannot check that the runs used the same "
                            "data, seed and batch")
    ref = runs[0]
    for r in runs[1:]:
        if r.info is None or ref.info is None:
            continue
        for key, flag in SAME_FIELDS:
            a, b = ref.info.get(key), r.info.get(key)
            if a != b:
                problems.append(f"the runs differ in {key} ({flag}): {ref.folder} has {a}, {r.folder} has {b}")
    if not problems:
        return
    if not force:
        raise Refused("refusing to compare: " + "; ".join(problems) + " (--force compares anyway)")
    for p in problems:
        print(f"warning: {p} (compared anyway: --force)")


def difference(ref, run):
    """[(step, run's train loss - ref's)] over the steps both logged with a finite loss, exact
    in the logs' decimals."""
    out = []
    for s in sorted(run.train):
        if s not in ref.train:
            continue
        a, b = decimal.Decimal(ref.train[s][1]), decimal.Decimal(run.train[s][1])
        if a.is_finite() and b.is_finite():
            out.append((s, b - a))
    return out


def finiteness_differs(ref, run):
    """The first step both logged where one train loss is finite and the other not (a NaN
    or infinity: a skipped step's), or where both are not finite but not alike; or None."""
    for s in sorted(run.train):
        if s not in ref.train:
            continue
        a, b = decimal.Decimal(ref.train[s][1]), decimal.Decimal(run.train[s][1])
        if a.is_finite() and b.is_finite():
            continue
        if a.is_finite() != b.is_finite() or a.is_nan() != b.is_nan() or (a.is_infinite() and a != b):
            return s
    return None


def model_layout(path):
    """(version, [(name, layers, elements)]) from an llm.c model file's header; raises Refused
    on a file that is not one or whose size does not match its header."""
    with open(path, "rb") as f:
        head = f.read(MODEL_HEADER_BYTES)
    if len(head) < MODEL_HEADER_BYTES:
        raise Refused(f"{path}: {len(head)} bytes, shorter than an llm.c model header ({MODEL_HEADER_BYTES})")
    magic, version, maxT, _, L, _, C, Vp = struct.unpack("<8i", head[:32])
    if magic != MODEL_MAGIC or version not in MODEL_ELEM_BYTES:
        raise Refused(f"{path} is not an llm.c model file (magic {magic}, version {version})")
    sizes = [Vp * C, maxT * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C,
             L * C, L * C, L * 4 * C * C, L * 4 * C, L * C * 4 * C, L * C, C, C]
    layers = [1, 1] + [L] * 12 + [1, 1]
    want = MODEL_HEADER_BYTES + sum(sizes) * MODEL_ELEM_BYTES[version]
    if os.path.getsize(path) != want:
        raise Refused(f"{path} is {os.path.getsize(path)} bytes; its header (L={L} C={C} Vp={Vp} maxT={maxT}, "
                      f"version {version}) needs {want}")
    return head, version, list(zip(TENSORS, layers, sizes))


def compare_models(np, ref_path, path):
    """None when the two model files are equal byte for byte, else what differs first: the
    tensor, its layer and element, how many elements differ and by how much."""
    head_a, version, layout = model_layout(ref_path)
    head_b, version_b, _ = model_layout(path)
    if head_a != head_b:
        return f"model_final.bin headers differ (version {version} against {version_b}, or the shapes)"
    a = np.memmap(ref_path, mode="r", offset=MODEL_HEADER_BYTES, dtype=np.uint32 if version == 3 else np.uint16)
    b = np.memmap(path, mode="r", offset=MODEL_HEADER_BYTES, dtype=a.dtype)

    def as_float(x):   # bf16 bits are the top half of an fp32
        return x.view(np.float32).astype(np.float64) if version == 3 else \
            (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    first, count, worst, sq_diff, sq_ref, at = None, 0, 0.0, 0.0, 0.0, 0
    for name, layers, n in layout:
        x, y = a[at:at + n], b[at:at + n]
        at += n
        fx = as_float(np.asarray(x))
        sq_ref += float(np.dot(fx, fx))
        bad = np.flatnonzero(np.asarray(x) != np.asarray(y))
        if bad.size == 0:
            continue
        fy = as_float(np.asarray(y))
        d = fy - fx
        count += bad.size
        worst = max(worst, float(np.max(np.abs(d))))
        sq_diff += float(np.dot(d, d))
        if first is None:
            i = int(bad[0])
            where = f"layer {i // (n // layers)}, element {i % (n // layers)}" if layers > 1 else f"element {i}"
            first = f"{name} ({where}: {fx[i]!r} against {fy[i]!r})"
    if first is None:
        return None
    total = at
    rel = (sq_diff / sq_ref) ** 0.5 if sq_ref > 0 else float("inf")
    return (f"model_final.bin differs first in {first}; {count:,} of {total:,} parameters differ, "
            f"max |diff| {worst:.3g}, relative L2 {rel:.3g}")


def equality(np, ref, run):
    """'bit-identical (...)' or what differs first, against the reference run."""
    for kind, a, b in (("train", ref.train, run.train), ("validation", ref.val, run.val)):
        if sorted(a) != sorted(b):
            only = sorted(set(a) ^ set(b))
            return f"differs: {kind} losses logged at other steps (first at s:{only[0]})"
        for step in sorted(a):
            if a[step][1] != b[step][1]:
                return f"differs: {kind} loss first at s:{step} ({a[step][1]} against {b[step][1]})"
    n = len(ref.train) + len(ref.val)
    if ref.model is None or run.model is None:
        missing = ref.folder if ref.model is None else run.folder
        return f"losses identical ({n} logged, digit for digit); {missing} has no model_final.bin to compare"
    diff = compare_models(np, ref.model, run.model)
    if diff:
        return f"differs: {n} logged losses identical, but {diff}"
    params = sum(s for _, _, s in model_layout(ref.model)[2])
    return f"bit-identical ({n} logged losses digit for digit, model_final.bin byte for byte: {params:,} parameters)"


def memory_bars(ax, runs):
    """Stacked bars of the largest rank's device memory by kind for each run, with the host
    tier (offload) as a hatched bar beside it and each total's share of the first run's."""
    kinds = [k for k, _ in MEMORY_KINDS if k != "total"]
    colors = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3"]
    shown = [(i, r, r.largest_rank()) for i, r in enumerate(runs)]
    shown = [(i, r, e) for i, r, e in shown if e is not None]
    ref_total = None
    if shown and shown[0][0] == 0:
        ref_total = (shown[0][2].get("device") or {}).get("total")
    for i, r, e in shown:
        for j, where in enumerate(("device", "host")):
            m = e.get(where) or {}
            if j == 1 and not m.get("total"):
                continue
            bottom = 0.0
            for k, c in zip(kinds, colors):
                v = m.get(k, 0) / 2**20
                ax.bar(i + 0.4 * j, v, width=0.38, bottom=bottom, color=c, hatch="//" if j else None,
                       edgecolor="white", label=k.replace("_", " ") if (i, j) == (shown[0][0], 0) else None)
                bottom += v
            note = f"{bottom:.1f}"
            if j == 0 and ref_total:
                note += f"\n{100.0 * m.get('total', 0) / ref_total:.0f}%"
            elif j == 1:
                note += "\nhost"
            ax.text(i + 0.4 * j, bottom, note, ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(runs)))
    ax.set_xticklabels([r.name for r in runs], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("MiB on the largest rank (% of the first run)")
    ax.set_title("memory per rank")
    ax.grid(alpha=0.3, axis="y")
    if shown:
        ax.set_ylim(0, ax.get_ylim()[1] * 1.4)   # room for the labels and the legend above the bars
        ax.legend(fontsize=7, loc="upper left")
    else:
        ax.text(0.5, 0.5, "no memory report", ha="center", va="center", transform=ax.transAxes)


def plot(plt, np, runs, path):
    fig = plt.figure(figsize=FIG_INCHES, dpi=FIG_DPI)
    grid = fig.add_gridspec(2, 2, height_ratios=[2, 1], width_ratios=[3, 1])
    top = fig.add_subplot(grid[0, 0])
    bottom = fig.add_subplot(grid[1, 0], sharex=top)
    memory_bars(fig.add_subplot(grid[:, 1]), runs)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, r in enumerate(runs):
        c = colors[i % len(colors)]
        steps = np.array(sorted(r.train))
        # the reference drawn wide underneath, so that an identical curve does not hide it
        top.plot(steps, [r.train[s][0] for s in steps], color=c, lw=3.0 if i == 0 else 1.2,
                 alpha=0.5 if i == 0 else 1.0, label=f"{r.label()} train")
        if r.val:
            vsteps = np.array(sorted(r.val))
            top.plot(vsteps, [r.val[s][0] for s in vsteps], color=c, ls="--", marker="o",
                     lw=3.0 if i == 0 else 1.2, ms=8 if i == 0 else 4, alpha=0.5 if i == 0 else 1.0,
                     label=f"{r.label()} val")
        if i > 0:
            d = difference(runs[0], r)
            if d:
                bottom.plot([s for s, _ in d], [float(x) for _, x in d], color=c, lw=1.2, label=r.label())
    top.set_ylabel("loss")
    top.set_title("loss against step")
    top.grid(alpha=0.3)
    top.legend(fontsize=8)
    bottom.axhline(0.0, color="black", lw=0.8)
    bottom.set_xlabel("step")
    bottom.set_ylabel(f"train loss - {runs[0].name}")
    bottom.set_title(f"train-loss difference against {runs[0].label()}")
    bottom.grid(alpha=0.3)
    if len(runs) > 1:
        bottom.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=FIG_DPI)   # no bbox_inches="tight": the size stays FIG_INCHES * FIG_DPI
    plt.close(fig)


def table(rows, header):
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    fmt = lambda row: "  ".join(str(x).rjust(w) if i else str(x).ljust(w) for i, (x, w) in enumerate(zip(row, widths)))
    return "\n".join([fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows])


def print_tables(np, runs):
    rows = []
    for i, r in enumerate(runs):
        last_train = max(r.train)
        last_val = max(r.val) if r.val else None
        if i == 0:
            dmax, dstep = "(reference)", "-"
        else:
            d, odd = difference(runs[0], r), finiteness_differs(runs[0], r)
            if odd is not None:   # a NaN or infinity against a number: no finite bound
                dmax, dstep = "non-finite", odd
            elif d:
                step, x = max(d, key=lambda sx: abs(sx[1]))
                dmax, dstep = str(abs(x)), step
            else:
                dmax, dstep = "no common step", "-"
        tps = r.tokens_per_second()
        rows.append([r.label(), len(r.train), r.train[last_train][1],
                     f"{r.val[last_val][1]} (s:{last_val})" if last_val is not None else "-",
                     dmax, dstep, f"{tps:.1f}" if tps is not None else "-"])
    print(table(rows, ["run", "steps", "final train loss", "final val loss", "max |train diff|", "at s:",
                       "tokens/s"]))

    if len(runs) > 1:
        print(f"\nagainst {runs[0].name}:")
        for r in runs[1:]:
            print(f"  {r.name}: {equality(np, runs[0], r)}")

    # the largest rank of each run side by side, from the same accounting
    rows = []
    ref = runs[0].largest_rank()
    ref_total = (ref.get("device") or {}).get("total") if ref else None
    for r in runs:
        e = r.largest_rank()
        if e is None:
            continue
        dev, host = e.get("device") or {}, e.get("host") or {}
        share = f"{100.0 * dev.get('total', 0) / ref_total:.1f}%" if ref_total else "-"
        world = (r.report or {}).get("world_size", len(r.report.get("ranks", [])))
        rows.append([r.name, world, e.get("rank")] + [f"{dev.get(k, 0) / 2**20:.2f}" for k, _ in MEMORY_KINDS]
                    + [share, f"{host.get('total', 0) / 2**20:.2f}"])
    if rows:
        print("\nmemory of each run's largest rank (MiB; device = where the model computes: host RAM for "
              "train_gpt2)")
        print(table(rows, ["run", "ranks", "rank"] + [short for _, short in MEMORY_KINDS]
                    + [f"of {runs[0].name}", "host tier"]))

    for r in runs:
        if not r.report:
            print(f"\n{r.name}: " + (f"{r.report_note}: not shown" if r.report_note
                                      else "no zero_report.json or memory_report.json"))
            continue
        if r.report_file != "zero_report.json":
            continue
        print(f"\n{r.name}: per-rank memory from zero_report.json (MiB; stage {r.report.get('stage')}, "
              f"{r.report.get('world_size')} ranks)")
        if (r.info or {}).get("trainer") == "train_gpt2":
            print("(train_gpt2 runs ZeRO's host backend, whose \"device\" memory is host memory)")
        rows = []
        for e in r.report.get("ranks", []):
            for where in ("device", "host"):
                kinds = e.get(where)
                if not kinds or not kinds.get("total"):
                    continue
                rows.append([e.get("rank"), where] + [f"{kinds.get(k, 0) / 2**20:.2f}" for k, _ in MEMORY_KINDS])
        print(table(rows, ["rank", "memory"] + [short for _, short in MEMORY_KINDS]))


def main(argv):
    ap = argparse.ArgumentParser(
        prog="compare_runs.py",
        description="Compares training runs: writes compare.png (train and validation loss against step "
                    "for every run; below, each run's train loss minus the first run's at the same step; beside, "
                    "each run's largest rank's memory by kind) "
                    "and prints per run: steps, final train and validation loss, the largest |train-loss "
                    "difference| against the first run and its step, tokens/s (OUT/run.json: the tokens of "
                    "the steps after the first over their time); whether each run is bit-identical to the "
                    "first (every logged loss digit for digit, model_final.bin byte for byte) or the first "
                    "step and tensor that differ; and per-rank memory by kind side by side "
                    "(zero_report.json of a ZeRO run, memory_report.json of an unsharded one). Runs must share data, seed, sequence length and global batch "
                    "(OUT/run.json) unless --force.",
        epilog="example: scripts/compare_runs.py out/main_job/unsharded out/main_job/zero3")
    ap.add_argument("runs", nargs="+", metavar="RUN_DIR",
                    help="output folders of training runs (-o); the first is the reference")
    ap.add_argument("-o", "--output", metavar="PNG",
                    help="where to write the plot (default: FIRST_RUN_DIR/compare.png)")
    ap.add_argument("--force", action="store_true",
                    help="compare runs even when their data, seed or batch differ, or run.json is missing")
    args = ap.parse_args(argv)
    try:
        plt, np = load_plotting()
        runs = [Run(d) for d in args.runs]
        check_same(runs, args.force)
        out = args.output or os.path.join(args.runs[0], "compare.png")
        if os.path.dirname(out):
            os.makedirs(os.path.dirname(out), exist_ok=True)
        plot(plt, np, runs, out)
        print_tables(np, runs)
        w, h = FIG_INCHES[0] * FIG_DPI, FIG_INCHES[1] * FIG_DPI
        print(f"\nwrote {out} ({w}x{h} pixels)")
    except (Refused, OSError) as e:
        print(f"compare_runs.py: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
