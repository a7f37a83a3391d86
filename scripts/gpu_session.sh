#!/usr/bin/env bash
# Everything that needs a GPU, in one go (for a session with a lent GPU): builds the CUDA
# targets, runs the GPU test programs, the 1-rank bit-identity check of train_gpt2_zero
# against train_gpt2cu, the train_gpt2_zero matrix and the benchmarks.
# On a lent machine without this project's build dependencies (no MPI, cJSON or liburing
# headers), build here with dev/gpu/bundle.sh and run dev/gpu/lent_machine.sh there instead.
# Logs go to $OUT (or ./gpu_logs); exits 1 naming the parts that failed. Pass part names to
# run a subset:
#   tests quant bitwise matrix offload zeropp zero-toy bench-model bench-zero bench-wire
set -u
case "${1:-}" in -h|--help) sed -n '2,/^set -/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
cd "$(dirname "$0")/.."
out=${OUT:-gpu_logs}; mkdir -p "$out"
all="tests quant bitwise matrix offload zeropp zero-toy bench-model bench-zero bench-wire"
parts=${*:-$all}
for p in $parts; do   # a misspelt part would otherwise run nothing after the whole build
    [[ " $all " == *" $p "* ]] || { echo "gpu_session.sh: unknown part '$p' (parts: $all; -h for help)" >&2; exit 2; }
done
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
make -j"$(nproc)" cuda > "$out/build.txt" 2>&1 || { tail -n 30 "$out/build.txt"; exit 1; }
# each part's status is its program's (the first of its pipeline); a program that fails or
# crashes says so (its exit status) among the lines shown, and the script exits 1
run_all() {   # run_all PROGRAM...: each, saying which failed and how; fails if any did
    local prog rc=0 e
    for prog in "$@"; do "$prog" || { e=$?; echo "FAIL $prog exited with $e"; rc=1; }; done
    return $rc
}
failed=""
for p in $parts; do
    echo "=== $p"
    case $p in
        tests) run_all ./test_gpt2_zero ./build/gpu_attention_cudnn 2>&1 | tee "$out/tests.txt" | grep -E "FAIL|passed|SKIP" ;;
        quant) run_all ./build/gpu_zero_quant ./build/gpu_backend_ops 2>&1 | tee "$out/quant.txt" | grep -E "FAIL|passed|SKIP" ;;
        bitwise) bash dev/test/cuda/gpu_train_matrix.sh bitwise 2>&1 | tee "$out/bitwise.txt" | grep -E "PASS|FAIL|passed|SKIP" ;;
        matrix) bash dev/test/cuda/gpu_train_matrix.sh matrix 2>&1 | tee "$out/matrix.txt" | grep -E "PASS|FAIL|passed|SKIP" ;;
        offload) bash dev/test/cuda/gpu_train_matrix.sh offload 2>&1 | tee "$out/offload.txt" | grep -E "PASS|FAIL|passed|SKIP" ;;
        zeropp) bash dev/test/cuda/gpu_train_matrix.sh zeropp 2>&1 | tee "$out/zeropp.txt" | grep -E "PASS|FAIL|passed|SKIP" ;;
        zero-toy) bash dev/test/zero/gpu_zero.sh 2>&1 | tee "$out/zero_toy.txt" | tail -n 15 ;;
        bench-model) ./bench_gpt2cu 2>&1 | tee "$out/bench_model.txt" ;;
        bench-zero) bash dev/bench/bench_zero.sh 2>&1 | tee "$out/bench_zero.txt" ;;
        bench-wire) ./bench_wire_cuda 2>&1 | tee "$out/bench_wire.txt" ;;
    esac
    [ "${PIPESTATUS[0]}" -eq 0 ] || failed="$failed $p"
done
if [ -n "$failed" ]; then echo "gpu_session.sh: failed:$failed (logs in $out)" >&2; exit 1; fi
