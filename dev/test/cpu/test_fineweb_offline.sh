#!/usr/bin/env bash
# test_fineweb_offline.sh: dev/data/fineweb.py without internet or the datasets package.
#  1. --from-jsonl on a small JSONL of documents (written here: unicode, quotes, newlines,
#     a blank line) writes llm.c-named shards (fineweb_val_000000.bin, then
#     fineweb_train_000001.bin, ...), each with llm.c's header (magic 20240520, version 1,
#     its token count, the file's size) and GPT-2 tokens that decode, with the project's
#     tokenizer file (data/gpt2/gpt2_tokenizer.bin), back to the documents in order, each
#     after an <|endoftext|> (50256); nothing on stderr says error
#  2. without --from-jsonl and without the datasets package (or with one that cannot reach
#     the hub): one error that points to --from-jsonl, no error of tokenize's, no shards
#  3. --help documents the offline flow
#  4. a second run into the same folder (one shard, val only) writes it anew; a JSONL that
#     goes bad after good documents ends the run with nothing under a shard's name and no
#     staged file left
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_fineweb_offline: $*"; exit 1; }

python3 - "$tmp/docs.jsonl" <<'PY'
import json, sys
docs = ["The quick brown fox jumps over the lazy dog. " * 3,
        "Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e \u2014 na\u00efve \u201cquotes\u201d and emoji \U0001F600.\nSecond line.",
        'He said "hello", then left.\n\n  Indented text\twith a tab.',
        "Numbers: 3.14159, 2718, 1e-9; code: for (int i = 0; i < n; i++) { x[i] = 0; }",
        "In the beginning God created the heaven and the earth. " * 4]
with open(sys.argv[1], "w", encoding="utf-8") as f:
    for i, d in enumerate(docs):
        f.write(json.dumps({"text": d, "id": i}, ensure_ascii=(i % 2 == 0)) + "\n")
        if i == 2:
            f.write("\n")   # a blank line is skipped
json.dump(docs, open(sys.argv[1] + ".expected", "w"))
PY

# 1. offline: a JSONL in, shards out (wait for tokenize too: the pipe closes when both exit)
python3 dev/data/fineweb.py --from-jsonl "$tmp/docs.jsonl" --out "$tmp/fw" --shard-size 40 2>&1 | cat > "$tmp/1.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || { cat "$tmp/1.txt"; fail "--from-jsonl run failed"; }
grep -qi "error\|warning" "$tmp/1.txt" && { cat "$tmp/1.txt"; fail "the offline run printed an error or warning"; }
grep -q "^5 documents tokenized into $tmp/fw" "$tmp/1.txt" || { cat "$tmp/1.txt"; fail "no closing line"; }
python3 - "$tmp/fw" "$tmp/docs.jsonl.expected" data/gpt2/gpt2_tokenizer.bin <<'PY' || fail "shards"
import glob, json, os, struct, sys
out, expected, tokfile = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3]
def bad(msg):
    print("FAIL test_fineweb_offline:", msg); sys.exit(1)
names = sorted(os.listdir(out))
val = ["fineweb_val_000000.bin"]
train = sorted(n for n in names if n.startswith("fineweb_train_"))
if names != sorted(val + train) or len(train) < 2:
    bad(f"shard names {names}: want fineweb_val_000000.bin and fineweb_train_000001.bin, ...")
if train != [f"fineweb_train_{i:06d}.bin" for i in range(1, len(train) + 1)]:
    bad(f"train shards not numbered from 000001 on: {train}")
# the project's tokenizer file: 256 int32 (magic 20240328, version 2, vocab, EOT), then len + bytes
raw = open(tokfile, "rb").read()
magic, version, vocab, eot = struct.unpack_from("<4i", raw)
if (magic, version, eot) != (20240328, 2, 50256): bad("tokenizer file header")
pieces, pos = [], 1024
for _ in range(vocab):
    n = raw[pos]; pieces.append(raw[pos + 1:pos + 1 + n]); pos += 1 + n
tokens = []
for i, name in enumerate(val + train):
    b = open(os.path.join(out, name), "rb").read()
    head = struct.unpack_from("<256i", b)
    if head[0] != 20240520 or head[1] != 1: bad(f"{name}: header magic {head[0]} version {head[1]}")
    if len(b) != 1024 + 2 * head[2]: bad(f"{name}: {len(b)} bytes for {head[2]} tokens")
    if i < len(val + train) - 1 and head[2] != 40: bad(f"{name}: {head[2]} tokens, not --shard-size 40")
    tokens += struct.unpack_from(f"<{head[2]}H", b, 1024)
