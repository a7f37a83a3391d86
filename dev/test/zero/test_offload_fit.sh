#!/usr/bin/env bash
# dev/bench/offload_fit.sh's search against a brute force: on a small width (C=256, T=256)
# under 1 GiB on the device and 1 GiB of host memory, for the configurations "opt" (the
# optimizer in host memory, its ratio searched) and "param" (parameters too), every row's
# model must fit as its flags say (a dry run of train_gpt2_zero exits 0, and its parameter
# count is the row's), and one layer more must fit at no --offload-optimizer-ratio of 0.05,
# 0.10, ..., 1 (nor without one). train_gpt2_zero's dry run needs no GPU.
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_offload_fit: $*"; exit 1; }
[ -x ./train_gpt2_zero ] || fail "./train_gpt2_zero is not built (make train_gpt2_zero)"
export RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 NO_MPI=1
small=(C=256 NH=4 T=256 B=4 ACCUM=1 GPU_MEM=1G HOST_MEM=1G MAX_DEPTH=128)
env "${small[@]}" CONFIGS="opt param" LOGDIR="$tmp/fit" bash dev/bench/offload_fit.sh > "$tmp/fit.txt" 2>&1 ||
    { rc=$?; tail -n 5 "$tmp/fit.txt"; fail "offload_fit.sh exit $rc"; }
dry() {   # dry NAME DEPTH FLAGS...: train_gpt2_zero's dry run of dDEPTHc256h4 under both budgets
    local name=$1 d=$2; shift 2
    ./train_gpt2_zero -e "d${d}c256h4" -t 256 -d 1024 "$@" -v 0 -s 0 -n 0 --dry-run --world 1 \
        --gpu-mem 1G --host-mem 1G -o "$tmp/$name" > "$tmp/$name.txt" 2>&1
}
for cfg in opt param; do
    row=$(grep "^| $cfg |" "$tmp/fit/offload_fit.md")
    flags=$(cut -d'|' -f3 <<< "$row" | xargs) model=$(cut -d'|' -f4 <<< "$row" | xargs) params=$(cut -d'|' -f5 <<< "$row" | xargs)
    d=$(sed -n 's/^d\([0-9]*\)c256h4$/\1/p' <<< "$model")
    [ -n "$d" ] || fail "$cfg: no model in the row '$row'"
    read -r -a f <<< "$flags"
    dry "${cfg}_fit" "$d" "${f[@]}" || fail "$cfg: d$d with '$flags' does not fit: $(tail -n 1 "$tmp/${cfg}_fit.txt")"
    n=$(sed -n 's/^model [^:]*: \([0-9]*\) parameters.*/\1/p' "$tmp/${cfg}_fit.txt")
    [ "$(awk -v n="$n" 'BEGIN { printf "%.2f B", n / 1e9 }')" = "$params" ] || fail "$cfg: d$d has $n parameters, the row says $params"
    # one layer more: without a ratio, and at every ratio of 0.05 (the dry run's own step)
    base=(); for x in "${f[@]}"; do [ "$x" = --offload-optimizer-ratio ] && break; base+=("$x"); done
    deeper=none
    dry "${cfg}_more" $((d + 1)) "${base[@]}" && deeper="no ratio"
    if [ "$cfg" = opt ]; then
        for r in $(seq 0.05 0.05 1.00); do dry "${cfg}_more" $((d + 1)) "${base[@]}" --offload-optimizer-ratio "$r" && deeper="ratio $r"; done
    fi
    [ "$deeper" = none ] || fail "$cfg: d$((d + 1)) fits ($deeper): the search stopped short"
    echo "$cfg: d$d fits with '$flags' ($n parameters); d$((d + 1)) fits at no ratio"
done
echo "PASS test_offload_fit"
