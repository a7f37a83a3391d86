#!/usr/bin/env bash
# What a user watching a run sees:
#  1. stdout is line-buffered: with stdout in a file, every step that main.log holds has
#     its step line in the file while the run goes on (checked with the trainer stopped)
#  2. every step line ends with "elapsed E | ETA R": E grows, R is the steps left times the
#     mean step time since the run's first step (from the printed elapsed times), 0 at the
#     end; unsharded, under ZeRO on 1 and 2 ranks, and after a resume
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2> /dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_train_progress: $*"; exit 1; }

# 1. a long run, stopped (SIGSTOP) now and then until main.log shows 3 steps
./train_gpt2 -x 100000 -v 0 -s 0 --threads 1 -o "$tmp/long" > "$tmp/long.txt" 2>&1 &
pid=$!
logged=0
for _ in $(seq 1 600); do
    sleep 0.05
    kill -STOP "$pid" 2> /dev/null || fail "the long run ended early: $(tail -n 3 "$tmp/long.txt")"
    logged=$(grep -c ' trl:' "$tmp/long/main.log" 2> /dev/null)
    [ "${logged:-0}" -ge 3 ] && break
    kill -CONT "$pid"
done
printed=$(grep -c '^step ' "$tmp/long.txt")
kill -9 "$pid"; wait "$pid" 2> /dev/null; pid=
[ "${logged:-0}" -ge 3 ] || fail "main.log showed no 3 steps in 30 s"
[ "$printed" -ge "$logged" ] \
    || fail "stdout in a file is behind: $logged steps in main.log, $printed step lines written (buffered?)"
echo "stdout to a file while running: $printed step lines for $logged logged steps"

# 2. elapsed and ETA of every step line of a finished run (seconds: these runs are short)
check_eta() {   # check_eta LOG STEPS: the step lines of LOG end at step STEPS
    awk -v N="$2" '
        /^step / {
            if (!match($0, /\| elapsed [0-9.]+s \| ETA [0-9.]+s$/)) { print "no elapsed/ETA: " $0; bad = 1; exit }
            split($2, s, "/"); k = s[1] + 0
            split(substr($0, RSTART), f, " "); e = f[3] + 0; r = f[6] + 0
            if (s[2] + 0 != N) { print "step total " s[2] " is not " N; bad = 1; exit }
            if (n == 0) { k1 = k; e1 = e; want = -1 }
            else {
                if (e < last) { print "elapsed went back at step " k; bad = 1; exit }
                want = (e - e1) / (k - k1) * (N - k)
                slack = 0.1 * (N - k) / (k - k1) + 0.11   # printed to 0.1 s
                if (r < want - slack || r > want + slack) {
                    printf "step %d: ETA %.1fs, expected %.2fs from the elapsed times\n", k, r, want; bad = 1; exit }
            }
            if (k == N && r != 0) { print "ETA at the last step is " r; bad = 1; exit }
            last = e; n++; lastk = k
        }
        END { if (!bad && lastk != N) { print "the last step line is step " lastk; bad = 1 } exit bad }' "$1"
}
small=(-e d2c64h2t64 -b 2 -t 32 -v 4 -m 2 -s 0 --threads 1)
./train_gpt2 "${small[@]}" -x 16 -n 8 -o "$tmp/plain" > "$tmp/plain.txt" 2>&1 || { tail "$tmp/plain.txt"; fail "unsharded run failed"; }
check_eta "$tmp/plain.txt" 16 || fail "unsharded step lines (above)"
echo 8 > "$tmp/plain/latest"   # back to the checkpoint of step 8 (kept beside the last)
./train_gpt2 "${small[@]}" -x 16 -n 8 -y 1 -o "$tmp/plain" > "$tmp/resumed.txt" 2>&1 || { tail "$tmp/resumed.txt"; fail "resume failed"; }
grep -q '^step    9/16 ' "$tmp/resumed.txt" || fail "the resumed run does not start at step 9"
check_eta "$tmp/resumed.txt" 16 || fail "resumed step lines (above)"
./train_gpt2 "${small[@]}" -x 16 -z 1 -o "$tmp/z1" > "$tmp/z1.txt" 2>&1 || { tail "$tmp/z1.txt"; fail "-z 1 run failed"; }
check_eta "$tmp/z1.txt" 16 || fail "-z 1 step lines (above)"
mpirun -np 2 ./train_gpt2 "${small[@]}" -x 16 -z 3 -o "$tmp/z3" > "$tmp/z3.txt" 2>&1 || { tail "$tmp/z3.txt"; fail "mpirun -np 2 -z 3 failed"; }
check_eta "$tmp/z3.txt" 16 || fail "2-rank -z 3 step lines (above)"
echo "step lines: elapsed and ETA consistent (unsharded, resumed, -z 1, 2 ranks -z 3)"
echo "PASS test_train_progress"
