#!/usr/bin/env bash
# --dpu N (ZeRO-Offload's one-step delayed parameter update) on the CPU trainer: from
# optimizer step N on, step t's AdamW runs on the delayed-update stream beside step t+1's
# forward and backward, which train on the parameters of step t-1.
#  - the reference: the unsharded trainer's own --dpu (a second copy of the parameters, one
#    update ahead) with --micro-grads 1; ZeRO at 2 ranks, stages 1, 2 and 3 with
#    --offload-optimizer cpu, gives its bits (losses and final parameters), also under
#    ZERO_HOST_JITTER with the delayed-update stream slowed (ZERO_HOST_SLOW, 2 ms before each
#    tensor's update): the update then outlasts the next step's forward, as a large model's
#    CPU step does on a GPU, so an accumulation that does not wait for it shows (and the
#    report says the accumulation waited)
#  - the delay starts where asked: the losses are those of the run without it through step N
#    and differ from step N + 1 on; 20 steps from step 5 end within 2% of the undelayed loss
#  - a partial offload (--offload-optimizer-ratio 0.5: the device's tensors updated at once,
#    the host's delayed): stages 1 and 3 the same bits, not those of the whole offload's
#  - checkpoints land the update in flight before the step's validation and save: stopped at
#    step 6 and resumed gives the bits (parameters, training and validation losses) of the
#    uninterrupted run with the same -n, and so does the unsharded reference
#  - zero_report.json: the update's waits (update_wait, accumulation_wait), and the
#    delayed update's host buffer (a working-parameter shard) in every rank's model
#    states, as the formula counts, live and in the dry run
#  - what it does not combine with is refused with a message
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_zero_dpu: $*"; exit 1; }
# accumulation 1 at 2 ranks, 2 unsharded (--micro-grads 1: ZeRO's sum of two micro-batches)
args=(-e d2c64h2t64 -b 2 -t 32 -d 128 -x 10 -v 0 -s 0 --threads 1)
off=(--offload-optimizer cpu)
losses() { grep trl "$1/main.log" | cut -d' ' -f1,2,4; }
one() {   # one NAME ARGS...: the unsharded trainer
    local name=$1; shift
    ./train_gpt2 "${args[@]}" --micro-grads 1 "$@" -o "$tmp/$name" > "$tmp/$name.txt" 2>&1 \
        || { tail "$tmp/$name.txt"; fail "./train_gpt2 $* failed"; }
}
two() {   # two NAME ARGS...: 2 ranks
    local name=$1; shift
    mpirun -np 2 -x ZERO_HOST_JITTER -x ZERO_HOST_SLOW ./train_gpt2 "${args[@]}" "$@" -o "$tmp/$name" > "$tmp/$name.txt" 2>&1 \
        || { tail "$tmp/$name.txt"; fail "mpirun -np 2 ./train_gpt2 $* failed"; }
}
same() {   # same A B WHAT
    cmp -s "$tmp/$1/model_final.bin" "$tmp/$2/model_final.bin" || fail "$3: the final parameters differ"
    diff <(losses "$tmp/$1") <(losses "$tmp/$2") > /dev/null || fail "$3: the losses differ"
}
export ZERO_HOST_JITTER= ZERO_HOST_SLOW=

one ref --dpu 4
one plain
for z in 1 2 3; do
    two "z$z" -z $z "${off[@]}" --dpu 4
    same ref "z$z" "stage $z --dpu 4 against the unsharded --dpu 4"
done
ZERO_HOST_JITTER=7 ZERO_HOST_SLOW=delayed-update:2000 two jitter -z 2 "${off[@]}" --dpu 4
grep -q "jitter is on (ZERO_HOST_JITTER=7)" "$tmp/jitter.txt" || fail "ZERO_HOST_JITTER=7: no start-up line says jitter is on"
grep -q "delayed-update stream .* waits 2000 us first (ZERO_HOST_SLOW)" "$tmp/jitter.txt" \
    || fail "ZERO_HOST_SLOW=delayed-update:2000: no start-up line says the delayed-update stream is slowed"
