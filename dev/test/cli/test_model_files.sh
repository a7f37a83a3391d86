#!/usr/bin/env bash
# Every trainer names its model files the same way: OUT/model_STEP.bin (8 digits) beside
# each checkpoint, the newest two kept, and OUT/model_final.bin at the end, with or
# without checkpoints. Checked on the CPU trainer unsharded and under ZeRO (2 ranks,
# stage 3): the final file equals the last checkpoint's, and a sharded checkpoint's model
# file equals what zero_to_model makes of that checkpoint (by default written into the
# run's folder as zero_to_model_STEP.bin).
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_model_files: $*"; exit 1; }
args=(-e d2c64h2t64 -b 2 -t 32 -d 128 -x 6 -v 0 -s 0 --threads 1)
models() { (cd "$1" && ls model_*.bin 2> /dev/null | tr '\n' ' '); }

./train_gpt2 "${args[@]}" -o "$tmp/plain" > "$tmp/plain.txt" 2>&1 || { tail "$tmp/plain.txt"; fail "unsharded run failed"; }
[ "$(models "$tmp/plain")" = "model_final.bin " ] || fail "unsharded without -n wrote: $(models "$tmp/plain")"
grep -q "^wrote $tmp/plain/model_final.bin$" "$tmp/plain.txt" || fail "the unsharded run does not say it wrote model_final.bin"

./train_gpt2 "${args[@]}" -n 2 -o "$tmp/ckpt" > "$tmp/ckpt.txt" 2>&1 || { tail "$tmp/ckpt.txt"; fail "unsharded run with -n 2 failed"; }
[ "$(models "$tmp/ckpt")" = "model_00000004.bin model_00000006.bin model_final.bin " ] \
    || fail "unsharded with -n 2 kept: $(models "$tmp/ckpt")"
cmp -s "$tmp/ckpt/model_00000006.bin" "$tmp/ckpt/model_final.bin" || fail "unsharded: model_final.bin is not the step-6 model"
cmp -s "$tmp/plain/model_final.bin" "$tmp/ckpt/model_final.bin" || fail "unsharded: checkpoints changed the final model"
echo "unsharded: model_final.bin always, model_STEP.bin per checkpoint (newest two)"

mpirun -np 2 ./train_gpt2 "${args[@]}" -z 3 -n 2 -o "$tmp/zero" > "$tmp/zero.txt" 2>&1 || { tail "$tmp/zero.txt"; fail "-z 3 run with -n 2 failed"; }
[ "$(models "$tmp/zero")" = "model_00000004.bin model_00000006.bin model_final.bin " ] \
    || fail "-z 3 with -n 2 kept: $(models "$tmp/zero")"
cmp -s "$tmp/zero/model_00000006.bin" "$tmp/zero/model_final.bin" || fail "-z 3: model_final.bin is not the step-6 model"
./zero_to_model "$tmp/zero" 4 "$tmp/zero4.bin" > "$tmp/z2m.txt" 2>&1 || { cat "$tmp/z2m.txt"; fail "zero_to_model failed"; }
cmp -s "$tmp/zero4.bin" "$tmp/zero/model_00000004.bin" || fail "-z 3: model_00000004.bin differs from zero_to_model of zero_4"
# without a file name zero_to_model writes into the run's folder, naming the step
./zero_to_model "$tmp/zero" latest > "$tmp/z2m.txt" 2>&1 || { cat "$tmp/z2m.txt"; fail "zero_to_model latest failed"; }
grep -q "^wrote $tmp/zero/zero_to_model_00000006.bin: step 6" "$tmp/z2m.txt" || { cat "$tmp/z2m.txt"; fail "zero_to_model's default name"; }
cmp -s "$tmp/zero/zero_to_model_00000006.bin" "$tmp/zero/model_00000006.bin" || fail "-z 3: zero_to_model latest differs"
# a step that is no number is refused by name, not read as step 0
for bad in abc 4x -1 ""; do
    if ./zero_to_model "$tmp/zero" "$bad" > "$tmp/z2m.txt" 2>&1; then fail "zero_to_model took the step '$bad'"; fi
    grep -q "STEP must be a step number or latest, not '$bad'" "$tmp/z2m.txt" || { cat "$tmp/z2m.txt"; fail "zero_to_model $bad: no message"; }
    if ./zero_consolidate "$tmp/zero" "$bad" "$tmp/cons_bad" > "$tmp/zc.txt" 2>&1; then fail "zero_consolidate took the step '$bad'"; fi
    grep -q "^usage: zero_consolidate" "$tmp/zc.txt" && [ ! -e "$tmp/cons_bad" ] || { cat "$tmp/zc.txt"; fail "zero_consolidate $bad: no usage, or a file written"; }
done
./build/model_diff "$tmp/plain/model_final.bin" "$tmp/zero/model_final.bin" 1e-4 > "$tmp/diff.txt" \
    || { tail -n 2 "$tmp/diff.txt"; fail "the unsharded and the -z 3 final models differ beyond 1e-4"; }
echo "ZeRO: the same names; model_00000004.bin == zero_to_model of zero_4; final models agree with unsharded"
# model_bf16: the same model as llm.c's bf16 file (version 5, half the bytes), each value within
# bf16's rounding of the fp32 file's; rounding it again changes nothing
./build/model_bf16 "$tmp/plain/model_final.bin" "$tmp/bf16.bin" > /dev/null || fail "model_bf16 failed"
[ "$(od -An -t d4 -N 8 "$tmp/bf16.bin" | xargs)" = "20240326 5" ] || fail "model_bf16: the header is not version 5"
[ "$(stat -c %s "$tmp/bf16.bin")" -eq $(( 1024 + ($(stat -c %s "$tmp/plain/model_final.bin") - 1024) / 2 )) ] || fail "model_bf16: size"
./build/model_diff "$tmp/plain/model_final.bin" "$tmp/bf16.bin" 4e-3 > "$tmp/diff.txt" \
    || { tail -n 2 "$tmp/diff.txt"; fail "model_bf16: beyond bf16's rounding (relative L2 4e-3)"; }
./build/model_bf16 "$tmp/bf16.bin" "$tmp/bf16b.bin" > /dev/null && cmp -s "$tmp/bf16.bin" "$tmp/bf16b.bin" || fail "model_bf16: not idempotent"
echo "model_bf16: version 5, within bf16 rounding, idempotent"
echo "PASS test_model_files"
