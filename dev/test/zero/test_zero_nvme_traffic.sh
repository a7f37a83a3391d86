#!/usr/bin/env bash
# The dry run's NVMe traffic against the live run's: per rank, the swap file's bytes read and
# written per step (mean over the run) and in its last step, equal to the byte, for the
# optimizer, the parameters or both on NVMe (fp32 parameters beside the master: the deferred
# update, folded into the next gather), stages 1-3, accumulation 2, 3 ranks, activation
# checkpoints with recompute, no prefetch, linear tiles, persistent small tensors, and
# vocabulary tiles (the tied embedding's partial gradients parked on NVMe between its units).
# The live figures are the engines' own counts; the dry run moves no byte and adds up what
# each request of the live schedule would move. The live run's log prints rank 0's figures.
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_zero_nvme_traffic: $*"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
[ -x ./train_gpt2 ] || fail "./train_gpt2 not built (make train_gpt2)"

base=(-e d2c64h1t64 -b 2 -t 64 -v 0 -s 0 -x 3 --threads 1)
cases=("z3_opt       2 -z 3 --offload-optimizer nvme"
       "z3_both      2 -z 3 --offload-optimizer nvme --offload-param nvme"
       "z3_param_cpu 2 -z 3 --offload-param nvme --offload-optimizer cpu"
       "z3_param_dev 2 -z 3 --offload-param nvme"
       "z2_opt_acc2  2 -z 2 --offload-optimizer nvme -d 512"
       "z1_opt       2 -z 1 --offload-optimizer nvme"
       "z3_both_acc2 3 -z 3 --offload-optimizer nvme --offload-param nvme -d 768"
       "z3_ckpt      2 -z 3 --offload-param nvme --offload-optimizer cpu --act-checkpoint 1 --zero-prefetch 0"
       "z3_tiles     2 -z 3 --offload-optimizer nvme --offload-param nvme --tile-linear 2 --zero-persist 4096"
       "z3_vocab     2 -z 3 --offload-optimizer nvme --offload-param nvme --tile-vocab 8"
       "z2_vocab     2 -z 2 --offload-optimizer nvme --tile-vocab 8")
n=0
for c in "${cases[@]}"; do
    read -r name world rest <<< "$c"
    read -r -a flags <<< "$rest"
    mkdir -p "$tmp/nv_$name"
    a=("${base[@]}" "${flags[@]}" --nvme-path "$tmp/nv_$name")
    ./train_gpt2 "${a[@]}" --dry-run --world "$world" -o "$tmp/dry_$name" > "$tmp/dry_$name.txt" 2>&1 \
        || { tail -n 5 "$tmp/dry_$name.txt"; fail "$name: the dry run failed"; }
    # each case twice: the engine the machine gives, then the threads engine with a random
    # sleep before half of its transfers (ZERO_NVME_JITTER), where requests a step leaves in
    # flight complete at another time than the first run's
    for jitter in "" 7; do
        rm -rf "$tmp/live_$name" "$tmp/nv_$name" && mkdir -p "$tmp/nv_$name"
        env ${jitter:+ZERO_NVME_JITTER=$jitter} timeout 300 mpirun ${jitter:+-x ZERO_NVME_JITTER} -np "$world" ./train_gpt2 "${a[@]}" \
            -o "$tmp/live_$name" > "$tmp/live_$name.txt" 2>&1 \
            || { tail -n 5 "$tmp/live_$name.txt"; fail "$name${jitter:+ with ZERO_NVME_JITTER=$jitter}: the live run failed"; }
        python3 - "$tmp/live_$name/zero_report.json" "$tmp/dry_$name/zero_report.json" "$name" "$world" "$tmp/live_$name.txt" \
            "${jitter:+ with ZERO_NVME_JITTER=$jitter}" << 'EOF' || fail "$name: see above"
import json, re, sys
sys.argv[3] += sys.argv[6]   # the case's name, and the jitter's seed
live, dry = (json.load(open(f))["ranks"] for f in sys.argv[1:3])
if not len(live) == len(dry) == int(sys.argv[4]):
    sys.exit(f"{sys.argv[3]}: {len(live)} ranks in the live report, {len(dry)} in the dry run's, {sys.argv[4]} wanted")
