#!/usr/bin/env bash
# test_launch_ranks.sh: scripts/launch_ranks.sh's usage and what it starts.
#  - -h and --help print the usage on stdout and exit 0; no arguments, an NP that is not a
#    positive integer, or no COMMAND print why and the usage on stderr and exit 2, starting nothing
#  - the usage names every variable the script gives the ranks, and they get them: with
#    NO_MPI=1 NP plain processes with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, a
#    bootstrap file in a private folder and a 64-hex-digit secret; with mpirun, NCCL_HOSTID
#  - without MPI the caller's bootstrap and MPI launcher variables do not reach the ranks
#  - a rank that fails makes the launcher fail; without MPI it also ends the other ranks at
#    once, naming the rank, and a SIGTERM to the launcher ends every rank before it exits
#    (one that ignores SIGTERM by SIGKILL after 10 s), also after a rank fails, and what a rank
#    started goes with it, and nothing it started outlives it; a rank killed by a signal is
#    named with its status
#  - another MPI's mpirun on the PATH (not Open MPI's) is passed over, saying so: the ranks
#    start without it
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_launch_ranks: $*"; exit 1; }
L=scripts/launch_ranks.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

for h in -h --help; do
    bash $L $h > "$tmp/h.out" 2> "$tmp/h.err" || fail "$h exited non-zero"
    grep -q "^usage: scripts/launch_ranks.sh NP COMMAND" "$tmp/h.out" || fail "$h printed no usage"
    [ -s "$tmp/h.err" ] && fail "$h wrote to stderr"
done
usage=$(cat "$tmp/h.out")
bad() {   # expected message, then the arguments
    local want=$1; shift
    bash $L "$@" > "$tmp/b.out" 2> "$tmp/b.err"
    local rc=$?
    [ "$rc" -eq 2 ] || fail "'$*' exited $rc, not 2"
    grep -q "$want" "$tmp/b.err" && grep -q "^usage: " "$tmp/b.err" || { cat "$tmp/b.err"; fail "'$*': no '$want' and usage"; }
    [ -s "$tmp/b.out" ] && fail "'$*' wrote to stdout"
    [ -e "$tmp/started" ] && fail "'$*' started something"
    return 0
}
bad "give NP and a COMMAND"
bad "NP must be a positive integer, not 'x'" x touch "$tmp/started"
bad "NP must be a positive integer, not '0'" 0 touch "$tmp/started"
bad "NP must be a positive integer, not '-2'" -2 touch "$tmp/started"
bad "no COMMAND to start" 2

# every variable the script sets for the ranks is in the usage
for v in $(grep -o '\b[A-Z][A-Z_]*=' $L | tr -d = | sort -u); do
    echo "$usage" | grep -q "$v" || fail "the usage does not mention $v, which the script sets"
done

# without MPI: the variables the usage promises
NO_MPI=1 bash $L 3 sh -c 'echo "$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE ${#ZERO_BOOTSTRAP_SECRET} \
$(stat -c %a "$(dirname "$ZERO_BOOTSTRAP_FILE")") $NCCL_SOCKET_IFNAME"' > "$tmp/env.txt" || fail "NO_MPI run failed"
[ "$(sort "$tmp/env.txt")" = $'0 3 0 3 64 700 lo\n1 3 1 3 64 700 lo\n2 3 2 3 64 700 lo' ] \
    || { cat "$tmp/env.txt"; fail "NO_MPI ranks' environment"; }
NO_MPI=1 bash $L 2 sh -c '[ "$RANK" = 0 ]' && fail "NO_MPI: a failing rank did not fail the launch"
# a caller's own bootstrap or MPI variables would make the ranks take another launch
ZERO_BOOTSTRAP_TCP=127.0.0.1:1 ZERO_BOOTSTRAP_SECRET_FILE=/nonexistent PMI_SIZE=4 PMIX_RANK=1 NO_MPI=1 bash $L 2 \
    sh -c 'echo "${ZERO_BOOTSTRAP_TCP-x} ${ZERO_BOOTSTRAP_SECRET_FILE-x} ${PMI_SIZE-x} ${PMIX_RANK-x}"' > "$tmp/inh.txt" \
    || fail "NO_MPI run with inherited variables failed"
[ "$(cat "$tmp/inh.txt")" = $'x x x x\nx x x x' ] || { cat "$tmp/inh.txt"; fail "NO_MPI: the caller's launch variables reached the ranks"; }
source dev/test/common/proc.sh   # running PID, alive FILE
# a rank that fails ends the others at once, named; they would wait for it in a collective
start=$SECONDS
mark="launch_ranks_test_$$_$RANDOM"   # in the environment of everything the launcher starts
LAUNCH_MARK=$mark NO_MPI=1 bash $L 3 bash -c '[ "$RANK" = 1 ] && exit 3; echo $$ >> "$0"; exec sleep 60' "$tmp/alive" 2> "$tmp/f.err"
rc=$?
[ $rc = 1 ] && [ $((SECONDS - start)) -lt 20 ] && [ "$(alive "$tmp/alive")" = 0 ] &&
    grep -q "launch_ranks.sh: rank 1 exited with status 3: stopping the other ranks" "$tmp/f.err" ||
    { cat "$tmp/f.err"; fail "NO_MPI: rank 1 failed: exit $rc after $((SECONDS - start)) s, $(alive "$tmp/alive") ranks alive"; }
