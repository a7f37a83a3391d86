#!/usr/bin/env bash
# The CPU trainer under mpirun (2 ranks, gradient accumulation 2) at every ZeRO stage, with
# the host backend's jitter (ZERO_HOST_JITTER=SEED: random sleeps before every queued
# stream operation) under two seeds: losses and final parameters must be the same bits as
# the run without jitter. The host backend's streams are real threads, so a wait missing
# in zero/ lets the model read a buffer that a gather or reduction has not finished.
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_zero_jitter: $*"; exit 1; }
args=(-e d2c64h2t64 -b 2 -t 32 -d 256 -x 8 -v 4 -m 2 -s 0 --threads 1 --zero-bucket 20000 --zero-prefetch 40000)
losses() { grep -E "trl|tel" "$1/main.log"; }
for stage in 0 1 2 3; do
    base="$tmp/z$stage"
    mpirun -np 2 ./train_gpt2 "${args[@]}" -z $stage -o "$base" > "$base.txt" 2>&1 \
        || { tail "$base.txt"; fail "stage $stage without jitter failed"; }
    for seed in 1 2; do
        out="$tmp/z${stage}_j$seed"
        ZERO_HOST_JITTER=$seed mpirun -np 2 -x ZERO_HOST_JITTER ./train_gpt2 "${args[@]}" -z $stage -o "$out" > "$out.txt" 2>&1 \
            || { tail "$out.txt"; fail "stage $stage with jitter seed $seed failed"; }
        grep -q "jitter is on (ZERO_HOST_JITTER=$seed)" "$out.txt" || { head "$out.txt"; fail "no start-up line says jitter is on"; }
        cmp -s "$base/model_final.bin" "$out/model_final.bin" || fail "stage $stage: jitter seed $seed changed the parameters"
        diff <(losses "$base") <(losses "$out") > /dev/null || fail "stage $stage: jitter seed $seed changed the losses"
    done
    echo "stage $stage: jitter seeds 1, 2 give the same bits as no jitter"
done
echo "PASS test_zero_jitter"