keys = ("read_bytes", "written_bytes", "last_step_read_bytes", "last_step_written_bytes")
for l, d in zip(live, dry):
    got = {k: d["nvme_per_step"][k] for k in keys}
    want = {k: l["nvme_per_step"][k] for k in keys}
    if got != want:
        sys.exit(f"{sys.argv[3]}: rank {l['rank']}: the dry run predicts {got}, the live run moved {want}")
    if want["read_bytes"] <= 0 or want["written_bytes"] <= 0:
        sys.exit(f"{sys.argv[3]}: rank {l['rank']}: no NVMe traffic at all: {want} (the case proves nothing)")
    if d["nvme_per_step"]["busy_seconds"] is not None:
        sys.exit(f"{sys.argv[3]}: the dry run states a busy time it cannot predict")
r0 = live[0]["nvme_per_step"]
# the live run's log says the same at its end (whole bytes a step)
said = [l for l in open(sys.argv[5]) if l.startswith("zero: rank 0's NVMe swap file per step (3 steps)")]
want = "read {:,} B, written {:,} B; its last step: read {:,} B, written {:,} B".format(
    int(r0["read_bytes"]), int(r0["written_bytes"]), int(r0["last_step_read_bytes"]), int(r0["last_step_written_bytes"]))
if not said or want not in said[-1]:
    sys.exit(f"{sys.argv[3]}: the live run's log does not end with rank 0's NVMe traffic '{want}': {said}")
print(f"{sys.argv[3]}: {len(live)} ranks, rank 0 reads {r0['read_bytes']:,.0f} B and writes {r0['written_bytes']:,.0f} B "
      f"a step (last step {r0['last_step_read_bytes']:,} and {r0['last_step_written_bytes']:,}): predicted alike")
EOF
    done
    n=$((n + 1))
done

# A validation (-v 1) or a checkpoint (-n 1) after each step reads the tensors before the next
# step's forward does, so the step's deferred update runs between the steps: the next step
# counts it, and its forward then reads the fresh parameters, the master's bytes (a third of
# the optimizer states on NVMe), which the update would otherwise have handed it. Written
# bytes as the dry run predicts, a step's reads that much more.
name=z3_both
a=("${base[@]}" -z 3 --offload-optimizer nvme --offload-param nvme --nvme-path "$tmp/nv_$name")
for between in "-v 1" "-n 1"; do
    rm -rf "$tmp/live_$name" "$tmp/nv_$name" && mkdir -p "$tmp/nv_$name"
    # shellcheck disable=SC2086
    timeout 300 mpirun -np 2 ./train_gpt2 "${a[@]}" $between -o "$tmp/live_$name" > "$tmp/live_$name.txt" 2>&1 \
        || { tail -n 5 "$tmp/live_$name.txt"; fail "$name $between: the live run failed"; }
    python3 - "$tmp/live_$name/zero_report.json" "$tmp/dry_$name/zero_report.json" "$name $between" << 'EOF' || fail "$name $between: see above"
import json, sys
live, dry = (json.load(open(f))["ranks"] for f in sys.argv[1:3])
for l, d in zip(live, dry):
    got, want = l["nvme_per_step"], dict(d["nvme_per_step"])
    master = d["nvme"]["optimizer_states"] // 3
    want["last_step_read_bytes"] += master
    want["read_bytes"] += master * 2 / 3   # three steps, the last two after one
    keys = ("read_bytes", "written_bytes", "last_step_read_bytes", "last_step_written_bytes")
    if any(abs(got[k] - want[k]) > 1 for k in keys):
        sys.exit(f"{sys.argv[3]}: rank {l['rank']}: moved {[got[k] for k in keys]}, expected {[want[k] for k in keys]} "
                 f"(the dry run's figures and a read of the {master:,} B master in each step after the first)")
print(f"{sys.argv[3]}: rank 0 reads {live[0]['nvme_per_step']['last_step_read_bytes']:,} B in its last step: the update "
      f"run before it and the parameters' read, as expected")
EOF
done
echo "PASS test_zero_nvme_traffic ($n configurations, and z3_both with a validation or a checkpoint between steps)"