same ref jitter "stage 2 --dpu 4 under ZERO_HOST_JITTER, the delayed update slowed"
python3 - "$tmp/jitter/zero_report.json" << 'PY' || fail "the slowed delayed update: no accumulation waited for it (above)"
import json, sys
t = json.load(open(sys.argv[1]))["ranks"][0]["seconds_per_step"]
print(f"slowed delayed update: the accumulation waited {1e3 * t['accumulation_wait']:.1f} ms a step for it")
assert t["accumulation_wait"] > 0
PY
echo "PASS: --dpu 4 at 2 ranks, stages 1-3 (and stage 2 under jitter, the update slowed): the unsharded --dpu 4's bits"

# the delay's start: step t's loss is taken at the parameters of update t - 1 (t - 2 delayed)
python3 - "$tmp/plain/main.log" "$tmp/ref/main.log" << 'PY' || fail "--dpu 4 does not start at step 4 (above)"
import re, sys
a, b = ([float(x) for x in re.findall(r"trl:([0-9.]+)", open(p).read())] for p in sys.argv[1:3])
assert len(a) == len(b) == 10, f"{len(a)} and {len(b)} losses"
same = [x == y for x, y in zip(a, b)]
print("losses equal to the undelayed run's at steps", [i + 1 for i, s in enumerate(same) if s])
assert all(same[:4]) and not any(same[4:]), "equal through step 4 and different from step 5 on, expected"
PY
long=(-x 20 -d 256 -u 2)   # 20 steps, accumulation 2 at 2 ranks
two long_dpu -z 2 "${off[@]}" --dpu 5 "${long[@]}"
two long_plain -z 2 "${off[@]}" "${long[@]}"
python3 - "$tmp/long_plain/main.log" "$tmp/long_dpu/main.log" << 'PY' || fail "--dpu 5 moves the loss too far (above)"
import re, sys
a, b = ([float(x) for x in re.findall(r"trl:([0-9.]+)", open(p).read())] for p in sys.argv[1:3])
last = lambda x: sum(x[-5:]) / 5
print(f"20 steps: mean of the last 5 losses {last(a):.4f} undelayed, {last(b):.4f} with --dpu 5 "
      f"({100 * (last(b) / last(a) - 1):+.2f}%; 2% allowed)")
assert last(b) <= 1.02 * last(a)
PY
echo "PASS: --dpu 4 takes effect from step 5; --dpu 5 over 20 steps ends within 2% of the undelayed loss"

# a partial offload delays the host tier's tensors only (vocabulary tiles: the token
# embedding, nearly all of this model, in 8 tensors, so that about half of it is a prefix)
for z in 1 3; do two "part$z" -z $z "${off[@]}" --tile-vocab 8 --offload-optimizer-ratio 0.5 --dpu 4; done
two part_whole -z 1 "${off[@]}" --tile-vocab 8 --dpu 4
same part1 part3 "--offload-optimizer-ratio 0.5 --dpu 4: stage 3 against stage 1"
cmp -s "$tmp/part1/model_final.bin" "$tmp/part_whole/model_final.bin" \
    && fail "--offload-optimizer-ratio 0.5 --dpu 4 gave the whole offload's bits: are the device's tensors delayed too?"
echo "PASS: --offload-optimizer-ratio 0.5 --dpu 4: stages 1 and 3 the same bits, not the whole offload's"

# checkpoints land the update in flight, in the uninterrupted run as in the resumed one
# (validation at the checkpoint steps: it sees the landed parameters in both)
ck=(-k constant -n 3 --dpu 2 -v 3 -m 2)
vals() { grep -E "trl|tel" "$tmp/$1/main.log" | cut -d' ' -f1,2; }
two whole -z 2 "${off[@]}" "${ck[@]}"
two cut -z 2 "${off[@]}" "${ck[@]}" -x 6
two cut -z 2 "${off[@]}" "${ck[@]}" -y 1
same whole cut "--dpu 2 stopped at step 6 and resumed"
[ "$(vals whole | grep -c tel)" = 5 ] && diff <(vals whole) <(vals cut) > /dev/null \
    || fail "--dpu 2 stopped at step 6 and resumed: the validation losses differ (or are not 5: steps 0, 3, 6, 9, 10)"
