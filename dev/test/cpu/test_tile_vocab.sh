#!/usr/bin/env bash
# Vocabulary tiles (--tile-vocab KV): the token embedding and the classifier as KV tiles of
# wte's rows, each tile's two parts units of their own (gpt2_config.h).
#  - the CPU model tiled against untiled (test_gpt2_cpu): logits and loss bit-identical,
#    every gradient within float rounding of the untiled model's (itself checked against
#    finite differences there), the hooks in the documented order with the parameters
#    visible only inside their units' windows, the tile table covering the untiled one
#  - the trainer: step-1 loss identical to untiled, final parameters within 1e-5
#  - ZeRO stage 3 on 2 ranks with the same tiles (and with linear tiles too) gives the
#    unsharded run's losses and final parameters bit for bit
#  - a tiled sharded checkpoint consolidates into the run's final model, resumes with the
#    same KV and is refused with another
#  - refusal: KV not dividing Vp, naming both
#  - the main job's default (scripts/train.sh, 2 steps): stage 3 on 4 ranks holds at most
#    half of the unsharded run's memory per rank (the JSON reports), bit-identical to it;
#    the same model untiled (dry run) holds more than half: the tiling is what does it
#  - with parameters and optimizer on NVMe (dry run) the same tiles shrink the working
#    buffers, which hold the largest unit, to less than half
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_tile_vocab: $*"; exit 1; }

./build/tests/test_gpt2_cpu "*tile*" > "$tmp/unit.txt" 2>&1 || { cat "$tmp/unit.txt"; fail "test_gpt2_cpu's tile tests"; }
grep -q "K=1 KV=48: logits and loss bit-identical" "$tmp/unit.txt" || { cat "$tmp/unit.txt"; fail "no KV=48 case ran"; }
grep -q "K=4 KV=6 checkpoint 1: 49 units" "$tmp/unit.txt" || { cat "$tmp/unit.txt"; fail "no tiled hook sequence ran"; }
grep "KV=" "$tmp/unit.txt" | grep -v "KV=1 " | head -n 5

args=(-e d2c64h2t64 -b 2 -t 32 -d 128 -x 4 -v 0 -s 0 --threads 1)
source dev/test/cpu/train_runs.sh

run ref 0
run kv8 0 --tile-vocab 8
close ref kv8
run z3_kv8 2 --tile-vocab 8
same kv8 z3_kv8
run kv8_k2 0 --tile-vocab 8 --tile-linear 2
run z3_kv8_k2 2 --tile-vocab 8 --tile-linear 2
same kv8_k2 z3_kv8_k2
python3 - "$tmp/z3_kv8/zero_report.json" "$tmp/z3_kv8_k2/zero_report.json" <<'EOF' || fail "unit counts"
import json, sys
# d2c64: L = 2; units KV + L U + 1 + KV with U = 1 untiled, 2 + 4K tiled
for path, want in zip(sys.argv[1:], (8 + 2 + 1 + 8, 8 + 2 * 10 + 1 + 8)):
    got = json.load(open(path))["num_units"]
    if got != want: sys.exit(f"{path}: {got} units, expected {want}")
print("stage-3 unit counts: 19 (KV 8), 37 (KV 8, K 2)")
EOF

# a vocabulary-tiled sharded checkpoint: consolidated, it is the run's final model; it
# resumes with the same KV and is refused with another
zargs=(-e d2c64h2t64 -b 2 -t 32 -d 128 -n 2 -v 0 -s 0 --threads 1 -z 3)
mpirun -np 2 ./train_gpt2 "${zargs[@]}" -x 2 --tile-vocab 8 -o "$tmp/tck" > "$tmp/tck.txt" 2>&1 \
    || { tail "$tmp/tck.txt"; fail "tiled run with checkpoints failed"; }
./zero_to_model "$tmp/tck" 2 "$tmp/tck.bin" > /dev/null || fail "zero_to_model of a vocabulary-tiled checkpoint failed"
cmp -s "$tmp/tck.bin" "$tmp/tck/model_final.bin" || fail "the consolidated tiled checkpoint differs from the run's final model"
if mpirun -np 2 ./train_gpt2 "${zargs[@]}" -x 4 -y 1 --tile-vocab 4 -o "$tmp/tck" > "$tmp/tck4.txt" 2>&1; then
    fail "a KV=8 checkpoint resumed with KV=4"; fi
grep -q "holds the same [0-9]* parameters in another tensor table (.*): resume with the table (the tiling) it was saved with" \
    "$tmp/tck4.txt" || { tail "$tmp/tck4.txt"; fail "no reason for refusing KV=4"; }
mpirun -np 2 ./train_gpt2 "${zargs[@]}" -x 4 -y 1 --tile-vocab 8 -o "$tmp/tck" > "$tmp/tck8.txt" 2>&1 \
    || { tail "$tmp/tck8.txt"; fail "a KV=8 checkpoint did not resume with KV=8"; }
