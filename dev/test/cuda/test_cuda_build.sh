#!/usr/bin/env bash
# The CUDA targets compile (sm_80 + sm_90, warning-clean) and link, whether or not a
# GPU is present: every library they need resolves and each binary starts (-h / skip).
set -u
cd "$(dirname "$0")/../../.."
fail() { echo "FAIL test_cuda_build: $*"; exit 1; }
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$nvcc" ] || fail "nvcc not found (CUDA toolkit missing): the CUDA targets cannot be built"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
make -j2 cuda > "$log" 2>&1 || { tail -n 40 "$log"; fail "make cuda failed"; }
# make's own notes under an outer `make -jN test` ("-j2 forced in submake") are not the compiler's
compiler_warnings() { grep -E -i "warning" "$log" | grep -v -e "Wno-deprecated" -e "^make.*: warning: .*jobserver" -e "^make.*: warning: -j"; }
if compiler_warnings > /dev/null; then
    compiler_warnings | head -n 20
    fail "CUDA build has warnings"
fi
for bin in train_gpt2cu train_gpt2_zero test_gpt2_zero bench_gpt2cu build/gpu_attention_cudnn build/gpu_zero_toy build/gpu_zero_quant \
           build/gpu_backend_ops bench_wire_cuda; do
    [ -x "$bin" ] || fail "$bin was not built"
    if ldd "$bin" | grep -q "not found"; then ldd "$bin" | grep "not found"; fail "$bin has unresolved libraries"; fi
done
./train_gpt2cu -h > "$log" 2>&1 || fail "train_gpt2cu -h exited non-zero"
grep -q -- "-i GLOB" "$log" || fail "train_gpt2cu -h printed no usage"
./train_gpt2_zero -h > "$log" 2>&1 || fail "train_gpt2_zero -h exited non-zero"
grep -q -- "-z STAGE" "$log" || fail "train_gpt2_zero -h does not document -z"
# the dry run needs no GPU: the plugin's predicted figures for GPT-2 124M on 8 ranks
./train_gpt2_zero -z 3 --dry-run --world 8 -e d12 -b 8 -t 1024 -o "$(dirname "$log")/dry_$$" > "$log" 2>&1 \
    || { cat "$log"; fail "train_gpt2_zero --dry-run failed"; }
grep -q '"optimizer_states"' "$(dirname "$log")/dry_$$/zero_report.json" || fail "dry run wrote no optimizer_states"
rm -rf "$(dirname "$log")/dry_$$"
echo "PASS test_cuda_build"
