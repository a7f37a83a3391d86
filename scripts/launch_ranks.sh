#!/usr/bin/env bash
# launch_ranks.sh NP COMMAND...: runs NP ranks of COMMAND on this machine, with mpirun
# when there is one and NO_MPI is unset, else as plain processes with RANK /
# WORLD_SIZE / LOCAL_RANK and a shared bootstrap file for the NCCL id: ZERO_BOOTSTRAP_FILE
# in a fresh private folder (mode 0700), and ZERO_BOOTSTRAP_SECRET, a fresh secret of 32
# random bytes drawn for this job alone, which binds the file to this job (the ranks refuse
# a file it does not open; zero/comm/bootstrap_tcp.c). Several ranks on one GPU need a
# distinct NCCL_HOSTID each and loopback sockets (NCCL < 2.30) or NCCL_MULTI_RANK_GPU_ENABLE=1.
# Exits non-zero if any rank does.
set -u
np=$1; shift
export NCCL_SOCKET_IFNAME=lo NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_IB_DISABLE=1 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
if command -v mpirun > /dev/null 2>&1 && [ -z "${NO_MPI:-}" ]; then
    exec mpirun --allow-run-as-root --oversubscribe -np "$np" \
        -x NCCL_SOCKET_IFNAME -x NCCL_MULTI_RANK_GPU_ENABLE -x NCCL_IB_DISABLE -x NCCL_DEBUG \
        -x LLMC_CUDNN_DETERMINISTIC \
        bash -c 'NCCL_HOSTID="rank${OMPI_COMM_WORLD_RANK:-0}" exec "$@"' launch "$@"
fi
bootdir=$(mktemp -d "${TMPDIR:-/tmp}/zero_boot.XXXXXX") || exit 1
trap 'rm -rf "$bootdir"' EXIT
secret=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
if [ ${#secret} -ne 64 ]; then echo "launch_ranks.sh: could not draw a secret from /dev/urandom" >&2; exit 1; fi
pids=()
for r in $(seq 0 $((np - 1))); do
    RANK=$r WORLD_SIZE=$np LOCAL_RANK=$r LOCAL_WORLD_SIZE=$np ZERO_BOOTSTRAP_FILE=$bootdir/id \
        ZERO_BOOTSTRAP_SECRET=$secret NCCL_HOSTID="rank$r" "$@" &
    pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
