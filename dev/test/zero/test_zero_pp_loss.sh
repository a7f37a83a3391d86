#!/usr/bin/env bash
# What ZeRO++'s quantization costs in loss: the CPU trainer on the bundled data, 4 ranks as
# 2 logical nodes of 2, 120 steps at stage 3, once plain and once with --qwz --hpz 2 --qgz
# (int8 forward weights, int4 two-hop gradients). After 120 steps the train loss (the mean
# of the last 20 steps: one step's loss swings by several percent) and the validation loss
# (16 batches) may be at most 2% above the plain run's: what the quantization costs. They
# may be lower: the plain run meets a gradient spike near step 10 (norm 38) that the
# quantized ones, on another path from step 1 on, miss, and ends about 2% higher for it
# (train -1.8%, validation -1.4% here; qgZ with blocks of 2048 costs +3% at 200 steps,
# docs/performance.md).
# scripts/compare_runs.py draws both curves (OUT/compare.png; kept when ZERO_PP_LOSS_OUT
# names a folder).
# STEPS (default 120) changes the length.
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=1
steps=${STEPS:-120}
out=${ZERO_PP_LOSS_OUT:-}
if [ -z "$out" ]; then out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
mkdir -p "$out"
fail() { echo "FAIL test_zero_pp_loss: $*"; exit 1; }
args=(-e d4c128h4t128 -b 2 -t 64 -x "$steps" -v 50 -m 16 -s 0 --threads 1 -z 3 --node-size 2)
for run in plain pp; do
    extra=()
    [ $run = pp ] && extra=(--qwz --hpz 2 --qgz)
    t0=$(date +%s)
    mpirun -np 4 ./train_gpt2 "${args[@]}" "${extra[@]}" -o "$out/$run" > "$out/$run.txt" 2>&1 \
        || { tail -20 "$out/$run.txt"; fail "the $run run failed"; }
    echo "$run: $steps steps in $(( $(date +%s) - t0 )) s"
done
python3 scripts/compare_runs.py -o "$out/compare.png" "$out/plain" "$out/pp" || fail "compare_runs.py"
python3 - "$out" << 'PY' || fail "the loss with --qwz --hpz 2 --qgz is more than 2% above stage 3's"
import re, sys
def final(run, key, n):
    v = [float(x) for x in re.findall(key + r":([0-9.]+)", open(f"{sys.argv[1]}/{run}/main.log").read())]
    return sum(v[-n:]) / n
ok = True
for key, name, n in (("trl", "train (mean of the last 20 steps)", 20), ("tel", "validation", 1)):
    a, b = final("plain", key, n), final("pp", key, n)
    rel = (b - a) / a
    print(f"{name} loss: stage 3 {a:.6f}, --qwz --hpz 2 --qgz {b:.6f}: {100 * rel:+.3f}% (at most +2%)")
    ok = ok and rel < 0.02
assert ok
PY
echo "test_zero_pp_loss: passed"
