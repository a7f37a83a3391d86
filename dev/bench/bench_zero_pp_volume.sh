#!/usr/bin/env bash
# ZeRO++'s cross-node traffic (paper 001, section 3.4, table 1: ZeRO-3 3M -> ZeRO++ 0.75M):
# bytes a rank sends to other nodes per step, by flow, for stage 3 and each switch.
#   1. dry run: GPT-2 d12 (124M) on 16 ranks in 2 nodes of 8, a step after the first, with train_gpt2_zero's dtypes
#      (bf16 weights, fp32 gradients) when it is built, else the CPU trainer's (fp32, fp32)
#   2. live: the CPU trainer, 4 ranks as 2 logical nodes of 2, bundled data, 3 steps
# Units: M' = the bytes of stage 3's forward all-gather that cross nodes (each rank sends
# its shard to the N-X ranks of the other node: M (N-X)/N for a model of M bytes), so
# stage 3's forward and backward gathers are about 1 M' each and its gradients 1 M' per
# 2 bytes of gradient element (fp32: 2 M'). The paper's 3M counts all three at fp16 and
# a ring reduce-scatter; here the gradients go by all-to-all (flat, or two hops).
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^set -/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
cd "$(dirname "$0")/../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trainer=./train_gpt2
[ -x ./train_gpt2_zero ] && trainer=./train_gpt2_zero
switches=("" "--qwz" "--hpz 8" "--qgz" "--hier-reduce" "--qwz --hpz 8 --qgz")
table() {   # table TITLE HPZ DIR...: one row per run
    python3 - "$@" << 'PY'
import json, sys
title, runs = sys.argv[1], sys.argv[2:]
flows = ["forward_param_gather", "backward_param_gather", "grad_flat", "grad_intra_node_hop",
         "grad_inter_node_hop", "step_param_gather"]
short = ["fwd gather", "bwd gather", "grads flat", "grads hop1", "grads hop2", "step gather"]
rep = [json.load(open(f"{d}/zero_report.json")) for d in runs]
unit = rep[0]["ranks"][0]["sent_per_step_by_flow"]["forward_param_gather"]["inter_node_bytes"]
print(f"\n{title}: {rep[0]['world_size']} ranks, {rep[0]['num_nodes']} nodes, psi {rep[0]['psi']:.0f}, "
      f"params {rep[0]['param_dtype']}, grads {rep[0]['grad_dtype']}; M' = {unit:.0f} B")
print(f"{'switches':22s}" + "".join(f"{s:>12s}" for s in short) + f"{'total':>12s}{'in M':>8s}")
for d, r in zip(runs, rep):
    f = r["ranks"][0]["sent_per_step_by_flow"]
    x = [f[k]["inter_node_bytes"] for k in flows]
    name = open(f"{d}/switches").read().strip() or "stage 3"
    print(f"{name:22s}" + "".join(f"{v / unit:12.3f}" for v in x) + f"{sum(x):12.0f}{sum(x) / unit:8.3f}")
PY
}
dirs=()
for k in "${!switches[@]}"; do
    d="$tmp/dry$k"
    $trainer -e d12 -z 3 --dry-run --world 16 --node-size 8 -x -1 ${switches[$k]} -o "$d" > "$d.txt" 2>&1 \
        || { tail -5 "$d.txt"; exit 1; }
    echo "${switches[$k]}" > "$d/switches"
    dirs+=("$d")
done
table "dry run, $trainer d12" "${dirs[@]}"
dirs=()
for k in 0 5; do
    d="$tmp/live$k"
    sw=${switches[$k]//8/2}
    mpirun -np 4 ./train_gpt2 -z 3 --node-size 2 -x 3 -v 0 -s 0 --threads 1 $sw -o "$d" > "$d.txt" 2>&1 \
        || { tail -5 "$d.txt"; exit 1; }
    echo "$sw" > "$d/switches"
    dirs+=("$d")
done
table "live, CPU trainer, 3 steps" "${dirs[@]}"
