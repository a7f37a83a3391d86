#!/usr/bin/env python3
"""bench_scale.py: the model side of dev/bench/bench_scale.sh, which runs the trainer.

  family                 GPT-2's family and its continuation, ascending (descriptors dLcCt64:
                         GPT-2's depths and widths with a context of 64, the length trained)
  between A B            models between A and B: 4 layers a step, the width in proportion
  params MODEL           parameters of a descriptor dLcC (GPT-2's vocabulary, T 1024)
  tiles MODEL            --tile-linear K --tile-vocab KV so that no unit exceeds UNIT_MAX elements
  disk DRY_DIR MODEL     bytes of disk a z3nvme run needs: the swap file (the dry run's
                         report) and the model file, with a margin
  membw                  this machine's memory copy bandwidth (bytes/s, numpy)
  record RUNS ...        appends one run's record to RUNS (JSON lines)
  report OUT             OUT/scale.md and OUT/scale.png from OUT/runs.jsonl

The bytes a step moves to and from NVMe have a minimum that follows from what lives there
and which passes read it (formula_bytes): every non-persistent parameter tensor is read
once per pass that needs it (forward, the activation-checkpoint recompute for the block's
linears but the MLP's output projection, backward; a tied tile by each of its two units;
with the parameters on NVMe no tensor is kept gathered), the gradient is written once, a tied tensor's partial
gradient parks (written and read once), and the optimizer reads master, m, v and the
gradient and writes master, m and v (12 + 4 bytes in, 12 out: the fp32 working parameters
are the master, stored once). The update of each tensor waits for its next read, the first
gather of the next forward, which takes the fresh master from the update instead of
reading it: one read of every parameter less (4 bytes a parameter).
"""
import json
import os
import re
import sys
import time

V, VP = 50257, 50304
MAXT = 64                   # the models' context: the length trained (T=64), so wpe holds 64 rows
UNIT_MAX = 1 << 20          # elements a unit may hold (the stage-3 pools hold a few units)
PERSIST = 0                 # --zero-persist's default with the parameters on NVMe: none stays gathered
FAMILY = [(3, 192), (6, 384), (12, 768), (24, 1024), (36, 1280), (48, 1600)]


def shape(model):
    m = re.fullmatch(rf"d(\d+)c(\d+)t{MAXT}", model)
    if not m:
        sys.exit(f"bench_scale.py: '{model}' is not a descriptor dLcCt{MAXT}")
    return int(m.group(1)), int(m.group(2))


def name(l, c):
    return f"d{l}c{c}t{MAXT}"


def family():
    out = [name(l, c) for l, c in FAMILY]
    l, heads = 48, 25
    while l < 240:   # 12 more layers and 5 more heads (of 64 channels) a step
        l, heads = l + 12, heads + 5
        out.append(name(l, 64 * heads))
    return out


def between(a, b):
    (la, ca), (lb, cb) = shape(a), shape(b)
    out = []
    for l in range(la + 4, lb, 4):
        c = ca + (cb - ca) * (l - la) / (lb - la)
        out.append(name(l, 64 * round(c / 64)))
    return out


