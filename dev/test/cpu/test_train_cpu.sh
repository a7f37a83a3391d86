#!/usr/bin/env bash
# End-to-end checks of the CPU trainer on the bundled corpus:
#  1. the default run lowers the loss (last train loss well below the first)
#  2. resuming from a checkpoint continues bit-exactly (same log, same model file)
#  3. a run killed with SIGKILL after a checkpoint resumes to the same end state
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_train_cpu: $*"; exit 1; }
small=(-e d2c64h2t64 -b 2 -t 32 -v 4 -m 2 -s 0 --threads 2)

# 1. the default configuration learns
./train_gpt2 -o "$tmp/default" -s 0 > "$tmp/default.txt" 2>&1 || { cat "$tmp/default.txt"; fail "default run exited non-zero"; }
first=$(sed -n 's/^s:0 trl:\([0-9.]*\).*/\1/p' "$tmp/default/main.log")
last=$(sed -n 's/^s:29 trl:\([0-9.]*\).*/\1/p' "$tmp/default/main.log")
[ -n "$first" ] && [ -n "$last" ] || fail "main.log lacks s:0 or s:29 train lines"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 2.0) }' || fail "loss did not fall: step 0 $first, step 29 $last"
grep -q '^s:30 tel:' "$tmp/default/main.log" || fail "no final validation line"
echo "default run: loss $first -> $last"

# 2. resume from a copied checkpoint
./train_gpt2 "${small[@]}" -x 8 -n 4 -o "$tmp/a" > "$tmp/a.txt" 2>&1 || fail "run a failed"
mkdir -p "$tmp/b"
cp "$tmp/a/ckpt_00000004.bin" "$tmp/b/"
echo 4 > "$tmp/b/latest"
grep -E '^s:[0-3] ' "$tmp/a/main.log" > "$tmp/b/main.log"
./train_gpt2 "${small[@]}" -x 8 -n 4 -o "$tmp/b" -y 1 > "$tmp/b.txt" 2>&1 || { cat "$tmp/b.txt"; fail "resume failed"; }
cmp -s "$tmp/a/model_final.bin" "$tmp/b/model_final.bin" || fail "resumed parameters differ"
diff <(grep trl "$tmp/a/main.log") <(grep trl "$tmp/b/main.log") > /dev/null || fail "resumed losses differ"
echo "resume from copied checkpoint: bit-exact"

# 3. kill -9 after the first checkpoint, resume, compare with an uninterrupted run
./train_gpt2 "${small[@]}" -x 24 -n 3 -o "$tmp/full" > /dev/null 2>&1 || fail "uninterrupted run failed"
./train_gpt2 "${small[@]}" -x 24 -n 3 -o "$tmp/killed" > /dev/null 2>&1 &
pid=$!
for _ in $(seq 1 600); do [ -s "$tmp/killed/latest" ] && break; sleep 0.05; done
kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
[ -s "$tmp/killed/latest" ] || fail "no checkpoint appeared before the kill"
echo "killed at checkpoint $(cat "$tmp/killed/latest")"
./train_gpt2 "${small[@]}" -x 24 -n 3 -o "$tmp/killed" -y 1 > "$tmp/k.txt" 2>&1 || { cat "$tmp/k.txt"; fail "resume after kill failed"; }
cmp -s "$tmp/full/model_final.bin" "$tmp/killed/model_final.bin" || fail "kill-and-resume parameters differ"
diff <(grep trl "$tmp/full/main.log") <(grep trl "$tmp/killed/main.log") > /dev/null || fail "kill-and-resume losses differ"
echo "kill -9 and resume: bit-exact"
echo "PASS test_train_cpu"
