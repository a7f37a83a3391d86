#!/usr/bin/env bash
# Launch limits from the real build (dev/cuda_emu/launch_limits.py): every launch site of
# the CUDA sources against every instantiation of its kernel in nvcc's --resource-usage
# reports for sm_80 and sm_90 (threads x registers within a block's 65536, shared memory
# within 48 KiB; a block size set at run time held to the kernel's __launch_bounds__).
# Then the check is shown to fail on a planted site: a kernel launched with twice the
# threads its __launch_bounds__ allows, in a copy of the sources.
set -u
cd "$(dirname "$0")/../../.."
fail() { echo "FAIL test_emu_launch_limits: $*"; exit 1; }
[ -d build/emu/ptxas ] || fail "no resource-usage reports (build/emu/ptxas): run make emu"
reports=$(find "$PWD/build/emu/ptxas" -name '*.txt' | sort)
sources=(llmc/cuda/*.cu zero/cuda/*.cu train_gpt2.cu train_gpt2_zero.cu test_gpt2_zero.cu dev/test/cuda/gpu_attention_cudnn.cu)
out=$(python3 dev/cuda_emu/launch_limits.py check $reports -- "${sources[@]}" 2>&1) || { echo "$out"; fail "a launch site breaks the limits"; }
echo "$out" | tail -n 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r llmc zero "$tmp/"
sed -i 's/adamw_kernel<<<blocks, ADAMW_THREADS, 0, stream>>>/adamw_kernel<<<blocks, 2 * ADAMW_THREADS, 0, stream>>>/' \
    "$tmp/llmc/cuda/adamw_cuda.cu"
grep -q "2 \* ADAMW_THREADS" "$tmp/llmc/cuda/adamw_cuda.cu" || fail "could not plant the oversized launch"
if bad=$(cd "$tmp" && python3 "$OLDPWD/dev/cuda_emu/launch_limits.py" check $reports -- llmc/cuda/adamw_cuda.cu 2>&1); then
    echo "$bad"; fail "a launch past its kernel's __launch_bounds__ passed"
fi
echo "$bad" | grep -q "past its __launch_bounds__" || { echo "$bad"; fail "no message naming the bound"; }
echo "planted: $(echo "$bad" | grep -m1 "past its __launch_bounds__")"
echo "PASS test_emu_launch_limits"
