#!/usr/bin/env bash
# ZeRO-Infinity's headline, small: dev/bench/bench_infinity.sh trains a model whose model
# states (2.0 GB) exceed a memory cap set for the test (1.5 GiB), on one rank with
# parameters and optimizer states on NVMe, and the process's peak resident memory must
# stay under that cap; the bench also checks the swap file is gone and the losses finite.
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cap=$((1536 * 1048576))
if ! dev/bench/bench_infinity.sh -e d24c512h8t64 -x 2 -p "$tmp/swap" -o "$tmp/out" --mem $cap --min-ratio 1 \
        --rss-cap $cap --dd-mib 256 > "$tmp/bench.txt" 2>&1; then
    tail -25 "$tmp/bench.txt"
    echo "FAIL test_zero_infinity: the bench failed its conditions"
    exit 1
fi
grep -E "^(model states|peak resident|seconds per step|NVMe achieved|achieved)" "$tmp/bench.txt"
echo "PASS test_zero_infinity"
