#!/usr/bin/env bash
# --trace on the CUDA trainers (emulated device): besides the host threads' spans, each GPU
# stream has a track of what the device ran, timed by CUDA events (zero/cuda/trace_gpu.h).
#  - train_gpt2_zero -z 2 at 2 ranks: the trace does not change the run's bits; the tracks
#    "GPU: main (the model)", "GPU: gather stream", "GPU: reduce stream" hold the units'
#    forward and backward, the gathers and the reductions
#  - the GPU clock lines up with the host's: no unit runs on the GPU before the host queued
#    it (its GPU span starts after its host span, within the reference event's latency)
#  - a stream runs in order: spans on one GPU track never overlap unless one holds the other
#  - both trainers: the forward, backward and optimizer passes as the GPU ran them
set -u
cd "$(dirname "$0")/../../.."
source dev/test/emu/emu_common.sh
need_emu train_gpt2cu train_gpt2_zero
export CUDA_EMU_QUIET=1 OMP_NUM_THREADS=1
a=(-e d2c64h1t64 -b 2 -t 64 -v 0 -s 0 -l 1e-3 -x 2)
run() {   # run NAME COMMAND...
    local name=$1; shift
    NO_MPI=1 timeout 600 "$@" -o "$tmp/$name" > "$tmp/$name.log" 2>&1 || { tail -n 15 "$tmp/$name.log"; bad "$name: $* failed"; return 1; }
}
run plain scripts/launch_ranks.sh 2 "$EMU/train_gpt2_zero" "${a[@]}" -z 2
run traced scripts/launch_ranks.sh 2 "$EMU/train_gpt2_zero" "${a[@]}" -z 2 --trace "$tmp/traced/t"
if cmp -s "$tmp/plain/model_final.bin" "$tmp/traced/model_final.bin"; then ok "train_gpt2_zero: --trace keeps the run's bits"
else bad "train_gpt2_zero: --trace changed the model"; fi
run single "$EMU/train_gpt2cu" "${a[@]}" --trace "$tmp/single/t"
python3 - "$tmp/traced/t.rank00000.json" "$tmp/traced/t.rank00001.json" "$tmp/single/t.rank00000.json" << 'PY'
import json, sys
EPS_US = 2000.0   # the reference event's synchronization latency, generously
fails = 0
def check(cond, what):
    global fails
    print(("PASS " if cond else "FAIL ") + what)
    fails += not cond
for path in sys.argv[1:]:
    d = json.load(open(path))
    ev, rank = d["traceEvents"], d["otherData"]["rank"]
    who = f"{'train_gpt2cu' if path == sys.argv[3] else 'train_gpt2_zero'} rank {rank}"
    names = {e["tid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e["name"] == "thread_name"}
    spans = [e for e in ev if e.get("ph") == "X"]
    track = {n: [e for e in spans if names[e["tid"]] == n] for n in names.values()}
    kinds = {e["name"] for e in track.get("GPU: the model's passes", [])}
    check({"forward pass", "backward pass", "optimizer step"} <= kinds,
          f"{who}: the passes' GPU track holds the forward, backward and optimizer passes ({sorted(kinds)})")
    if path != sys.argv[3]:
        want = {"GPU: main (the model)": {"forward", "backward"}, "GPU: gather stream": {"all_gather"},
                "GPU: reduce stream": {"all_to_all"}}
        for t, k in want.items():
            kinds = {e["name"] for e in track.get(t, [])}
            check(k <= kinds, f"{who}: track '{t}' holds {sorted(k)} ({len(track.get(t, []))} spans)")
        host = {(e["args"]["step"], e["name"], e["args"].get("label")): e for e in track["main (the model)"]
                if e["name"] in ("forward", "backward")}
        early = [e for e in track["GPU: main (the model)"] if e["name"] in ("forward", "backward") and
                 e["ts"] + EPS_US < host[(e["args"]["step"], e["name"], e["args"].get("label"))]["ts"]]
        check(not early, f"{who}: no unit ran on the GPU before the host queued it ({len(early)} did)")
    for t, es in track.items():
        if not t.startswith("GPU:"):
            continue
        es = sorted(es, key=lambda e: (e["ts"], -e["dur"]))
        bad = 0
        stack = []
        for e in es:
            while stack and stack[-1] <= e["ts"] + 1e-3:
                stack.pop()
            if stack and e["ts"] + e["dur"] > stack[-1] + 1e-3:
                bad += 1   # overlaps an earlier span without being inside it
            stack.append(e["ts"] + e["dur"])
        check(bad == 0 and all(e["dur"] >= 0 for e in es), f"{who}: '{t}' runs in order ({len(es)} spans, {bad} crossing)")
sys.exit(1 if fails else 0)
PY
[ $? -eq 0 ] && ok "the traces' GPU tracks (above)" || bad "the traces' GPU tracks (above)"
echo "$pass passed, $failn failed"
[ "$failn" -eq 0 ]
