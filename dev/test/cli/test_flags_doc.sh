#!/usr/bin/env bash
# test_flags_doc.sh: docs/flags.md names exactly the flags each trainer's -h prints.
# docs/flags.md is sections of tables; a section's heading says which trainers take its flags
# ("all trainers", or the trainers' names in backticks), and a table row names its flags in
# its first cell. For ./train_gpt2 (needed) and ./train_gpt2cu, ./train_gpt2_zero (where
# built), the flags its -h prints (every -x / --long token, the launcher's "mpirun -np N"
# aside) must equal the flags of the sections that name that trainer. And every flag the page
# mentions anywhere (outside code blocks) must be one its tables document.
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_flags_doc: $*"; exit 1; }
[ -x ./train_gpt2 ] || fail "./train_gpt2 is not built (make train_gpt2)"
[ -f docs/flags.md ] || fail "docs/flags.md is missing"

trainers=()
for t in train_gpt2 train_gpt2cu train_gpt2_zero; do
    [ -x "./$t" ] || continue
    "./$t" -h > "$tmp/$t.txt" 2>&1 || fail "./$t -h exited non-zero"
    trainers+=("$t")
done
echo "checking -h of: ${trainers[*]}"

python3 - "$tmp" docs/flags.md "${trainers[@]}" <<'EOF'
import re, sys
tmp, doc, trainers = sys.argv[1], sys.argv[2], sys.argv[3:]
ALL = ["train_gpt2", "train_gpt2cu", "train_gpt2_zero"]
# a flag: one or two dashes and a letter, at the start or after a space, ( , / [ or `
FLAG = re.compile(r"(?:^|(?<=[\s(,/\[`]))--?[A-Za-z][A-Za-z0-9-]*")

def printed(name):
    text = open(f"{tmp}/{name}.txt").read()
    text = re.sub(r"mpirun -np \S+", "", text)          # the launcher's flags are not the trainer's
    return set(FLAG.findall(text))

takes = {t: set() for t in ALL}       # trainer -> flags the page says it takes
documented, mentioned = set(), {}     # first-cell flags; every flag anywhere -> first line
section, in_code, errors = None, False, []
for n, line in enumerate(open(doc), 1):
    if line.startswith("```"):
        in_code = not in_code
        continue
    if in_code:
        continue
    if line.startswith("#"):
        if "all trainers" in line:
            section = ALL
        else:
            section = [t for t in ALL if f"`{t}`" in line] or None
        continue
    for f in FLAG.findall(line):
        mentioned.setdefault(f, n)
    cells = line.strip().strip("|").split("|")
    if not line.startswith("|") or len(cells) < 2 or cells[0].strip() in ("flag", "---"):
        continue
    flags = FLAG.findall(cells[0])
    if not flags:
        errors.append(f"docs/flags.md:{n}: a table row names no flag in its first cell")
    if section is None:
        errors.append(f"docs/flags.md:{n}: a flag row under a heading that names no trainer")
        continue
    documented.update(flags)
    for t in section:
        takes[t].update(flags)

for f, n in sorted(mentioned.items()):
    if f not in documented:
        errors.append(f"docs/flags.md:{n}: mentions {f}, which no table of the page documents")
for t in trainers:
    h = printed(t)
    for f in sorted(h - takes[t]):
        errors.append(f"{t} -h prints {f}, which docs/flags.md does not list for {t}")
    for f in sorted(takes[t] - h):
        errors.append(f"docs/flags.md lists {f} for {t}, whose -h does not print it")
    print(f"{t}: {len(h)} flags in -h, {len(takes[t])} in docs/flags.md")
for e in errors:
    print(e)
sys.exit(1 if errors else 0)
EOF
[ $? -eq 0 ] || fail "docs/flags.md and the trainers' -h disagree (above)"
echo "PASS test_flags_doc"
