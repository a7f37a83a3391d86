#!/usr/bin/env bash
# Runs every test program and prints one closing line "N passed, N failed".
# EMU_DIR (set by make test when the CUDA toolkit is there): the emulated programs' folder.
# cmocka programs report their own counts; shell tests (dev/test/*.sh) count as one
# test each (exit 0 = pass). A run that executes nothing counts as a failure.
set -u
passed=0
failed=0
failed_names=()
log=$(mktemp)
for bin in "$@"; do
    echo "=== $bin"
    "$bin" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi   # crashed before reporting
    passed=$((passed + p)); failed=$((failed + f))
    [ "$f" -gt 0 ] && failed_names+=("$bin")
done
for sh in dev/test/test_*.sh; do
    [ -e "$sh" ] || continue
    echo "=== $sh"
    if bash "$sh"; then passed=$((passed + 1)); else failed=$((failed + 1)); failed_names+=("$sh"); fi
done
# A program that prints its own "N passed, N failed" (or "SKIP: reason"): its counts join ours.
run_counted() {
    echo "=== $*"
    "$@" 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]}
    if grep -q '^SKIP' "$log"; then return; fi
    local counts p f
    counts=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    p=$(echo "$counts" | awk '{print $1+0}'); f=$(echo "$counts" | awk '{print $3+0}')
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    if [ -z "$counts" ] && [ "$rc" -eq 0 ]; then f=1; echo "($* printed no counts)"; fi
    passed=$((passed + p)); failed=$((failed + f))
    [ "$f" -gt 0 ] && failed_names+=("$*")
}
# GPU programs (built by test_cuda_build.sh above) print "SKIP: reason" without a GPU.
for gpu in ./test_gpt2_zero build/gpu_attention_cudnn build/gpu_zero_toy build/gpu_zero_quant; do
    [ -x "$gpu" ] && run_counted "$gpu"
done
# The same CUDA sources on the emulated device (make emu; dev/cuda_emu/README.md), and the
# emulator's own tests: they run wherever the CUDA toolkit is, GPU or not.
if [ -n "${EMU_DIR:-}" ]; then
    export LLMC_CUDNN_DETERMINISTIC=1 CUDA_EMU_QUIET=1
    for prog in emu_selftest test_cublaslt_emu test_cudnn_emu gpu_zero_quant "gpu_zero_toy all" gpu_attention_cudnn \
                test_gpt2_zero; do
        set -- $prog
        if [ -x "$EMU_DIR/$1" ]; then run_counted "$EMU_DIR/$1" "${@:2}"
        else echo "=== $EMU_DIR/$1: not built"; failed=$((failed + 1)); failed_names+=("$EMU_DIR/$1"); fi
    done
fi
rm -f "$log"
[ "$passed" -eq 0 ] && [ "$failed" -eq 0 ] && { echo "no test ran"; failed=1; }
[ ${#failed_names[@]} -gt 0 ] && echo "failed: ${failed_names[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
