#!/usr/bin/env bash
# ZeRO-Offload / ZeRO-Infinity on the CPU trainer: moving optimizer states (stages 1-3) or
# stage 3's parameters to host memory or to NVMe swap files must not change a bit.
#   - every stage 1-3 with --offload-optimizer cpu|nvme, and stage 3 with --offload-param
#     cpu|nvme (optimizer on the device, cpu or nvme), at 2 ranks; at 1 rank (no mpirun) and
#     4 ranks each tier once: losses and final parameters the same bits as the run without
#     offload
#   - the same under ZERO_HOST_JITTER (the host stream's accumulations and parameter reads
#     race the reductions and gathers if a wait is missing)
#   - a run that saves checkpoints (NVMe, with ZERO_NVME_JITTER) ends with the bits of one
#     that does not, and its checkpoint resumes bit-exact, onto offload and onto none
#   - the report counts NVMe bytes and the swap files are gone after the run; fp32 working
#     parameters in the optimizer's tier are stored once, as the master
#   - tied tensors (vocabulary tiles: wte read by an embedding and a classifier unit) park
#     their first unit's partial gradient in the offload tier (NVMe, or host memory) and
#     get it back at the second unit's backward: the same bits at stages 2 and 3, with
#     jitter, and a gradient pool that holds no whole tied tensor
#   - a partial optimizer offload (--offload-optimizer-ratio): the first tensors keep their
#     optimizer on the device, the rest go to host memory: the same bits at stages 1-3, 1 and
#     2 ranks, with jitter; the report splits the states between the two; its checkpoint
#     resumes onto the whole offload and onto none; what it does not combine with is refused
#   - errors: a missing or non-folder --nvme-path, and a swap file the disk cannot hold
#     (ulimit -f), end the run with a message naming the folder; a checkpoint saved before
#     stays intact and resumes
# Arguments pick parts (default all): matrix report tied jitter resume ratio errors.
set -u
cd "$(dirname "$0")/../../.."
parts=" ${*:-matrix report tied jitter resume ratio errors} "
want() { [[ "$parts" == *" $1 "* ]]; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_zero_offload: $*"; exit 1; }
nv="$tmp/swap"
mkdir -p "$nv"
# a gradient accumulation of 2 (-d 256 = 2 x 2 x 32 x 2 ranks at 2 ranks; 4 at 1 rank)
args=(-e d2c64h2t64 -b 2 -t 32 -d 256 -x 4 -v 2 -m 2 -s 0 --threads 1 --zero-bucket 20000 --zero-prefetch 40000)
losses() { grep -E "trl|tel" "$1/main.log"; }
# train NP OUT ARGS...: one rank runs without mpirun
train() {
    local np=$1 out=$2
    shift 2
    if [ "$np" = 1 ]; then ./train_gpt2 "${args[@]}" -o "$out" "$@" > "$out.txt" 2>&1
    else mpirun -np "$np" -x ZERO_HOST_JITTER -x ZERO_NVME_ENGINE -x ZERO_NVME_JITTER ./train_gpt2 "${args[@]}" -o "$out" "$@" > "$out.txt" 2>&1; fi \
        || { grep -v -e '^\s*$' -e '^[-+|]' "$out.txt" | tail -30; fail "np $np $*: the run failed"; }
    # a run said to be under jitter must be (the seed reaches the ranks, and the backend took it)
    [ -z "${ZERO_HOST_JITTER:-}" ] || grep -qF "jitter is on (ZERO_HOST_JITTER=$ZERO_HOST_JITTER)" "$out.txt" \
        || fail "$*: ZERO_HOST_JITTER=$ZERO_HOST_JITTER, and no start-up line says jitter is on"
    [ -z "${ZERO_NVME_JITTER:-}" ] || grep -qF "forced by ZERO_NVME_JITTER=$ZERO_NVME_JITTER" "$out.txt" \
        || fail "$*: ZERO_NVME_JITTER=$ZERO_NVME_JITTER, and the NVMe engine's line does not say it"
}
same() {   # same BASE OUT WHAT
    cmp -s "$1/model_final.bin" "$2/model_final.bin" || fail "$3: the final parameters differ from the run without offload"
    diff <(losses "$1") <(losses "$2") > /dev/null || fail "$3: the losses differ from the run without offload"
}
swap() { case " $* " in *" nvme "*) echo "--nvme-path $nv" ;; esac; }   # --nvme-path only with nvme
export ZERO_HOST_JITTER= ZERO_NVME_ENGINE= ZERO_NVME_JITTER=
# every combination at 2 ranks; at 1 and 4 ranks (other partition edges, the same tiers' code)
# each tier once for the optimizer and once for the parameters
combos() {   # combos NP: "stage tier" and "param-tier optimizer-tier" pairs to run at NP ranks
    if [ "$1" = 2 ]; then opt="1:cpu 1:nvme 2:cpu 2:nvme 3:cpu 3:nvme"; par="cpu:none cpu:cpu cpu:nvme nvme:none nvme:cpu nvme:nvme"
    else opt="1:nvme 2:cpu 3:nvme"; par="cpu:none nvme:cpu"; fi
}
want matrix && for np in 1 2 4; do
    combos $np
    for stage in 1 2 3; do train $np "$tmp/n${np}z$stage" -z $stage; done
    for c in $opt; do
        stage=${c%:*} tier=${c#*:}
        out="$tmp/n${np}z${stage}o$tier"
        train $np "$out" -z $stage --offload-optimizer $tier $(swap $tier)
        same "$tmp/n${np}z$stage" "$out" "np $np stage $stage --offload-optimizer $tier"
    done
    for c in $par; do
        ptier=${c%:*} otier=${c#*:}
        out="$tmp/n${np}p${ptier}o$otier"
        train $np "$out" -z 3 --offload-param $ptier --offload-optimizer $otier $(swap $ptier $otier)
        same "$tmp/n${np}z3" "$out" "np $np stage 3 --offload-param $ptier --offload-optimizer $otier"
    done
    echo "np $np: optimizer offload (stages $(echo $opt | tr ' ' ,)) and parameter offload ($(echo $par | tr ' ' ,)): same bits"
done
[ -z "$(ls -A "$nv")" ] || fail "swap files left behind: $(ls "$nv")"

# the report: bytes per tier, and NVMe reads and writes per step when anything is there
if want report; then
[ -d "$tmp/n2z3" ] || train 2 "$tmp/n2z3" -z 3
[ -d "$tmp/n2pnvmeonvme" ] || train 2 "$tmp/n2pnvmeonvme" -z 3 --offload-param nvme --offload-optimizer nvme $(swap nvme)
python3 - "$tmp/n2z3/zero_report.json" "$tmp/n2pnvmeonvme/zero_report.json" << 'EOF' || fail "the report of the NVMe run"
import json, sys
dev, nv = (json.load(open(f))["ranks"][0] for f in sys.argv[1:])
print("NVMe per step:", nv["nvme_per_step"])
# what left the device is on NVMe (the gather pool stays: stage 3 gathers into it)
assert nv["device"]["parameters"] <= dev["device"]["parameters"], (nv["device"], dev["device"])
assert nv["device"]["optimizer_states"] == 0 and nv["host"]["optimizer_states"] == 0, nv
assert nv["nvme"]["optimizer_states"] >= dev["device"]["optimizer_states"] > 0, (nv["nvme"], dev["device"])
# fp32 working parameters beside the fp32 master: stored once, as the master (master, m, v)
assert json.load(open(sys.argv[2]))["params_stored_as_master"] is True
assert nv["nvme"]["parameters"] == 0, nv["nvme"]
step = nv["nvme_per_step"]
# each step reads at least the fp32 master, m, v and gradient once and writes master, m, v
opt = nv["nvme"]["optimizer_states"]
assert step["read_bytes"] >= opt * 4 / 3 * 0.99 and step["written_bytes"] >= opt * 0.99, (step, opt)
assert step["busy_seconds"] > 0, step
EOF
fi

# tied gradients parked: vocabulary tiles at 2 ranks, stages 2 and 3, against the same tiles
# without offload; with jitter the parking races the reductions if a wait is missing
if want tied; then
    tv=(--tile-vocab 4)
    train 2 "$tmp/tv3" -z 3 "${tv[@]}"
    train 2 "$tmp/tv2" -z 2 "${tv[@]}"
    for seed in "" 3; do
        export ZERO_HOST_JITTER=$seed
        train 2 "$tmp/tv3n$seed" -z 3 "${tv[@]}" --offload-param nvme --offload-optimizer nvme --nvme-path "$nv"
        same "$tmp/tv3" "$tmp/tv3n$seed" "stage 3, --tile-vocab 4, parameters and optimizer on nvme${seed:+, jitter $seed}"
        train 2 "$tmp/tv2c$seed" -z 2 "${tv[@]}" --offload-optimizer cpu
        same "$tmp/tv2" "$tmp/tv2c$seed" "stage 2, --tile-vocab 4, optimizer on cpu${seed:+, jitter $seed}"
    done
    export ZERO_HOST_JITTER=
    python3 - "$tmp/tv3/zero_report.json" "$tmp/tv3n/zero_report.json" "$tmp/tv2c/zero_report.json" << 'EOF' \
        || fail "parked tied gradients: the report"
import json, sys
keep, nvme, host = (json.load(open(p)) for p in sys.argv[1:])
wte = 50304 * 64   # d2c64: the tied tensors (4 vocabulary tiles of wte), every rank's whole gradient
for name, r, tier in (("nvme", nvme, "nvme"), ("cpu", host, "host")):
    parked = r["parked_tied_gradient_bytes"]
    assert parked == wte * 4, (name, parked)
    assert r["ranks"][0][tier]["gradients"] >= parked, (name, r["ranks"][0][tier])
pool = lambda r: r["ranks"][0]["pools"]["grad_pool_elems"]
# without parking the pool holds all of wte through the backward; parked, a tile at most twice
assert pool(keep) >= wte and pool(nvme) < pool(keep) - wte // 2, (pool(keep), pool(nvme))
print(f"tied gradients parked: {wte * 4} B per rank off the device; gradient pool {pool(keep)} -> {pool(nvme)} elements")
EOF
    echo "tied gradients parked in nvme and in host memory (stages 3 and 2, 2 ranks, jitter): same bits"
fi

# jitter: the host stream's work in random order against the other streams
for stage in 1 2 3; do [ -d "$tmp/n2z$stage" ] || train 2 "$tmp/n2z$stage" -z $stage; done
want jitter && for seed in 1 2; do
    export ZERO_HOST_JITTER=$seed
    for stage in 1 2; do
        out="$tmp/j${seed}z$stage"
        train 2 "$out" -z $stage --offload-optimizer nvme --nvme-path "$nv"
        grep -q "jitter is on" "$out.txt" || fail "no start-up line says jitter is on"
        same "$tmp/n2z$stage" "$out" "jitter $seed stage $stage --offload-optimizer nvme"
    done
    out="$tmp/j${seed}p"
    train 2 "$out" -z 3 --offload-param nvme --offload-optimizer cpu $(swap nvme)
    same "$tmp/n2z3" "$out" "jitter $seed stage 3 --offload-param nvme --offload-optimizer cpu"
done
export ZERO_HOST_JITTER=
want jitter && echo "jitter seeds 1, 2: the same bits"
if want jitter; then   # the NVMe engine's thread-pool fallback (io_uring refused) too
    out="$tmp/threads"
    ZERO_NVME_ENGINE=threads train 2 "$out" -z 3 --offload-param nvme --offload-optimizer nvme $(swap nvme)
    grep -q "engine threads" "$out.txt" || fail "the start-up output does not say the thread-pool engine runs"
    same "$tmp/n2z3" "$out" "ZERO_NVME_ENGINE=threads stage 3 --offload-param nvme --offload-optimizer nvme"
    echo "the thread-pool engine: the same bits"
fi

# resume: checkpoints at steps 2 and 4 of an offloaded run; resumed from step 2 onto offload
# and onto none
want resume && for stage in 2 3; do
    ck="$tmp/ck$stage"
    extra=(--offload-optimizer nvme --nvme-path "$nv")
    [ $stage = 3 ] && extra+=(--offload-param nvme)
    # the saves read the state back from NVMe, after the validation's forward whose gathers
    # (stage 3) run the deferred updates and leave their writes in flight: the run goes on
    # with the same bits, also with the engine's transfers delayed at random
    ZERO_NVME_JITTER=12 train 2 "$ck" -z $stage -n 2 "${extra[@]}"
    [ -d "$ck/zero_2" ] || fail "stage $stage: no checkpoint at step 2 in $ck"
    same "$tmp/n2z$stage" "$ck" "stage $stage with checkpoints every 2 steps, ZERO_NVME_JITTER=12"
    for onto in offload none; do
        out="$tmp/r$stage$onto"
        mkdir -p "$out" && cp -r "$ck/zero_2" "$out/" && echo 2 > "$out/latest_zero"
        if [ $onto = offload ]; then train 2 "$out" -z $stage -y 1 "${extra[@]}"
        else train 2 "$out" -z $stage -y 1; fi
        grep -qi "resum" "$out.txt" || fail "stage $stage onto $onto: did not resume"
        cmp -s "$tmp/n2z$stage/model_final.bin" "$out/model_final.bin" \
            || fail "stage $stage: resuming an offloaded checkpoint onto $onto changed the parameters"
    done
done
want resume && echo "resume of offloaded checkpoints (stages 2, 3) onto offload and onto none: same bits"

# a partial optimizer offload; d2c64's wte is 97% of the model, so a ratio of 0.01 keeps wte
# and most blocks' optimizer states on the device and offloads the last tensors'
if want ratio; then
    ratio=(--offload-optimizer cpu --offload-optimizer-ratio 0.01)
    for np in 1 2; do
        for stage in 1 2 3; do
            [ -d "$tmp/n${np}z$stage" ] || train $np "$tmp/n${np}z$stage" -z $stage
            train $np "$tmp/ratio$np$stage" -z $stage "${ratio[@]}"
            same "$tmp/n${np}z$stage" "$tmp/ratio$np$stage" "np $np stage $stage ${ratio[*]}"
        done
    done
    grep -q "partial optimizer offload: tensors wte\.\." "$tmp/ratio22.txt" || fail "no report line names the tensors kept on the device"
    # a ratio whose device part would not hold the first tensor (wte): all offloaded, and said
    train 1 "$tmp/ratiowte" -z 2 --offload-optimizer cpu --offload-optimizer-ratio 0.5
    same "$tmp/n1z2" "$tmp/ratiowte" "np 1 stage 2 --offload-optimizer-ratio 0.5 (all offloaded)"
    grep -q "optimizer ratio 0.5 keeps nothing on the device: the first tensor, wte, is" "$tmp/ratiowte.txt" \
        || fail "a ratio that keeps nothing on the device: no note says so"
    ZERO_HOST_JITTER=2 train 2 "$tmp/ratioj" -z 2 "${ratio[@]}"
    same "$tmp/n2z2" "$tmp/ratioj" "jitter 2, stage 2 ${ratio[*]}"
    python3 - "$tmp/n2z2/zero_report.json" "$tmp/ratio22/zero_report.json" "$tmp/ratio23/zero_report.json" "$tmp/n2z3/zero_report.json" \
        << 'EOF' || fail "the report of a partial optimizer offload"
import json, sys
none, part, part3, none3 = (json.load(open(p)) for p in sys.argv[1:])
d0, d, h = none["ranks"][0]["device"], part["ranks"][0]["device"], part["ranks"][0]["host"]
kept = part["optimizer_device_shard"]
# master, m, v: 12 bytes an element, split between the device's prefix and host memory
assert "optimizer_device_shard" not in none, none.keys()
assert 0 < kept < part["shard_elems"], (kept, part["shard_elems"])
assert d["optimizer_states"] == 12 * kept and 0 < h["optimizer_states"], (d, h, kept)
assert d["optimizer_states"] + h["optimizer_states"] == d0["optimizer_states"], (d, h, d0)
# stage 3: a working shard only for the offloaded tensors, beside the device's
extra = part3["ranks"][0]["device"]["parameters"] - none3["ranks"][0]["device"]["parameters"]
assert 0 < extra < 2 * none3["ranks"][0]["device"]["parameters"], extra
print(f"partial offload: {kept} of {part['shard_elems']} shard elements' optimizer states stay on the device")
EOF
    ck="$tmp/ratiock"
    train 2 "$ck" -z 2 -n 2 "${ratio[@]}"
    for onto in "--offload-optimizer cpu" ""; do
        out="$tmp/ratior${onto:+o}"
        mkdir -p "$out" && cp -r "$ck/zero_2" "$out/" && echo 2 > "$out/latest_zero"
        train 2 "$out" -z 2 -y 1 $onto
        grep -qi "resum" "$out.txt" || fail "a partial offload's checkpoint onto '${onto:-none}': did not resume"
        cmp -s "$tmp/n2z2/model_final.bin" "$out/model_final.bin" \
            || fail "resuming a partial offload's checkpoint onto '${onto:-none}' changed the parameters"
    done
    echo "a partial optimizer offload (ratio 0.01; stages 1-3, 1 and 2 ranks, jitter, resumed onto cpu and none): same bits"
fi
if want errors; then
    refused() {   # refused WHAT PATTERN ARGS...: the run must fail, printing PATTERN
        local what=$1 pat=$2
        shift 2
        if ./train_gpt2 "${args[@]}" -z 2 -o "$tmp/err" "$@" > "$tmp/err.txt" 2>&1; then fail "$what: accepted"; fi
        grep -q "$pat" "$tmp/err.txt" || { tail -3 "$tmp/err.txt"; fail "$what: no message matching '$pat'"; }
        echo "$what: $(tail -1 "$tmp/err.txt")"
    }
    refused "a ratio of 0" "offloads nothing" --offload-optimizer cpu --offload-optimizer-ratio 0
    refused "a ratio with nvme" "needs --offload-optimizer cpu" --offload-optimizer nvme --nvme-path "$nv" --offload-optimizer-ratio 0.5
    refused "a ratio with --offload-param" "offload-param cpu is not supported" --offload-optimizer cpu --offload-param cpu \
        --offload-optimizer-ratio 0.5
    refused "a missing --nvme-path" "$tmp/none.*does not exist" --offload-optimizer nvme --nvme-path "$tmp/none"
    refused "a file as --nvme-path" "is not a folder" --offload-optimizer nvme --nvme-path "$tmp/n2z2/main.log"
    # a checkpoint at step 2, then a resume whose swap file the "disk" cannot hold
    ck="$tmp/full"
    train 1 "$ck" -z 2 -x 2 -n 2 --offload-optimizer nvme --nvme-path "$nv"
    cp -r "$ck" "$ck.before"
    if (ulimit -f 2000; ./train_gpt2 "${args[@]}" -z 2 -o "$ck" -y 1 --offload-optimizer nvme --nvme-path "$nv" > "$tmp/full.txt" 2>&1); then
        fail "a swap file larger than the file-size limit was accepted"; fi
    grep -q "cannot reserve .* under $nv" "$tmp/full.txt" || { tail -3 "$tmp/full.txt"; fail "no message naming the swap folder"; }
    echo "disk full: $(tail -1 "$tmp/full.txt")"
    # (but .lock: the PID of the run that held the folder last, llmc/run/run_lock.h)
    diff -r -x .lock "$ck.before" "$ck" > /dev/null || fail "the failed start changed the output folder (its checkpoint)"
    [ -z "$(ls -A "$nv")" ] || fail "the failed start left its swap file: $(ls "$nv")"
    train 1 "$ck" -z 2 -x 2 -y 1 --offload-optimizer nvme --nvme-path "$nv"
    grep -qi "resum" "$ck.txt" || fail "the checkpoint did not resume after the failed start"
fi
echo "PASS test_zero_offload"
