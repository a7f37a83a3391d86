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
#  4. other datasets whose names look like PREFIX's val and train shards (-o PREFIX_val,
#     -o PREFIX_train): --overwrite removes nothing and names one; a run that fails part way
#     leaves no shard under a shard's name (they are staged as NAME.partial), and a staged
#     shard a killed run left counts as PREFIX's
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
grep -q "^tokenize: 1 shard(s) in place: $d/doc_000000.bin$" "$tmp/7.txt" || { cat "$tmp/7.txt"; fail "no line for the shards in place"; }

# 4. other datasets -o o/fw_val and -o o/fw_train (3 shards each), then -o o/fw --overwrite
o=$tmp/o
for p in fw_val fw_train; do ./tokenize -o "$o/$p" --shard-size 3000 "$tmp/doc.txt" > /dev/null 2>&1 || fail "-o $p"; done
before=$(ls "$o" | tr '\n' ' ')
./tokenize -o "$o/fw" --overwrite "$tmp/doc.txt" > "$tmp/8.txt" 2>&1 && fail "--overwrite over other datasets' shards passed"
grep -q "^error: --overwrite: $o/fw_\(val_00000[12]\|train_000000\)\.bin may be a shard of another dataset (-o $o/fw_\(val\|train\)), not of -o $o/fw; nothing removed" \
    "$tmp/8.txt" || { cat "$tmp/8.txt"; fail "--overwrite does not name the other dataset's shard"; }
[ "$(ls "$o" | tr '\n' ' ')" = "$before" ] || { ls "$o"; fail "--overwrite changed other datasets' shards"; }
# a lone val shard 0 may be -o fw_val's single shard, or fw's own: in doubt too
mkdir "$o/lone" && cp "$o/fw_val_000000.bin" "$o/lone/"
./tokenize -o "$o/lone/fw" --overwrite "$tmp/doc.txt" > "$tmp/9.txt" 2>&1 && fail "--overwrite over a lone val shard passed"
grep -q "fw_val_000000.bin may be a shard of another dataset (-o $o/lone/fw_val)" "$tmp/9.txt" || { cat "$tmp/9.txt"; fail "no doubt over a lone val shard"; }
# a bad line after 300 good ones: the run fails, its shards written so far are removed
mkdir "$o/bad"
for i in $(seq 1 300); do echo "{\"text\": \"line $i of a document long enough to fill a few shards\"}"; done > "$tmp/bad.jsonl"
echo '{"text": bad}' >> "$tmp/bad.jsonl"
./tokenize --jsonl -o "$o/bad/x" --val-first --shard-size 1000 "$tmp/bad.jsonl" > "$tmp/10.txt" 2>&1 && fail "a bad JSONL line passed"
grep -q "bad.jsonl:301: not valid JSON" "$tmp/10.txt" || { cat "$tmp/10.txt"; fail "the bad line is not named"; }
n=$(grep -c "^tokenize: wrote $o/bad/x_.*\.bin\.partial" "$tmp/10.txt")
[ "$n" -ge 2 ] || { cat "$tmp/10.txt"; fail "the fixture wrote $n shards before the bad line (want 2 or more)"; }
grep -q "^tokenize: removed the $n shard(s) this failed run had written" "$tmp/10.txt" || { cat "$tmp/10.txt"; fail "the failed run does not say it removed its shards"; }
[ -z "$(ls "$o/bad")" ] || { ls "$o/bad"; fail "a failed run left files"; }
# a shard a killed run left staged: refused, then removed by --overwrite
cp "$o/fw_val_000000.bin" "$o/bad/x_val_000000.bin.partial"
cp "$o/fw_val_000001.bin" "$o/bad/x_train_000001.bin.partial"
./tokenize -o "$o/bad/x" --val-first "$tmp/doc.txt" > "$tmp/11.txt" 2>&1 && fail "a staged shard of PREFIX was not counted"
grep -q "2 shard(s) of -o $o/bad/x are there already (e.g. $o/bad/x_.*\.bin\.partial)" "$tmp/11.txt" || { cat "$tmp/11.txt"; fail "the staged shards are not named"; }
./tokenize -o "$o/bad/x" --val-first --overwrite --shard-size 3000 "$tmp/doc.txt" > "$tmp/12.txt" 2>&1 || { cat "$tmp/12.txt"; fail "--overwrite over a staged shard"; }
[ "$(ls "$o/bad" | tr '\n' ' ')" = "x_train_000001.bin x_train_000002.bin x_val_000000.bin " ] || { ls "$o/bad"; fail "not exactly the new shards"; }
echo "test_tokenize_out: OK"