# nothing it started outlives it, its SIGKILL timer included
left=$(grep -lsa "LAUNCH_MARK=$mark" /proc/[0-9]*/environ | cut -d/ -f3 | tr '\n' ' ')
[ -z "$left" ] || { ps -o pid,ppid,args -p ${left// /,} 2> /dev/null; kill $left 2> /dev/null
    fail "NO_MPI: processes the launcher started outlive it: $left"; }
# SIGTERM to the launcher ends its ranks too
NO_MPI=1 bash $L 2 bash -c 'echo $$ >> "$0"; exec sleep 60' "$tmp/alive2" &
lp=$!
for _ in $(seq 100); do [ "$(cat "$tmp/alive2" 2> /dev/null | wc -l)" = 2 ] && break; sleep 0.1; done
kill -TERM $lp; wait $lp; rc=$?
[ $rc = 143 ] && [ "$(wc -l < "$tmp/alive2")" = 2 ] && [ "$(alive "$tmp/alive2")" = 0 ] ||
    { kill $(cat "$tmp/alive2") 2> /dev/null; fail "NO_MPI: SIGTERM to the launcher: exit $rc, $(alive "$tmp/alive2") of its ranks alive"; }
# a rank that ignores SIGTERM: the launcher exits only after it is killed
NO_MPI=1 bash $L 2 bash -c 'trap "" TERM; echo $$ >> "$0"; exec sleep 60' "$tmp/alive3" &
lp=$!
for _ in $(seq 100); do [ "$(cat "$tmp/alive3" 2> /dev/null | wc -l)" = 2 ] && break; sleep 0.1; done
start=$SECONDS
kill -TERM $lp; wait $lp; rc=$?
[ $rc = 143 ] && [ "$(alive "$tmp/alive3")" = 0 ] && [ $((SECONDS - start)) -lt 20 ] ||
    { kill -9 $(cat "$tmp/alive3") 2> /dev/null; fail "NO_MPI: SIGTERM with a rank ignoring it: exit $rc, $(alive "$tmp/alive3") alive"; }
# a rank killed by a signal is named with its status, however bash reports it (5 tries: the
# race in which bash drops it from its jobs first is one in several)
for try in 1 2 3 4 5; do
    NO_MPI=1 bash $L 2 bash -c 'sleep 0.3; [ "$RANK" = 1 ] && kill -KILL $$; exec sleep 60' 2> "$tmp/k.err"
    rc=$?
    [ $rc = 1 ] && grep -q "launch_ranks.sh: rank 1 exited with status 137" "$tmp/k.err" && ! grep -q "unbound" "$tmp/k.err" ||
        { cat "$tmp/k.err"; fail "NO_MPI: rank 1 killed by SIGKILL (try $try): exit $rc"; }
done
# after a rank fails, what the others started is ended too (each rank is a process group),
# and what ignores SIGTERM is killed after 10 s
start=$SECONDS
# (rank 1 fails once ranks 0 and 2 have written their two pids each, up to 15 s)
NO_MPI=1 bash $L 3 bash -c 'if [ "$RANK" = 1 ]; then
        for _ in $(seq 300); do [ "$(cat "$0" 2> /dev/null | wc -l)" -ge 4 ] && break; sleep 0.05; done; exit 3; fi
    trap "" TERM; sleep 60 & echo $! >> "$0"; echo $$ >> "$0"; wait' "$tmp/alive4" 2> "$tmp/g.err"
rc=$?
[ $rc = 1 ] && [ $((SECONDS - start)) -lt 30 ] && [ "$(wc -l < "$tmp/alive4")" = 4 ] && [ "$(alive "$tmp/alive4")" = 0 ] ||
    { kill -9 $(cat "$tmp/alive4") 2> /dev/null; cat "$tmp/g.err"
      fail "NO_MPI: rank 1 failed beside ranks ignoring SIGTERM with children: exit $rc, $(alive "$tmp/alive4") alive"; }
if command -v mpirun > /dev/null; then
    bash $L 2 sh -c 'echo "$OMPI_COMM_WORLD_RANK $NCCL_HOSTID"' > "$tmp/mpi.txt" 2>&1 || { cat "$tmp/mpi.txt"; fail "mpirun run"; }
    [ "$(sort "$tmp/mpi.txt")" = $'0 rank0\n1 rank1' ] || { cat "$tmp/mpi.txt"; fail "mpirun ranks' NCCL_HOSTID (or a warning)"; }
fi
mkdir "$tmp/mpich"
printf '#!/bin/sh\n[ "$1" = --version ] && { echo "HYDRA build details:"; exit 0; }\ntouch "%s/mpich_ran"; exit 1\n' "$tmp" \
    > "$tmp/mpich/mpirun"
chmod +x "$tmp/mpich/mpirun"
PATH="$tmp/mpich:$PATH" bash $L 2 sh -c 'echo "$RANK/$WORLD_SIZE"' > "$tmp/mpich.txt" 2> "$tmp/mpich.err" \
    || { cat "$tmp/mpich.txt" "$tmp/mpich.err"; fail "another MPI's mpirun: the launch failed"; }
[ "$(sort "$tmp/mpich.txt")" = $'0/2\n1/2' ] && [ ! -e "$tmp/mpich_ran" ] \
    && grep -q "launch_ranks.sh: the mpirun on the PATH ($tmp/mpich/mpirun) is not Open MPI's: starting the ranks without it" \
        "$tmp/mpich.err" || { cat "$tmp/mpich.txt" "$tmp/mpich.err"; fail "another MPI's mpirun was not passed over, saying so"; }
echo "test_launch_ranks: OK"
