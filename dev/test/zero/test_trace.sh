#!/usr/bin/env bash
# --trace FILE (zero/trace.h): a timeline per rank of what each thread did and waited on.
#  - stage 2 on 2 ranks, tiled, one unit per gradient bucket: each rank writes a Chrome trace
#    whose structure holds (metadata naming the main thread and the gather and reduce
#    streams; spans with a name, a start, a duration, a step; counters), the run's bits do
#    not change with the trace on, and scripts/trace_merge.py joins the ranks and draws a step
#    (under whichever python3 is first in PATH), refusing files that are not one run's ranks
#  - what ZeRO's overlap promises shows in it: the reduction of unit u's gradients on the
#    reduce stream runs while the model back-propagates the units before it (seen on some rank in some
#    traced step: on a loaded 2-core machine the scheduler may serialize any single one)
#  - the ring keeps the last --trace-steps steps
#  - a stuck run: one rank stopped, the other's watchdog ends the job and writes its trace,
#    with the collective it was stuck in as an open span
#  - a trace that cannot be written (its folder missing) is refused before the first step
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_trace: $*"; exit 1; }
args=(-z 2 -e d4c128h4t64 -b 2 -t 32 -x 6 -v 0 -s 0 --threads 1 --tile-linear 2 --zero-bucket 16)
mpirun -np 2 ./train_gpt2 "${args[@]}" -o "$tmp/plain" > "$tmp/plain.txt" 2>&1 || { tail "$tmp/plain.txt"; fail "the run without --trace failed"; }
mpirun -np 2 ./train_gpt2 "${args[@]}" --trace "$tmp/tr/t" --trace-steps 5 -o "$tmp/tr" > "$tmp/tr.txt" 2>&1 \
    || { tail "$tmp/tr.txt"; fail "the run with --trace failed"; }
