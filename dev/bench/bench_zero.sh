#!/usr/bin/env bash
# Throughput and peak GPU memory of train_gpt2_zero -z 0..3 against train_gpt2cu at one
# rank, in one run (GPT-2 124M by default). Target: every stage within 3% of unsharded.
#   dev/bench/bench_zero.sh [model=d12] [B=16] [T=1024] [steps=30]
set -u
case "${1:-}" in -h|--help) sed -n '2,/^set -/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
cd "$(dirname "$0")/../.."
model=${1:-d12}; B=${2:-16}; T=${3:-1024}; steps=${4:-30}
command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1 || { echo "SKIP: no CUDA device"; exit 0; }
make -j"$(nproc)" train_gpt2cu train_gpt2_zero > /dev/null || { echo "build failed"; exit 1; }
tmp=$(mktemp -d)
args=(-e "$model" -b "$B" -t "$T" -x "$steps" -v 0 -s 0 -r 1 -o "$tmp/out")
# mean tok/s over the second half of the steps (warm-up excluded); peak memory sampled
run() { # name command...
    local name=$1; shift
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$tmp/$name.mem" &
    local smi=$!
    "$@" "${args[@]}" > "$tmp/$name.txt" 2>&1
    local rc=$?
    kill "$smi" 2> /dev/null; wait "$smi" 2> /dev/null
    local toks peak
    toks=$(grep -E '^step +[0-9]+/' "$tmp/$name.txt" | awk -v h=$((steps / 2)) '{ split($2, s, "/"); if (s[1] > h) { for (i = 1; i <= NF; i++) if ($i == "tok/s") { t += $(i-1); n++ } } } END { if (n) printf "%.0f", t / n; else print 0 }')
    peak=$(sort -n "$tmp/$name.mem" | tail -n 1)
    printf "%-14s %12s tok/s   peak %6s MiB   %s\n" "$name" "$toks" "${peak:-?}" "$([ $rc -eq 0 ] && echo ok || echo "FAILED (rc $rc): $(tail -n 1 "$tmp/$name.txt")")"
    echo "$toks" > "$tmp/$name.toks"
}
echo "model $model, B=$B, T=$T, $steps steps, 1 rank, $(nvidia-smi --query-gpu=name --format=csv,noheader)"
run train_gpt2cu ./train_gpt2cu
for z in 0 1 2 3; do run "zero-z$z" scripts/launch_ranks.sh 1 ./train_gpt2_zero -z "$z"; done
base=$(cat "$tmp/train_gpt2cu.toks")
for z in 0 1 2 3; do
    awk -v a="$(cat "$tmp/zero-z$z.toks")" -v b="$base" -v z="$z" 'BEGIN { if (b > 0) printf "stage %d: %.1f%% of unsharded throughput\n", z, 100 * a / b }'
done
