#!/usr/bin/env bash
# ZeRO++ on the CPU trainer, 4 ranks as 2 logical nodes of 2 (--node-size 2):
#   determinism  each switch (--qwz, --hpz 2, --qgz, --hier-reduce) and all of them: two
#                runs, the second under ZERO_HOST_JITTER, give the same losses and model
#   identities   --hpz 2 alone moves exact weights: the same bits as plain stage 3;
#                --hier-reduce at 2 nodes: the flat run's model up to rounding;
#                --hier-reduce on one node (--node-size 4) or one rank per node
#                (--node-size 1) sums in rank order: the same bits as the flat reduction;
#                stages 2 and 3 give the same bits with --qgz and with --hier-reduce
#   bytes        the report's bytes per flow against formulas from the tensor sizes (the
#                checkpoint manifest's table), and the dry run's bytes and stage-3 events
#                against live runs that validate and generate text between steps
#   offload      qwZ and hpZ with the optimizer or the parameters offloaded (cpu, nvme): the
#                same bits as without offload
#   resume       a checkpoint of a run with every switch resumes bit-exact
#   nan          a run that diverges through the quantized paths stops naming the step (a
#                NaN travels as a NaN block, never as plausible numbers)
#   errors       switches the run cannot honour are refused with a message; an hpZ group
#                wider than the node is warned of and trains
# Arguments pick parts (default all).
set -u
cd "$(dirname "$0")/../../.."
parts=" ${*:-determinism identities bytes offload resume nan errors} "
want() { [[ "$parts" == *" $1 "* ]]; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_zero_pp: $*"; exit 1; }
# gradient accumulation 2 at 4 ranks; every tensor in the gather pool (--zero-persist 0)
# and a pool that never evicts, so the gathers per step are one per tensor and use
args=(-e d2c64h2t64 -b 2 -t 32 -d 512 -x 4 -v 2 -m 2 -s 0 --threads 1 --zero-bucket 20000 --zero-prefetch 40000
      --zero-persist 0 --zero-max-live 8000000 --node-size 2)
losses() { grep -E "trl|tel" "$1/main.log"; }
train() {   # train OUT ARGS... (4 ranks)
    local out=$1
    shift
    mpirun -np 4 -x ZERO_HOST_JITTER ./train_gpt2 "${args[@]}" -o "$out" "$@" > "$out.txt" 2>&1 \
        || { grep -v -e '^\s*$' -e '^[-+|]' "$out.txt" | tail -30; fail "$*: the run failed"; }
    # a run said to be under jitter must be (the seed reaches the ranks, and the backend took it)
    [ -z "${ZERO_HOST_JITTER:-}" ] || grep -qF "jitter is on (ZERO_HOST_JITTER=$ZERO_HOST_JITTER)" "$out.txt" \
        || fail "$*: ZERO_HOST_JITTER=$ZERO_HOST_JITTER, and no start-up line says jitter is on"
}
same() {   # same A B WHAT
    cmp -s "$1/model_final.bin" "$2/model_final.bin" || fail "$3: the final parameters differ"
    diff <(losses "$1") <(losses "$2") > /dev/null || fail "$3: the losses differ"
}
run() {   # run NAME ARGS...: once, reused by later parts
    [ -d "$tmp/$1" ] && return
    local name=$1
    shift
    ZERO_HOST_JITTER= train "$tmp/$name" "$@"
}
export ZERO_HOST_JITTER=

if want determinism; then
    run z3 -z 3
    for sw in "--qwz" "--hpz 2" "--qgz" "--hier-reduce" "--qwz --hpz 2 --qgz"; do
        name=z3$(echo "$sw" | tr -d ' -')
        run "$name" -z 3 $sw
        ZERO_HOST_JITTER=7 train "$tmp/${name}j" -z 3 $sw
        same "$tmp/$name" "$tmp/${name}j" "-z 3 $sw under ZERO_HOST_JITTER"
    done
    # quantization changes the numbers (else the switch did nothing), by little
    for q in qwz qgz; do
        cmp -s "$tmp/z3/model_final.bin" "$tmp/z3$q/model_final.bin" && fail "--$q gave the unquantized bits"
    done
    python3 - "$tmp" << 'EOF' || fail "the quantized runs' losses"
import re, sys
def last(run): return [float(x) for x in re.findall(r"trl:([0-9.]+)", open(f"{sys.argv[1]}/{run}/main.log").read())]
base = last("z3")
for run in ("z3qwz", "z3qgz", "z3qwzhpz2qgz"):
    l = last(run)
    rel = max(abs(a - b) / b for a, b in zip(l, base))
    print(f"{run}: train losses {l} vs {base}: largest relative difference {rel:.2e}")
    assert len(l) == len(base) and rel < 0.02, run
EOF
    echo "determinism: every switch gives the same bits twice (second run jittered)"
fi

if want identities; then
    run z3 -z 3
    run z3hpz2 -z 3 --hpz 2
    same "$tmp/z3" "$tmp/z3hpz2" "--hpz 2 against plain stage 3"
    run z2 -z 2
    for ns in 1 4; do
        run "z2hier$ns" -z 2 --hier-reduce --node-size $ns
        same "$tmp/z2" "$tmp/z2hier$ns" "--hier-reduce --node-size $ns against the flat reduction"
    done
    for sw in "--hier-reduce" "--qgz"; do
        name=$(echo "$sw" | tr -d ' -')
        run "z2$name" -z 2 $sw
        run "z3$name" -z 3 $sw
        same "$tmp/z2$name" "$tmp/z3$name" "stages 2 and 3 with $sw"
    done
    # at 2 nodes the two hops add in another order: the same model up to float rounding
    # (relative L2 1.5e-7 here; slices sent to the wrong rank give > 1e-3), and qgZ's int4
    # within its quantization noise (0.04; the wrong slice order gives 0.16)
    ./build/model_diff "$tmp/z2/model_final.bin" "$tmp/z2hierreduce/model_final.bin" 1e-5 > "$tmp/diff.txt" ||
        { tail -3 "$tmp/diff.txt"; fail "--hier-reduce at 2 nodes is not the flat reduction's model up to rounding"; }
    ./build/model_diff "$tmp/z2/model_final.bin" "$tmp/z2qgz/model_final.bin" 0.1 > "$tmp/diff.txt" ||
        { tail -3 "$tmp/diff.txt"; fail "--qgz moved the model further than its quantization noise"; }
    echo "identities: hpZ alone = stage 3; two hops on one node or one rank per node = flat; stage 2 = stage 3"
fi

if want bytes; then
    # one micro-step a step and no prefetch, so that what is gathered is fixed by the model:
    # forward, every tensor once and wte twice (the embeddings and the classifier read it);
    # backward, every tensor once (the classifier's wte is kept from its forward). The first
    # step records the fetch order and differs: the formulas take the fourth step alone (the
    # totals of 4 steps less those of 3). Validation (-v 2) and text generation (-s 2) fetch
    # between steps: neither the bytes nor the events count them, as the dry run has none
    b=(-d 256 --zero-prefetch 0 -s 2 -g 4)
    run z3n -z 3 -n 4 "${b[@]}"
    run z3n3 -z 3 "${b[@]}" -x 3
    run z3pp -z 3 --qwz --hpz 2 --qgz "${b[@]}"
    run z3pp3 -z 3 --qwz --hpz 2 --qgz "${b[@]}" -x 3
    run z3hier -z 3 --hier-reduce "${b[@]}"
    # a bucket of the whole model (3,323,648 padded elements) is one collective a step on every
    # wire: the records' padding must not push a group into a second one
    for sw in flat --hier-reduce --qgz; do
        ./train_gpt2 -e d2c64h2t64 -b 2 -t 32 -d 256 --node-size 2 -z 2 $( [ $sw = flat ] || echo $sw ) --zero-bucket 3330000 \
            --dry-run --world 4 -x 3 -o "$tmp/bucket$sw" > "$tmp/bucket$sw.txt" 2>&1 || { tail "$tmp/bucket$sw.txt"; fail "the dry run, $sw"; }
        n=$(python3 -c 'import json, sys; print({r["events"]["buckets"] for r in json.load(open(sys.argv[1]))["ranks"]})' \
            "$tmp/bucket$sw/zero_report.json")
        [ "$n" = "{3}" ] || fail "a bucket of the whole model, $sw: $n buckets in 3 steps on the ranks, not 3"
    done
    # the dry run simulates two steps and predicts a run of -x steps from them
    for r in z3n z3pp; do
        for x in 4 3; do
            ./train_gpt2 "${args[@]}" "${b[@]}" -z 3 $( [ $r = z3pp ] && echo --qwz --hpz 2 --qgz ) --dry-run --world 4 \
                -x $x -o "$tmp/${r}dry$x" > "$tmp/${r}dry$x.txt" 2>&1 || { tail -20 "$tmp/${r}dry$x.txt"; fail "the dry run of $r, -x $x"; }
        done
    done
    # and with prefetch (args' window): prefetches, hits and kept tensors beside validation
    run z3pf -z 3 -s 2 -g 4
    ./train_gpt2 "${args[@]}" -z 3 -s 2 -g 4 --dry-run --world 4 -o "$tmp/z3pfdry4" > "$tmp/z3pfdry4.txt" 2>&1 \
        || { tail -20 "$tmp/z3pfdry4.txt"; fail "the dry run of z3pf"; }
    python3 - "$tmp" << 'EOF' || fail "bytes per flow"
import json, sys
tmp = sys.argv[1]
N, X, H = 4, 2, 2
Y = N // X
def rep(run): return json.load(open(f"{tmp}/{run}/zero_report.json"))
tensors = json.load(open(f"{tmp}/z3n/zero_4/manifest.json"))["tensors"]
names = [t["name"] for t in tensors]
r16 = lambda b: -(-b // 16) * 16
S = [r16(-(-t["numel"] // N)) for t in tensors]   # partition.h: ceil(numel / N) rounded up to 16
BW, BG = 2048, 64   # the default blocks: qwZ's int8 weights, qgZ's int4 gradients
rec8 = [r16(s) + r16(4 * -(-s // BW)) for s in S]          # wire.h: payload and scales, each to 16 B
rec4 = [r16(-(-s // 2)) + r16(4 * -(-s // BG)) for s in S]
fwd = [2 if n == "wte" else 1 for n in names]              # forward gathers per step
bwd = [1 for n in names]                                   # backward gathers per step
dot = lambda a, b: sum(x * y for x, y in zip(a, b))
def flows(run, k=0): return rep(run)["ranks"][k]["sent_per_step_by_flow"]
def last_step(run):   # the fourth step's bytes: 4 steps' totals less 3 steps'
    a, b = flows(run), flows(run + "3")
    return {f: {k: 4 * a[f][k] - 3 * b[f][k] for k in a[f]} for f in a}
def check(what, got, want):
    print(f"{what}: {got:.0f} B per step (formula {want:.0f})")
    assert abs(got - want) <= 0.5, what
base, pp, hier = last_step("z3n"), last_step("z3pp"), flows("z3hier")
S4 = [4 * s for s in S]   # fp32 on the CPU
# gradients, flat: S to each of the N-1 others; two hops: Y slices to each other local
# rank, then one slice to each other node
check("flat gradients inter-node", base["grad_flat"]["inter_node_bytes"], sum(S4) * (N - X))
check("flat gradients intra-node", base["grad_flat"]["intra_node_bytes"], sum(S4) * (X - 1))
check("two-hop gradients, hop 1 intra", hier["grad_intra_node_hop"]["intra_node_bytes"], sum(S4) * Y * (X - 1))
check("two-hop gradients, hop 2 inter", hier["grad_inter_node_hop"]["inter_node_bytes"], sum(S4) * (Y - 1))
check("qgZ hop 1 intra", pp["grad_intra_node_hop"]["intra_node_bytes"], sum(rec4) * Y * (X - 1))
check("qgZ hop 2 inter", pp["grad_inter_node_hop"]["inter_node_bytes"], sum(rec4) * (Y - 1))
assert pp["grad_inter_node_hop"]["intra_node_bytes"] == 0 and pp["grad_intra_node_hop"]["inter_node_bytes"] == 0
# parameters: stage 3 all-gathers S; qwZ its int8 records; hpZ's backward N/H slots to
# the other H-1 members of its group (here: its node)
check("stage-3 forward gathers inter", base["forward_param_gather"]["inter_node_bytes"], dot(fwd, S4) * (N - X))
check("stage-3 backward gathers inter", base["backward_param_gather"]["inter_node_bytes"], dot(bwd, S4) * (N - X))
check("qwZ forward gathers inter", pp["forward_param_gather"]["inter_node_bytes"], dot(fwd, rec8) * (N - X))
check("qwZ forward gathers intra", pp["forward_param_gather"]["intra_node_bytes"], dot(fwd, rec8) * (X - 1))
check("hpZ backward gathers intra", pp["backward_param_gather"]["intra_node_bytes"], dot(bwd, S4) * N // H * (H - 1))
check("hpZ backward gathers inter", pp["backward_param_gather"]["inter_node_bytes"], 0)
zp, zp3 = rep("z3pp")["ranks"][0]["zero_pp"], rep("z3pp3")["ranks"][0]["zero_pp"]
assert zp["qwz_gathers"] - zp3["qwz_gathers"] == sum(fwd), (zp, zp3)
assert zp["hpz_gathers"] - zp3["hpz_gathers"] == sum(bwd), (zp, zp3)
check("hpZ secondary partition", zp["secondary_partition_bytes"], sum(S4) * N // H)
check("qwZ records of the shard", zp["qwz_records_bytes"], sum(rec8))
inter = lambda f: sum(v["inter_node_bytes"] for k, v in f.items() if k != "step_param_gather")
print(f"cross-node bytes in a step: stage 3 {inter(base):.0f}, ZeRO++ {inter(pp):.0f} ({inter(pp) / inter(base):.3f} x)")
# the dry run predicts the live figures of a run of 4 and 3 steps, every rank: bytes and events
for run, x, live in (("z3n", 4, "z3n"), ("z3n", 3, "z3n3"), ("z3pp", 4, "z3pp"), ("z3pp", 3, "z3pp3"), ("z3pf", 4, "z3pf")):
    dry = json.load(open(f"{tmp}/{run}dry{x}/zero_report.json"))
    assert dry["steps"] == rep(live)["steps"] == x, (run, x, dry["steps"], rep(live)["steps"])
    for k in range(N):
        live_r, dry_r = rep(live)["ranks"][k], dry["ranks"][k]
        for key in ("sent_per_step", "sent_per_step_by_flow", "sent_total", "events", "zero_pp"):
            assert live_r[key] == dry_r[key], (live, x, k, key, live_r[key], dry_r[key])
ev = rep("z3pf")["ranks"][0]["events"]
assert ev["prefetches"] > 0 and ev["gather_hits"] > 0, ev
print(f"dry run = live run (validation and generation between steps) of 4 and of 3 steps, every rank; with prefetch {ev}")
EOF
    echo "bytes: per-flow bytes match the formulas and the dry run"
fi

if want offload; then
    mkdir -p "$tmp/swap"
    run qh -z 3 --qwz --hpz 2
    run hpz -z 3 --hpz 2
    # BASE|OFFLOAD: qwZ packs no shard from NVMe (refused), so NVMe parameters go with hpZ alone
    for c in "qh|--offload-optimizer cpu" "qh|--offload-optimizer nvme" "qh|--offload-param cpu" \
             "qh|--offload-param cpu --offload-optimizer cpu" "hpz|--offload-param nvme --offload-optimizer cpu"; do
        base=${c%%|*} off=${c#*|}
        sw=(-z 3 --hpz 2 $off)
        [ "$base" = qh ] && sw+=(--qwz)
        [[ "$off" == *nvme* ]] && sw+=(--nvme-path "$tmp/swap")
        name=$base$(echo "$off" | tr -dc 'a-z')
        run "$name" "${sw[@]}"
        same "$tmp/$base" "$tmp/$name" "${sw[*]} against no offload"
    done
    echo "offload: qwZ and hpZ give the same bits with the optimizer or the parameters offloaded"
fi

if want resume; then
    pp=(-z 3 --qwz --hpz 2 --qgz)
    run z3ppfull "${pp[@]}"
    ZERO_HOST_JITTER= train "$tmp/z3ppcut" "${pp[@]}" -n 2 -x 2
    ZERO_HOST_JITTER= train "$tmp/z3ppcut" "${pp[@]}" -y 1
    cmp -s "$tmp/z3ppfull/model_final.bin" "$tmp/z3ppcut/model_final.bin" || fail "a resumed ZeRO++ run differs"
    echo "resume: a checkpoint with qwZ, hpZ and qgZ resumes bit-exact"
fi

if want nan; then
    if ZERO_HOST_JITTER= mpirun -np 4 ./train_gpt2 "${args[@]}" -z 3 --qwz --hpz 2 --qgz -l 10 -c 10 -u 0 -q 1 -x 30 -v 0 \
        -o "$tmp/nan" > "$tmp/nan.txt" 2>&1; then
        fail "a run that diverged to NaN through qwZ and qgZ exited 0"
    fi
    grep -q "^error: step [0-9]*/30: loss .*: not finite, so training stops here" "$tmp/nan.txt" \
        || { tail -5 "$tmp/nan.txt"; fail "no message naming the NaN step"; }
    echo "nan: the diverged run stopped at $(sed -n 's/^error: step \([0-9]*\)\/30.*/\1/p' "$tmp/nan.txt" | head -1)"
fi

if want errors; then
    expect() {   # expect PATTERN ARGS...
        local pat=$1
        shift
        if mpirun -np 4 ./train_gpt2 "${args[@]}" -x 1 -o "$tmp/err" "$@" > "$tmp/err.txt" 2>&1; then
            fail "$* was accepted"
        fi
        grep -q -- "$pat" "$tmp/err.txt" || { tail -5 "$tmp/err.txt"; fail "$*: no message matching '$pat'"; }
    }
    expect "needs -z 3" -z 2 --qwz
    expect "needs -z 3" -z 1 --hpz 2
    expect "does not divide world size 4" -z 3 --hpz 3
    expect "not supported yet" -z 3 --qgz --offload-optimizer cpu
    expect "not supported yet" -z 3 --qwz --offload-param nvme --nvme-path "$tmp"
    expect "even number" -z 3 --qwz --qwz-block 7
    echo "errors: refused with messages"
    # an hpZ group across nodes trains, with a warning that its backward gathers cross nodes
    warned() {   # warned YES|NO ARGS...
        local want=$1
        shift
        mpirun -np 4 ./train_gpt2 "${args[@]}" -x 1 -o "$tmp/warn" "$@" > "$tmp/warn.txt" 2>&1 \
            || { tail -5 "$tmp/warn.txt"; fail "$*: the run failed"; }
        local n
        n=$(grep -c "warning: --hpz .* spans nodes of 2 ranks, so the backward gathers cross nodes" "$tmp/warn.txt")
        { [ "$want" = YES ] && [ "$n" -eq 1 ]; } || { [ "$want" = NO ] && [ "$n" -eq 0 ]; } \
            || fail "$*: $n warnings that hpZ groups span nodes (wanted: $want)"
    }
    warned YES -z 3 --hpz 4 --node-size 2
    warned NO -z 3 --hpz 2 --node-size 2
    echo "errors: an hpZ group wider than the node is warned of once, and trains"
fi
echo "test_zero_pp: all passed"
