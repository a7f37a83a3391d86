#!/usr/bin/env python3
"""rewrite_launch.py: the one change the emulator makes to the project's CUDA sources.

Copies the given files into OUT (same relative paths, so relative includes still
resolve) with every launch `kernel<<<grid, block[, smem[, stream]]>>>(args)` rewritten as
`emu_launch_kernel(kernel, "kernel", __FILE__, __LINE__, dim3(grid), dim3(block), smem,
stream, args)` (cuda_emu.h). Nothing else changes: line numbers stay, so compiler messages
and the emulator's name the original lines. Also writes OUT/dynamic_smem.cpp, the storage
of every `extern __shared__ T name[]` array (dynamic shared memory) the sources declare.

usage: rewrite_launch.py OUT FILE...   (FILE relative to the current directory)
"""
import os
import re
import sys

DYN_SMEM = re.compile(r"extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s+)?([A-Za-z_][\w:]*(?:\s*\*)?)\s+"
                      r"(?:__align__\s*\(\s*\d+\s*\)\s+)?([A-Za-z_]\w*)\s*\[\s*\]")
DYN_SMEM_MAX = 227 * 1024


def skip_literal(s, i):
    """Index past the string or char literal starting at s[i]."""
    q = s[i]
    i += 1
    while i < len(s) and s[i] != q:
        i += 2 if s[i] == "\\" else 1
    return i + 1


def matching(s, i, open_c, close_c):
    """Index of the bracket closing the one at s[i], minding literals and comments."""
    depth = 0
    while i < len(s):
        c = s[i]
        if c in "\"'":
            i = skip_literal(s, i)
            continue
        if s.startswith("//", i):
            i = s.index("\n", i) if "\n" in s[i:] else len(s)
            continue
        if s.startswith("/*", i):
            i = s.index("*/", i) + 2
            continue
        if c == open_c:
            depth += 1
        elif c == close_c:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError(f"unbalanced {open_c}{close_c}")


def split_top(s):
    """s split at its top-level commas."""
    parts, depth, cur, i = [], 0, "", 0
    while i < len(s):
        c = s[i]
        if c in "\"'":
            j = skip_literal(s, i)
            cur += s[i:j]
            i = j
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    if cur.strip():
        parts.append(cur)
    return parts


def callee_start(s, end):
    """Start of the kernel expression ending just before s[end] (a name, its template
    arguments, a namespace qualification)."""
    i = end
    while i > 0 and s[i - 1] in " \t\\\n":
        i -= 1
    if s[i - 1] == ">":   # template arguments: walk back to the matching '<'
        depth, i = 0, i - 1
        while i >= 0:
            if s[i] == ">":
                depth += 1
            elif s[i] == "<":
                depth -= 1
                if depth == 0:
                    break
            i -= 1
        while i > 0 and s[i - 1] in " \t":
            i -= 1
    while i > 0 and (s[i - 1].isalnum() or s[i - 1] in "_:"):
        i -= 1
    return i


def rewrite(src, path):
    out, pos, n = [], 0, 0
    while True:
        k = src.find("<<<", pos)
        if k < 0:
            out.append(src[pos:])
            break
        start = callee_start(src, k)
        callee = src[start:k].strip()
        if not callee:
            raise ValueError(f"{path}: a launch without a kernel name before <<<")
        cfg_end = src.find(">>>", k)
        cfg = split_top(src[k + 3:cfg_end])
        if not 2 <= len(cfg) <= 4:
            raise ValueError(f"{path}: launch of {callee} with {len(cfg)} configuration values (2 to 4)")
        p = cfg_end + 3
        while src[p] in " \t\\\n":
            p += 1
        if src[p] != "(":
            raise ValueError(f"{path}: launch of {callee} without an argument list")
        close = matching(src, p, "(", ")")
        args = src[p + 1:close]
        grid, block = cfg[0].strip(), cfg[1].strip()
        smem = cfg[2].strip() if len(cfg) > 2 else "0"
        stream = cfg[3].strip() if len(cfg) > 3 else "(cudaStream_t)0"
        name = re.sub(r"\s+", " ", callee).replace('"', "")
        head = (f'emu_launch_kernel({callee}, "{name}", "{path}", __LINE__, dim3({grid}), dim3({block}), '
                f"(size_t)({smem}), {stream}")
        out.append(src[pos:start])
        out.append(head + (", " + args.lstrip(" ") if args.strip() else "") + ")")
        pos = close + 1
        n += 1
    return "".join(out), n


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    outdir, files = sys.argv[1], sys.argv[2:]
    dyn = {}
    launches = 0
    for f in files:
        with open(f) as fh:
            src = fh.read()
        for m in DYN_SMEM.finditer(src):
            typ, name = m.group(1).strip(), m.group(2)
            if name in dyn and dyn[name][0] != typ:
                sys.exit(f"rewrite_launch.py: dynamic shared array {name} declared as {dyn[name][0]} ({dyn[name][1]}) "
                         f"and {typ} ({f}): give one of them another name")
            dyn.setdefault(name, (typ, f))
        try:
            text, n = rewrite(src, f) if "<<<" in src else (src, 0)
        except ValueError as e:
            sys.exit(f"rewrite_launch.py: {e}")
        launches += n
        dst = os.path.join(outdir, f)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        old = open(dst).read() if os.path.exists(dst) else None
        if old != text:   # untouched files keep their time: make rebuilds only what changed
            with open(dst, "w") as fh:
                fh.write(text)
    lines = ["// dynamic_smem.cpp: generated by rewrite_launch.py: the storage of the sources' extern",
             "// __shared__ arrays (cuda_emu.h turns __shared__ into thread_local), and their list.",
             '#include "cuda_emu.h"', ""]
    # A dynamic initializer: the sources' `extern thread_local` declarations call the
    # variable's TLS init function when it exists, and a weak reference to a missing one is
    # not reliably skipped; with one, the array is cleared once per host thread on first use.
    lines.append("template <typename T> static T emu_smem_zero() { return T(); }")
    for name, (typ, f) in sorted(dyn.items()):
        lines.append(f"alignas(256) thread_local {typ} {name}[{DYN_SMEM_MAX} / sizeof({typ})] = "
                     f"{{emu_smem_zero<{typ}>()}};   // {f}")
        lines.append(f"static void *emu_storage_{name}() {{ return (void *){name}; }}")
    lines.append('extern "C" const EmuDynamicSmem emu_dynamic_smem[] = {')
    for name in sorted(dyn):
        lines.append(f'    {{"{name}", emu_storage_{name}, sizeof({name})}},')
    lines.append("    {nullptr, nullptr, 0}};")
    lines.append(f'extern "C" const int emu_dynamic_smem_count = {len(dyn)};')
    text = "\n".join(lines) + "\n"
    dst = os.path.join(outdir, "dynamic_smem.cpp")
    if not os.path.exists(dst) or open(dst).read() != text:
        with open(dst, "w") as fh:
            fh.write(text)
    print(f"rewrite_launch.py: {len(files)} files, {launches} launches rewritten, {len(dyn)} dynamic shared arrays")


if __name__ == "__main__":
    main()
