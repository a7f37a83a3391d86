#!/usr/bin/env python3
"""rewrite_launch.py: the one change the emulator makes to the project's CUDA sources.

Copies the given files into OUT (same relative paths, so relative includes still
resolve) with every launch `kernel<<<grid, block[, smem[, stream]]>>>(args)` rewritten as
`emu_launch_kernel(kernel, "kernel", __FILE__, __LINE__, dim3(grid), dim3(block), smem,
stream, args)` (cuda_emu.h). Nothing else changes: line numbers stay, so compiler messages
and the emulator's name the original lines. Shared memory declarations inside functions
become per-block storage the kernel engine hands out (cuda_emu.h), on the same line:
`__shared__ T a[N], b;` declares references to this block's own copies (EMU_SHARED), and
`extern __shared__ T name[];` a pointer to this block's dynamic shared memory (EMU_DYN_SHARED),
exactly the launch's size.

usage: rewrite_launch.py OUT FILE...   (FILE relative to the current directory)
"""
import hashlib
import os
import re
import sys

SHARED = re.compile(r"\b(extern\s+)?(?:static\s+)?__shared__\b")
ALIGN = re.compile(r"__align__\s*\(\s*(\d+)\s*\)")


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


def code_spans(src):
    """(start, end) of the stretches of src outside comments and literals."""
    spans, i, start = [], 0, 0
    while i < len(src):
        c = src[i]
        if c in "\"'":
            spans.append((start, i))
            i = skip_literal(src, i)
            start = i
        elif src.startswith("//", i) or src.startswith("/*", i):
            spans.append((start, i))
            if src[i + 1] == "/":
                j = src.find("\n", i)
                i = len(src) if j < 0 else j
            else:
                i = src.index("*/", i) + 2
            start = i
        else:
            i += 1
    spans.append((start, len(src)))
    return spans


def shared_decl(stmt, path, line, dynamic):
    """The replacement of one shared declaration (its text after __shared__, up to ';')."""
    align = None
    m = ALIGN.search(stmt)
    if m:
        align = m.group(1)
        stmt = stmt[:m.start()] + stmt[m.end():]
    at_least = lambda t: f"alignof({t})" if align is None else f"({align} > alignof({t}) ? {align} : alignof({t}))"
    parts = split_top(stmt)
    first = re.match(r"(.*?)([A-Za-z_]\w*)\s*((?:\[[^\]]*\]\s*)*)$", parts[0].strip(), re.S)
    if not first:
        raise ValueError(f"{path}:{line}: a __shared__ declaration it cannot read: {stmt.strip()!r}")
    base = first.group(1).strip().rstrip("*").strip()
    decls = [(first.group(1).strip()[len(base):].strip(), first.group(2), first.group(3).strip())]
    for p in parts[1:]:
        d = re.match(r"\s*(\**)\s*([A-Za-z_]\w*)\s*((?:\[[^\]]*\]\s*)*)$", p, re.S)
        if not d:
            raise ValueError(f"{path}:{line}: a __shared__ declarator it cannot read: {p.strip()!r}")
        decls.append((d.group(1), d.group(2), d.group(3).strip()))
    out = []
    for stars, name, dims in decls:
        t = f"emu_shared_t_{name}"
        if dynamic:
            out.append(f"{base} {stars}*const {name} = ({base} {stars}*)emu_dev::dynamic_shared("
                       f"{at_least(base + ' ' + stars)}, \"{name}\");")
        else:
            key = int.from_bytes(hashlib.sha1(f"{path}:{line}:{name}".encode()).digest()[:8], "little")
            out.append(f"typedef {base} {stars}{t}{dims}; {t} &{name} = *({t} *)emu_dev::block_shared("
                       f"{key:#x}ull, sizeof({t}), {at_least(t)}, \"{name}\");")
    return " ".join(out)


def rewrite_shared(src, path):
    """src with its shared declarations inside braces made per-block (see the docstring)."""
    if "__shared__" not in src:
        return src, 0
    spans = code_spans(src)
    in_code = lambda i: any(a <= i < b for a, b in spans)
    out, pos, n = [], 0, 0
    for m in SHARED.finditer(src):
        if m.start() < pos or not in_code(m.start()):
            continue
        if src.startswith("#define", src.rfind("\n", 0, m.start()) + 1):
            continue   # a macro's text (cuda_emu.h's own definition)
        depth = sum(1 for i in range(m.start()) if src[i] == "{" and in_code(i)) - \
            sum(1 for i in range(m.start()) if src[i] == "}" and in_code(i))
        if depth <= 0:
            continue   # namespace scope: cuda_emu.h's thread_local stands
        end = src.index(";", m.end())
        line = src.count("\n", 0, m.start()) + 1
        stmt = src[m.end():end]
        text = shared_decl(stmt, path, line, bool(m.group(1)))
        out.append(src[pos:m.start()])
        out.append(text + "\n" * stmt.count("\n"))
        pos = end + 1
        n += 1
    out.append(src[pos:])
    return "".join(out), n


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    outdir, files = sys.argv[1], sys.argv[2:]
    launches = shared = 0
    for f in files:
        with open(f) as fh:
            src = fh.read()
        try:
            text, n = rewrite(src, f) if "<<<" in src else (src, 0)
            text, k = rewrite_shared(text, f)
        except ValueError as e:
            sys.exit(f"rewrite_launch.py: {e}")
        launches += n
        shared += k
        dst = os.path.join(outdir, f)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        old = open(dst).read() if os.path.exists(dst) else None
        if old != text:   # untouched files keep their time: make rebuilds only what changed
            with open(dst, "w") as fh:
                fh.write(text)
    print(f"rewrite_launch.py: {len(files)} files, {launches} launches and {shared} shared memory declarations "
          f"rewritten")


if __name__ == "__main__":
    main()
