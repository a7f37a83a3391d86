#!/usr/bin/env bash
# --fast-reduce (gradients rounded to bf16 and summed by the library's reduce-scatter) with
# the CPU trainer at 2 ranks, 20 steps with gradient accumulation 4, against the default
# (fp32, summed in rank order, which other tests hold to the unsharded trainer's bits):
#  - stages 0 and 1 give the same bits, and so do stages 2 and 3 (a sum of two bf16 values
#    is the same in any order, so MPI's order cannot tell them apart at 2 ranks)
#  - losses within 0.1% of the default's at every step, parameters within 1e-2 relative L2
#    after 20 steps, and not the same bits (the flag does what it says)
#  - zero_report.json: the gradients' bytes per step are half the default's (bf16 against
#    fp32), as a reduce-scatter, and the dry run predicts the same count; stage 0 gathers the
#    bf16 sums (an all-reduce in its two halves): half the bytes stage 1's fp32 weights take
#  - every rank's model states are the report's formula, live and in the dry run
#  - stopped at step 10 and resumed (-y 1): the uninterrupted run's bits
#  - combinations it does not support are refused with a message
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_zero_fast_reduce: $*"; exit 1; }
args=(-e d2c64h2t64 -b 2 -t 32 -d 512 -x 20 -v 0 -s 0 --threads 1)
run() {   # run NAME ARGS...
    local name=$1; shift
    mpirun -np 2 ./train_gpt2 "${args[@]}" "$@" -o "$tmp/$name" > "$tmp/$name.txt" 2>&1 \
        || { tail "$tmp/$name.txt"; fail "mpirun -np 2 ./train_gpt2 $* failed"; }
}
for z in 0 1 2 3; do run "fast$z" -z $z --fast-reduce; done
run ordered1 -z 1
run ordered3 -z 3
for pair in "0 1" "2 3"; do
    set -- $pair
    cmp -s "$tmp/fast$1/model_final.bin" "$tmp/fast$2/model_final.bin" \
        || fail "--fast-reduce at stages $1 and $2 (2 ranks) gave different parameters"
    echo "PASS: --fast-reduce, 2 ranks: stages $1 and $2 give the same bits"
done
# a resume draws the bf16 roundings the uninterrupted run would: the same bits (a constant
# learning rate, so that the first part's -x 10 does not change the schedule)
run whole -z 2 --fast-reduce -k constant
mpirun -np 2 ./train_gpt2 "${args[@]}" -z 2 --fast-reduce -k constant -x 10 -n 10 -o "$tmp/cut" > "$tmp/cut.txt" 2>&1 \
    || { tail "$tmp/cut.txt"; fail "the first half of the cut run failed"; }
run cut -z 2 --fast-reduce -k constant -y 1
cmp -s "$tmp/whole/model_final.bin" "$tmp/cut/model_final.bin" \
    || fail "--fast-reduce, stopped at step 10 and resumed: not the uninterrupted run's parameters"
echo "PASS: --fast-reduce stopped at step 10 and resumed: the uninterrupted run's bits"
for z in 1 3; do
    python3 - "$tmp/ordered$z/main.log" "$tmp/fast$z/main.log" << 'PY' || fail "stage $z: --fast-reduce's losses are off the default's (above)"
import re, sys
a, b = ([float(x) for x in re.findall(r"trl:([0-9.]+)", open(p).read())] for p in sys.argv[1:3])
assert len(a) == len(b) == 20, f"{len(a)} and {len(b)} losses"
worst = max(abs(x - y) / x for x, y in zip(a, b))
print(f"losses over 20 steps: at most {100 * worst:.4f}% from the default's (0.1% allowed)")
assert worst < 0.001
PY
    ./build/model_diff "$tmp/ordered$z/model_final.bin" "$tmp/fast$z/model_final.bin" 1e-2 > "$tmp/diff.txt" 2>&1 \
        || { cat "$tmp/diff.txt"; fail "stage $z: --fast-reduce's parameters are beyond 1e-2 of the default's"; }
    cmp -s "$tmp/ordered$z/model_final.bin" "$tmp/fast$z/model_final.bin" \
        && fail "stage $z: --fast-reduce gave the default's bits: were the gradients rounded to bf16?"
    echo "PASS: stage $z: --fast-reduce within 0.1% (losses) and 1e-2 (parameters) of the default, other bits"