one uwhole "${ck[@]}"
same uwhole whole "--dpu 2 with checkpoints every 3 steps, unsharded against stage 2"
diff <(vals uwhole) <(vals whole) > /dev/null || fail "--dpu 2 with checkpoints: the unsharded validation losses differ"
echo "PASS: --dpu 2 with checkpoints: stopped at step 6 and resumed gives the uninterrupted run's bits (validation too), the unsharded reference's"

# the report: the waits, and the delayed update's buffer in the model states and the formula
./train_gpt2 "${args[@]}" -z 3 "${off[@]}" --dpu 4 --dry-run --world 2 -o "$tmp/dry" > "$tmp/dry.txt" 2>&1 \
    || { tail "$tmp/dry.txt"; fail "the dry run of --dpu failed"; }
python3 - "$tmp/z3/zero_report.json" "$tmp/dry/zero_report.json" "$tmp/part3/zero_report.json" << 'PY' \
    || fail "--dpu's report (above)"
import json, sys
live, dry, part = (json.load(open(p)) for p in sys.argv[1:4])
for r in (live, dry, part):
    for rank in r["ranks"]:
        got, want = rank["model_states_bytes"], rank["formula"]["model_states_bytes"]
        assert got == want, f"model states {got} B against the formula's {want} B"
for a, b in zip(live["ranks"], dry["ranks"]):
    assert a["model_states_bytes"] == b["model_states_bytes"], "the dry run counts other model states"
t = live["ranks"][0]["seconds_per_step"]
print(f"rank 0 per step: CPU AdamW {t['optimizer_compute']:.4f} s, waited for it in zero_step {t['update_wait']:.4f} s, "
      f"accumulation waited {t['accumulation_wait']:.4f} s; model states {live['ranks'][0]['model_states_bytes']} B = formula, "
      "dry run alike")
assert t["update_wait"] >= 0 and t["accumulation_wait"] >= 0
PY
# against the same run without --dpu: a working-parameter shard more (fp32 here) in host memory
./train_gpt2 "${args[@]}" -z 3 "${off[@]}" --dry-run --world 2 -o "$tmp/dry_plain" > /dev/null 2>&1 || fail "the dry run without --dpu failed"
python3 - "$tmp/dry/zero_report.json" "$tmp/dry_plain/zero_report.json" << 'PY' || fail "--dpu's host buffer (above)"
import json, sys
d, p = (json.load(open(x)) for x in sys.argv[1:3])
for a, b in zip(d["ranks"], p["ranks"]):
    extra = a["model_states_bytes"] - b["model_states_bytes"]
    f = b["formula"]   # stage 3: nothing replicated, so the shard is what is left of the pools
    shard = (f["model_states_bytes"] - f["pool_bytes"]) // f["sharded_bytes_per_param"]
    print(f"rank {a['rank']}: --dpu adds {extra} B of model states; its shard is {shard} fp32 elements")
    assert extra == 4 * shard
PY
echo "PASS: --dpu's report: the waits, and a working-parameter shard more in host memory (the formula's, live and dry)"

expect_refused() {   # expect_refused PATTERN ARGS...
    local pat=$1; shift
    if mpirun -np 2 ./train_gpt2 "${args[@]}" -x 1 "$@" -o "$tmp/bad" > "$tmp/bad.txt" 2>&1; then fail "$* accepted"; fi
    grep -q -- "$pat" "$tmp/bad.txt" || { cat "$tmp/bad.txt"; fail "no clear error for $*"; }
}
expect_refused "it needs --offload-optimizer cpu (got none)" -z 2 --dpu 3
expect_refused "it needs --offload-optimizer cpu (got nvme)" -z 2 --dpu 3 --offload-optimizer nvme --nvme-path "$tmp"
expect_refused "with --offload-param cpu is not supported" -z 3 --dpu 3 "${off[@]}" --offload-param cpu
expect_refused "expects an integer in" -z 2 "${off[@]}" --dpu -1
echo "PASS: --dpu without --offload-optimizer cpu, with nvme, with --offload-param, below 0: refused with a message"
echo "PASS test_zero_dpu"
