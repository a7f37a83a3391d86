#!/usr/bin/env bash
# test_threads.sh: OpenMP threads of the CPU trainer's ranks (llmc/run/threads.c). A 2-rank
# mpirun gives each rank cores / 2 threads (not every core each) and says so in one
# "threads:" line; one process takes every core; OMP_NUM_THREADS and --threads win.
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
unset OMP_NUM_THREADS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_threads: $*"; exit 1; }
command -v mpirun > /dev/null || { echo "test_threads: no mpirun: skipped"; exit 77; }
args=(-e d2c64h2t64 -b 2 -t 32 -d 128 -x 1 -v 0 -s 0)
cores=$(getconf _NPROCESSORS_ONLN)
half=$((cores / 2 > 0 ? cores / 2 : 1))
# the trainer's own count: "GPT-2 CPU trainer: ..., N threads, AdamW kernel K"
used() { sed -n 's/^GPT-2 CPU trainer:.*, \([0-9]*\) threads, AdamW kernel [a-z0-9]*$/\1/p' "$1"; }

# 2 ranks, not bound by the launcher (--bind-to none: each rank may run on every core)
mpirun --bind-to none -np 2 ./train_gpt2 -z 1 "${args[@]}" -o "$tmp/two" > "$tmp/two.txt" 2>&1 \
    || { cat "$tmp/two.txt"; fail "2-rank run failed"; }
grep -q "^threads: $half per rank ($cores cores / 2 ranks on this node, from OMPI_COMM_WORLD_LOCAL_SIZE" "$tmp/two.txt" \
    || { grep threads "$tmp/two.txt"; fail "2 ranks: no 'threads: $half per rank ($cores cores / 2 ranks ...' line"; }
[ "$(grep -c '^threads:' "$tmp/two.txt")" -eq 1 ] || fail "2 ranks: the threads line is not printed once"
[ "$(used "$tmp/two.txt")" = "$half" ] || fail "2 ranks: the trainer runs $(used "$tmp/two.txt") threads, not $half"

# one process: every core
./train_gpt2 "${args[@]}" -o "$tmp/one" > "$tmp/one.txt" 2>&1 || { cat "$tmp/one.txt"; fail "1-process run failed"; }
grep -q "^threads: $cores ($cores cores, one rank on this node)" "$tmp/one.txt" || { grep threads "$tmp/one.txt"; fail "one process"; }

# an explicit OMP_NUM_THREADS wins over the default, --threads over both
OMP_NUM_THREADS=3 mpirun --bind-to none -x OMP_NUM_THREADS -np 2 ./train_gpt2 -z 1 "${args[@]}" -o "$tmp/env" \
    > "$tmp/env.txt" 2>&1 || { cat "$tmp/env.txt"; fail "OMP_NUM_THREADS run failed"; }
grep -q "^threads: as OMP_NUM_THREADS=3 says" "$tmp/env.txt" && [ "$(used "$tmp/env.txt")" = 3 ] \
    || { grep threads "$tmp/env.txt"; fail "OMP_NUM_THREADS=3 did not win"; }
OMP_NUM_THREADS=3 mpirun --bind-to none -x OMP_NUM_THREADS -np 2 ./train_gpt2 -z 1 "${args[@]}" --threads 2 \
    -o "$tmp/flag" > "$tmp/flag.txt" 2>&1 || { cat "$tmp/flag.txt"; fail "--threads run failed"; }
grep -q "^threads: 2 (--threads)" "$tmp/flag.txt" && [ "$(used "$tmp/flag.txt")" = 2 ] \
    || { grep threads "$tmp/flag.txt"; fail "--threads 2 did not win"; }
echo "test_threads: OK ($cores cores: $half per rank at 2 ranks)"