def params(model):
    L, C = shape(model)
    return VP * C + MAXT * C + L * (12 * C * C + 13 * C) + 2 * C


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def tiles(model):
    L, C = shape(model)
    K = next(k for k in divisors(C) if 4 * C * C // k <= UNIT_MAX or k == C)
    KV = next(k for k in divisors(VP) if VP * C // k <= UNIT_MAX or k == VP)
    return K, KV


def tensors(model):
    """(numel, units reading it, passes per step that read it) for every tensor of the
    stage-3 table: passes = forward + recompute + backward, per unit."""
    L, C = shape(model)
    K, KV = tiles(model)
    out = [(VP * C // KV, 2, 2)] * KV + [(MAXT * C, 1, 2)]   # wte tiles (tied), wpe
    for _ in range(L):
        out += [(C, 1, 3)] * 2                                 # ln1 (recomputed)
        for rows, recompute in ((3 * C, 1), (C, 1), (4 * C, 1), (C, 0)):   # qkv, attproj, fc, fcproj
            inp = 4 * C if rows == C and not recompute else C
            out += [(rows // K * inp, 1, 2 + recompute), (rows // K, 1, 2 + recompute)] * K
        out += [(C, 1, 3)] * 2                                 # ln2 (recomputed)
    out += [(C, 1, 2)] * 2                                     # lnf
    return out


def formula_bytes(model):
    """Minimum NVMe bytes (read, written) a step moves: one rank, one micro-step, fp32."""
    P = params(model)
    rd = wr = 0
    tied = 0
    for numel, units, passes in tensors(model):
        if numel <= PERSIST:
            rd += 4 * numel                 # persistent (--zero-persist): read once, when the step refreshes it
        else:
            rd += 4 * numel * units * passes
        if units > 1:
            tied += numel
    rd += 4 * tied                          # parked tied gradients come back
    wr += 4 * tied                          # and go out
    wr += 4 * P                             # the gradient, accumulated once
    rd += 16 * P                            # master, m, v and gradient into the optimizer
    wr += 12 * P                            # master, m, v out
    rd -= 4 * P                             # the next forward's first read of each: the update's own
    return rd, wr


def disk(dry_dir, model):
    rep = json.load(open(os.path.join(dry_dir, "zero_report.json")))
    swap = rep["ranks"][0]["nvme"]["total"]
    model_file = 4 * params(model) + 1024
    return int(1.02 * (swap + model_file)) + (1 << 30)


def membw():
    import numpy as np
    a = np.ones(1 << 26, dtype=np.float32)   # 256 MiB
    b = np.empty_like(a)
    best = 0.0
    for _ in range(3):
        t = time.perf_counter()
        np.copyto(b, a)
        dt = time.perf_counter() - t
        best = max(best, 2 * a.nbytes / dt)   # read + write
    return int(best)


def kv_file(path):
    out = {}
    if path and os.path.exists(path):
        for line in open(path):
            if "=" in line:
                k, v = line.strip().split("=", 1)
                out[k] = v
    return out


def step_ms(log):
    if not log or not os.path.exists(log):
        return []
    return [float(m.group(1)) for m in re.finditer(r"^step +\d+/\d+ \|.*?\| ([0-9.]+) ms", open(log).read(), re.M)]


def record(runs, config, model, cap, dry_dir, dry_rc, mem, run_dir, log, disk_rd, disk_wr, mem_bw, inferred, timef=""):
    r = {"config": config, "model": model, "params": params(model), "cap_bytes": int(cap),
         "tiles": list(tiles(model)) if config != "unsharded" else [1, 1],
         "disk_read_Bps": float(disk_rd), "disk_write_Bps": float(disk_wr), "mem_copy_Bps": float(mem_bw)}
    dry = os.path.join(dry_dir, "zero_report.json") if config != "unsharded" else os.path.join(dry_dir, "memory_report.json")
    if os.path.exists(dry):
        d = json.load(open(dry))
        r["predicted_peak_bytes"] = d.get("process_peak_bytes")
        r["predicted_fits"] = int(dry_rc) == 0
        if config != "unsharded":
            r["predicted_nvme_bytes"] = d["ranks"][0]["nvme"]["total"]
            r["predicted_nvme_per_step"] = d["ranks"][0]["nvme_per_step"]
    if inferred:
        status, cap0 = inferred.split()
        r.update(status=status, inferred_from=int(cap0))
    else:
        m = kv_file(mem)
        r["status"] = {"ok": "trained", "killed": "killed"}.get(m.get("status"), "failed")
        if r["status"] == "trained" and not os.path.exists(os.path.join(run_dir, "model_final.bin")) and \
                "wrote" not in open(log).read():
            r["status"] = "failed"
        r["peak_bytes"] = int(m.get("peak_bytes", 0))
        r["limit_hits"] = int(m.get("limit_hits", 0))
        t = kv_file("")
        if timef and os.path.exists(timef):
            mm = re.search(r"rss_peak_kib (\d+)", open(timef).read())
            if mm:
                r["rss_peak_bytes"] = int(mm.group(1)) * 1024
        r["ms_per_step"] = step_ms(log)
        if r["status"] == "failed" and log and os.path.exists(log):
            r["why"] = [l for l in open(log).read().splitlines() if l.strip()][-1:]
        rep = os.path.join(run_dir, "zero_report.json")
        if os.path.exists(rep):
            rk = json.load(open(rep))["ranks"][0]
            r["nvme_per_step"] = rk["nvme_per_step"]
            r["seconds_per_step"] = rk.get("seconds_per_step")
            r["live_accounted_bytes"] = rk["device"]["total"] + rk["host"]["total"]
        if config == "z3nvme":
            fr, fw = formula_bytes(model)
            r["formula_read_bytes"], r["formula_written_bytes"] = fr, fw
    with open(runs, "a") as f:
        f.write(json.dumps(r) + "\n")


def report(out):
    runs = [json.loads(l) for l in open(os.path.join(out, "runs.jsonl"))]
    G, M = 1e9, 1 << 20
    lines = ["| cap | configuration | model | parameters | result | peak (cgroup) | predicted | "
             "ms/step (last) | NVMe B/param, last step: read, written (formula; dry run) | disk-bound s | compute s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    best = {}
    for r in runs:
        if r["status"] == "trained":
            k = (r["config"], r["cap_bytes"])
            if r["params"] > best.get(k, (0, ""))[0]:
                best[k] = (r["params"], r["model"])
        res = r["status"] + (f" (inferred from {r['inferred_from'] // M} MiB)" if r.get("inferred_from") else "")
        peak = f"{r['peak_bytes'] / M:.0f} MiB" if r.get("peak_bytes") else ""
        pred = f"{r['predicted_peak_bytes'] / M:.0f} MiB" if r.get("predicted_peak_bytes") else ""
        if pred and r.get("predicted_fits") is not None:
            pred += " fits" if r["predicted_fits"] else " does not fit"
        ms = r.get("ms_per_step") or []
        ms_s = f"{ms[-1]:.0f}" if ms else ""   # the last step: the first has no deferred update in it
        nv = r.get("nvme_per_step")
        io = disk_s = comp = ""
        if nv and r["config"] == "z3nvme":
            P = r["params"]
            rd, wr = nv.get("last_step_read_bytes", nv["read_bytes"]), nv.get("last_step_written_bytes", nv["written_bytes"])
            io = f"{rd / P:.1f}, {wr / P:.1f} (formula {r['formula_read_bytes'] / P:.1f}, {r['formula_written_bytes'] / P:.1f}"
            pn = r.get("predicted_nvme_per_step")
            if pn:
                io += f"; dry run {pn['last_step_read_bytes'] / P:.1f}, {pn['last_step_written_bytes'] / P:.1f}"
            io += ")"
            disk_s = f"{rd / r['disk_read_Bps'] + wr / r['disk_write_Bps']:.1f}"
        sp = r.get("seconds_per_step")
        if sp:
            comp = f"{sp['model'] + sp.get('optimizer_compute', 0):.1f}"
        lines.append(f"| {r['cap_bytes'] // M} MiB | {r['config']} | {r['model']} | {r['params'] / G:.3f} B | {res} | "
                     f"{peak} | {pred} | {ms_s} | {io} | {disk_s} | {comp} |")
    lines.append("")
    for (config, cap), (p, model) in sorted(best.items()):
        lines.append(f"- {cap // M} MiB, {config}: largest model trained {model} ({p / G:.3f} B parameters)")
    open(os.path.join(out, "scale.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench_scale.py: no matplotlib: no plot")
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for config in sorted({c for c, _ in best}):
        pts = sorted((cap / M, p) for (c, cap), (p, _) in best.items() if c == config)
        ax.plot([x for x, _ in pts], [y for _, y in pts], "o-", label=config)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("memory cap (MiB, cgroup)")
    ax.set_ylabel("parameters of the largest model trained")
    ax.set_title("CPU trainer, 1 rank, B=1, T=64: largest model under a memory cap")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "scale.png"), dpi=120)
    print(f"wrote {os.path.join(out, 'scale.png')}")


def main():
    a = sys.argv[1:]
    if not a:
        sys.exit(__doc__)
    cmd = a[0]
    if cmd == "family":
        print(" ".join(family()))
    elif cmd == "between":
        print(" ".join(between(a[1], a[2])))
    elif cmd == "params":
        print(params(a[1]))
    elif cmd == "tiles":
        K, KV = tiles(a[1])
        print(f"--tile-linear {K} --tile-vocab {KV}")
    elif cmd == "disk":
        print(disk(a[1], a[2]))
    elif cmd == "membw":
        print(membw())
    elif cmd == "record":
        record(*a[1:])
    elif cmd == "report":
        report(a[1])
    elif cmd == "formula":
        fr, fw = formula_bytes(a[1])
        P = params(a[1])
        print(f"{a[1]}: {P} parameters; per step read {fr} B ({fr / P:.2f} B/param), written {fw} B ({fw / P:.2f} B/param)")
    else:
        sys.exit(f"bench_scale.py: unknown command '{cmd}'\n{__doc__}")


if __name__ == "__main__":
    main()
