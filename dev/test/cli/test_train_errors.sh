#!/usr/bin/env bash
# Bad inputs stop the trainer with a message naming what is wrong (and exit non-zero).
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_train_errors: $*"; exit 1; }
expect_error() { # expect_error "pattern" args...
    local pattern=$1; shift
    if ./train_gpt2 "$@" -o "$tmp/out" -s 0 -x 1 > "$tmp/log" 2>&1; then fail "accepted: $*"; fi
    grep -q -- "$pattern" "$tmp/log" || { cat "$tmp/log"; fail "message for [$*] lacks '$pattern'"; }
}
expect_error "unknown option" --no-such-flag
expect_error "option '--nan-skip' takes no value, got '--nan-skip=3'" --nan-skip=3
expect_error "option '--tile' is ambiguous: --tile-linear, --tile-vocab" --tile 2
# flags that would do nothing here are refused: ZeRO's knobs without -z, a dry run's --world without --dry-run, a block without its switch, --trace-steps
# without --trace, the CUDA trainers' --cudnn 0, -m 0 (no batch: a NaN loss), values a float
# holds as 0, and a -t the model has no positions for in a dry run too
expect_error "tune ZeRO: give -z STAGE" --zero-bucket 1000
expect_error "tune ZeRO: give -z STAGE" --zero-timeout 5
expect_error "tune ZeRO: give -z STAGE" --node-size 2
expect_error "--world 8 sets the ranks --dry-run predicts" --world 8
expect_error "--qwz-block sets the block of --qwz" -z 3 --qwz-block 64
expect_error "give --trace FILE too" --trace-steps 2
expect_error "--cudnn 0 is the CUDA trainers'" --cudnn 0
expect_error "--cudnn 2 is the CUDA trainers'" --cudnn 2
expect_error "-m 0 evaluates no validation batch" -m 0
expect_error "-l 1e-50 is too small for a float (it would be 0)" -l 1e-50
expect_error "--grad-clip 1e-46 is too small for a float" --grad-clip 1e-46
expect_error "--beta1 expects a number" --beta1 1e-400
expect_error "-t 512 exceeds the model's maximum sequence length 128" --dry-run -t 512 --gpu-mem 8G
expect_error "-b expects an integer" -b zero
expect_error "neither a model descriptor" -e nosuchmodel
expect_error "no shard files match" -i "$tmp/none_*.bin"
head -c 2000 data/kjv/kjv_val_000000.bin > "$tmp/trunc_000000.bin"
expect_error "trunc_000000.bin" -i "$tmp/trunc_*.bin"
printf 'not a model file at all, but long enough to have a header.......' > "$tmp/bad_model.bin"
head -c 4096 /dev/zero >> "$tmp/bad_model.bin"
expect_error "bad_model.bin" -e "$tmp/bad_model.bin"
# -y 1 with no checkpoint starts fresh (test_train_recovery.sh); a corrupt `latest` is an error
mkdir -p "$tmp/out" && printf 'garbage\n' > "$tmp/out/latest"
expect_error "'$tmp/out/latest' is corrupt" -y 1
printf '12junk\n' > "$tmp/out/latest"   # a step with more after it is no step the writer left
expect_error "'$tmp/out/latest' is corrupt" -y 1
printf '99999999999\n' > "$tmp/out/latest"
expect_error "'$tmp/out/latest' is corrupt" -y 1
rm -f "$tmp/out/latest"
expect_error "exceeds the model's maximum sequence length" -e d2c64h2t64 -t 128

