#!/usr/bin/env bash
# test_tokenize_out.sh: the tokenize tool's output (tokenize.c):
#  1. -o PREFIX in folders that do not exist yet: they are created (as the trainers create -o)
#     and the shards land there; a folder that cannot be created is an error naming it
#  2. --val-first with a --shard-size that leaves the train shards fewer tokens than the val
#     shard warns, saying so; a split with train >= val does not; --val-tokens that takes
#     everything warns once
#  3. a second run into a PREFIX whose shards are there is refused, naming how many and
#     writing nothing; --overwrite removes exactly those shards first (files that only look
#     alike stay) and writes its own
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_tokenize_out: $*"; exit 1; }
[ -x ./tokenize ] || fail "./tokenize is not built"
# 3000 lines of numbers: about 8100 tokens, one document
seq 1 3000 > "$tmp/doc.txt"

# 1. nested folders created
./tokenize -o "$tmp/new/a/b/doc" --val-first --shard-size 3000 "$tmp/doc.txt" > "$tmp/1.txt" 2>&1 \
    || { cat "$tmp/1.txt"; fail "-o into a folder that does not exist failed"; }
for f in doc_val_000000.bin doc_train_000001.bin doc_train_000002.bin; do
    [ -s "$tmp/new/a/b/$f" ] || { ls -R "$tmp/new"; fail "$f was not written"; }
done
grep -q warning "$tmp/1.txt" && { cat "$tmp/1.txt"; fail "a warning for a train split larger than val"; }
# a folder under a regular file cannot be created, not even by root (ENOTDIR)
touch "$tmp/plain"
./tokenize -o "$tmp/plain/sub/doc" "$tmp/doc.txt" > "$tmp/1b.txt" 2>&1 && fail "a folder that cannot be created passed"
grep -q "cannot create folder '$tmp/plain/sub'" "$tmp/1b.txt" || { cat "$tmp/1b.txt"; fail "the error does not name the folder"; }

# 2. --val-first, val 5000 tokens, train about 3100: warned, with both counts
./tokenize -o "$tmp/w/doc" --val-first --shard-size 5000 "$tmp/doc.txt" > "$tmp/2.txt" 2>&1 || { cat "$tmp/2.txt"; fail "run 2"; }
val=$(od -An -t d4 -j 8 -N 4 "$tmp/w/doc_val_000000.bin" | tr -d ' ')
train=$(od -An -t d4 -j 8 -N 4 "$tmp/w/doc_train_000001.bin" | tr -d ' ')
[ "$val" -eq 5000 ] && [ "$train" -lt "$val" ] || fail "the fixture split is val $val, train $train"
grep -q "^tokenize: warning: the train split ($train tokens in 1 shard(s)) is smaller than the val split ($val tokens)" \
    "$tmp/2.txt" || { cat "$tmp/2.txt"; fail "no warning for a train split smaller than val"; }
# everything in the val shard: train is empty, warned
./tokenize -o "$tmp/w/all" --val-first --shard-size 100000 "$tmp/doc.txt" > "$tmp/3.txt" 2>&1 || fail "run 3"
grep -q "warning: the train split (0 tokens in 0 shard(s)) is smaller than the val split" "$tmp/3.txt" \
    || { cat "$tmp/3.txt"; fail "no warning when every token went to val"; }
# --val-tokens: a val shard that leaves train less warns; one that never reached N tokens
# keeps its own warning, and only it
./tokenize -o "$tmp/w/vt" --val-tokens 100 "$tmp/doc.txt" > "$tmp/4.txt" 2>&1 || fail "run 4"
[ "$(grep -c warning "$tmp/4.txt")" -eq 1 ] && grep -q "smaller than the val split.*give a smaller --val-tokens" "$tmp/4.txt" \
    || { cat "$tmp/4.txt"; fail "--val-tokens 100: not one warning"; }
./tokenize -o "$tmp/w/vt2" --val-tokens 100000 "$tmp/doc.txt" > "$tmp/5.txt" 2>&1 || fail "run 5"
[ "$(grep -c warning "$tmp/5.txt")" -eq 1 ] && grep -q "all [0-9]* tokens went to the val shard" "$tmp/5.txt" \
    || { cat "$tmp/5.txt"; fail "--val-tokens 100000: not one warning"; }

# 3. shards of an earlier run: refused, or removed with --overwrite
d=$tmp/new/a/b
touch "$d/doc_notes.txt" "$d/doc_val_000000.bin.bak" "$d/doc2_000000.bin"
if ./tokenize -o "$d/doc" "$tmp/doc.txt" > "$tmp/6.txt" 2>&1; then fail "a second run into the same PREFIX passed"; fi
grep -q "3 shard(s) of -o $d/doc are there already (e.g. $d/doc_.*\.bin): .*--overwrite" "$tmp/6.txt" \
    || { cat "$tmp/6.txt"; fail "the refusal does not count the shards or name one"; }
[ "$(ls "$d" | wc -l)" -eq 6 ] || { ls "$d"; fail "the refused run changed the folder"; }
./tokenize -o "$d/doc" --overwrite "$tmp/doc.txt" > "$tmp/7.txt" 2>&1 || { cat "$tmp/7.txt"; fail "--overwrite failed"; }
grep -q "removed 3 shard(s) of $d/doc" "$tmp/7.txt" || { cat "$tmp/7.txt"; fail "--overwrite does not say what it removed"; }
[ "$(ls "$d" | sort | tr '\n' ' ')" = "doc2_000000.bin doc_000000.bin doc_notes.txt doc_val_000000.bin.bak " ] \
    || { ls "$d"; fail "--overwrite: not exactly the old shards replaced by the new one"; }
echo "test_tokenize_out: OK"
