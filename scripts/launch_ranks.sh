#!/usr/bin/env bash
# launch_ranks.sh NP COMMAND...: runs NP ranks of COMMAND on this machine, with Open MPI's
# mpirun when there is one and NO_MPI is unset, else as plain processes with RANK /
# WORLD_SIZE / LOCAL_RANK and a shared bootstrap file for the NCCL id: ZERO_BOOTSTRAP_FILE
# in a fresh private folder (mode 0700), and ZERO_BOOTSTRAP_SECRET, a fresh secret of 32
# random bytes drawn for this job alone, which binds the file to this job (the ranks refuse
# a file it does not open; zero/comm/bootstrap_tcp.c). Without mpirun, the first rank that
# fails, or a signal to the launcher, ends every rank. Several ranks on one GPU need a
# distinct NCCL_HOSTID each and loopback sockets (NCCL < 2.30) or NCCL_MULTI_RANK_GPU_ENABLE=1.
# Exits non-zero if any rank does. -h prints the usage.
set -u
usage() {
    cat <<'USAGE'
usage: scripts/launch_ranks.sh NP COMMAND [ARGS...]

Starts NP ranks of COMMAND on this machine and waits for them; exits non-zero if any rank
does (mpirun's status, or 1). Without mpirun, the first rank that fails ends the others, and
a signal to the launcher ends them all.
  - With Open MPI's mpirun on the PATH (and NO_MPI unset): mpirun --allow-run-as-root
    --oversubscribe -np NP, each rank with NCCL_HOSTID=rank<R> so that ranks may share one GPU.
  - Else (another MPI's mpirun, said; or NO_MPI=1; bash 5.1 or later): NP plain processes with RANK, WORLD_SIZE,
    LOCAL_RANK and LOCAL_WORLD_SIZE=NP, ZERO_BOOTSTRAP_FILE in a fresh private folder (mode
    0700, removed at the end) and ZERO_BOOTSTRAP_SECRET, 32 random bytes drawn for this job
    alone; the caller's ZERO_BOOTSTRAP_TCP and ZERO_BOOTSTRAP_SECRET_FILE, and the variables
    by which a rank would take itself for one of an MPI launch (OMPI_COMM_WORLD_SIZE and
    _RANK, _LOCAL_RANK, _LOCAL_SIZE, PMI_SIZE, PMI_RANK, PMIX_RANK, SLURM_STEP_NUM_TASKS),
    are not passed on; the secret is in the ranks' environment only, never on a command
    line. A failed rank or a signal to the launcher ends the ranks and what they started
    (SIGKILL after 10 s) before it exits.
Both ways it sets NCCL_SOCKET_IFNAME=lo, NCCL_MULTI_RANK_GPU_ENABLE=1, NCCL_IB_DISABLE=1
and NCCL_DEBUG (default WARN): one machine, loopback only.

examples:
  scripts/launch_ranks.sh 4 ./train_gpt2_zero -z 3 -e d12 -b 4 -t 1024 -x 20 -o out/launch_z3
  NO_MPI=1 scripts/launch_ranks.sh 2 ./train_gpt2_zero -z 1 -o out/launch_nompi
USAGE
}
case "${1:-}" in
    -h|--help) usage; exit 0 ;;
esac
if [ $# -lt 2 ] || ! [[ "$1" =~ ^[1-9][0-9]*$ ]]; then
    if [ $# -lt 1 ]; then echo "launch_ranks.sh: give NP and a COMMAND" >&2
    elif ! [[ "$1" =~ ^[1-9][0-9]*$ ]]; then echo "launch_ranks.sh: NP must be a positive integer, not '$1'" >&2
    else echo "launch_ranks.sh: no COMMAND to start" >&2; fi
    usage >&2
    exit 2
fi
np=$1; shift
export NCCL_SOCKET_IFNAME=lo NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_IB_DISABLE=1 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
# Open MPI's mpirun only: its flags and OMPI_COMM_WORLD_RANK below are Open MPI's (the
# trainers are built against it); another MPI's mpirun is passed over, saying so
if command -v mpirun > /dev/null 2>&1 && [ -z "${NO_MPI:-}" ] && ! mpirun --version 2>&1 | grep -q "Open MPI"; then
    echo "launch_ranks.sh: the mpirun on the PATH ($(command -v mpirun)) is not Open MPI's: starting the ranks without it" >&2
    NO_MPI=1
fi
if command -v mpirun > /dev/null 2>&1 && [ -z "${NO_MPI:-}" ]; then
    pass=(-x NCCL_SOCKET_IFNAME -x NCCL_MULTI_RANK_GPU_ENABLE -x NCCL_IB_DISABLE -x NCCL_DEBUG)
    exec mpirun --allow-run-as-root --oversubscribe -np "$np" "${pass[@]}" \
        bash -c 'NCCL_HOSTID="rank${OMPI_COMM_WORLD_RANK:-0}" exec "$@"' launch "$@"
fi
# wait -n -p (which rank ended) is bash 5.1's
if [ "${BASH_VERSINFO[0]}" -lt 5 ] || { [ "${BASH_VERSINFO[0]}" -eq 5 ] && [ "${BASH_VERSINFO[1]}" -lt 1 ]; }; then
    echo "launch_ranks.sh: starting ranks without mpirun needs bash 5.1 or later (wait -n -p); this is bash $BASH_VERSION" >&2
    exit 2
fi
bootdir=$(mktemp -d "${TMPDIR:-/tmp}/zero_boot.XXXXXX") || exit 1
trap 'rm -rf "$bootdir"' EXIT
secret=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
if [ ${#secret} -ne 64 ]; then echo "launch_ranks.sh: could not draw a secret from /dev/urandom" >&2; exit 1; fi
pids=() running=() killer=
# the ranks are this script's children, in its process group (a signal to the group ends
# them all): a signal to the launcher ends them, and what they started (its exit removes the
# bootstrap folder they would otherwise go on without), and it exits once they are gone
tree() {   # tree PID...: the processes and their descendants
    local p
    for p in "$@"; do
        echo "$p"
        command -v pgrep > /dev/null && tree $(pgrep -P "$p")
    done
}
signal_ranks() {   # signal_ranks SIG PID...: the ranks and what they started
    local sig=$1 procs; shift
    procs=$(tree "$@")
    [ -z "$procs" ] || kill "-$sig" $procs 2> /dev/null
}
stop_ranks() {   # SIGTERM now, SIGKILL to what is left after 10 s
    [ ${#running[@]} -gt 0 ] || return 0
    signal_ranks TERM "${running[@]}"
    [ -n "$killer" ] || { (sleep 10; signal_ranks KILL "$@") > /dev/null 2>&1 & killer=$!; }
}
end_ranks() {
    [ ${#running[@]} -gt 0 ] && signal_ranks TERM "${running[@]}"
    for _ in $(seq 100); do [ -z "$(jobs -pr | grep -vx "${killer:-none}")" ] && break; sleep 0.1; done
    signal_ranks KILL $(jobs -pr)
    wait 2> /dev/null
}
trap 'end_ranks; exit 130' INT
trap 'end_ranks; exit 143' TERM
trap 'end_ranks; exit 129' HUP
# what a caller's environment would make the ranks take for another launch
inherited=(ZERO_BOOTSTRAP_TCP ZERO_BOOTSTRAP_SECRET_FILE OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_RANK
           OMPI_COMM_WORLD_LOCAL_RANK OMPI_COMM_WORLD_LOCAL_SIZE PMI_SIZE PMI_RANK PMIX_RANK SLURM_STEP_NUM_TASKS)
for r in $(seq 0 $((np - 1))); do
    # the secret goes through the environment only (a command line is readable by every user)
    (
        unset "${inherited[@]}"
        export RANK=$r WORLD_SIZE=$np LOCAL_RANK=$r LOCAL_WORLD_SIZE=$np ZERO_BOOTSTRAP_FILE=$bootdir/id \
            ZERO_BOOTSTRAP_SECRET=$secret NCCL_HOSTID="rank$r"
        exec "$@"
    ) &
    pids+=($!) running+=($!)
done
# as mpirun does: the first rank that fails ends the others, which would otherwise wait in a
# collective for it until their timeout
rc=0 misses=0
while [ ${#running[@]} -gt 0 ]; do
    done_pid=
    wait -n -p done_pid "${running[@]}"
    st=$?
    if [ -z "${done_pid-}" ]; then
        # bash may have dropped a rank a signal killed from its jobs before wait -n saw it:
        # such a one is no job any more, and wait PID still gives its status
        live=" $(jobs -p | tr '\n' ' ') "
        for p in "${running[@]}"; do
            if [[ "$live" != *" $p "* ]]; then wait "$p"; st=$?; done_pid=$p; break; fi
        done
        if [ -z "$done_pid" ]; then
            misses=$((misses + 1))
            [ $misses -lt 100 ] || { echo "launch_ranks.sh: cannot tell which rank ended (wait -n: $st)" >&2; rc=1; break; }
            sleep 0.1
            continue
        fi
    fi
    rest=()
    for p in "${running[@]}"; do [ "$p" = "$done_pid" ] || rest+=("$p"); done
    running=("${rest[@]}")
    if [ "$st" -ne 0 ] && [ "$rc" -eq 0 ]; then
        for r in "${!pids[@]}"; do [ "${pids[$r]}" = "$done_pid" ] && break; done
        echo "launch_ranks.sh: rank $r exited with status $st: stopping the other ranks" >&2
        rc=1
        stop_ranks "${running[@]}"
    fi
done
[ -z "$killer" ] || signal_ranks TERM "$killer"   # the killer and its sleep
exit $rc
