#!/usr/bin/env bash
# A cluster on one machine (scripts/cluster.sh): 2 nodes x 2 ranks in network namespaces
# over shaped links.
#  - a stage-3 job through it gives the bits of the same job without namespaces (one
#    machine, --node-size 2)
#  - the bytes that crossed the nodes' links (interface counters) are the report's
#    inter-node bytes plus the protocol's overhead (TCP/IP headers and acknowledgements, MPI's
#    own messages): measured between 0% and 15% over
#  - the isolation check runs before any rank; the namespaces are gone after the job, after
#    a failing job and after SIGTERM (at once, the script dying by it), and a killed run's by
#    the next run (a live one's kept, even by a run in another PID namespace); a delay or
#    loss is refused by name where the kernel has no netem
# Skipped (exit 77, saying why) without root, network namespaces, tc or mpirun.
set -u
cd "$(dirname "$0")/../../.."
fail() { echo "FAIL test_cluster: $*"; exit 1; }
skip() { echo "SKIP test_cluster: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
command -v tc > /dev/null || skip "no tc"
command -v mpirun > /dev/null || skip "no mpirun"
ip netns add "zctest$$" 2> /dev/null || skip "this machine refuses network namespaces"
ip netns del "zctest$$"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1
args=(-z 3 -e d2c64h2t64 -b 2 -t 32 -x 3 -v 0 -s 0 --threads 1)
ours() { ip netns list | grep -c '^zc[0-9]*\(sw\|n[0-9]*\)' ; }
before=$(ours)

mpirun -np 4 -x OMP_NUM_THREADS ./train_gpt2 "${args[@]}" --node-size 2 -o "$tmp/ref" > "$tmp/ref.txt" 2>&1 \
    || { tail "$tmp/ref.txt"; fail "the job without namespaces failed"; }
scripts/cluster.sh -n 2 -r 2 --rate 1gbit --counters "$tmp/links.txt" -- ./train_gpt2 "${args[@]}" -o "$tmp/ns" \
    > "$tmp/ns.txt" 2>&1 || { tail "$tmp/ns.txt"; fail "the job in the cluster failed"; }
grep -q "^cluster.sh: 2 nodes x 2 ranks, links 1gbit, MTU 1500; isolated:" "$tmp/ns.txt" || fail "no isolation line"
grep -q "4 ranks (2 nodes of 2)" "$tmp/ns.txt" || fail "the trainer did not see 2 nodes of 2 ranks"
cmp -s "$tmp/ref/model_final.bin" "$tmp/ns/model_final.bin" || fail "the cluster's model differs from the one-machine job's"
diff <(grep trl "$tmp/ref/main.log") <(grep trl "$tmp/ns/main.log") > /dev/null || fail "the losses differ"
python3 - "$tmp/ns/zero_report.json" "$tmp/links.txt" << 'EOF' || fail "the link counters do not match the report"
import json, sys
rep = json.load(open(sys.argv[1]))
links = dict(l.strip().split("=", 1) for l in open(sys.argv[2]) if "=" in l)
counted = sum(r["sent_total"]["total"]["inter_node_bytes"] for r in rep["ranks"])
crossed = sum(int(links[f"node{i}_tx_bytes"]) for i in range(2))
over = crossed / counted - 1
print(f"inter-node bytes: the report counts {counted}, the links carried {crossed}: {100 * over:.1f}% protocol overhead")
sys.exit(0 if counted > 0 and 0 <= over <= 0.15 else 1)
EOF
echo "2 nodes x 2 ranks through namespaces: the one-machine job's bits"

# cleanup: after the job, after a failing job, after SIGTERM
[ "$(ours)" = "$before" ] || fail "namespaces left after the job: $(ip netns list)"
if scripts/cluster.sh -n 2 -r 1 -- false > "$tmp/f.txt" 2>&1; then fail "a failing job's status was 0"; fi
[ "$(ours)" = "$before" ] || fail "namespaces left after a failing job"
scripts/cluster.sh -n 2 -r 1 -- sleep 60 > "$tmp/t.txt" 2>&1 &
pid=$!
for _ in $(seq 300); do grep -q "isolated:" "$tmp/t.txt" && break; sleep 0.1; done   # the job runs
sleep 1
t_kill=$SECONDS
kill -TERM $pid
wait $pid
rc=$?
[ $rc -eq 143 ] || fail "the terminated job's status was $rc, not 143 (died by SIGTERM)"
[ $((SECONDS - t_kill)) -le 10 ] || fail "SIGTERM ended the job after $((SECONDS - t_kill)) s, not at once"
[ "$(ours)" = "$before" ] || fail "namespaces left after SIGTERM: $(ip netns list)"
echo "namespaces removed after the job, a failing job (exit non-zero) and SIGTERM (exit $rc within $((SECONDS - t_kill)) s)"
# what a run killed by SIGKILL left (namespaces named with a PID no process has): the next run removes it
sh -c 'exit 0' &
dead=$!
wait $dead
ip netns add "zc${dead}n0" && ip netns add "zc${dead}sw" || fail "cannot make the stand-in namespaces"
scripts/cluster.sh -n 2 -r 1 --no-mpi -- true > "$tmp/s.txt" 2>&1 || { cat "$tmp/s.txt"; fail "the run after a killed one failed"; }
grep -q "removed what a killed run left: namespaces .*zc${dead}n0" "$tmp/s.txt" && ! ip netns list | grep -q "^zc${dead}" ||
    { ip netns del "zc${dead}n0" 2> /dev/null; ip netns del "zc${dead}sw" 2> /dev/null; fail "a killed run's namespaces were not removed"; }
echo "a killed run's namespaces removed by the next run"
# a live run's are not, though a run in another PID namespace cannot see its PID (its lock says it lives)
scripts/cluster.sh -n 2 -r 1 --no-mpi -- sleep 6 > "$tmp/live.txt" 2>&1 &
live=$!
for _ in $(seq 300); do grep -q "isolated:" "$tmp/live.txt" && break; sleep 0.1; done
unshare --pid --fork --mount-proc scripts/cluster.sh -n 2 -r 1 --no-mpi -- true > "$tmp/other.txt" 2>&1 ||
    { cat "$tmp/other.txt"; fail "a run in another PID namespace failed"; }
wait $live || { cat "$tmp/live.txt"; fail "the live run failed beside a run in another PID namespace"; }
grep -q "removed what a killed run left" "$tmp/other.txt" && fail "a run in another PID namespace removed a live run's namespaces"
echo "a live run's namespaces kept by a run in another PID namespace"

# netem: refused by name where the kernel lacks it, used where it has it
if scripts/cluster.sh -n 2 -r 1 --delay 1ms -- true > "$tmp/d.txt" 2>&1; then
    echo "--delay 1ms: this kernel has netem"
else
    grep -q "need tc's netem" "$tmp/d.txt" || { cat "$tmp/d.txt"; fail "--delay refused without naming netem"; }
    echo "--delay 1ms: $(tail -1 "$tmp/d.txt")"
fi
[ "$(ours)" = "$before" ] || fail "namespaces left after the --delay run"
echo "PASS test_cluster"
