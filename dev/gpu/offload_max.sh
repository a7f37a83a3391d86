#!/usr/bin/env bash
# offload_max.sh: ZeRO-Offload's claim on one GPU (its paper: a 13B model on one 32 GB V100
# at about 40 TFLOP/s): train_gpt2_zero at one rank with the optimizer states in host
# memory (all of them, or with RATIO < 1 the states of that fraction of the parameters: the
# rest stay on the GPU and are updated there), on the largest GPT-2-shaped model they fit,
# predicted first and then measured.
#   1. the dry run (--dry-run --gpu-mem GPU_MEM --host-mem HOST_MEM): device and host bytes,
#      "fits" or not on each side (and when not, the ratio that would)
#   2. STEPS steps: tok/s and MFU (medians of the steps after the first), TFLOP/s (MFU x the
#      peak the trainer prints), peak GPU memory (nvidia-smi, polled) and peak host memory
#      (the trainer's VmHWM, polled), against the prediction; and from the plugin's report
#      (zero_report.json: the mean a step over the steps it covers, the first's warm-up
#      among them), the seconds of zero_step and of the CPU's AdamW: the optimizer's time
#      the GPU waits for
# Prints a markdown table (also to OUT_MD) and exits 0 when the run trained its steps. The
# trainer is stopped once its last step's line is out: the model export after it (41 GB at
# the default model) measures the disk, not the offload.
# Environment (defaults in brackets):
#   MODEL      [d50c4096h32: 10.28 B parameters at LLaMA-7B's width (the LayerNorm kernels
#              take rows of up to 4096). All offloaded, 16 bytes each of host state (fp32
#              master, m, v and gradient) would make 153 GiB, over 128 GB of host memory.]
#   RATIO      [0.6: the dry run predicts 122.6 GiB on the GPU and 95.1 GiB of host memory at
#              B=8 (0.55: 129.6 and 88.1; 0.65: 114.6 and 103.1)]
#   B, T, ACCUM, STEPS [8, 1024, 8, 3]: micro-steps of B x T, ACCUM of them a step, so that
#              the CPU's optimizer step is spread over more GPU work
#   STAGE [2]    OFFLOAD [cpu]    GPU_MEM [139G]
#   DPU        [0]: --dpu N, ZeRO-Offload's delayed parameter update from step N (the CPU's
#              AdamW beside the next step's forward and backward; a working-parameter shard
#              more of host memory, so a lower RATIO may be needed: the dry run says); the
#              table then also gives the seconds a step still waited for the CPU's update
#   HOST_MEM   [100G: of the lent machine's 128 GiB, 28 GiB left to the system and the
#              process's own runtime (the CUDA context, libraries, the data)]
#   DEADLINE   [none]: seconds for the whole script; the trainer is stopped 10 s before, and
#              the table has the steps it ran
#   EXTRA      [none]: more trainer flags, for the dry run and the run (--act-checkpoint 1:
#              dev/bench/offload_fit.sh's opt-ckpt rows)
#   TRAINER    [./train_gpt2_zero]    LOGDIR [/tmp/offload_max]    OUT_MD [LOGDIR/offload_max.md]
set -u
case "${1:-}" in -h|--help) sed -n '2,/^set -/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
cd "$(dirname "$0")/../.."
start=$(date +%s)
model=${MODEL:-d50c4096h32} B=${B:-8} T=${T:-1024} accum=${ACCUM:-8} steps=${STEPS:-3} stage=${STAGE:-2} ratio=${RATIO:-0.6}
dpu=${DPU:-0}
off=${OFFLOAD:-cpu} gmem=${GPU_MEM:-139G} hmem=${HOST_MEM:-100G} trainer=${TRAINER:-./train_gpt2_zero}
log=${LOGDIR:-/tmp/offload_max}; mkdir -p "$log"; md=${OUT_MD:-$log/offload_max.md}
export RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 NO_MPI=1
args=(-e "$model" -b "$B" -t "$T" -d $((B * T * accum)) -z "$stage" --offload-optimizer "$off" -v 0 -s 0 -n 0)
part=; [ "$ratio" = 1 ] || { args+=(--offload-optimizer-ratio "$ratio"); part=" --offload-optimizer-ratio $ratio"; }
[ "$dpu" = 0 ] || { args+=(--dpu "$dpu"); part="$part --dpu $dpu"; }
read -r -a extra <<< "${EXTRA:-}"
[ ${#extra[@]} = 0 ] || { args+=("${extra[@]}"); part="$part ${extra[*]}"; }
"$trainer" "${args[@]}" --dry-run --world 1 --gpu-mem "$gmem" --host-mem "$hmem" -o "$log/dry" > "$log/dry.txt" 2>&1
dry_rc=$?
mib() { sed -n "s/^rank 0 $1 bytes: .*total \([0-9.]*\) MiB.*/\1/p" "$log/dry.txt" | head -n 1; }
pdev=$(mib device) phost=$(mib host)
params=$(sed -n 's/^model [^:]*: \([0-9]*\) parameters.*/\1/p' "$log/dry.txt" | head -n 1)
echo "offload_max: $model, ${params:-?} parameters: predicted ${pdev:-?} MiB on the GPU, ${phost:-?} MiB of host memory (dry run exit $dry_rc)"
[ "$dry_rc" -eq 0 ] || { echo "FAIL offload_max: the dry run says it does not fit or failed:"; tail -n 5 "$log/dry.txt"; exit 1; }
smi=
if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$log/gpu.mem" 2> /dev/null &
    smi=$!
fi
t0=$(date +%s)
"$trainer" "${args[@]}" -x "$steps" -o "$log/run" > "$log/run.txt" 2>&1 &
pid=$!
hwm=0 stopped=
while kill -0 "$pid" 2> /dev/null; do   # the trainer's peak resident set, while it lives
    h=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status" 2> /dev/null)
    [ -n "$h" ] && [ "$h" -gt "$hwm" ] && hwm=$h
    if grep -q "^step \+$steps/$steps " "$log/run.txt"; then stopped="after its last step"
    elif [ -n "${DEADLINE:-}" ] && [ $(( $(date +%s) - start )) -ge $(( DEADLINE - 10 )) ]; then stopped="at the deadline"; fi
    [ -n "$stopped" ] && { kill "$pid" 2> /dev/null; break; }
    sleep 0.5
done
if [ -n "$stopped" ]; then
    # its exit gives back about 100 GiB of pinned host and device memory: the row is written
    # after a few seconds whether or not it is gone, so a lane's deadline close behind cannot
    # lose it (whatever still runs is killed with the lane)
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2> /dev/null || break; sleep 0.5; done
    rc=1; [ "$stopped" = "after its last step" ] && rc=0
else
    wait "$pid"; rc=$?
fi
ran=$(grep -c "^step \+[0-9]*/" "$log/run.txt")
# the final model (41 GB at 10.28 B parameters), or the export the kill cut short (its
# temporary file): no use here, and too big for the logs
rm -f "$log/run"/*.bin "$log/run"/*.tmp.*
[ -n "$smi" ] && { kill "$smi" 2> /dev/null; wait "$smi" 2> /dev/null; }
secs=$(( $(date +%s) - t0 ))
# medians over the steps after the first: tok/s and MFU from "| X ms | Y tok/s | MFU Z% |"
med() {
    awk -v f="$1" '/^step +[0-9]+\// { split($2, s, "/"); if (s[1] + 0 < 2) next
            for (i = 2; i <= NF; i++) if ($i == f) { v = $(i - 1); if (f == "MFU") v = $(i + 1); gsub("%", "", v); x[++n] = v + 0 } }
        END { if (!n) { print "?"; exit } for (i = 2; i <= n; i++) { t = x[i]; j = i - 1; while (j > 0 && x[j] > t) { x[j + 1] = x[j]; j-- } x[j + 1] = t }
              print (n % 2) ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2 }' "$log/run.txt"
}
tok=$(med tok/s) mfu=$(med MFU)
peak_tf=$(sed -n 's/^GPU: .*peak bf16 \([0-9.]*\) TFLOP\/s.*/\1/p' "$log/run.txt" | head -n 1)
tflops=$(awk -v m="$mfu" -v p="${peak_tf:-0}" 'BEGIN { if (m != "?" && p > 0) printf "%.1f", m * p / 100; else print "?" }')
gpu_peak=$( [ -s "$log/gpu.mem" ] && sort -n "$log/gpu.mem" | tail -n 1 || echo "?")
host_peak=$(awk -v k="$hwm" 'BEGIN { printf "%.0f", k / 1024 }')
opt=$(python3 -c 'import json, sys; t = json.load(open(sys.argv[1]))["ranks"][0]["seconds_per_step"]
w = ", waited %.2f + %.2f" % (t["update_wait"], t["accumulation_wait"]) if "update_wait" in t else ""
print("%.2f, %.2f%s" % (t["in_zero_step"], t["optimizer_compute"], w))' "$log/run/zero_report.json" 2> /dev/null || echo "?")
status=ok; [ "$stopped" = "at the deadline" ] && status="stopped at the deadline after $ran of $steps steps"
[ "$rc" -ne 0 ] && [ -z "$stopped" ] && status="exit $rc: $(grep -v '^\s*$' "$log/run.txt" | tail -n 1 | cut -c1-80 | tr '|' '/')"
{
    echo "| model | parameters | B x T x micro-steps | status | s (all) | tok/s | MFU | TFLOP/s | GPU MiB: predicted, peak | host MiB: predicted, peak | s a step in zero_step, CPU AdamW (report's mean; --dpu: waited for it in zero_step + in the accumulation) |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    echo "| $model, -z $stage --offload-optimizer $off$part | ${params:-?} | $B x $T x $accum | $status | $secs | $tok | $mfu% | $tflops | ${pdev:-?}, $gpu_peak | ${phost:-?}, $host_peak | $opt |"
} | tee "$md"
[ "$rc" -eq 0 ]