cmp -s "$tmp/plain/model_final.bin" "$tmp/tr/model_final.bin" || fail "--trace changed the model"
ls "$tmp/plain" | grep -q rank && fail "a run without --trace wrote a trace"
python3 - "$tmp/tr/t.rank00000.json" "$tmp/tr/t.rank00001.json" << 'EOF' || fail "the trace's structure or overlap (above)"
import json, sys
overlaps = 0
for rank, path in enumerate(sys.argv[1:]):
    d = json.load(open(path))
    o, ev = d["otherData"], d["traceEvents"]
    assert o["rank"] == rank and o["world"] == 2, o
    # the ring: the last 5 steps of 6 (steps 1..5 of 0..5; the final validation and export in step 5)
    assert o["last_step"] == 5 and o["first_step"] == 1, o
    names = {e["tid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e["name"] == "thread_name"}
    for want in ("main (the model)", "gather stream", "reduce stream"):
        assert want in names.values(), (want, names)
    spans = [e for e in ev if e.get("ph") == "X"]
    for e in spans:
        assert e["pid"] == rank and e["tid"] in names and e["dur"] >= 0 and e["ts"] >= 0, e
        assert o["first_step"] <= e["args"]["step"] <= o["last_step"], e
    assert any(e.get("ph") == "C" for e in ev), "no counters"
    kinds = {e["name"] for e in spans}
    for want in ("forward", "backward", "fetch", "all_to_all", "all_gather", "zero_step", "forward pass", "optimizer step"):
        assert want in kinds, (want, kinds)
    # the overlap: unit u's reduction (its first tensor in the all_to_all's label) runs during
    # the backward of a unit before it (u-1, u-2, ...)
    main = [t for t, n in names.items() if n == "main (the model)"][0]
    red = [t for t, n in names.items() if n == "reduce stream"][0]
    bwd = {}
    for e in spans:
        if e["name"] == "backward" and e["tid"] == main:
            u, tensor = e["args"]["label"].split(" ", 1)
            bwd[(e["args"]["step"], int(u[1:]))] = (e, tensor)
    found = []
    for e in spans:
        if e["name"] != "all_to_all" or e["tid"] != red:
            continue
        for (step, u), (b, tensor) in bwd.items():
            if not e["args"]["label"].startswith(f"gradients of {tensor},"):
                continue
            for (s2, v), (b2, _) in bwd.items():
                if s2 == step and v < u and e["ts"] < b2["ts"] + b2["dur"] and b2["ts"] < e["ts"] + e["dur"]:
                    found.append((step, u, v))
                    break
    overlaps += len(found)
    eg = f" (e.g. step {found[0][0]}: unit {found[0][1]}'s during unit {found[0][2]}'s backward)" if found else ""
    print(f"rank {rank}: {len(spans)} spans on {len(names)} tracks, steps {o['first_step']}..{o['last_step']}; "
          f"{len(found)} reductions overlap a later unit's backward{eg}")
assert overlaps, "no reduction of a unit overlaps the backward of the units before it on any rank"
EOF
# (run as a user would: whichever python3 is first in PATH, with or without matplotlib)
scripts/trace_merge.py "$tmp"/tr/t.rank*.json -o "$tmp/merged.json" --png "$tmp/step.png" > "$tmp/merge.txt" 2>&1 \
    || { cat "$tmp/merge.txt"; fail "trace_merge.py"; }
grep -q "2 ranks" "$tmp/merge.txt" && [ -s "$tmp/step.png" ] || { cat "$tmp/merge.txt"; fail "trace_merge.py wrote no merged trace or PNG"; }
# files that are not one run's ranks: refused by name, nothing written
python3 - "$tmp"/tr/t.rank00001.json "$tmp/other1.json" << 'EOF' || fail "cannot make a stale file"
import json, sys
d = json.load(open(sys.argv[1]))
d["otherData"]["world"] = 3   # as an earlier run of 3 ranks would have left it
json.dump(d, open(sys.argv[2], "w"))
EOF
for bad in "$tmp/other1.json" "$tmp/merged.json" "$tmp/tr/t.rank00000.json"; do
    if scripts/trace_merge.py "$tmp"/tr/t.rank00000.json "$bad" -o "$tmp/bad.json" > "$tmp/bad.txt" 2>&1; then
        fail "trace_merge.py merged $bad beside rank 0's file"; fi
    grep -q "^trace_merge.py: .*$(basename "$bad")" "$tmp/bad.txt" && ! grep -q Traceback "$tmp/bad.txt" && [ ! -e "$tmp/bad.json" ] \
        || { cat "$tmp/bad.txt"; fail "$bad: no clear refusal naming it"; }
done
echo "trace_merge.py: a file of a run of another size, a merged file and one rank twice: refused by name"
# rank 1's trace cut before its last two steps (a rank killed): the step drawn is one both hold
python3 - "$tmp"/tr/t.rank00001.json "$tmp/cut1.json" << 'EOF' || fail "cannot cut rank 1's trace"
import json, sys
d = json.load(open(sys.argv[1]))
last = max(e["args"]["step"] for e in d["traceEvents"] if e.get("ph") == "X")
d["traceEvents"] = [e for e in d["traceEvents"] if e.get("ph") != "X" or e["args"]["step"] <= last - 2]
json.dump(d, open(sys.argv[2], "w"))
EOF
scripts/trace_merge.py "$tmp"/tr/t.rank00000.json "$tmp/cut1.json" -o "$tmp/cut.json" --png "$tmp/cut.png" \
    > "$tmp/cut.txt" 2>&1 || { cat "$tmp/cut.txt"; fail "trace_merge.py on a cut trace"; }
drawn=$(sed -n 's/^wrote .*cut.png: step \([0-9]*\)$/\1/p' "$tmp/cut.txt")
held=$(python3 -c 'import json, sys
print(max(e["args"]["step"] for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"))' "$tmp/cut1.json")
[ -n "$drawn" ] && [ "$drawn" -ge 0 ] && [ "$drawn" -le "$held" ] && ! grep -q warning "$tmp/cut.txt" \
    || { cat "$tmp/cut.txt"; fail "a cut trace: drew step '$drawn', past rank 1's last step $held"; }
echo "rank 1's trace cut at step $held: trace_merge.py drew step $drawn, which both ranks hold"
# rank 1's trace with no span at all: no step is in every rank's, said naming it (not a
# drawing of rank 0 alone)
python3 - "$tmp"/tr/t.rank00001.json "$tmp/empty1.json" << 'EOF' || fail "cannot empty rank 1's trace"
import json, sys
d = json.load(open(sys.argv[1]))
d["traceEvents"] = [e for e in d["traceEvents"] if e.get("ph") != "X"]
json.dump(d, open(sys.argv[2], "w"))
EOF
scripts/trace_merge.py "$tmp"/tr/t.rank00000.json "$tmp/empty1.json" -o "$tmp/empty.json" --png "$tmp/empty.png" \
    > "$tmp/empty.txt" 2>&1 && { cat "$tmp/empty.txt"; fail "a rank without spans: drawn anyway"; }
grep -q "no step is in every rank's trace (rank 0: steps .*, rank 1: none)" "$tmp/empty.txt" \
    || { cat "$tmp/empty.txt"; fail "a rank without spans: not named"; }
echo "a rank's trace without spans: refused, naming it"

# a stuck run: rank 1 stopped after its first step; rank 0's watchdog (2 s) ends the job
mpirun -np 2 ./train_gpt2 "${args[@]}" -x 200 --zero-timeout 2 --trace "$tmp/st/t" -o "$tmp/st" > "$tmp/st.txt" 2>&1 &
job=$!
for _ in $(seq 600); do grep -q "^step    2/" "$tmp/st.txt" && break; sleep 0.1; done
r1=$(pgrep -f "train_gpt2 .*-o $tmp/st" | sort -n | tail -1)
[ -n "$r1" ] || fail "no rank to stop"
kill -STOP "$r1"
for _ in $(seq 300); do kill -0 $job 2> /dev/null || break; sleep 0.1; done
kill -CONT "$r1" 2> /dev/null; kill -9 "$r1" 2> /dev/null; wait $job 2> /dev/null
grep -q "timed out" "$tmp/st.txt" || { tail "$tmp/st.txt"; fail "the watchdog did not end the stuck run"; }
python3 - "$tmp"/st/t.rank*.json << 'EOF' || fail "no trace of the stuck run shows its open collective"
import json, sys
ok = False
for p in sys.argv[1:]:
    d = json.load(open(p))
    stuck = [e for e in d["traceEvents"] if e.get("ph") == "X" and e["args"].get("open")]
    for e in stuck:
        print(f"rank {d['otherData']['rank']}: open when the watchdog fired: {e['name']} {e['args'].get('label', '')} "
              f"({e['dur'] / 1e6:.1f} s)")
    ok = ok or any(e["name"] in ("all_gather", "all_to_all", "wait") for e in stuck)
sys.exit(0 if ok else 1)
EOF
./train_gpt2 -e d4c128h4t64 -b 2 -t 32 -x 2 -v 0 -s 0 --threads 1 --trace "$tmp/none/t" -o "$tmp/bad" > "$tmp/bad.txt" 2>&1 \
    && fail "a --trace in a missing folder passed"
grep -q "^zero: rank 0: --trace $tmp/none/t: cannot write $tmp/none/t.rank00000.json.tmp: No such file" "$tmp/bad.txt" \
    && ! grep -q "^step" "$tmp/bad.txt" || { cat "$tmp/bad.txt"; fail "a --trace in a missing folder is not refused before the first step"; }
echo "PASS test_trace"
