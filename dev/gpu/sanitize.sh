#!/usr/bin/env bash
# sanitize.sh: NVIDIA's compute-sanitizer over the CUDA programs, on a GPU: each tool
# (memcheck, racecheck, synccheck, initcheck) over two steps of each trainer on a small
# model at T=128, where cuDNN's fused attention runs (train_gpt2cu; train_gpt2_zero -z 3 with
# activation checkpointing and its offload; -z 3 with parameters and optimizer on NVMe);
# then each tool over test_gpt2_zero, the longest run, last. Prints one line per
# run, "PASS sanitize TOOL NAME: 0 errors" or "FAIL sanitize TOOL NAME: N errors (LOG)",
# and its error lines; exit 0 only when every run that ran had none.
#   dev/gpu/sanitize.sh [TOOL...]      (default: memcheck racecheck synccheck initcheck)
# Environment: SANITIZER (default: compute-sanitizer on PATH, else under /usr/local/cuda),
# BIN (the folder of train_gpt2cu, train_gpt2_zero and test_gpt2_zero; default .),
# LOGDIR (default /tmp/sanitize), LANE_LEFT (seconds left: runs that would start with under
# 20 s are listed as not run), RANK/WORLD_SIZE are set to one rank without MPI.
set -u
case "${1:-}" in -h|--help) sed -n '2,/^set -/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
cd "$(dirname "$0")/../.."
tools=${*:-memcheck racecheck synccheck initcheck}
san=${SANITIZER:-$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -n 1)}
[ -n "$san" ] && [ -x "${san%% *}" ] || { echo "SKIP sanitize: no compute-sanitizer (set SANITIZER)"; exit 0; }
log=${LOGDIR:-/tmp/sanitize}; mkdir -p "$log"
t0=$(date +%s); budget=${LANE_LEFT:-100000}
export RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 NO_MPI=1
small=(-e d2c64h2t128 -b 2 -t 128 -x 2 -v 0 -s 0 -n 0)
nvme=$log/nvme; mkdir -p "$nvme"
bin=${BIN:-.}
trainers=(   # NAME|COMMAND (arguments split on spaces)
    "train_gpt2cu|$bin/train_gpt2cu ${small[*]} -o $log/out_cu"
    "zero3_act_offload|$bin/train_gpt2_zero ${small[*]} -z 3 --act-checkpoint 1 --act-offload 1 -o $log/out_act"
    "zero3_nvme|$bin/train_gpt2_zero ${small[*]} -z 3 --offload-param nvme --offload-optimizer nvme --nvme-path $nvme -o $log/out_nvme"
)
runs=()   # TOOL|NAME|COMMAND: every tool over the trainers, then over test_gpt2_zero
for tool in $tools; do for r in "${trainers[@]}"; do runs+=("$tool|$r"); done; done
for tool in $tools; do runs+=("$tool|test_gpt2_zero|$bin/test_gpt2_zero"); done
fail=0
for r in "${runs[@]}"; do
    tool=${r%%|*}; r=${r#*|}
    name=${r%%|*}; read -r -a cmd <<< "${r#*|}"
    left=$(( budget - ($(date +%s) - t0) ))
    if [ "$left" -lt 20 ]; then echo "SKIP sanitize $tool $name: not run (deadline)"; continue; fi
    out=$log/${tool}_$name.txt
    # --error-exitcode tells its errors from the program's own status
    timeout -k 10 "$left" $san --tool "$tool" --error-exitcode 86 --print-limit 50 "${cmd[@]}" > "$out" 2>&1
    rc=$?
    # "ERROR SUMMARY: N errors"; racecheck may give only "RACECHECK SUMMARY: H hazards displayed (N errors, W warnings)"
    # (anchored: past --print-limit a second line says "ERROR SUMMARY: M errors were not printed")
    n=$(sed -n -e 's/^========= ERROR SUMMARY: \([0-9]*\) errors\{0,1\}$/\1/p' \
               -e 's/^========= RACECHECK SUMMARY: .*(\([0-9]*\) error.*/\1/p' "$out" | tail -n 1)
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo "SKIP sanitize $tool $name: stopped at the deadline ($out)"
    elif grep -q "Device not supported" "$out"; then   # a runtime the tools cannot instrument (gVisor)
        echo "SKIP sanitize: compute-sanitizer does not support this device here ($out)"; exit "$fail"
    elif [ "${n:-x}" = 0 ] && [ "$rc" = 0 ]; then echo "PASS sanitize $tool $name: 0 errors"
    else
        echo "FAIL sanitize $tool $name: ${n:-no summary,} errors, exit $rc ($out)"
        grep -E "^========= (Invalid|Race|Barrier|Uninitialized|Error|Program hit|  )" "$out" | head -n 12
        fail=1
    fi
done
exit $fail