done
# bytes: half the default's, as a reduce-scatter; the dry run counts the same
./train_gpt2 "${args[@]}" -z 3 --fast-reduce --dry-run --world 2 -o "$tmp/dry" > "$tmp/dry.txt" 2>&1 \
    || { tail "$tmp/dry.txt"; fail "the dry run of --fast-reduce failed"; }
python3 - "$tmp/ordered3/zero_report.json" "$tmp/fast3/zero_report.json" "$tmp/dry/zero_report.json" \
    "$tmp/fast0/zero_report.json" "$tmp/fast1/zero_report.json" << 'PY' || fail "--fast-reduce's bytes (above)"
import json, sys
def sent(path, op):
    r = json.load(open(path))
    return [s["sent_per_step"][op]["intra_node_bytes"] + s["sent_per_step"][op]["inter_node_bytes"] for s in r["ranks"]]
ordered, fast, dry = sent(sys.argv[1], "all_to_all"), sent(sys.argv[2], "reduce_scatter"), sent(sys.argv[3], "reduce_scatter")
print(f"gradient bytes per step per rank: default all_to_all {ordered}, --fast-reduce reduce_scatter {fast}, dry run {dry}")
assert all(f > 0 and 2 * f == o for f, o in zip(fast, ordered)), "not half the default's"
assert sent(sys.argv[2], "all_to_all") == [0, 0], "--fast-reduce still sent an all_to_all"
assert dry[0] == fast[0], "the dry run counts other bytes"
z0, z1 = sent(sys.argv[4], "all_gather"), sent(sys.argv[5], "all_gather")
print(f"all_gather bytes per step per rank: stage 0 (bf16 sums) {z0}, stage 1 (fp32 weights) {z1}")
assert all(a > 0 and 2 * a == b for a, b in zip(z0, z1)), "stage 0 does not gather bf16 sums"
assert sent(sys.argv[4], "reduce_scatter") == sent(sys.argv[5], "reduce_scatter"), "stages 0 and 1 reduce other bytes"
PY
echo "PASS: --fast-reduce sends half the default's gradient bytes, as a reduce-scatter; the dry run counts the same"
# memory: each rank's model states are the report's formula, live at every stage and in the
# dry run (stage 0 gathers the bf16 sums into a whole buffer of their own)
./train_gpt2 "${args[@]}" -z 0 --fast-reduce --dry-run --world 2 -o "$tmp/dry0" > "$tmp/dry0.txt" 2>&1 \
    || { tail "$tmp/dry0.txt"; fail "the stage-0 dry run of --fast-reduce failed"; }
python3 - "$tmp"/fast{0,1,2,3}/zero_report.json "$tmp/dry0/zero_report.json" "$tmp/dry/zero_report.json" << 'PY' \
    || fail "--fast-reduce's model states off the formula (above)"
import json, sys
for path in sys.argv[1:]:
    r = json.load(open(path))
    for rank in r["ranks"]:
        got, want = rank["model_states_bytes"], rank["formula"]["model_states_bytes"]
        print(f"{path.split('/')[-2]} (stage {r['stage']}) rank {rank['rank']}: model states {got} B, formula {want} B")
        assert got == want, path
PY
echo "PASS: --fast-reduce: every rank's model states are the formula's, live at stages 0-3 and in the dry run"
# refusals
expect_refused() {   # expect_refused PATTERN ARGS...
    local pat=$1; shift
    if mpirun -np 2 ./train_gpt2 "${args[@]}" -x 1 "$@" -o "$tmp/bad" > "$tmp/bad.txt" 2>&1; then fail "$* accepted"; fi
    grep -q -- "$pat" "$tmp/bad.txt" || { cat "$tmp/bad.txt"; fail "no clear error for $*"; }
}
expect_refused "give -z STAGE" --fast-reduce
expect_refused "does not combine with --qgz" -z 3 --fast-reduce --qgz
expect_refused "does not combine with --offload-optimizer" -z 2 --fast-reduce --offload-optimizer cpu
echo "PASS: --fast-reduce without -z, with --qgz, with --offload-optimizer: refused with a message"
echo "PASS test_zero_fast_reduce"
