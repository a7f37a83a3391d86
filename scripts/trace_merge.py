#!/usr/bin/env python3
"""trace_merge.py: joins the per-rank timelines of --trace (FILE.rankRRRRR.json) into one
Chrome trace (Perfetto, chrome://tracing: a process per rank, a track per thread), and draws
a step of it as a PNG (matplotlib) for a report.

  scripts/trace_merge.py FILE.rank*.json -o merged.json [--png timeline.png] [--step N]

The ranks' clocks: files written under one kernel (the same boot id: ranks on one machine,
namespaces included) share CLOCK_MONOTONIC and line up by it exactly; from different
machines they line up by the wall clock each recorded at its start (as good as NTP).
--step N draws step N (default: the last whole step in every file).
"""
import argparse
import json
import os
import sys

HEADER = ("rank", "world", "start_ns", "start_realtime_ns")   # what every rank's file says of itself


def load(paths):
    """The files, each a rank's of one run: one world size, each rank once."""
    files, ranks = [], {}
    for p in paths:
        try:
            with open(p, encoding="utf-8") as f:
                d = json.load(f)
        except (OSError, ValueError) as e:
            sys.exit(f"trace_merge.py: {p}: {e}")
        o = d.get("otherData") if isinstance(d, dict) else None
        if not isinstance(o, dict) or "traceEvents" not in d or any(k not in o for k in HEADER):
            sys.exit(f"trace_merge.py: {p} is not a rank's --trace file (it lacks traceEvents or otherData's "
                     f"{', '.join(HEADER)}; a merged file cannot be merged again)")
        if o["rank"] in ranks:
            sys.exit(f"trace_merge.py: {ranks[o['rank']]} and {p} are both rank {o['rank']}'s")
        ranks[o["rank"]] = p
        files.append(d)
    worlds = {f["otherData"]["world"] for f in files}
    if len(worlds) > 1:
        sys.exit("trace_merge.py: the files are of runs of different sizes (" + ", ".join(
            f"{p}: {f['otherData']['world']} ranks" for p, f in zip(paths, files)) +
            "): a stale file of an earlier run in the same place?")
    world = worlds.pop()
    if len(files) < world:
        print(f"trace_merge.py: warning: {len(files)} of the run's {world} ranks' files", file=sys.stderr)
    return files


def need_matplotlib():
    """Before anything is written: Debian's matplotlib is /usr/bin/python3's; a different
    python3 first in PATH (pyenv, a venv) may lack it, so run this script with that one."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as e:
        system = "/usr/bin/python3"
        if os.path.realpath(sys.executable) != os.path.realpath(system) and os.access(system, os.X_OK) \
                and not os.environ.get("TRACE_MERGE_REEXEC"):
            os.environ["TRACE_MERGE_REEXEC"] = "1"
            os.execv(system, [system] + sys.argv)
        sys.exit(f"trace_merge.py: {sys.executable} cannot import {e.name}: --png needs matplotlib "
                 "(bash scripts/install_deps.sh installs Debian's python3-matplotlib)")


def merge(files):
    same_kernel = len({f["otherData"].get("boot_id") for f in files}) == 1
    key = "start_ns" if same_kernel else "start_realtime_ns"
    t0 = min(f["otherData"][key] for f in files)
    events = []
    for f in files:
        shift = (f["otherData"][key] - t0) / 1e3   # microseconds
        for e in f["traceEvents"]:
            e = dict(e)
            if "ts" in e:
                e["ts"] = round(e["ts"] + shift, 3)
            events.append(e)
    return {"displayTimeUnit": "ms", "otherData": {"ranks": len(files), "aligned_by": key}, "traceEvents": events}


COLOURS = {"forward": "#4c72b0", "backward": "#dd8452", "fetch": "#c44e52", "fetch (backward)": "#c44e52",
           "all_gather": "#55a868", "all_to_all": "#8172b3", "wait": "#bbbbbb", "zero_step": "#937860",
           "optimizer step": "#937860", "adamw": "#da8bc3", "reduce": "#8c8c8c", "grads_ready": "#ccb974"}


def draw(merged, png, step):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    spans = [e for e in merged["traceEvents"] if e.get("ph") == "X"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in merged["traceEvents"]
             if e.get("ph") == "M" and e["name"] == "thread_name"}
    steps = sorted({e["args"]["step"] for e in spans if e["args"]["step"] >= 0})
    if not steps:
        sys.exit("trace_merge.py: no step in the traces")
    # a rank's trace may end early (killed, or cut by the watchdog), or hold no step at all:
    # every rank of the files counts, spans or not
    per_rank = {e["pid"]: set() for e in merged["traceEvents"] if "pid" in e}
    for e in spans:
        if e["args"]["step"] >= 0:
            per_rank.setdefault(e["pid"], set()).add(e["args"]["step"])
    common = sorted(set.intersection(*per_rank.values()))
    if step is None:
        if not common:
            sys.exit("trace_merge.py: no step is in every rank's trace (" + ", ".join(
                f"rank {p}: steps {min(s)}..{max(s)}" if s else f"rank {p}: none"
                for p, s in sorted(per_rank.items())) + "): give --step")
        step = common[-2] if len(common) > 1 else common[-1]   # the last one may hold only the end of the run
    missing = [p for p, s in sorted(per_rank.items()) if step not in s]
    if missing:
        print(f"trace_merge.py: warning: step {step} is not in the trace of rank(s) {', '.join(map(str, missing))}",
              file=sys.stderr)
    shown = [e for e in spans if e["args"]["step"] == step and e["name"] not in ("forward pass", "backward pass")]
    if not shown:
        sys.exit(f"trace_merge.py: no span in step {step} (steps {steps[0]}..{steps[-1]})")
    t0 = min(e["ts"] for e in shown)
    rows = sorted({(e["pid"], e["tid"]) for e in shown})
    fig, ax = plt.subplots(figsize=(12, 0.45 * len(rows) + 1.5))
    for y, row in enumerate(rows):
        for e in (e for e in shown if (e["pid"], e["tid"]) == row):
            colour = COLOURS.get(e["name"], "#64b5cd" if "nvme" in e["name"] or "park" in e["name"] else "#a0a0a0")
            ax.barh(y, e["dur"] / 1e3, left=(e["ts"] - t0) / 1e3, color=colour, height=0.7, linewidth=0)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"rank {p}: {names.get((p, t), f'thread {t}')}" for p, t in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"ms since step {step} began")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLOURS.values()]
    ax.legend(handles, list(COLOURS), fontsize=7, ncol=6, loc="upper center", bbox_to_anchor=(0.5, -0.12))
    ax.set_title(f"step {step}: what each thread did (--trace)")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    return step


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--png")
    ap.add_argument("--step", type=int)
    a = ap.parse_args()
    if a.png:
        need_matplotlib()
    merged = merge(load(a.files))
    with open(a.out, "w") as f:
        json.dump(merged, f)
    print(f"wrote {a.out}: {len(a.files)} ranks, {len(merged['traceEvents'])} events, aligned by "
          f"{merged['otherData']['aligned_by']}")
    if a.png:
        step = draw(merged, a.png, a.step)
        print(f"wrote {a.png}: step {step}")


if __name__ == "__main__":
    main()
