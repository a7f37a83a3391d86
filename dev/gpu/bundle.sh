#!/usr/bin/env bash
# bundle.sh [DIR]: builds every CUDA target for Hopper (sm_90) with portable host code and
# gathers them, with the few host libraries a bare GPU image lacks, into DIR (default
# gpubundle/), for dev/gpu/lent_machine.sh to run on a lent GPU machine that has NVIDIA's
# libraries but none of this project's build dependencies (no MPI, cJSON, liburing headers).
# Builds in a copy of the working tree (BUNDLE_SRC, default /tmp/zero_bundle_src; kept, so a
# second bundle rebuilds only what changed: a file is copied, with a new time, only when its
# bytes differ, since a tree's times can run backwards from one checkout to another and make
# would keep an object built from other bytes) so this checkout's binaries are untouched, and
# against zero/comm/mpi_stub (ranks start from RANK/WORLD_SIZE with the bootstrap file).
# LLMC_DIR (an llm.c checkout): llm.c's train_gpt2cu built there by
# dev/bench/bench_vs_llmc.sh --build-only goes in as bin/llmc_train_gpt2cu, for the lane
# vsllmc. BUILD_INFO records the commit and the toolkit's versions.
# bundle.sh --sync-only: brings BUNDLE_SRC up to date with the working tree and stops.
set -eu
case "${1:-}" in -h|--help) sed -n '2,/^set -/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
llmc=${LLMC_DIR:+$(realpath -m "$LLMC_DIR")}
cd "$(dirname "$0")/../.."
sync_only=0
[ "${1:-}" = --sync-only ] && { sync_only=1; shift; }
dir=$(realpath -m "${1:-gpubundle}")
commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo "+uncommitted changes")
src=${BUNDLE_SRC:-/tmp/zero_bundle_src}
mkdir -p "$src"
stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C "$stage"
(cd "$stage" && find . -type f -print0) | while IFS= read -r -d '' f; do
    cmp -s "$stage/$f" "$src/$f" || { mkdir -p "$(dirname "$src/$f")" && cp --preserve=mode "$stage/$f" "$src/$f"; }
done
# a source the tree no longer has (removed, renamed) leaves the copy too: the Makefile builds
# every source its wildcards find there. Build outputs (build/, the programs) stay.
(cd "$src" && find . -path ./build -prune -o -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \
    -o -name '*.sh' -o -name '*.py' -o -name '*.mk' \) -print0) | while IFS= read -r -d '' f; do
    [ -e "$stage/$f" ] || rm -f "$src/$f"
done
[ "$sync_only" = 1 ] && { echo "bundle.sh: $src is up to date with the working tree"; exit 0; }
cd "$src"
b=build
# -march=x86-64-v3: the lent machine's processor is not this one (-march=native could fault)
CFLAGS="-O3 -march=x86-64-v3" make -j"$(nproc)" BUILD=$b MPICC=/nonexistent \
    CUDA_ARCHS="-gencode arch=compute_90,code=sm_90" cuda $b/model_diff $b/model_bf16
rm -rf "$dir"; mkdir -p "$dir/bin" "$dir/build" "$dir/lib"
for t in train_gpt2cu train_gpt2_zero test_gpt2_zero bench_gpt2cu bench_wire_cuda; do cp -p "$t" "$dir/bin/"; done
for t in gpu_attention_cudnn gpu_zero_toy gpu_zero_quant gpu_backend_ops model_diff model_bf16; do cp -p "$b/$t" "$dir/build/"; done
# host libraries a CUDA image may lack (glibc here is older than there, so these load)
for l in libcjson.so.1 liburing.so.2 libgomp.so.1 libpcre2-8.so.0 libcrypto.so.3 libz.so.1; do
    p=$(ldconfig -p | awk -v n="$l" '$1 == n && /x86-64/ { print $NF; exit }')
    [ -n "$p" ] && cp -L "$p" "$dir/lib/"
done
# headers and link names for dev/test/zero/gpu_zero.sh, which compiles zero/ there (CPATH, LIBRARY_PATH)
mkdir -p "$dir/include/cjson"
cp /usr/include/cjson/cJSON.h "$dir/include/cjson/" && cp /usr/include/zlib.h /usr/include/zconf.h "$dir/include/"
for l in libcjson libz liburing; do ln -sf "$(basename "$(ls "$dir/lib/$l".so.*)")" "$dir/lib/$l.so"; done
if [ -n "$llmc" ]; then
    bash dev/bench/bench_vs_llmc.sh --build-only "$dir/bin/llmc_train_gpt2cu" "$llmc"
    mv "$dir/bin/llmc_train_gpt2cu.info" "$dir/"
fi
cuda_v=$(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
cudnn_v=$(awk '/define CUDNN_(MAJOR|MINOR|PATCHLEVEL) / { v = v (v == "" ? "" : ".") $3 } END { print v }' \
    "$(dirname "$(dirname "$(command -v nvcc)")")/include/cudnn_version.h" 2> /dev/null || true)
{
    echo "gpt2-zero commit $commit, built $(date -u +%Y-%m-%dT%H:%MZ) with CUDA $cuda_v and cuDNN ${cudnn_v:-?} headers"
    if [ -f "$dir/llmc_train_gpt2cu.info" ]; then cat "$dir/llmc_train_gpt2cu.info"; fi
} > "$dir/BUILD_INFO"
strip -s "$dir"/bin/* "$dir"/build/* 2> /dev/null || true
# the scripts leave multi-rank runs to mpirun where there is one: these binaries have no MPI
echo "NO_MPI=1: built against zero/comm/mpi_stub" > "$dir/NO_MPI"
du -sh "$dir"
