#!/usr/bin/env bash
# offload_fit.sh: the largest GPT-2-shaped model each ZeRO-Offload configuration trains on one
# GPU, predicted by the dry run alone (no GPU needed): for each configuration below, the
# deepest model of width C (NH heads) whose dry run at one rank fits GPU_MEM on the device
# and HOST_MEM of host memory, searched by bisection on the depth (a model one layer deeper
# does not fit). Where the optimizer is in host memory the dry run names the largest
# --offload-optimizer-ratio that fits both sides (the rest of the optimizer stays on the
# GPU); that ratio is taken and checked by a dry run of its own. Prints a markdown table
# (also to OUT_MD): parameters, the ratio, the device and host GiB the dry run predicts, and
# the command line that measures the row on a GPU (dev/gpu/offload_max.sh runs the first
# row's kind).
# Configurations (-z 2 unless said; T=1024, B micro-batch, ACCUM micro-steps a step):
#   gpu        no offload: everything on the device
#   opt        --offload-optimizer cpu (the ratio searched)
#   opt-dpu    the same with --dpu 2 (a working-parameter shard more of host memory)
#   opt-ckpt   the same as opt with --act-checkpoint 1 (block inputs only; the forward
#              recomputed in backward: 8 N FLOP a token instead of 6 N)
#   opt-ckpt-b4  opt-ckpt at B=4 (twice ACCUM)
#   param      -z 3 --offload-param cpu --offload-optimizer cpu --act-checkpoint 1: the
#              parameters in host memory too (their bf16 copy and the fp32 states)
# Environment (defaults in brackets): GPU_MEM [139G] HOST_MEM [100G] C [4096] NH [32] B [8]
#   T [1024] ACCUM [8] CONFIGS [gpu opt opt-dpu opt-ckpt opt-ckpt-b4 param]
#   MAX_DEPTH [256] TRAINER [./train_gpt2_zero] LOGDIR [/tmp/offload_fit] OUT_MD [LOGDIR/offload_fit.md]
# Exit status 0 when every configuration found a model that fits.
set -u
case "${1:-}" in -h|--help) sed -n '2,/^set -/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
cd "$(dirname "$0")/../.."
gmem=${GPU_MEM:-139G} hmem=${HOST_MEM:-100G} C=${C:-4096} NH=${NH:-32} B=${B:-8} T=${T:-1024} accum=${ACCUM:-8}
trainer=${TRAINER:-./train_gpt2_zero} max_depth=${MAX_DEPTH:-256}
log=${LOGDIR:-/tmp/offload_fit}; mkdir -p "$log"; md=${OUT_MD:-$log/offload_fit.md}
read -r -a configs <<< "${CONFIGS:-gpu opt opt-dpu opt-ckpt opt-ckpt-b4 param}"
export RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 NO_MPI=1
[ -x "$trainer" ] || { echo "offload_fit: $trainer is not built (make train_gpt2_zero)"; exit 1; }

flags_of() {   # flags_of CONFIG: the configuration's flags (B included)
    case $1 in
        gpu) echo "-z 2 -b $B" ;;
        opt) echo "-z 2 -b $B --offload-optimizer cpu" ;;
        opt-dpu) echo "-z 2 -b $B --offload-optimizer cpu --dpu 2" ;;
        opt-ckpt) echo "-z 2 -b $B --offload-optimizer cpu --act-checkpoint 1" ;;
        opt-ckpt-b4) echo "-z 2 -b $((B / 2)) --offload-optimizer cpu --act-checkpoint 1" ;;
        param) echo "-z 3 -b $B --offload-param cpu --offload-optimizer cpu --act-checkpoint 1" ;;
        *) return 1 ;;
    esac
}
# dry CONFIG DEPTH [RATIO]: the dry run's log in LOG/CONFIG_dDEPTH[_rRATIO].txt; its status
dry() {
    local cfg=$1 d=$2 r=${3:-} f
    read -r -a f <<< "$(flags_of "$cfg")"
    local out=$log/${cfg}_d$d${r:+_r$r}
    [ -n "$r" ] && f+=(--offload-optimizer-ratio "$r")
    # one step is B x T x ACCUM tokens whatever the micro-batch
    "$trainer" -e "d${d}c${C}h${NH}" -t "$T" -d $((B * T * accum)) "${f[@]}" -v 0 -s 0 -n 0 \
        --dry-run --world 1 --gpu-mem "$gmem" --host-mem "$hmem" -o "$out" > "$out.txt" 2>&1
}
# fits CONFIG DEPTH: 0 when the model fits, as it is or at the ratio its dry run names; sets
# fit_log to the dry run that fits and fit_ratio to that ratio (empty: none needed)
fits() {
    fit_ratio=; fit_log=$log/$1_d$2.txt
    dry "$1" "$2" && return 0
    local r; r=$(sed -n 's/^a partial optimizer offload fits both: --offload-optimizer-ratio \([0-9.]*\).*/\1/p' "$fit_log")
    [ -n "$r" ] || return 1
    fit_ratio=$r; fit_log=$log/$1_d$2_r$r.txt
    dry "$1" "$2" "$r"
}
gib() { sed -n "s/^rank 0 $1 bytes: .*total \([0-9.]*\) MiB.*/\1/p" "$2" | head -n 1 | awk '{ printf "%.1f", $1 / 1024 }'; }

rows=(); all=0
for cfg in "${configs[@]}"; do
    flags_of "$cfg" > /dev/null || { echo "offload_fit: unknown configuration '$cfg'"; exit 2; }
    lo=0 hi=$((max_depth + 1))   # lo fits (0: none yet), hi does not
    while [ $((hi - lo)) -gt 1 ]; do
        mid=$(((lo + hi) / 2))
        if fits "$cfg" "$mid"; then lo=$mid; else hi=$mid; fi
    done
    if [ "$lo" = 0 ]; then
        rows+=("| $cfg | $(flags_of "$cfg") | none fits | | | | |"); all=1
        echo "offload_fit: $cfg: not even one layer fits ($(tail -n 1 "$log/${cfg}_d1.txt"))"; continue
    fi
    fits "$cfg" "$lo"
    params=$(sed -n 's/^model [^:]*: \([0-9]*\) parameters.*/\1/p' "$fit_log" | head -n 1)
    bp=$(awk -v p="$params" 'BEGIN { printf "%.2f B", p / 1e9 }')
    host=$(gib host "$fit_log")
    rows+=("| $cfg | $(flags_of "$cfg")${fit_ratio:+ --offload-optimizer-ratio $fit_ratio} | d${lo}c${C}h${NH} | $bp | $(gib device "$fit_log") | ${host:-none} | d$((lo + 1)) does not |")
    echo "offload_fit: $cfg: d${lo}c${C}h${NH}, $bp parameters${fit_ratio:+, ratio $fit_ratio}"
done
{
    echo "Largest model of width $C ($NH heads), T=$T, that one rank fits: $gmem on the GPU, $hmem of host memory (dry runs, $(date -u +%Y-%m-%d))"
    echo
    echo "| configuration | flags | model | parameters | GPU GiB | host GiB | one layer more |"
    echo "| --- | --- | --- | --- | --- | --- | --- |"
    printf '%s\n' "${rows[@]}"
} > "$md"
cat "$md"
exit $all
