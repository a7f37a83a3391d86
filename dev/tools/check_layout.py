#!/usr/bin/env python3
"""check_layout.py: holds zero/ and llmc/ to the shape their READMEs describe.

Every source file of zero/ and llmc/ belongs to a module (its path without the extension:
foo.c, foo.h and foo.cu are one module) and every module to a layer of the table below,
lowest first. A module may use (include, or call a function defined in) modules of lower
layers; inside a layer only where the layer says its members may use each other, and
never in a circle. On top of the order:
  - llmc/ never uses zero/; zero/ uses llmc/numerics/ (the numeric contract) and nothing
    else of llmc/;
  - nothing outside a cuda/ folder uses a cuda/ folder or includes a CUDA toolkit header;
  - nothing in zero/ or llmc/ includes a file of the repository's top level (a trainer);
  - struct Zero's state has owners (STATE_OWNERS): a field of a phase's sub-struct
    (z->gather.X, z->reduce.X, ...) is assigned, incremented or aliased (&z->gather) only
    in its owner's files, and the world (z->rank, z->t, ...: every other field) only in
    zero/zero.c, which sets it up in zero_init; a tensor row's phase marks (t->gather.X,
    t->reduce.X) likewise.
Includes come from the sources ("file.h" resolved next to the including file, then from
the repository root); calls from the symbols of the built objects (nm), so run it after
a build. Exits 1 after listing every violation, 0 when there is none.

usage: check_layout.py [--root DIR] [--build DIR] [--no-calls] [-v]
"""
import argparse
import collections
import os
import re
import subprocess
import sys

# (name, module patterns, whether members of the layer may use each other), lowest first.
LAYERS = [
    ("llmc numerics: the numeric contract zero/ shares", ["llmc/numerics/*"], True),
    ("llmc base", ["llmc/utils", "llmc/atomic_file"], True),
    ("llmc model definition", ["llmc/model/*"], True),
    ("llmc data", ["llmc/data/*"], True),
    ("llmc run", ["llmc/run/*"], True),
    ("llmc CPU model", ["llmc/cpu/*"], True),
    ("llmc CUDA", ["llmc/cuda/*"], True),
    ("zero public header", ["zero/zero.h"], False),
    ("zero trace", ["zero/trace"], False),
    ("zero layout math", ["zero/partition", "zero/arena"], False),
    ("zero kernels", ["zero/kernels/*"], True),
    ("zero io", ["zero/io/*"], True),
    ("zero world", ["zero/comm", "zero/comm/*", "zero/comm/mpi_stub/*"], True),
    ("zero backend interface", ["zero/backend"], False),
    ("zero host backend", ["zero/host/*"], True),
    ("zero CUDA backend", ["zero/cuda/*"], True),
    ("zero state", ["zero/state"], False),
    ("zero offload tiers", ["zero/offload"], False),
    ("zero phases", ["zero/gather", "zero/reduce"], False),
    ("zero orchestrator", ["zero/zero"], False),
    ("zero on the orchestrator", ["zero/checkpoint", "zero/report"], False),
    ("zero dry run", ["zero/dryrun"], False),
    ("zero tools", ["zero/tools/*"], True),
]
# Backend folders: only other backends use them (the orchestration goes through backend.h).
BACKENDS = ("zero/host/", "zero/cuda/")
# Files that are a module of their own although a source shares their stem.
OWN_MODULE = {"zero/zero.h"}
SOURCE_EXT = (".c", ".h", ".cu", ".cuh")
# struct Zero's sub-structs (zero/state.h) and the files that may write them; None: the world.
STATE_OWNERS = {
    "gather": ["zero/gather.c"],
    "reduce": ["zero/reduce.c"],
    "off": ["zero/offload.c"],
    "step": ["zero/zero.c"],
    "acct": ["zero/state.c", "zero/report.c"],   # report.c: the activation bytes the trainer reports
    None: ["zero/zero.c"],
}
# A write of z->FIELD or z->SUB.FIELD[.X...] (not through a subscript: a buffer's elements
# are data, not the plugin's state): assignment, compound assignment, ++/--, or an alias of
# a sub-struct.
_ASSIGN = r"(?:=(?!=)|(?:[-+*/%|&^]|<<|>>)=|\+\+|--)"
STATE_WRITE = re.compile(r"\bz->(\w+)(?:\.\w+)*\s*" + _ASSIGN + r"|(?:\+\+|--)\s*z->(\w+)(?:\.\w+)*(?![\[\w])"
                         r"|=\s*&z->(\w+)\s*;")
