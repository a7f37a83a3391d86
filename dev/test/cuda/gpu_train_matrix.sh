#!/usr/bin/env bash
# GPU suite, part 2: train_gpt2_zero at 1, 2 and 4 ranks on the one GPU, stages 0-3,
# against each other and against the unsharded train_gpt2cu (20 steps, bundled data).
#  - at each world size stages 2 and 3 give bit-identical parameters and losses, and all
#    four stages do where each rank has one micro-batch; then every stage gives
#    train_gpt2cu's bits (its --micro-grads rule), as stages 2-3 do at 1 rank (cuDNN's
#    deterministic backward, the trainers' default)
#  - stage 0 agrees with stage 1 within 1e-5 relative L2 (all-reduce once per step)
#  - every run agrees with train_gpt2cu within 2e-2 relative L2 and 2e-2 in loss
#  - at 1 rank without gradient accumulation, with a gradient clip that bites on every
#    step (checked from the logged norms), every stage gives train_gpt2cu's model, losses
#    and norms bit for bit (model_diff tolerance 0): both trainers run the same AdamW
#    element, the same bf16 stochastic rounding with the same keys and the same gradient
#    norm order and clip scale (llmc/numerics/adamw.h: double sums of 4096-element blocks, slice by
#    slice in slice order). Accumulation is off because train_gpt2cu adds micro-steps
#    inside its matmuls (beta 1) where zero/ stages 2-3 add each micro-step's gradient
#    (beta 0) afterwards: the same sums in exact terms, but cuBLASLt may pick other
#    algorithms for the two calls.
#  - offload (ZeRO-Offload / ZeRO-Infinity): at 1 and 2 ranks, stage 1 and 3 with the
#    optimizer in pinned host memory or on NVMe (AdamW on the CPU), and stage 3 with the
#    parameters there too, give the same bits as the run without offload: the CPU AdamW is
#    adamw_element and the bf16 refresh uses the same stochastic-rounding keys
#  - ZeRO++ at 4 ranks as 2 logical nodes of 2 (--node-size 2): --hpz 2 alone gives plain
#    stage 3's bits (it moves exact weights); --hier-reduce on one node (--node-size 4) gives
#    the flat reduction's bits; stages 2 and 3 give the same bits with --qgz; --qwz --hpz 2
#    --qgz twice gives the same bits, and a loss within 2e-2 of plain stage 3
# Arguments pick parts (default all): bitwise (the 1-rank check, a minute) matrix offload zeropp.
# NPS="1 2 4" picks the world sizes of matrix and offload (offload takes 1 and 2), OFFLOAD_MATCH
# only the offload cases whose flags contain it (e.g. "param nvme"). RUN_LIMIT (default 500):
# the seconds each trainer run may take; a run that hangs fails alone and the cases after it run.
# Prints PASS/FAIL lines and "N passed, N failed". Needs a GPU; skips without one.
set -u
cd "$(dirname "$0")/../../.."
parts=" ${*:-bitwise matrix offload zeropp} "
want() { [[ "$parts" == *" $1 "* ]]; }
command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1 || { echo "SKIP: no CUDA device"; exit 0; }
make -j"$(nproc)" train_gpt2cu train_gpt2_zero build/model_diff > /dev/null || { echo "FAIL: build"; echo "0 passed, 1 failed"; exit 1; }
tmp=${KEEP_DIR:-$(mktemp -d)}
pass=0; failn=0
ok() { echo "PASS $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; failn=$((failn + 1)); }
limited() { timeout -k 5 "${RUN_LIMIT:-500}" "$@"; }   # a trainer run, ended after RUN_LIMIT s
args=(-e d2c128h2t128 -b 4 -t 128 -d 2048 -x 20 -v 10 -m 4 -s 0 -r 1)
losses() { grep trl "$1/main.log" | cut -d' ' -f1-2; }
# step, loss and gradient norm of every step (main.log: "s:N trl:L lr:R norm:G")
losses_norms() { grep trl "$1/main.log" | cut -d' ' -f1,2,4; }
# 0 when every logged norm of the run exceeds the clip (so the clip scale is < 1 each step)
clip_bites() { grep trl "$1/main.log" | awk -v c="$2" '{ split($4, a, ":"); n++; if (a[2] + 0 <= c) low++ }
    END { exit !(n > 0 && low == 0) }'; }

if want bitwise; then
    clip=0.5   # the norms of this run are about 1.5 to 2.6 (CPU trainer, same data)
    bitwise=(-e d2c128h2t128 -b 4 -t 128 -d 512 -x 8 -v 0 -s 0 -r 1 --grad-clip $clip)
    limited ./train_gpt2cu "${bitwise[@]}" -o "$tmp/bw_ref" > "$tmp/bw_ref.txt" 2>&1 || { bad "train_gpt2cu (bitwise reference)"; tail "$tmp/bw_ref.txt"; }
    if clip_bites "$tmp/bw_ref" "$clip"; then ok "the clip $clip bites on every step of the bitwise reference"
    else bad "some norm of the bitwise reference is <= the clip $clip, which then checks less: $(losses_norms "$tmp/bw_ref" | tr '\n' ' ')"; fi
    for stage in 0 1 2 3; do
        out="$tmp/bw_z${stage}"
        if ! limited scripts/launch_ranks.sh 1 ./train_gpt2_zero "${bitwise[@]}" -z "$stage" -o "$out" > "$out.txt" 2>&1; then
            bad "train_gpt2_zero np=1 z=$stage (bitwise run)"; tail -n 20 "$out.txt"; continue
        fi
        if ./build/model_diff "$tmp/bw_ref/model_final.bin" "$out/model_final.bin" 0 > "$out.diff" \
            && diff <(losses_norms "$tmp/bw_ref") <(losses_norms "$out") > /dev/null; then
            ok "np=1 z=$stage bit-identical to train_gpt2cu after 8 clipped steps (model, losses, norms)"
        else bad "np=1 z=$stage vs train_gpt2cu, tolerance 0: $(tail -n 2 "$out.diff" | paste -sd " "); norms $(losses_norms "$out" | cut -d' ' -f3 | tr '\n' ' ')vs $(losses_norms "$tmp/bw_ref" | cut -d' ' -f3 | tr '\n' ' ')"; fi
    done
    # activation checkpointing (and its pinned-host offload) reruns the same kernels on the
    # same block inputs: the same bits, unsharded and at stage 3
    for act in "1 0" "1 1"; do
        set -- $act
        flags=(--act-checkpoint "$1" --act-offload "$2")
        for trainer in cu z3; do
            out="$tmp/bw_act$1$2_$trainer"
            if [ "$trainer" = cu ]; then cmd=(limited ./train_gpt2cu); else cmd=(limited scripts/launch_ranks.sh 1 ./train_gpt2_zero -z 3); fi
            if ! "${cmd[@]}" "${bitwise[@]}" "${flags[@]}" -o "$out" > "$out.txt" 2>&1; then
                bad "$trainer ${flags[*]} (bitwise run)"; tail -n 20 "$out.txt"; continue
            fi
            if cmp -s "$tmp/bw_ref/model_final.bin" "$out/model_final.bin" && diff <(losses_norms "$tmp/bw_ref") <(losses_norms "$out") > /dev/null; then
                ok "$trainer ${flags[*]} bit-identical to train_gpt2cu without (model, losses, norms)"
            else bad "$trainer ${flags[*]} differs from train_gpt2cu without"; fi
        done
    done
    # tiled linears: other bf16 roundings (the tiles' input gradients sum in fp32), same model within 2e-2
    out="$tmp/bw_tiles4"
    if limited scripts/launch_ranks.sh 1 ./train_gpt2_zero -z 3 "${bitwise[@]}" --tile-linear 4 -o "$out" > "$out.txt" 2>&1 \
        && ./build/model_diff "$tmp/bw_ref/model_final.bin" "$out/model_final.bin" 2e-2 > "$out.diff"; then
        ok "z3 --tile-linear 4 vs train_gpt2cu: $(tail -n 2 "$out.diff" | paste -sd " ")"
    else bad "z3 --tile-linear 4 vs train_gpt2cu: $(tail -n 2 "$out.diff" 2> /dev/null | paste -sd " ")"; tail -n 20 "$out.txt"; fi
    # vocabulary tiles: both trainers compute the same tiles, so stage 3 gives train_gpt2cu's bits
    for trainer in cu z3; do
        out="$tmp/bw_kv8_$trainer"
        if [ "$trainer" = cu ]; then cmd=(limited ./train_gpt2cu); else cmd=(limited scripts/launch_ranks.sh 1 ./train_gpt2_zero -z 3); fi
        "${cmd[@]}" "${bitwise[@]}" --tile-vocab 8 -o "$out" > "$out.txt" 2>&1 || { bad "$trainer --tile-vocab 8 (bitwise run)"; tail -n 20 "$out.txt"; }
    done
    if cmp -s "$tmp/bw_kv8_cu/model_final.bin" "$tmp/bw_kv8_z3/model_final.bin" &&
        diff <(losses_norms "$tmp/bw_kv8_cu") <(losses_norms "$tmp/bw_kv8_z3") > /dev/null; then
        ok "z3 --tile-vocab 8 bit-identical to train_gpt2cu --tile-vocab 8 (model, losses, norms)"
    else bad "z3 --tile-vocab 8 differs from train_gpt2cu --tile-vocab 8"; fi
    if ./build/model_diff "$tmp/bw_ref/model_final.bin" "$tmp/bw_kv8_cu/model_final.bin" 2e-2 > "$tmp/bw_kv8.diff"; then
        ok "train_gpt2cu --tile-vocab 8 vs untiled: $(tail -n 2 "$tmp/bw_kv8.diff" | paste -sd " ")"
    else bad "train_gpt2cu --tile-vocab 8 vs untiled: $(tail -n 2 "$tmp/bw_kv8.diff" | paste -sd " ")"; fi
fi

if want matrix; then
    limited ./train_gpt2cu "${args[@]}" -o "$tmp/ref" > "$tmp/ref.txt" 2>&1 && ok "train_gpt2cu reference" || { bad "train_gpt2cu reference"; tail "$tmp/ref.txt"; }
    for np in ${NPS:-1 2 4}; do
        for stage in 0 1 2 3; do
            out="$tmp/np${np}_z${stage}"
            if limited scripts/launch_ranks.sh "$np" ./train_gpt2_zero "${args[@]}" -z "$stage" -o "$out" > "$out.txt" 2>&1; then
                ok "train_gpt2_zero np=$np z=$stage runs ($(grep -m1 'tok/s' "$out.txt" | sed 's/.*| \([0-9]* tok\/s\).*/\1/'))"
            else
                bad "train_gpt2_zero np=$np z=$stage"; tail -n 20 "$out.txt"; continue
            fi
            if ./build/model_diff "$tmp/ref/model_final.bin" "$out/model_final.bin" 2e-2 > "$out.diff"; then
                ok "np=$np z=$stage vs train_gpt2cu: $(tail -n 2 "$out.diff" | paste -sd " ")"
            else bad "np=$np z=$stage vs train_gpt2cu: $(tail -n 2 "$out.diff" | paste -sd " ")"; fi
            m=$(paste <(losses "$tmp/ref") <(losses "$out") | awk '{ split($2,a,":"); split($4,b,":"); d=a[2]-b[2]; if (d<0) d=-d; if (d>m) m=d } END { print m+0 }')
            awk -v m="$m" 'BEGIN { exit !(m < 2e-2) }' && ok "np=$np z=$stage loss within $m of train_gpt2cu" || bad "np=$np z=$stage loss differs by $m"
        done
        # stages 2-3 add each micro-batch's gradient to the sum (the micro-grad rule), stages
        # 0-1 accumulate inside the kernels, train_gpt2cu follows the rule (--micro-grads 1):
        # 2 = 3 always; all four equal when each rank has one micro-batch; 2 and 3 give
        # train_gpt2cu's bits at 1 rank (the same micro-batches summed in the same order), and
        # every stage gives them when each of the ranks has one micro-batch (the reduction sums
        # the ranks' gradients in rank order, as train_gpt2cu sums its micro-batches)
        same_run() { cmp -s "$1/model_final.bin" "$2/model_final.bin" && diff <(losses "$1") <(losses "$2") > /dev/null; }
        accum=$((2048 / (4 * 128 * np)))
        same_run "$tmp/np${np}_z2" "$tmp/np${np}_z3" && ok "np=$np stage 3 bit-identical to stage 2" || bad "np=$np stage 3 differs from stage 2"
        if [ "$accum" -eq 1 ]; then
            same_run "$tmp/np${np}_z1" "$tmp/np${np}_z2" && ok "np=$np (one micro-batch per rank) stage 2 bit-identical to stage 1" \
                || bad "np=$np (one micro-batch per rank) stage 2 differs from stage 1"
        fi
        if [ "$np" -eq 1 ] || [ "$accum" -eq 1 ]; then
            for stage in 0 1 2 3; do
                [ "$accum" -eq 1 ] || [ "$stage" -ge 2 ] || continue
                same_run "$tmp/ref" "$tmp/np${np}_z${stage}" && ok "np=$np z=$stage bit-identical to train_gpt2cu (accumulation $((2048 / 512)))" \
                    || bad "np=$np z=$stage not bit-identical to train_gpt2cu"
            done
        fi
        if ./build/model_diff "$tmp/np${np}_z1/model_final.bin" "$tmp/np${np}_z0/model_final.bin" 1e-5 > "$tmp/d0"; then
            ok "np=$np stage 0 vs 1: $(tail -n 2 "$tmp/d0" | paste -sd " ")"
        else bad "np=$np stage 0 vs 1: $(tail -n 2 "$tmp/d0" | paste -sd " ")"; fi
    done
fi
if want offload; then
    swap="$tmp/swap"; mkdir -p "$swap"
    # the parameters on NVMe first, and 2 ranks before 1: what a short GPU window must not miss
    offload_cases=("3|--offload-param nvme --offload-optimizer nvme" "3|--offload-param nvme"
                   "1|--offload-optimizer cpu" "1|--offload-optimizer nvme" "3|--offload-optimizer cpu"
                   "3|--offload-optimizer nvme" "3|--offload-param cpu --offload-optimizer cpu")
    for np in ${NPS:-2 1}; do
        [ "$np" -le 2 ] || continue
        for stage in 1 3; do
            base="$tmp/off_np${np}_z$stage"
            limited scripts/launch_ranks.sh "$np" ./train_gpt2_zero "${args[@]}" -z $stage -o "$base" > "$base.txt" 2>&1 \
                || { bad "train_gpt2_zero np=$np z=$stage (offload baseline)"; tail -n 20 "$base.txt"; }
        done
        for c in "${offload_cases[@]}"; do
            [[ -z "${OFFLOAD_MATCH:-}" || "${c#*|}" == *"$OFFLOAD_MATCH"* ]] || continue
            stage=${c%%|*}; flags=(${c#*|})
            [[ " ${flags[*]} " == *" nvme "* ]] && flags+=(--nvme-path "$swap")
            out="$tmp/off_np${np}_z${stage}_$(echo "${c#*|}" | tr -dc 'a-z')"
            if ! limited scripts/launch_ranks.sh "$np" ./train_gpt2_zero "${args[@]}" -z $stage "${flags[@]}" -o "$out" > "$out.txt" 2>&1; then
                bad "train_gpt2_zero np=$np z=$stage ${c#*|}"; tail -n 20 "$out.txt"; continue
            fi
            if cmp -s "$tmp/off_np${np}_z$stage/model_final.bin" "$out/model_final.bin" \
                && diff <(losses "$tmp/off_np${np}_z$stage") <(losses "$out") > /dev/null; then
                ok "np=$np z=$stage ${c#*|}: bit-identical to no offload ($(grep -m1 'tok/s' "$out.txt" | sed 's/.*| \([0-9]* tok\/s\).*/\1/'))"
            else bad "np=$np z=$stage ${c#*|} differs from the run without offload"; fi
        done
    done
    [ -z "$(ls -A "$swap")" ] && ok "no swap file left behind" || bad "swap files left: $(ls "$swap")"
fi
if want zeropp; then
    pp_run() {   # pp_run NAME ARGS...: 4 ranks
        local out="$tmp/pp_$1"
        shift
        limited scripts/launch_ranks.sh 4 ./train_gpt2_zero "${args[@]}" --node-size 2 "$@" -o "$out" > "$out.txt" 2>&1 \
            || { bad "train_gpt2_zero np=4 $*"; tail -n 20 "$out.txt"; return 1; }
    }
    pp_same() {   # pp_same A B WHAT
        if cmp -s "$tmp/pp_$1/model_final.bin" "$tmp/pp_$2/model_final.bin" && diff <(losses "$tmp/pp_$1") <(losses "$tmp/pp_$2") > /dev/null
        then ok "ZeRO++: $3"; else bad "ZeRO++: $3"; fi
    }
    # the three features together first (after plain stage 3, their loss reference): what a
    # short GPU window must not miss
    pp_run z3 -z 3
    if pp_run all -z 3 --qwz --hpz 2 --qgz && pp_run all2 -z 3 --qwz --hpz 2 --qgz; then
        pp_same all all2 "--qwz --hpz 2 --qgz deterministic"
        if [ -f "$tmp/pp_z3/model_final.bin" ]; then   # (a failed stage 3 run has its FAIL line)
            m=$(paste <(losses "$tmp/pp_z3") <(losses "$tmp/pp_all") | awk '{ split($2,a,":"); split($4,b,":"); d=a[2]-b[2]; if (d<0) d=-d; if (d>m) m=d } END { print m+0 }')
            awk -v m="$m" 'BEGIN { exit !(m < 2e-2) }' && ok "ZeRO++ loss within $m of stage 3" || bad "ZeRO++ loss differs by $m"
        fi
    fi
    [ -f "$tmp/pp_z3/model_final.bin" ] && pp_run hpz -z 3 --hpz 2 && pp_same z3 hpz "--hpz 2 bit-identical to stage 3"
    pp_run z2n4 -z 2 --node-size 4 && pp_run hier4 -z 2 --node-size 4 --hier-reduce &&
        pp_same z2n4 hier4 "--hier-reduce on one node bit-identical to the flat reduction"
    pp_run qgz2 -z 2 --qgz && pp_run qgz3 -z 3 --qgz && pp_same qgz2 qgz3 "--qgz: stages 2 and 3 bit-identical"
fi
echo "$pass passed, $failn failed"
[ "$failn" -eq 0 ]
