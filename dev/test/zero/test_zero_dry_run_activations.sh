#!/usr/bin/env bash
# The dry run's activation bytes are the live ones: for the same model, batch shape and
# world, every rank's device memory in the dry run's zero_report.json (activations
# included, which the CPU trainer predicts with gpt2_cpu_activation_bytes) equals what a
# real mpirun -z run allocated and reported (the model's activation buffers as grown by its
# forward and backward), kind by kind, at stages 1 and 3.
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_zero_dry_run_activations: $*"; exit 1; }
np=2
model=d2c64h2t64
B=3
T=40   # below the model's 64, and not a multiple of 16: the layout's rounding shows
for stage in 1 3; do
    live="$tmp/live_z$stage" dry="$tmp/dry_z$stage"
    mpirun -np $np ./train_gpt2 -z $stage -e $model -b $B -t $T -x 1 -v 0 -s 0 --threads 1 -o "$live" \
        > "$live.txt" 2>&1 || { tail "$live.txt"; fail "mpirun -np $np -z $stage failed"; }
    ./train_gpt2 -z $stage --dry-run --world $np -e $model -b $B -t $T -o "$dry" > "$dry.txt" 2>&1 \
        || { cat "$dry.txt"; fail "the dry run -z $stage failed"; }
    python3 - "$live/zero_report.json" "$dry/zero_report.json" "$stage" <<'EOF' || fail "stage $stage: the dry run differs from the live run (above)"
import json, sys
live, dry, stage = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
ok = len(live["ranks"]) == len(dry["ranks"])
for l, d in zip(live["ranks"], dry["ranks"]):
    for side in ("device", "host"):
        if l[side] != d[side]:
            print(f"rank {l['rank']} {side}: live {l[side]}\n{' ' * len(str(l['rank']))}      dry  {d[side]}")
            ok = False
    if l["device"]["activations"] <= 0:
        print(f"rank {l['rank']}: the live run reports no activations"); ok = False
a = live["ranks"][0]["device"]["activations"]
print(f"stage {stage}: activations {a} bytes per rank, device total {live['ranks'][0]['device']['total']:.0f} bytes:"
      + (" dry run = live run" if ok else " MISMATCH"))
sys.exit(0 if ok else 1)
EOF
done
echo "PASS test_zero_dry_run_activations"
