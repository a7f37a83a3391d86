#!/usr/bin/env python3
"""compare_runs.py RUN_DIR...: compares training runs of this project's trainers.

Reads each run folder's main.log (llm.c lines "s:STEP trl:LOSS" and "s:STEP tel:LOSS"),
run.json (what the trainer ran: data, seed, batch, world, stage, step times) and, when
present, zero_report.json (per-rank memory by kind). Writes a plot, compare.png: train and
validation loss against step for every run, and below it each run's train loss minus the
first run's at the same step. Prints a table per run: steps, final train and validation
loss, the largest |train-loss difference| against the first run and its step, tokens/s,
and per-rank bytes by kind from the ZeRO report.

Runs that saw different data, seed or batch are refused unless --force: their curves
would differ for reasons other than the trainer.
"""
import argparse
import decimal
import json
import os
import re
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
]

MEMORY_KINDS = [("parameters", "params"), ("gradients", "grads"), ("optimizer_states", "optimizer"),
                ("activations", "activations"), ("buffers", "buffers"), ("total", "total")]

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
    with open(path) as f:
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
    try:
        with open(path) as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise Refused(f"{path} is not valid JSON: {e}")


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
        self.info = read_json(info) if os.path.isfile(info) else None
        report = os.path.join(folder, "zero_report.json")
        self.report = read_json(report) if os.path.isfile(report) else None
        self.name = os.path.basename(os.path.normpath(os.path.abspath(folder)))
        self.report_note = None
        if self.report is not None:
            self.report_note = self.stale_report()
            if self.report_note:
                self.report = None

    def stale_report(self):
        """Why zero_report.json does not describe this run (a dry run's prediction, or the
        report of an earlier run in the same folder), or None."""
        rep = self.report
        if rep.get("source") != "live":
            return f"its zero_report.json is a {rep.get('source')} prediction, not this run's measurement"
        if self.info is None:
            return None
        stage, world = self.info.get("zero_stage"), self.info.get("world_size")
        if stage != rep.get("stage") or world != rep.get("world_size"):
            return (f"its zero_report.json (stage {rep.get('stage')}, {rep.get('world_size')} ranks) is from "
                    f"another run: run.json says stage {stage}, {world} ranks")
        return None

    def label(self):
        if not self.info:
            return self.name
        stage = self.info.get("zero_stage")
        how = "unsharded" if stage == "unsharded" else f"ZeRO-{stage}"
        world = self.info.get("world_size", 1)
        return f"{self.name} ({self.info.get('trainer', '?')}, {how}, {world} rank{'s' if world != 1 else ''})"

    def tokens_per_second(self):
        timing = (self.info or {}).get("timing") or {}
        return timing.get("tokens_per_second")


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
    """[(step, run's train loss - ref's)] over the steps both logged, exact in the logs' decimals."""
    return [(s, decimal.Decimal(run.train[s][1]) - decimal.Decimal(ref.train[s][1]))
            for s in sorted(run.train) if s in ref.train]


def plot(plt, np, runs, path):
    fig, (top, bottom) = plt.subplots(2, 1, figsize=FIG_INCHES, dpi=FIG_DPI, sharex=True,
                                      gridspec_kw={"height_ratios": [2, 1]})
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


def print_tables(runs):
    rows = []
    for i, r in enumerate(runs):
        last_train = max(r.train)
        last_val = max(r.val) if r.val else None
        if i == 0:
            dmax, dstep = "(reference)", "-"
        else:
            d = difference(runs[0], r)
            if d:
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
    for r in runs:
        if not r.report:
            print(f"\n{r.name}: " + (f"{r.report_note}: not shown" if r.report_note
                                      else "no zero_report.json (a run without ZeRO writes none)"))
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
                    "for every run; below, each run's train loss minus the first run's at the same step) "
                    "and prints per run: steps, final train and validation loss, the largest |train-loss "
                    "difference| against the first run and its step, tokens/s (OUT/run.json: the tokens of "
                    "the steps after the first over their time), and per-rank memory by kind from zero_report.json when "
                    "there is one. Runs must share data, seed, sequence length and global batch "
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
        print_tables(runs)
        w, h = FIG_INCHES[0] * FIG_DPI, FIG_INCHES[1] * FIG_DPI
        print(f"\nwrote {out} ({w}x{h} pixels)")
    except (Refused, OSError) as e:
        print(f"compare_runs.py: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
