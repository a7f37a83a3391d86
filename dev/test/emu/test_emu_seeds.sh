#!/usr/bin/env bash
# The emulated suite under three other seeds of the emulator (CUDA_EMU_SEED: the order of
# blocks, the interleaving of each block's threads between barriers, what fresh memory
# holds) with random delays before queued stream work (CUDA_EMU_JITTER) and before the NVMe
# engine's transfers (ZERO_NVME_JITTER): the same bits. A missing barrier, a dependence on
# block order, a read of memory never written or a missing stream or NVMe wait would change
# them. Per seed: gpu_zero_quant, gpu_backend_ops and
# gpu_zero_toy (their own bit-for-bit checks against the C references), and train_gpt2cu, train_gpt2_zero -z 3
# and -z 3 with optimizer and parameters in host memory, 6 steps, against seed 0's runs (so
# their default attention backward is cuDNN's deterministic one). train_gpt2cu --cudnn 2,
# cuDNN's atomic backward, must differ from seed 0's: the emulated cuDNN adds dQ's terms in an
# order each seed draws, as a GPU's blocks finish in an order of their own.
set -u
cd "$(dirname "$0")/../../.."
source dev/test/emu/emu_common.sh
export CUDA_EMU_QUIET=1 OMP_NUM_THREADS=2
# gpu_backend_ops's 1 GiB norm (two passes, one block sum per thread) runs in make test's own
# emulated run; its order is fixed by the passes, not by block interleaving
export ZERO_GPU_TEST_SMALL=1
bw=(-e d2c64h1t64 -b 2 -t 64 -v 0 -s 0 -l 1e-3 -d 128 -x 6 --grad-clip 0.5)
trainers=("cu $EMU/train_gpt2cu" "z3 $EMU/train_gpt2_zero -z 3"
          "z3off $EMU/train_gpt2_zero -z 3 --offload-optimizer cpu --offload-param cpu"
          "atomic $EMU/train_gpt2cu --cudnn 2")
train_all() {   # train_all SEED: every trainer into $tmp/SEED/
    for t in "${trainers[@]}"; do
        set -- $t
        local name=$1; shift
        mkdir -p "$tmp/$seed"
        timeout 600 "$@" "${bw[@]}" -o "$tmp/$seed/$name" > "$tmp/$seed/$name.log" 2>&1 ||
            { bad "seed $seed: $name failed"; tail -n 10 "$tmp/$seed/$name.log"; }
    done
}
run_seed() {   # run_seed SEED: seed 0 trains; another seed, with jitter, also runs the programs
    local seed=$1
    export CUDA_EMU_SEED=$seed
    if [ "$seed" -ne 0 ]; then
        export CUDA_EMU_JITTER=$seed ZERO_NVME_JITTER=$seed
        for prog in gpu_zero_quant gpu_backend_ops "gpu_zero_toy all"; do
            set -- $prog
            if timeout 600 "$EMU/$1" "${@:2}" > "$tmp/$1.$seed.log" 2>&1 && grep -q ' 0 failed$' "$tmp/$1.$seed.log"; then
                ok "seed $seed, jitter $seed: $prog: $(grep -E '^[0-9]+ passed' "$tmp/$1.$seed.log" | tail -n 1)"
            else bad "seed $seed, jitter $seed: $prog"; grep -m5 FAIL "$tmp/$1.$seed.log"; tail -n 3 "$tmp/$1.$seed.log"; fi
        done
    fi
    train_all
}
# Each seed is one process at a time (the emulator runs a kernel on one core): the seeds side
# by side (side_by_side, emu_common.sh)
side_by_side run_seed 0 1 2 3
for seed in 1 2 3; do
    for t in "${trainers[@]}"; do
        name=${t%% *}
        if [ "$name" = atomic ]; then   # two models compared tensor by tensor, and not the same bits
            verdict=$(./build/model_diff "$tmp/0/$name/model_final.bin" "$tmp/$seed/$name/model_final.bin" 0 2>&1)
            case "$verdict" in
                *"model max|diff|"*differ) ok "seed $seed: ${t#* } differs from seed 0 (cuDNN's atomic dQ): $(grep -m 1 -o 'model max.*' <<< "$verdict")" ;;
                *"model max|diff|"*) bad "seed $seed: ${t#* } gives seed 0's model bit for bit: its dQ terms' order did not change" ;;
                *) bad "seed $seed: ${t#* }: the models could not be compared: $(tail -n 2 <<< "$verdict")" ;;
            esac
            continue
        fi
        if ./build/model_diff "$tmp/0/$name/model_final.bin" "$tmp/$seed/$name/model_final.bin" 0 > /dev/null 2>&1 &&
            diff <(grep trl "$tmp/0/$name/main.log" | cut -d' ' -f1,2,4) <(grep trl "$tmp/$seed/$name/main.log" | cut -d' ' -f1,2,4) > /dev/null
        then ok "seed $seed, jitter $seed: ${t#* } gives seed 0's model, losses and norms"
        else bad "seed $seed, jitter $seed: ${t#* } differs from seed 0"; fi
    done
done
echo "$pass passed, $failn failed"
[ "$failn" -eq 0 ]
