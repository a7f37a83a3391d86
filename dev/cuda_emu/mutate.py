#!/usr/bin/env python3
"""mutate.py: the emulated suite's mutation score (dev/cuda_emu/README.md, "Mutation score").

Each mutation of mutations.txt is applied, one at a time, to a private copy of the
emulated build (build/emu-mut by default: its own rewritten sources and objects; the
working tree is never touched). The objects that include the mutated file are rebuilt,
and the emulated tests of every program that changed run until one fails: the mutation
is caught, and the failing test is named. Tests run in the order cheapest first.

usage:
  mutate.py --check                 every mutation still applies (its lines are found
                                    exactly once in the working tree); exits 1 if not
  mutate.py [--only A,B] [--quick] [--build DIR] [--report FILE] [--expect-caught]
                                    runs the mutations (all, or those named) and prints
                                    the score; --quick runs the emulated programs' tests
                                    only (not the trainers' shell tests); --expect-caught
                                    exits 1 unless every one run was caught
"""
import argparse
import glob
import os
import shutil
import signal
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LIST = os.path.join(ROOT, "dev", "cuda_emu", "mutations.txt")

# The emulated programs a mutation can change, and the tests (as make test runs them) of
# each. A test script runs when any program it uses changed.
PROGRAMS = ["gpu_zero_quant", "gpu_backend_ops", "gpu_zero_toy", "gpu_attention_cudnn", "test_gpt2_zero",
            "train_gpt2cu", "train_gpt2_zero", "test_nccl_emu"]
TESTS = [  # (name, programs it uses, command)
    ("gpu_attention_cudnn", {"gpu_attention_cudnn"}, ["{B}/gpu_attention_cudnn"]),
    ("gpu_zero_toy all", {"gpu_zero_toy"}, ["{B}/gpu_zero_toy", "all"]),
    ("gpu_zero_quant", {"gpu_zero_quant"}, ["{B}/gpu_zero_quant"]),
    ("gpu_backend_ops", {"gpu_backend_ops"}, ["{B}/gpu_backend_ops"]),
    ("test_gpt2_zero", {"test_gpt2_zero"}, ["{B}/test_gpt2_zero"]),
    ("test_emu_train_ranks.sh", {"train_gpt2_zero", "train_gpt2cu"}, ["bash", "dev/test/emu/test_emu_train_ranks.sh"]),
    ("test_emu_train.sh", {"train_gpt2_zero", "train_gpt2cu"}, ["bash", "dev/test/emu/test_emu_train.sh"]),
    ("test_emu_nccl.sh", {"gpu_zero_toy", "test_nccl_emu"}, ["bash", "dev/test/emu/test_emu_nccl.sh"]),
    ("test_emu_seeds.sh", {"gpu_zero_quant", "gpu_backend_ops", "gpu_zero_toy", "train_gpt2cu", "train_gpt2_zero"},
     ["bash", "dev/test/emu/test_emu_seeds.sh"]),
]
TEST_TIMEOUT = 1200


class Mutation:
    def __init__(self, name, klass, what):
        self.name, self.klass, self.what = name, klass, what
        self.file, self.find, self.repl, self.gpu = None, [], [], ""

    def apply(self, text):
        """text with the mutation applied; ValueError unless its lines occur exactly once."""
        old = "\n".join(self.find) + "\n"
        n = text.count(old)
        if n != 1:
            raise ValueError(f"{self.name}: the lines to mutate occur {n} times in {self.file} (need exactly 1)")
        new = "\n".join(self.repl) + "\n" if self.repl else ""
        return text.replace(old, new)


