#!/usr/bin/env bash
# Runs every test program and prints one closing line "N passed, N failed".
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
# GPU programs (built by test_cuda_build.sh above) print "SKIP: reason" without a GPU, else their own "N passed, N failed".
for gpu in ./test_gpt2_zero build/gpu_attention_cudnn build/gpu_zero_toy build/gpu_zero_quant; do
    [ -x "$gpu" ] || continue
    echo "=== $gpu"
    "$gpu" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    if grep -q '^SKIP' "$log"; then continue; fi
    counts=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    p=$(echo "$counts" | awk '{print $1+0}'); f=$(echo "$counts" | awk '{print $3+0}')
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    passed=$((passed + p)); failed=$((failed + f))
    [ "$f" -gt 0 ] && failed_names+=("$gpu")
done
rm -f "$log"
[ "$passed" -eq 0 ] && [ "$failed" -eq 0 ] && { echo "no test ran"; failed=1; }
[ ${#failed_names[@]} -gt 0 ] && echo "failed: ${failed_names[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
