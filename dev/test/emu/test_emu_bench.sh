#!/usr/bin/env bash
# bench_gpt2cu's logic on the emulated device (its figures there are the emulator's, never a
# GPU's): -e both runs each configuration with cuBLASLt's fused epilogues and without them,
# and the two must train the same (losses within bf16 noise) while only the unfused run
# launches the separate GELU and bias-gradient kernels; -k adds the step's phases and the
# LayerNorm kernels' table, every kernel time positive; -c 1,2 runs each configuration with
# cuDNN's deterministic and its atomic-dQ backward, training alike. On a device too small for the batch,
# each model halves B until it fits.
set -u
cd "$(dirname "$0")/../../.."
source dev/test/emu/emu_common.sh
need_emu bench_gpt2cu
# one block at a time, no forced switches: this tests the benchmark, not the kernels
export CUDA_EMU_QUIET=1 CUDA_EMU_BLOCKS=1 CUDA_EMU_PREEMPT=0
args=(-m d2c64h2 -B 2 -T 32 -s 1 -w 1)
if ! "$EMU/bench_gpt2cu" "${args[@]}" -e both -k > "$tmp/both" 2>&1; then
    cat "$tmp/both"; bad "bench_gpt2cu -e both -k failed"; echo "$pass passed, $failn failed"; exit 1
fi
cat "$tmp/both"
loss_of() { grep "$1" "$2" | sed -E 's/.*loss ([0-9.]+).*/\1/'; }   # loss_of PATTERN FILE: a result line's loss
within_1pct() { awk -v x="${1:-x}" -v y="${2:-y}" 'BEGIN { d = x - y; if (d < 0) d = -d; exit !(x + 0 > 0 && d <= 0.01 * x) }'; }
for rc in 0 2; do
    for e in fused apart; do
        n=$(grep -c "recompute $rc attention .* epilogues $e " "$tmp/both")
        [ "$n" = 1 ] && ok "recompute $rc, epilogues $e: one result line" || bad "recompute $rc, epilogues $e: $n result lines"
    done
    f=$(loss_of "recompute $rc attention .* epilogues fused " "$tmp/both")
    a=$(loss_of "recompute $rc attention .* epilogues apart " "$tmp/both")
    if within_1pct "$f" "$a"; then
        ok "recompute $rc: the losses fused ($f) and apart ($a) agree within 1%"
    else bad "recompute $rc: the losses fused (${f:-?}) and apart (${a:-?}) differ by more than 1%"; fi
done
n=$(grep -cE "^  phases: forward [0-9.]+ ms, backward [0-9.]+ ms, update [0-9.]+ ms$" "$tmp/both")
[ "$n" = 4 ] && ok "a phases line for each of the 4 configurations" || bad "$n phases lines for 4 configurations"
for k in "device-to-device copy" "layernorm_forward" "layernorm_backward" "layernorm_backward (accumulate)"; do
    n=$(grep -E "^  ${k//[()]/.} +[0-9]" "$tmp/both" | awk '$0 ~ / us / { for (i = 1; i < NF; i++) if ($(i + 1) == "us" && $i + 0 > 0) c++ } END { print c + 0 }')
    [ "$n" = 4 ] && ok "kernel table: $k timed in all 4 configurations" || bad "kernel table: $k timed in $n of 4 configurations"
done
# the unfused path's own kernels: only where the epilogues are off (the GELU forward also
# runs in the recompute, with or without them)
# (-e on also runs each configuration with both cuDNN backwards: -c 1,2)
CUDA_EMU_TRACE=1 "$EMU/bench_gpt2cu" "${args[@]}" -e on -c 1,2 > "$tmp/trace_on" 2>&1 || bad "bench_gpt2cu -e on -c 1,2 failed"
CUDA_EMU_TRACE=1 "$EMU/bench_gpt2cu" "${args[@]}" -e off > "$tmp/trace_off" 2>&1 || bad "bench_gpt2cu -e off failed"
for rc in 0 2; do
    d=$(loss_of "recompute $rc attention cuDNN  *epilogues" "$tmp/trace_on")
    a=$(loss_of "recompute $rc attention cuDNN (atomic dQ) epilogues" "$tmp/trace_on")
    if within_1pct "$d" "$a"; then
        ok "-c 1,2, recompute $rc: a deterministic ($d) and an atomic-dQ ($a) run, losses within 1%"
    else bad "-c 1,2, recompute $rc: no deterministic and atomic-dQ pair agreeing (${d:-?}, ${a:-?})"; fi
done
for kern in gelu_backward_inplace_kernel bias_grad_partial_kernel; do
    on=$(grep -c "kernel $kern\$" "$tmp/trace_on") off=$(grep -c "kernel $kern\$" "$tmp/trace_off")
    [ "$on" = 0 ] && [ "$off" -gt 0 ] && ok "$kern: $off launches with -e off, none with -e on" ||
        bad "$kern: $off launches with -e off, $on with -e on (expected some, then none)"
done
# a device too small for B=64: each model halves B until it fits, and every failed build gives
# its cuDNN plans back (the cache holds 8 shapes: the second model's halvings would pass it)
if CUDA_EMU_MEM=110M "$EMU/bench_gpt2cu" -m d2c64h1t64,d2c64h2t64 -B 64 -T 64 -s 1 -w 0 -e on > "$tmp/small" 2>&1 &&
    [ "$(grep -c 'B=2 .*ms/step' "$tmp/small")" = 4 ]; then
    ok "110 MiB device: both models halve B from 64 to 2 ($(grep -c 'does not fit' "$tmp/small") failed builds) and run"
else tail -n 3 "$tmp/small"; bad "110 MiB device: the halvings from B=64 did not end in 4 runs at B=2"; fi
"$EMU/bench_gpt2cu" "${args[@]}" -e sideways > "$tmp/bad" 2>&1 && bad "-e sideways accepted" ||
    { grep -q "usage:" "$tmp/bad" && ok "-e sideways refused with the usage" || bad "-e sideways refused without the usage"; }
for c in 3 1, 1,,2 x; do
    "$EMU/bench_gpt2cu" "${args[@]}" -c "$c" > "$tmp/bad" 2>&1 && bad "-c $c accepted" ||
        { grep -q "usage:" "$tmp/bad" && ok "-c $c refused with the usage" || bad "-c $c refused without the usage"; }
done
echo "$pass passed, $failn failed"
[ "$failn" -eq 0 ]
