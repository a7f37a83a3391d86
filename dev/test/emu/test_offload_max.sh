#!/usr/bin/env bash
# The logic of dev/gpu/offload_max.sh (ZeRO-Offload's largest model on one GPU) with the
# emulated train_gpt2_zero standing in, on a tiny model: the dry run's device and host bytes
# and the run's tok/s, MFU and peak host memory land in one table row; a GPU too small for
# the prediction stops it before the run, naming the dry run's verdict; a deadline inside the
# run stops the trainer, and the row says after how many steps; the medians of tok/s and MFU
# over the steps after the first are taken as numbers, and TFLOP/s is MFU x the peak; a
# model export cut short by the stop leaves no temporary file behind; a trainer slow to exit
# once stopped does not hold the row back; DPU=2 (--dpu 2) adds the seconds a step waited for
# the delayed update to the row; EXTRA's flags reach the trainer and the row.
set -u
cd "$(dirname "$0")/../../.."
source dev/test/emu/emu_common.sh
need_emu train_gpt2_zero
export CUDA_EMU_QUIET=1 OMP_NUM_THREADS=1 CUDA_EMU_BLOCKS=1 CUDA_EMU_PREEMPT=0
small=(TRAINER=$EMU/train_gpt2_zero MODEL=d2c64h1t64 B=2 T=64 ACCUM=2 STEPS=3 RATIO=0.01)
env "${small[@]}" GPU_MEM=1G LOGDIR="$tmp/ok" bash dev/gpu/offload_max.sh > "$tmp/ok.txt" 2>&1
rc=$?
row=$(grep "^| d2c64h1t64" "$tmp/ok/offload_max.md")
trim() { echo "$1" | sed 's/^ *//; s/ *$//'; }
IFS='|' read -r _ _ params _ status _ tok mfu _ gpu host opt _ <<< "$row"
params=$(trim "$params") status=$(trim "$status") tok=$(trim "$tok") gpu=$(trim "$gpu") host=$(trim "$host") opt=$(trim "$opt")
gpu_re='^[0-9.]+, ' host_re='^[0-9.]+, [1-9][0-9]*$'
if [ $rc -eq 0 ] && [ "$status" = ok ] && [ "${params:-0}" -gt 3000000 ] && awk -v t="$tok" 'BEGIN { exit !(t + 0 > 0) }' &&
   [[ $gpu =~ $gpu_re ]] && [[ $host =~ $host_re ]] && [[ $opt =~ ^[0-9.]+,\ [0-9.]+$ ]]
then ok "a run (a partial optimizer offload, ratio 0.01): $params parameters, $tok tok/s, GPU MiB (predicted, peak) $gpu, host MiB $host, zero_step and CPU AdamW s $opt"
else bad "exit $rc, row: $row"; cat "$tmp/ok.txt"; fi
env "${small[@]}" DPU=2 EXTRA="--act-checkpoint 1" GPU_MEM=1G LOGDIR="$tmp/dpu" bash dev/gpu/offload_max.sh > "$tmp/dpu.txt" 2>&1
rc=$?
row=$(grep "^| d2c64h1t64" "$tmp/dpu/offload_max.md")
IFS='|' read -r _ model _ _ status _ _ _ _ _ _ opt _ <<< "$row"
if [ $rc -eq 0 ] && [ "$(trim "$status")" = ok ] && [[ $model == *"--dpu 2 --act-checkpoint 1"* ]] &&
   [[ $(trim "$opt") =~ ^[0-9.]+,\ [0-9.]+,\ waited\ [0-9.]+\ \+\ [0-9.]+$ ]] &&
   grep -q "recompute [0-9], checkpointed" "$tmp/dpu/run.txt"