if tokens[0] != eot: bad("the first token is not <|endoftext|>")
docs, cur = [], None
for t in tokens:
    if t == eot:
        if cur is not None: docs.append(cur)
        cur = bytearray()
    else:
        if t >= vocab: bad(f"token {t} outside the vocabulary")
        cur += pieces[t]
docs.append(cur)
got = [d.decode("utf-8") for d in docs]
if got != expected:
    for g, e in zip(got, expected):
        if g != e: bad(f"decoded {g!r}, want {e!r}")
    bad(f"{len(got)} documents decoded, want {len(expected)}")
print(f"{len(val + train)} shards, {len(tokens)} tokens, {len(got)} documents decode back")
PY

# 2. no datasets package: one error naming --from-jsonl, none of tokenize's, nothing written
mkdir -p "$tmp/nods/datasets" "$tmp/offline/datasets"
echo 'raise ImportError("No module named datasets")' > "$tmp/nods/datasets/__init__.py"
printf 'def load_dataset(*a, **k):\n    raise ConnectionError("Could not reach huggingface.co")\n' \
    > "$tmp/offline/datasets/__init__.py"
for case in nods offline; do
    PYTHONPATH="$tmp/$case" python3 dev/data/fineweb.py --out "$tmp/$case/fw" 2>&1 | cat > "$tmp/2$case.txt"
    [ "${PIPESTATUS[0]}" -ne 0 ] || fail "$case: the download without a way to download passed"
    grep -q -- "--from-jsonl FILE" "$tmp/2$case.txt" || { cat "$tmp/2$case.txt"; fail "$case: the error does not point to --from-jsonl"; }
    [ "$(grep -ci error "$tmp/2$case.txt")" -eq 1 ] || { cat "$tmp/2$case.txt"; fail "$case: not exactly one error"; }
    grep -q "tokenize\.c:\|no documents in the input" "$tmp/2$case.txt" && { cat "$tmp/2$case.txt"; fail "$case: a spurious tokenize error"; }
    [ -e "$tmp/$case/fw" ] && fail "$case: an output folder was made"
done

# 3. --help: the offline flow
python3 dev/data/fineweb.py --help > "$tmp/3.txt" || fail "--help"
for want in "--from-jsonl FILE" "Offline" '"text"' "fineweb_train_000001.bin" "fineweb_val_000000.bin" "20240520"; do
    grep -q -- "$want" "$tmp/3.txt" || fail "--help does not say '$want'"
done
# 4. the same small run twice (all of it in the val shard), then a file that goes bad
head -n 1 "$tmp/docs.jsonl" > "$tmp/one.jsonl"
for k in 1 2; do
    python3 dev/data/fineweb.py --from-jsonl "$tmp/one.jsonl" --out "$tmp/again" > "$tmp/4$k.txt" 2>&1 \
        || { cat "$tmp/4$k.txt"; fail "a small run into the same folder, run $k, failed"; }
done
[ "$(ls "$tmp/again")" = "fineweb_val_000000.bin" ] || { ls "$tmp/again"; fail "the second run: not one val shard"; }
# (3000 documents first, so that tokenize has staged shards when the bad line comes)
{ for _ in $(seq 3000); do head -n 1 "$tmp/docs.jsonl"; done; echo '{"text": broken'; } > "$tmp/bad.jsonl"
python3 dev/data/fineweb.py --from-jsonl "$tmp/bad.jsonl" --out "$tmp/bad" --shard-size 1000 > "$tmp/4b.txt" 2>&1 \
    && { cat "$tmp/4b.txt"; fail "a JSONL that goes bad passed"; }
grep -q "^tokenize: wrote .*\.partial" "$tmp/4b.txt" || { cat "$tmp/4b.txt"; fail "the bad JSONL ended the run before a shard was staged"; }
[ -d "$tmp/bad" ] && [ -z "$(ls "$tmp/bad")" ] || { ls "$tmp/bad"; tail -n 3 "$tmp/4b.txt"; fail "a run that failed left files"; }
echo "a small run twice into one folder; a JSONL gone bad leaves no file"
echo "test_fineweb_offline: OK"