def parse(path):
    muts, cur = [], None
    for no, line in enumerate(open(path).read().split("\n"), 1):
        if line.startswith("#") or not line.strip():
            continue
        if line.startswith("["):
            head, _, rest = line.partition("] ")
            klass, _, what = rest.partition(": ")
            cur = Mutation(head[1:], klass, what)
            muts.append(cur)
        elif cur is None:
            sys.exit(f"{path}:{no}: a line before the first [name]")
        elif line.startswith("file: "):
            cur.file = line[6:].strip()
        elif line.startswith("- ") or line == "-":
            cur.find.append(line[2:])
        elif line.startswith("+ ") or line == "+":
            cur.repl.append(line[2:])
        elif line.startswith("gpu: "):
            cur.gpu = line[5:]
        else:
            sys.exit(f"{path}:{no}: not a mutation line: {line!r}")
    names = [m.name for m in muts]
    for m in muts:
        if not m.file or not m.find:
            sys.exit(f"{path}: mutation {m.name} has no file or no lines to find")
        if names.count(m.name) > 1:
            sys.exit(f"{path}: two mutations named {m.name}")
    return muts


def mirror(text, path):
    """text as rewrite_launch.py puts it in the emulated build's sources (launches and shared
    memory declarations rewritten): the mutation applies to the source, as a person edits it."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import rewrite_launch
    if "<<<" in text:
        text, _ = rewrite_launch.rewrite(text, path)
    if hasattr(rewrite_launch, "rewrite_shared"):
        text, _ = rewrite_launch.rewrite_shared(text, path)
    return text


def check(muts):
    bad = 0
    for m in muts:
        try:
            m.apply(open(os.path.join(ROOT, m.file)).read())
        except (OSError, ValueError) as e:
            print(f"FAIL {e}")
            bad += 1
    print(f"{len(muts) - bad} of {len(muts)} mutations apply to the sources")
    return bad == 0


def make(build, targets, log, frozen=True):
    cmd = ["make", "-j2", f"EMU={build}", "EMU_CXX=g++ -MD"]
    if frozen:   # the rewritten sources stay as they are (mutated), and the host objects as
        # they are, whatever the working tree does meanwhile
        cmd += ["-o", f"{build}/src.stamp", "-o", f"{build}/rt/launch_limits.cpp"]
        for lib in ["build/libzero.a", "build/libllmc.a", "build/gpt2_zero.o"] + \
                glob.glob(os.path.join(ROOT, "build", "zero", "cuda", "*.o")):
            cmd += ["-o", os.path.relpath(lib, ROOT)]
    with open(log, "w") as fh:
        return subprocess.run(cmd + [f"{build}/{p}" for p in targets], cwd=ROOT, stdout=fh,
                              stderr=subprocess.STDOUT).returncode == 0


def dependents(build, path):
    """The objects whose dependency files name path."""
    out = []
    for d in glob.glob(os.path.join(ROOT, build, "obj", "**", "*.d"), recursive=True):
        text = open(d).read().replace("\\\n", " ")
        if path in {os.path.normpath(w) for w in text.split()}:   # the compiler writes a/b/../c
            out.append(d[:-2] + ".o")
    return out


def run_one(argv, env, log):
    """Runs a test until it ends or prints its first FAIL line: 0 if it passed, else why not."""
    deadline = time.time() + TEST_TIMEOUT
    with open(log, "w") as fh:
        p = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True, text=True, errors="replace")
        verdict = None
        for line in p.stdout:
            fh.write(line)
            if line.startswith("FAIL") and verdict is None:
                verdict = "FAIL"
                break
            if time.time() > deadline:
                verdict = "timeout"
                break
        if verdict:
            os.killpg(p.pid, signal.SIGKILL)
        rc = p.wait()
        return verdict or rc


def run_tests(build, changed, log_dir, name, quick):
    """(failing test or None, the lines that say why)."""
    env = dict(os.environ, EMU_DIR=build, CUDA_EMU_QUIET="1", OMP_NUM_THREADS="2",
               OMP_WAIT_POLICY="passive", CUDA_EMU_HANG_S="60")
    for tname, uses, cmd in TESTS:
        if not uses & changed or (quick and cmd[0] == "bash"):
            continue
        log = os.path.join(log_dir, f"{name}.{tname.split()[0]}.log")
        argv = [c.replace("{B}", build) for c in cmd]
        rc = run_one(argv, env, log)
        if rc != 0:
            lines = [ln for ln in open(log, errors="replace").read().split("\n")
                     if ln.startswith("FAIL") or "cuda_emu:" in ln or "error" in ln.lower()]
            return tname, (lines[:3] if lines else [f"exit {rc}"])
    return None, []


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--build", default="build/emu-mut")
    ap.add_argument("--report", default="")
    ap.add_argument("--expect-caught", action="store_true")
    ap.add_argument("--quick", action="store_true", help="the emulated programs only, not the shell tests")
    args = ap.parse_args()
    muts = parse(LIST)
    if not check(muts):
        return 1
    if args.check:
        return 0
    if args.only:
        want = args.only.split(",")
        unknown = [w for w in want if w not in {m.name for m in muts}]
        if unknown:
            sys.exit(f"mutate.py: no mutation named {', '.join(unknown)}")
        muts = [m for m in muts if m.name in want]
    build = args.build
    log_dir = os.path.join(ROOT, build, "logs")
    os.makedirs(log_dir, exist_ok=True)
    t0 = time.time()
    if not make(build, PROGRAMS, os.path.join(log_dir, "build.log"), frozen=False):
        print(f"mutate.py: the unmutated build failed (see {log_dir}/build.log)")
        return 1
    print(f"unmutated build ready ({time.time() - t0:.0f} s)")
    results = []
    for m in muts:
        t1 = time.time()
        src = os.path.join(build, "src", m.file)
        srcabs = os.path.join(ROOT, src)
        orig = open(srcabs).read()
        st = os.stat(srcabs)
        objs = dependents(build, src)
        saved = []
        try:
            open(srcabs, "w").write(mirror(m.apply(open(os.path.join(ROOT, m.file)).read()), m.file))
            for o in objs:
                shutil.move(o, o + ".orig")
                saved.append(o)
            stamp = time.time() - 1
            if not make(build, PROGRAMS, os.path.join(log_dir, f"{m.name}.build.log")):
                verdict, detail = "build failed", []
            else:
                changed = {p for p in PROGRAMS if os.path.getmtime(os.path.join(ROOT, build, p)) >= stamp}
                failing, detail = run_tests(build, changed, log_dir, m.name, args.quick)
                verdict = f"caught by {failing}" if failing else "not caught"
                if not changed:
                    verdict = "no program changed"
        finally:
            open(srcabs, "w").write(orig)
            os.utime(srcabs, (st.st_atime, st.st_mtime))
            now = time.time()
            for o in saved:
                if os.path.exists(o):
                    os.remove(o)
                shutil.move(o + ".orig", o)
                os.utime(o, (now, now))   # newer than the mutated programs: make relinks them
        # relink the restored programs now, so the next mutation's changed programs are its own
        make(build, PROGRAMS, os.path.join(log_dir, f"{m.name}.restore.log"))
        results.append((m, verdict, detail, time.time() - t1))
        print(f"{m.name:26s} {m.klass:13s} {verdict} ({time.time() - t1:.0f} s)")
        for d in detail:
            print(f"    {d[:200]}")
        sys.stdout.flush()
    caught = sum(1 for _, v, _, _ in results if v.startswith("caught"))
    print(f"mutation score: {caught} of {len(results)} caught ({time.time() - t0:.0f} s)")
    if args.report:
        with open(args.report, "w") as fh:
            for m, v, d, s in results:
                fh.write(f"{m.name}\t{m.klass}\t{v}\t{s:.0f}\t{' | '.join(d)[:300]}\n")
            fh.write(f"score\t{caught}\t{len(results)}\n")
    if args.expect_caught and caught != len(results):
        print("FAIL mutate.py: a mutation expected to be caught was not")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
