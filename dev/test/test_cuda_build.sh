#!/usr/bin/env bash
# The CUDA targets compile (sm_80 + sm_90, warning-clean) and link, whether or not a
# GPU is present: every library they need resolves and each binary starts (-h / skip).
set -u
cd "$(dirname "$0")/../.."
fail() { echo "FAIL test_cuda_build: $*"; exit 1; }
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$nvcc" ] || fail "nvcc not found (CUDA toolkit missing): the CUDA targets cannot be built"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
make -j2 cuda > "$log" 2>&1 || { tail -n 40 "$log"; fail "make cuda failed"; }
if grep -E -i "warning" "$log" | grep -v "Wno-deprecated" > /dev/null; then
    grep -E -i "warning" "$log" | head -n 20
    fail "CUDA build has warnings"
fi
for bin in train_gpt2cu test_gpt2_zero bench_gpt2cu; do
    [ -x "$bin" ] || fail "$bin was not built"
    if ldd "$bin" | grep -q "not found"; then ldd "$bin" | grep "not found"; fail "$bin has unresolved libraries"; fi
done
./train_gpt2cu -h > "$log" 2>&1 || fail "train_gpt2cu -h exited non-zero"
grep -q -- "-z\|-i GLOB" "$log" || fail "train_gpt2cu -h printed no usage"
echo "PASS test_cuda_build"
