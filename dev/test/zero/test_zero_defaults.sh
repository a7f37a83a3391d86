#!/usr/bin/env bash
# Memory defaults: with no ZeRO size flags, a higher stage never holds more model-state
# bytes (parameters + gradients + fp32 master + AdamW m, v) on any rank than a lower one.
# Read from the dry run (which runs the plugin's own sizing on a counting backend) for the
# CPU trainer's default model (d4c128h4t128) at 4 ranks and for d4 .. d48 at 8 and 64 ranks,
# with the CPU trainer (fp32) and, where it is built, the CUDA trainer (bf16 weights, fp32
# gradients; its dry run needs no GPU). Also: stage 3's default prefetch window is not empty at d48 (it used to end at
# the first tensor larger than the budget and prefetch nothing).
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_zero_defaults: $*"; exit 1; }

trainers=(./train_gpt2)
[ -x ./train_gpt2_zero ] && trainers+=(./train_gpt2_zero)

# check TRAINER WORLD MODEL B T: stages 0-3 in order, every rank
check() {
    local tr=$1 world=$2 model=$3 B=$4 T=$5
    for z in 0 1 2 3; do
        "$tr" -z $z --dry-run --world "$world" -e "$model" -b "$B" -t "$T" -o "$tmp/z$z" > "$tmp/z$z.txt" 2>&1 \
            || { tail "$tmp/z$z.txt"; fail "$tr dry run of $model at $world ranks, stage $z"; }
    done
    python3 - "$tmp" "$tr $model x$world" <<'EOF' || fail "$tr $model at $world ranks: a higher stage holds more (above)"
import json, sys
tmp, name = sys.argv[1], sys.argv[2]
runs = [json.load(open(f"{tmp}/z{z}/zero_report.json")) for z in range(4)]
states = [[r["model_states_bytes"] for r in run["ranks"]] for run in runs]
ok = True
for z in range(3):
    for rank, (lo, hi) in enumerate(zip(states[z], states[z + 1])):
        if hi > lo:
            print(f"{name}: rank {rank}: stage {z + 1} holds {hi} B, stage {z} {lo} B")
            ok = False
mb = lambda b: f"{b / 2**20:,.1f}"
print(f"{name:34s} model states per rank (MiB, rank 0): " + " > ".join(mb(s[0]) for s in states)
      + f"  [bucket {runs[3]['config']['bucket_elems']}, prefetch {runs[3]['config']['prefetch_elems']}]")
sys.exit(0 if ok else 1)
EOF
}

for tr in "${trainers[@]}"; do
    check "$tr" 4 d4c128h4t128 2 64
    for model in d4 d6 d12 d24 d36 d48; do
        for world in 8 64; do check "$tr" "$world" "$model" 8 1024; done
    done
done

# d48, stage 3, defaults, gradient accumulation 2 (the first micro-step records the fetch
# order, the second can gather ahead): the window gathers ahead
./train_gpt2 -z 3 --dry-run --world 8 -e d48 -b 8 -t 1024 -d $((8 * 1024 * 8 * 2)) -x 1 -o "$tmp/d48" > /dev/null 2>&1 || fail "d48 dry run"
python3 - "$tmp/d48/zero_report.json" <<'EOF' || fail "d48 stage 3 prefetches nothing at the defaults"
import json, sys
r = json.load(open(sys.argv[1]))["ranks"][0]["events"]
print(f"d48 stage 3 at the defaults, one step of 2 micro-steps: {r['prefetches']:.0f} tensors prefetched, {r['gathers']:.0f} gathered on demand, {r['gather_hits']:.0f} hits")
sys.exit(0 if r["prefetches"] > 0 and r["gather_hits"] > 0 else 1)
EOF
echo "PASS test_zero_defaults"
