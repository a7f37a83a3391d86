#!/usr/bin/env bash
# test_doc_links.sh: every relative link in the documents a reader follows from the front
# door (README.md, docs/*.md, zero/README.md, SECURITY.md, dev/gpu/README.md) resolves:
# [text](path), ![alt](path) and [name]: path, relative to the linking file, name an existing
# file or folder, and a #fragment names a heading of the target (GitHub's anchors: lower case,
# punctuation dropped, spaces as hyphens, -1, -2 for repeats). Links in code are not links;
# http(s) and mailto links are not checked (no network in CI).
set -u
cd "$(dirname "$0")/../../.."
fail() { echo "FAIL test_doc_links: $*"; exit 1; }
docs=(README.md docs/*.md zero/README.md SECURITY.md dev/gpu/README.md)
for d in "${docs[@]}"; do [ -f "$d" ] || fail "$d is missing"; done

python3 - "${docs[@]}" <<'EOF'
import os, re, sys

def strip_code(text):   # blanks code out, keeping the line count
    blank = lambda m: "\n" * m.group(0).count("\n")
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", blank, text, flags=re.S | re.M)   # fenced blocks
    return re.sub(r"`[^`\n]*`", "", text)                                       # code spans

def anchors(path):
    seen, out = {}, set()
    in_code = False
    for line in open(path, encoding="utf-8"):
        if line.startswith(("```", "~~~")):
            in_code = not in_code
        m = None if in_code else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = m.group(1).lower().replace("`", "")
        slug = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", slug)          # a link's text only
        slug = re.sub(r"[^\w\- ]", "", slug).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out

LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|^\s*\[[^\]]+\]:\s*(\S+)", re.M)
errors, checked = [], 0
for doc in sys.argv[1:]:
    text = strip_code(open(doc, encoding="utf-8").read())
    for m in LINK.finditer(text):
        target = m.group(1) or m.group(2)
        if re.match(r"[a-z][a-z0-9+.-]*:", target):     # http:, https:, mailto:
            continue
        path, _, frag = target.partition("#")
        full = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
        line = text.count("\n", 0, m.start()) + 1
        checked += 1
        if not os.path.exists(full):
            errors.append(f"{doc}:{line}: link to {target}: {full} does not exist")
        elif frag and full.endswith(".md") and frag not in anchors(full):
            errors.append(f"{doc}:{line}: link to {target}: {full} has no heading #{frag}")
for e in errors:
    print(e)
print(f"{checked} relative links in {len(sys.argv) - 1} documents, {len(errors)} broken")
sys.exit(1 if errors else 0)
EOF
[ $? -eq 0 ] || fail "broken links (above)"
echo "PASS test_doc_links"
