#!/usr/bin/env bash
# The emulated device's slow producer (CUDA_EMU_SLOW=N: the work of the stream created
# N mod 4-th is held back by random pauses, so a consumer on another stream that does not
# wait for it reads stale data), on a chosen subset: gpu_zero_toy's CUDA backend checks,
# and train_gpt2cu and train_gpt2_zero -z 3 with activation offload (their copy stream and
# compute stream) for 4 steps, against the unslowed run's model, losses and norms.
# (emu_selftest's slow_producer cases show a consumer without its wait reading stale data.)
set -u
cd "$(dirname "$0")/../../.."
source dev/test/emu/emu_common.sh
need_emu gpu_zero_toy train_gpt2cu train_gpt2_zero
export CUDA_EMU_QUIET=1 OMP_NUM_THREADS=2
# The runs here compare bits between configurations (or streams): their kernels keep the
# bounds, alignment and race checks (the race check on the first launch of each kernel,
# block and grid shape), but run one block at a time without forced switches. Interleaved blocks and
# forced switches run on a chosen subset: the kernels' own tests (test_gpt2_zero,
# gpu_zero_quant, gpu_zero_toy, gpu_attention_cudnn) and test_emu_seeds.sh
# (dev/cuda_emu/README.md, "Which checks run where").
export CUDA_EMU_BLOCKS=1 CUDA_EMU_PREEMPT=0
bw=(-e d2c64h1t64 -b 2 -t 64 -v 0 -s 0 -l 1e-3 -d 128 -x 4 --grad-clip 0.5)
trainers=("cu $EMU/train_gpt2cu --act-checkpoint 1 --act-offload 1" "z3 $EMU/train_gpt2_zero -z 3")
train_all() {   # train_all TAG: every trainer into $tmp/TAG/
    local tag=$1 t name
    mkdir -p "$tmp/$tag"
    for t in "${trainers[@]}"; do
        set -- $t
        name=$1; shift
        timeout 900 "$@" "${bw[@]}" -o "$tmp/$tag/$name" > "$tmp/$tag/$name.log" 2>&1 ||
            { bad "$tag: $name failed"; tail -n 10 "$tmp/$tag/$name.log"; }
    done
}
run_slow() {   # run_slow N: the checks with stream N slowed
    local slow=$1 t name
    export CUDA_EMU_SLOW=$slow
    if timeout 900 "$EMU/gpu_zero_toy" all > "$tmp/toy.$slow.log" 2>&1 && grep -q ' 0 failed$' "$tmp/toy.$slow.log"; then
        ok "slow stream $slow: gpu_zero_toy all: $(grep -E '^[0-9]+ passed' "$tmp/toy.$slow.log" | tail -n 1)"
    else bad "slow stream $slow: gpu_zero_toy all"; grep -m5 FAIL "$tmp/toy.$slow.log"; tail -n 3 "$tmp/toy.$slow.log"; fi
    train_all "slow$slow"
    for t in "${trainers[@]}"; do
        name=${t%% *}
        if ./build/model_diff "$tmp/plain/$name/model_final.bin" "$tmp/slow$slow/$name/model_final.bin" 0 > /dev/null 2>&1 &&
            diff <(grep trl "$tmp/plain/$name/main.log" | cut -d' ' -f1,2,4) \
                 <(grep trl "$tmp/slow$slow/$name/main.log" | cut -d' ' -f1,2,4) > /dev/null
        then ok "slow stream $slow: ${t#* } gives the unslowed run's model, losses and norms"
        else bad "slow stream $slow: ${t#* } differs from the unslowed run"; fi
    done
}
train_all plain
# Each slowed stream is one process at a time (blocks run one at a time: one core): the four
# side by side (side_by_side, emu_common.sh)
side_by_side run_slow 0 1 2 3
echo "$pass passed, $failn failed"
[ "$failn" -eq 0 ]
