#!/usr/bin/env bash
# test_zero_groups.sh: builds dev/test/zero/mpi_zero_groups.c with zero/ (mpicc, warning-free)
# and runs it under mpirun at 1, 2, 4 and 6 ranks: the ZeRO++ groups (world, node, across,
# hpz) at every layout of the world, their geometry, all_gather and all_to_all in each on
# the host backend's stream channels, the intra- and inter-node bytes counted, and the
# refusal of node and hpZ sizes that do not divide the world.
# Run from anywhere. Prints PASS/FAIL per case; exit 0 only if all pass.
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin="$tmp/mpi_zero_groups"
source dev/test/zero/zero_sources.sh
# as the Makefile decides: zero/io/nvme.c uses liburing when its header is there
uring=$(printf '#include <liburing.h>\n' | ${CC:-cc} -E -x c - > /dev/null 2>&1 && echo -luring)
if ! mpicc -std=c11 -D_GNU_SOURCE -O2 -fopenmp -ffp-contract=off -Wall -Wextra -Werror dev/test/zero/mpi_zero_groups.c \
        "${ZERO_HOST_SRC[@]}" -lcjson -lz $uring -lcrypto -lm -o "$bin" > "$tmp/build.log" 2>&1; then
    cat "$tmp/build.log"
    echo "FAIL: building mpi_zero_groups (needs mpicc from OpenMPI)"
    exit 1
fi
echo "PASS: build (warning-free)"

# Open MPI: ranks as root, more ranks than cores; the ranks share the cores
mpiflags=()
mpirun --version 2>&1 | grep -q "Open MPI" && mpiflags=(--oversubscribe) &&
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1

status=0
for np in 1 2 4 6; do
    log="$tmp/np$np.log"
    if timeout 120 mpirun "${mpiflags[@]}" -np "$np" "$bin" > "$log" 2>&1 &&
       grep -q "^mpi_zero_groups: $np ranks, [0-9]* checks passed, 0 failed" "$log"; then
        echo "PASS: groups at $np ranks ($(grep -o '[0-9]* checks passed' "$log"))"
    else
        cat "$log"
        echo "FAIL: groups at $np ranks"
        status=1
    fi
done
[ "$status" -eq 0 ] && echo "test_zero_groups: all passed" || echo "test_zero_groups: FAILED"
exit "$status"
