#!/usr/bin/env bash
# Bytes each rank sends per optimizer step, read from zero_report.json of real CPU-trainer
# runs (2 ranks, fp32) with gradient accumulation 1, 2 and 4, against the ZeRO paper's
# volumes (per peer, Psi = this rank's shard of every padded tensor, times N-1 peers):
#   stage 1: gradients reduced once per step      all_to_all Psi,   all_gather Psi
#   stage 2: gradients reduced every micro-step   all_to_all G*Psi, all_gather Psi
# Stage 1 must not depend on the accumulation.
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_zero_step_bytes: $*"; exit 1; }
np=2
for stage in 1 2; do
    for G in 1 2 4; do
        out="$tmp/z${stage}_g$G"
        mpirun -np $np ./train_gpt2 -e d2c64h2t64 -b 2 -t 32 -d $((2 * 32 * np * G)) -x 2 -v 0 -s 0 --threads 1 \
            -z $stage -o "$out" > "$out.txt" 2>&1 || { tail "$out.txt"; fail "mpirun -np $np -z $stage (accumulation $G) failed"; }
        python3 - "$out/zero_report.json" "$stage" "$G" "$np" <<'EOF' || fail "stage $stage, accumulation $G: bytes off the formula (above)"
import json, sys
path, stage, G, N = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
r = json.load(open(path))
assert r["grad_accum"] == G, f"report says accumulation {r['grad_accum']}, ran {G}"
# the shard from the model's shape (d2c64h2t64, vocabulary padded to 50304): each tensor of
# each layer split into N slices of ceil(numel / N) rounded up to 16 (zero/partition.h)
C, L, Vp, maxT = 64, 2, 50304, 64
layer = [C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C]
sizes = [Vp * C, maxT * C] + layer * L + [C, C]
shard = sum(-(-(-(-n // N)) // 16) * 16 for n in sizes)
assert r["shard_elems"] == shard, f"report's shard {r['shard_elems']} elements, the model's {shard}"
psi = shard * 4 * (N - 1)          # fp32, one shard to each peer
want = {"all_to_all": psi * (1 if stage == 1 else G), "all_gather": psi}
ok = True
for rank in r["ranks"]:
    for op, w in want.items():
        s = rank["sent_per_step"][op]
        got = s["intra_node_bytes"] + s["inter_node_bytes"]
        if got != w:
            print(f"rank {rank['rank']}: {op} sent {got:.0f} bytes per step, formula {w}")
            ok = False
print(f"stage {stage}, accumulation {G}: all_to_all {want['all_to_all']} B, all_gather {want['all_gather']} B per step per rank" + ("" if ok else " (MISMATCH)"))
sys.exit(0 if ok else 1)
EOF
    done
done
echo "PASS test_zero_step_bytes"