then ok "DPU=2 EXTRA=--act-checkpoint 1: the row names both, the run checkpoints, and the row gives the waits for the delayed update ($(trim "$opt"))"
else bad "DPU=2: exit $rc, row: $row"; cat "$tmp/dpu.txt"; fi
env "${small[@]}" GPU_MEM=10M LOGDIR="$tmp/small" bash dev/gpu/offload_max.sh > "$tmp/small.txt" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "FAIL offload_max: the dry run says it does not fit" "$tmp/small.txt" && [ ! -e "$tmp/small/run.txt" ]
then ok "a GPU of 10 MiB: stopped after the dry run, which says it does not fit"
else bad "a GPU of 10 MiB: exit $rc"; cat "$tmp/small.txt"; fi
# a deadline inside the run: the trainer is stopped and the row says after how many steps
env "${small[@]}" STEPS=200 DEADLINE=14 GPU_MEM=1G LOGDIR="$tmp/late" bash dev/gpu/offload_max.sh > "$tmp/late.txt" 2>&1
rc=$?
row=$(grep "^| d2c64h1t64" "$tmp/late/offload_max.md")
if [ $rc -ne 0 ] && [[ $row == *"stopped at the deadline after "*" of 200 steps"* ]] && ! pgrep -f "$tmp/late/run" > /dev/null
then ok "a deadline of 14 s: the trainer stopped, the row says so"
else bad "a deadline of 14 s: exit $rc, row: $row"; cat "$tmp/late.txt"; fi
# the medians and TFLOP/s, numerically: a stand-in whose run prints a peak and five steps with
# MFU 9.5, 10.1, 10.3 and 9.9 after the first (as text, "10.3" < "9.5"); its dry run is the
# emulated trainer's; it leaves a model export's temporary file, as a kill inside the
# export does, which must not stay (it would be tens of GB in the lane's logs)
cat > "$tmp/trainer" <<EOF
#!/usr/bin/env bash
case " \$* " in *" --dry-run "*) exec "$EMU/train_gpt2_zero" "\$@" ;; esac
out=; prev=; for a in "\$@"; do [ "\$prev" = -o ] && out=\$a; prev=\$a; done
mkdir -p "\$out" && : > "\$out/model_final.bin.tmp.4242"
echo "GPU: NVIDIA H200, peak bf16 989 TFLOP/s"
i=0
for m in 50.0:7.0 9.5:1000 10.1:1200 10.3:1100 9.9:900; do
    i=\$((i + 1)); echo "step \$i/5 | loss 10.0 | norm 1.0 | lr 1e-4 | 1.0 ms | \${m#*:} tok/s | MFU \${m%:*}% | ok"
done
# SLOW_EXIT: stopped, it takes 30 s to go (a 10 B model's pinned memory given back)
[ -n "\${SLOW_EXIT:-}" ] && { trap 'sleep 30' TERM; sleep 60 & wait; exit 143; }
sleep 5
EOF
chmod +x "$tmp/trainer"
env "${small[@]}" TRAINER="$tmp/trainer" STEPS=5 GPU_MEM=1G LOGDIR="$tmp/med" bash dev/gpu/offload_max.sh > "$tmp/med.txt" 2>&1
IFS='|' read -r _ _ _ _ _ _ tok mfu tf _ <<< "$(grep "^| d2c64h1t64" "$tmp/med/offload_max.md")"
tok=$(trim "$tok") mfu=$(trim "$mfu") tf=$(trim "$tf")
[ "$tok" = 1050 ] && [ "$mfu" = "10%" ] && [ "$tf" = 98.9 ] &&
    ok "steps 2-5: median tok/s $tok, MFU $mfu (numbers, not text), $tf TFLOP/s at 989" ||
    bad "medians: tok/s '$tok' (want 1050), MFU '$mfu' (want 10%), TFLOP/s '$tf' (want 98.9)"
[ -d "$tmp/med/run" ] && [ -z "$(ls "$tmp/med/run" | grep -e '\.bin$' -e '\.tmp\.')" ] &&
    ok "no model file or cut-off export left in the run's folder" || bad "left in $tmp/med/run: $(ls "$tmp/med/run" 2>&1)"
# a trainer slow to exit once stopped: the row is written within seconds, not after its exit
# (a lane's deadline close behind would cut the script inside the wait, with no row)
SLOW_EXIT=1 timeout -k 5 20 env "${small[@]}" TRAINER="$tmp/trainer" STEPS=5 GPU_MEM=1G LOGDIR="$tmp/slow" \
    bash dev/gpu/offload_max.sh > "$tmp/slow.txt" 2>&1
rc=$?
pkill -f "$tmp/trainer" 2> /dev/null
if [ $rc -eq 0 ] && grep -q "^| d2c64h1t64.* | ok | " "$tmp/slow/offload_max.md" 2> /dev/null
then ok "a trainer 30 s slow to exit: the row is written, the script done within 20 s"
else bad "a trainer 30 s slow to exit: exit $rc, row: $(cat "$tmp/slow/offload_max.md" 2>&1)"; fi
echo "$pass passed, $failn failed"
[ "$failn" -eq 0 ]