grep -q "resumed from .* at step 2" "$tmp/tck8.txt" || fail "KV=8 did not resume at step 2"
echo "vocabulary-tiled stage-3 checkpoint: consolidated == final model; resumes with KV 8, refused with KV 4"

if ./train_gpt2 "${args[@]}" --tile-vocab 5 -o "$tmp/bad" > "$tmp/bad.txt" 2>&1; then fail "--tile-vocab 5 accepted"; fi
grep -qF -- "--tile-vocab 5: vocabulary tiles KV = 5 do not divide the padded vocabulary Vp = 50304" "$tmp/bad.txt" \
    || { cat "$tmp/bad.txt"; fail "no clear error for --tile-vocab 5"; }

# The main job's defaults, 2 steps: the memory reports of both runs, per rank.
scripts/train.sh -z 3 -n 4 -x 2 -o "$tmp/job" -- -v 0 -s 0 > "$tmp/job.txt" 2>&1 \
    || { tail -n 30 "$tmp/job.txt"; fail "scripts/train.sh -x 2 failed"; }
cmp -s "$tmp/job/unsharded/model_final.bin" "$tmp/job/zero3/model_final.bin" \
    || fail "main job: stage 3 on 4 ranks is not bit-identical to the unsharded run"
model=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["model"])' "$tmp/job/unsharded/run.json")
python3 - "$tmp/job" "$model" <<'EOF' || fail "the main job's stage-3 memory is over half of the unsharded run's"
import json, sys
job, model = sys.argv[1:]
u = json.load(open(f"{job}/unsharded/memory_report.json"))["ranks"][0]["device"]
ranks = json.load(open(f"{job}/zero3/zero_report.json"))["ranks"]
if len(ranks) != 4: sys.exit(f"{len(ranks)} ranks in zero_report.json, expected 4")
for r in ranks:
    z = r["device"]
    ratio = z["total"] / u["total"]
    print(f"{model}, rank {r['rank']}: stage 3 {z['total'] / 2**20:.1f} MiB of unsharded {u['total'] / 2**20:.1f} MiB = "
          f"{ratio:.3f}")
    if ratio > 0.5: sys.exit(f"rank {r['rank']}: {ratio:.3f} > 0.5")
EOF
# the same model, B and T untiled (the dry run's prediction): over half
read -r B T <<< "$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["micro_batch"], r["seq_len"])' \
    "$tmp/job/unsharded/run.json" 2> /dev/null)"
./train_gpt2 -z 3 --dry-run --world 4 -e "$model" -b "${B:-1}" -t "${T:-64}" -d $((${B:-1} * ${T:-64} * 4)) \
    -o "$tmp/dry" > "$tmp/dry.txt" 2>&1 || { tail "$tmp/dry.txt"; fail "untiled dry run failed"; }
python3 - "$tmp/job/unsharded/memory_report.json" "$tmp/dry/zero_report.json" <<'EOF' || fail "untiled is not over half"
import json, sys
u = json.load(open(sys.argv[1]))["ranks"][0]["device"]["total"]
z = max(r["device"]["total"] for r in json.load(open(sys.argv[2]))["ranks"])
print(f"untiled (dry run): stage 3 {z / 2**20:.1f} MiB of unsharded {u / 2**20:.1f} MiB = {z / u:.3f}")
if z / u <= 0.5: sys.exit("untiled already at most half: the test would not show the tiling")
EOF
# NVMe offload of parameters and optimizer reads each unit into working buffers sized by
# the largest unit: the same tiles keep them small (dry run, the same model)
for kv in 1 16; do
    ./train_gpt2 -z 3 --dry-run --world 4 -e "$model" -b "${B:-1}" -t "${T:-64}" -d $((${B:-1} * ${T:-64} * 4)) \
        --tile-linear 4 --tile-vocab $kv --offload-param nvme --offload-optimizer nvme --nvme-path "$tmp" \
        -o "$tmp/nvme$kv" > "$tmp/nvme$kv.txt" 2>&1 || { tail "$tmp/nvme$kv.txt"; fail "NVMe dry run with KV $kv failed"; }
done
python3 - "$tmp/nvme1/zero_report.json" "$tmp/nvme16/zero_report.json" <<'EOF' || fail "NVMe working buffers do not shrink"
import json, sys
buf = [sum(r[t]["buffers"] + r[t]["parameters"] for t in ("device", "host"))
       for r in (json.load(open(p))["ranks"][0] for p in sys.argv[1:])]
print(f"NVMe offload, working parameters and buffers per rank: {buf[0] / 2**20:.1f} MiB untiled vocabulary, "
      f"{buf[1] / 2**20:.1f} MiB with 16 tiles")
if buf[1] > buf[0] / 2: sys.exit("not halved")
EOF
echo "PASS test_tile_vocab"