# no silent wrong training from the batch geometry and the numbers' ranges
small=(-e d2c64h2t64 -b 2 -t 64 -v 0 -s 0 --threads 1)
# -d through an int: (2^32 + 1) x 128 tokens was accumulation 1 with the loss scaled by
# 1/5.5e11 (norm 0, exit 0); 0 and 2^40 were accumulation 0, every step a NaN
expect_error "-d 549755814016 is 4294967297 micro-batches of B\*T\*ranks = 2\*64\*1 = 128 tokens per rank: at most 65536 gradient accumulation steps" "${small[@]}" -d 549755814016
expect_error "-d 1099511627776 is 8589934592 micro-batches" "${small[@]}" -d 1099511627776
expect_error "-d 0 is less than one micro-batch on every rank, B\*T\*ranks = 2\*64\*1 = 128 tokens" "${small[@]}" -d 0
expect_error "-d 64 is less than one micro-batch on every rank" "${small[@]}" -d 64
expect_error "-d 8388864 is 65538 micro-batches" "${small[@]}" -d 8388864
# past strtol's range: refused, not clamped to 2^63-1
expect_error "--seed expects an integer in \[0, 9223372036854775807\], got '99999999999999999999'" --seed 99999999999999999999
# -x 0: said so (it was "the train data holds less than one step")
expect_error "-x expects -1 (one epoch of the train data) or a number of optimizer steps in \[1, 1073741824\], got '0'" -x 0
expect_error "--nan-skip-limit 3 limits --nan-skip's skipped steps: give --nan-skip too" --nan-skip-limit 3
./train_gpt2 -h | grep -q -- "--nan-skip-limit N  with --nan-skip: the N-th skipped step in a row stops the run" \
    || fail "-h does not document --nan-skip-limit"
./train_gpt2 -h | grep -q -- "at most 65536 micro-batches per rank" || fail "-h does not give -d's accumulation bound"
echo "-d overflows and bounds, --seed past its range, -x 0: refused by name"

# --nan-skip gives up: a learning rate of 10 with weight decay 10 makes every step from
# some K on a NaN (the weights are inf, and a skipped step leaves them so). Before, such a
# run skipped to its end and exited 0 without training.
nan=("${small[@]}" -t 32 -l 10 -c 10 -u 0 -q 1 --nan-skip)
if ./train_gpt2 "${nan[@]}" -x 40 -o "$tmp/nan" > "$tmp/nan.txt" 2>&1; then fail "--nan-skip: a run of NaN steps exited 0"; fi
k=$(sed -n 's/^step *\([0-9]*\)\/40 | loss -*nan | norm -*nan | skipped (--nan-skip).*/\1/p' "$tmp/nan.txt" | head -n 1)
[ -n "$k" ] || { cat "$tmp/nan.txt"; fail "no skipped step"; }
grep -q "^error: step $((k + 9))/40: loss -*nan, gradient norm -*nan: not finite, 10 such steps in a row (--nan-skip-limit 10), so training stops here; 10 of the $((k + 9)) steps of this run were skipped" "$tmp/nan.txt" \
    || { cat "$tmp/nan.txt"; fail "the 10th skipped step in a row (from step $k) did not stop the run"; }
[ -e "$tmp/nan/model_final.bin" ] && fail "a run that gave up wrote model_final.bin"
if ./train_gpt2 "${nan[@]}" -x 40 --nan-skip-limit 3 -o "$tmp/nan3" > "$tmp/nan3.txt" 2>&1; then fail "--nan-skip-limit 3: exited 0"; fi
grep -q "^error: step $((k + 2))/40: .*3 such steps in a row (--nan-skip-limit 3)" "$tmp/nan3.txt" \
    || { cat "$tmp/nan3.txt"; fail "--nan-skip-limit 3 did not stop at step $((k + 2))"; }
# fewer than the limit: the run ends normally and says how many steps it skipped
./train_gpt2 "${nan[@]}" -x $((k + 1)) -o "$tmp/nan2" > "$tmp/nan2.txt" 2>&1 || { cat "$tmp/nan2.txt"; fail "2 skipped steps stopped the run"; }
grep -q "^--nan-skip: 2 of the $((k + 1)) steps of this run skipped" "$tmp/nan2.txt" || { cat "$tmp/nan2.txt"; fail "the run's end does not count the skipped steps"; }
./train_gpt2 "${small[@]}" -x 2 --nan-skip -o "$tmp/nan0" > "$tmp/nan0.txt" 2>&1 || fail "--nan-skip without a NaN failed"
grep -q "^--nan-skip: 0 of the 2 steps of this run skipped" "$tmp/nan0.txt" || { cat "$tmp/nan0.txt"; fail "no count of skipped steps"; }
echo "--nan-skip: NaN from step $k, stopped at the 10th in a row (--nan-skip-limit 3: the 3rd); the end counts them"
echo "PASS test_train_errors"