# The same for a tensor's row (ZeroTensorState), through any name but z: t->gather.X or
# z->t[i].reduce.X.
ROW_WRITE = re.compile(r"(?:\b(?!z\b)\w+->|\]\.)(gather|reduce)\.\w+\s*" + _ASSIGN +
                       r"|(?:\+\+|--)\s*[\w\[\]>.-]*?(?:\b(?!z\b)\w+->|\]\.)(gather|reduce)\.")
TREES = ("zero", "llmc")
CUDA_HEADERS = re.compile(r"^(cuda|cuda_runtime|cuda_runtime_api|cuda_bf16|cuda_fp16|cublas|cublasLt|cublas_v2|"
                          r"cudnn|cudnn_[a-z_]*|nccl|cooperative_groups|cub/.*|mma|curand.*)\.(h|hpp|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


def module_of(path):
    if path in OWN_MODULE:
        return path
    stem, _ = os.path.splitext(path)
    if stem.endswith(".cu"):
        stem = stem[:-3]
    return stem


def layer_of(mod):
    for i, (_, pats, _) in enumerate(LAYERS):
        # "dir/*": the modules directly in dir; anything else: that module
        if any(os.path.dirname(mod) == p[:-2] if p.endswith("/*") else mod == p for p in pats):
            return i
    return None


def in_cuda(mod):
    return "/cuda/" in "/" + mod + "/"


def sources(root):
    out = []
    for tree in TREES:
        for d, _, files in os.walk(os.path.join(root, tree)):
            for f in files:
                if f.endswith(SOURCE_EXT):
                    out.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(out)


def includes(root, path, errors):
    """(kind, target) for each include of path: kind 'local' (a repo file), 'cuda' or 'top'."""
    out = []
    with open(os.path.join(root, path), errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            quote, name = m.groups()
            where = f"{path}:{n}"
            if quote == "<":
                if CUDA_HEADERS.match(name):
                    out.append(("cuda", name, where))
                continue
            for base in (os.path.dirname(path), ""):
                cand = os.path.normpath(os.path.join(base, name))
                if os.path.isfile(os.path.join(root, cand)):
                    top = cand.split("/")[0]
                    out.append(("local" if top in TREES else "top", cand, where))
                    break
            else:
                if CUDA_HEADERS.match(name):
                    out.append(("cuda", name, where))
                else:
                    errors.append(f'{where}: #include "{name}" names no file next to it or under the repository root')
    return out


def objects(build):
    for tree in TREES:
        for d, _, files in os.walk(os.path.join(build, tree)):
            for f in files:
                if f.endswith(".o"):
                    yield os.path.join(d, f)


def call_edges(build, mods, errors):
    """module -> {module: [symbols]} from the built objects' defined and undefined symbols
    (objects whose source is gone, left over from an older tree, are skipped)."""
    defs, refs = {}, collections.defaultdict(set)
    objs = sorted(objects(build))
    if not objs:
        errors.append(f"no object files under {build}/zero or {build}/llmc: build first (make), or pass --no-calls")
        return {}
    for o in objs:
        mod = module_of(os.path.relpath(o, build)[:-2])
        if mod not in mods:
            continue
        res = subprocess.run(["nm", o], capture_output=True, text=True)
        if res.returncode != 0:
            errors.append(f"nm {o} failed: {res.stderr.strip()}")
            continue
        for line in res.stdout.splitlines():
            p = line.split()
            if len(p) == 3 and p[1] in "TDBRC":
                defs.setdefault(p[2], mod)
            elif len(p) == 2 and p[0] == "U":
                refs[mod].add(p[1])
    edges = collections.defaultdict(lambda: collections.defaultdict(list))
    for mod, syms in refs.items():
        for s in syms:
            if s in defs and defs[s] != mod:
                edges[mod][defs[s]].append(s)
    return edges


def state_writes(root, errors):
    """Writes of struct Zero's state outside its owners (STATE_OWNERS)."""
    subs = {k for k in STATE_OWNERS if k}
    for f in sources(root):
        if not f.startswith("zero/") or not f.endswith(".c") or "/" in f[len("zero/"):]:
            continue
        text = open(os.path.join(root, f), encoding="utf-8", errors="replace").read()
        for n, line in enumerate(text.split("\n"), 1):
            code = line.split("//")[0]
            for m in STATE_WRITE.finditer(code):
                field = m.group(1) or m.group(2) or m.group(3)
                sub = field if field in subs else None
                if f not in STATE_OWNERS[sub]:
                    what = f"z->{field}" if sub or m.group(3) else f"z->{field} (the world)"
                    errors.append(f"{f}:{n}: writes {what}, owned by {', '.join(STATE_OWNERS[sub])}")
            for m in ROW_WRITE.finditer(code):
                sub = m.group(1) or m.group(2)
                if f not in STATE_OWNERS[sub]:
                    errors.append(f"{f}:{n}: writes a tensor's {sub} marks, owned by {', '.join(STATE_OWNERS[sub])}")


def cycles(graph):
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter[0]; counter[0] += 1
        stack.append(start); on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]; counter[0] += 1
                    stack.append(w); on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop(); on.discard(w); comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=".")
    ap.add_argument("--build", default=None, help="build folder with the objects (default ROOT/build)")
    ap.add_argument("--no-calls", action="store_true", help="check includes only")
    ap.add_argument("-v", action="store_true", help="print the module graph")
    a = ap.parse_args()
    root, build = a.root, a.build or os.path.join(a.root, "build")
    errors = []

    files = sources(root)
    mods = sorted({module_of(f) for f in files})
    for m in mods:
        if layer_of(m) is None:
            errors.append(f"{m}: in no layer of dev/tools/check_layout.py's table (place it, and say so in its folder's README)")

    file_graph = collections.defaultdict(set)
    uses = collections.defaultdict(lambda: collections.defaultdict(list))   # module -> module -> reasons
    for f in files:
        src = module_of(f)
        for kind, target, where in includes(root, f, errors):
            if kind == "cuda":
                if not in_cuda(src):
                    errors.append(f"{where}: includes the CUDA header <{target}> outside a cuda/ folder")
            elif kind == "top":
                errors.append(f"{where}: includes {target}, a file of the repository's top level (a trainer's): "
                              "zero/ and llmc/ never reach up")
            else:
                file_graph[f].add(target)
                dst = module_of(target)
                if dst != src:
                    uses[src][dst].append(f"{where} includes {target}")
    if not a.no_calls:
        for src, dsts in call_edges(build, set(mods), errors).items():
            for dst, syms in dsts.items():
                shown = ", ".join(sorted(syms)[:3]) + (" ..." if len(syms) > 3 else "")
                uses[src][dst].append(f"{src} calls {shown}")

    state_writes(root, errors)
    for comp in cycles(file_graph):
        errors.append("include circle: " + " -> ".join(comp + comp[:1]))
    mod_graph = {m: set(d) for m, d in uses.items()}
    for comp in cycles(mod_graph):
        errors.append("modules that use each other in a circle: " + ", ".join(comp))

    for src in sorted(uses):
        ls = layer_of(src)
        for dst in sorted(uses[src]):
            ld = layer_of(dst)
            why = uses[src][dst][0]
            if ls is None or ld is None:
                continue
            if src.startswith("llmc/") and dst.startswith("zero/"):
                errors.append(f"llmc/ uses zero/: {why}")
            elif src.startswith("zero/") and dst.startswith("llmc/") and not dst.startswith("llmc/numerics/"):
                errors.append(f"zero/ uses llmc/ beyond llmc/numerics/: {why}")
            elif in_cuda(dst) and not in_cuda(src):
                errors.append(f"host code uses a cuda/ folder: {why}")
            elif dst.startswith(BACKENDS) and not src.startswith(BACKENDS):
                errors.append(f"{src} reaches into a backend (what a backend provides goes through zero/backend.h): {why}")
            elif ld > ls:
                errors.append(f"upward: {src} ({LAYERS[ls][0]}) uses {dst} ({LAYERS[ld][0]}): {why}")
            elif ld == ls and not LAYERS[ls][2]:
                errors.append(f"siblings: {src} and {dst} are both in layer '{LAYERS[ls][0]}', whose modules do "
                              f"not use each other: {why}")
    if a.v:
        for src in sorted(uses):
            print(f"{src} -> {', '.join(sorted(uses[src]))}")
    for e in errors:
        print("check_layout: " + e)
    print(f"check_layout: {len(files)} files, {len(mods)} modules, {sum(len(d) for d in uses.values())} "
          f"module dependencies{'' if a.no_calls else ' (includes and calls)'}: "
          + ("ok" if not errors else f"{len(errors)} violation(s)"))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
