#!/usr/bin/env bash
# The emulated suite under AddressSanitizer and UndefinedBehaviorSanitizer: the project's
# CUDA sources and the emulator built with them (build/emu-asan). Device memory is host
# memory here, so a kernel's access out of bounds of a cudaMalloc buffer is a heap
# overflow (emu_selftest's kernel_out_of_bounds case shows it is caught). Runs the
# emulator's and libraries' own tests, gpu_zero_quant, gpu_backend_ops, gpu_zero_toy and the trainers for a
# few steps (train_gpt2cu; train_gpt2_zero at stage 3 with offload to host memory and NVMe,
# and at stage 2 with the delayed parameter update and a checkpoint that lands it),
# and the emulated NCCL across processes (test_nccl_emu, gpu_zero_toy's training at 2 ranks).
set -u
cd "$(dirname "$0")/../../.."
# -O1 (after the build's -O3): a third of the compile time, and what ASan is meant for
san="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all -O1"
progs=(emu_selftest test_cublaslt_emu test_cudnn_emu test_nccl_emu gpu_zero_quant gpu_backend_ops gpu_zero_toy train_gpt2cu
       train_gpt2_zero)
if ! make -j2 EMU=build/emu-asan EMU_SAN="$san" "${progs[@]/#/build/emu-asan/}" > build/emu-asan.build.log 2>&1; then
    tail -n 30 build/emu-asan.build.log; echo "FAIL test_emu_asan: the sanitizer build"; exit 1
fi
source dev/test/emu/emu_common.sh
EMU=build/emu-asan
export ZERO_GPU_TEST_SMALL=1   # gpu_backend_ops's 1 GiB norm: in make test's own emulated run
# the emulator keeps its streams and registry for the life of the process: no leak checks
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1
export CUDA_EMU_QUIET=1 OMP_NUM_THREADS=2
# AddressSanitizer checks here, not the instrumented memory checks (no forced switches in this
# build): blocks run one at a time, as fewer fibers cost ASan's fake stacks less.
export CUDA_EMU_BLOCKS=1
# every program starts first, side by side (spawn); then each is checked, in this order
names=()
check() { names+=("$1"); spawn "$@"; }
for p in emu_selftest test_cublaslt_emu test_cudnn_emu gpu_zero_quant gpu_backend_ops; do check "$p" "$EMU/$p"; done
check gpu_zero_toy "$EMU/gpu_zero_toy" all
check test_nccl_emu_np2 env NO_MPI=1 scripts/launch_ranks.sh 2 "$EMU/test_nccl_emu"
check gpu_zero_toy_train_np2 env NO_MPI=1 scripts/launch_ranks.sh 2 "$EMU/gpu_zero_toy" train
bw=(-e d2c64h1t64 -b 2 -t 64 -v 0 -s 0 -l 1e-3 -d 128 -x 3)
check train_gpt2cu "$EMU/train_gpt2cu" "${bw[@]}" -o "$tmp/cu"
mkdir -p "$tmp/nvme"
check train_gpt2_zero_offload_cpu "$EMU/train_gpt2_zero" "${bw[@]}" -z 3 --offload-optimizer cpu --offload-param cpu -o "$tmp/z3c"
check train_gpt2_zero_offload_nvme "$EMU/train_gpt2_zero" "${bw[@]}" -z 3 --offload-optimizer nvme \
    --offload-param nvme --nvme-path "$tmp/nvme" -o "$tmp/z3n"
check train_gpt2_zero_dpu "$EMU/train_gpt2_zero" "${bw[@]}" -z 2 --offload-optimizer cpu --dpu 2 -n 2 -o "$tmp/z2d"
wait
for name in "${names[@]}"; do   # exit 0, and no sanitizer report
    if [ "$(cat "$tmp/$name.rc")" = 0 ] && ! grep -q "ERROR: AddressSanitizer\|runtime error" "$tmp/$name.log"; then
        ok "$name under ASan/UBSan: $(grep -E '^[0-9]+ passed' "$tmp/$name.log" | tail -n 1)"
    else
        bad "$name under ASan/UBSan (exit $(cat "$tmp/$name.rc"))"
        grep -m3 -A12 "ERROR: AddressSanitizer\|runtime error" "$tmp/$name.log"; grep -m5 -A3 "^FAIL" "$tmp/$name.log"
        tail -n 5 "$tmp/$name.log"
    fi
done
echo "$pass passed, $failn failed"
[ "$failn" -eq 0 ]
