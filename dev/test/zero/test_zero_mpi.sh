#!/usr/bin/env bash
# test_zero_mpi.sh: builds dev/test/zero/mpi_zero_toy.c with zero/ (mpicc) and runs it under
# mpirun: the host kernels' rounding odds and thread counts, refused configurations, offload
# where a rank owns nothing or one tile, a gradient pool of every gradient at once that first
# fit would split, every ZeRO stage
# at 1, 2, 3 and 4 ranks against the unsharded reference (also with the host backend's
# jitter, ZERO_HOST_JITTER, and the NVMe engine's, ZERO_NVME_JITTER, under several seeds,
# with offload's delayed update slowed, ZERO_HOST_SLOW: the same bits), the overlap properties
# read from a recording backend (mpi_zero_overlap.c), and runs that must die: a launcher's
# world size that MPI's contradicts, a start-up failure on one rank, a
# collective (or the opening of a stream's communicators) stalled past the watchdog's
# timeout, a hook called out of order, zero_step
# with t 0 and a reduce-scatter whose count x ranks exceeds MPI's int count.
# Run from the repository root. Prints PASS/FAIL per case; exit 0 only if all pass.
set -u
cd "$(dirname "$0")/../../.."

fail=0
pass() { echo "PASS: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

for tool in mpicc mpirun; do
    command -v "$tool" >/dev/null || { echo "FAIL: $tool not found (install OpenMPI)"; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source dev/test/zero/zero_sources.sh
# zero/io/nvme.c uses liburing when its header is there (as the Makefile decides)
uring=$(printf '#include <liburing.h>\n' | ${CC:-cc} -E -x c - > /dev/null 2>&1 && echo -luring)
# build NAME: dev/test/zero/NAME.c with zero/ into $tmp/NAME, warning-free
build() {
    if ! mpicc -std=c11 -D_GNU_SOURCE -O2 -march=native -fopenmp -ffp-contract=off -Wall -Wextra -Werror \
            "dev/test/zero/$1.c" "${ZERO_HOST_SRC[@]}" -lcjson -lz $uring -lcrypto -lm -o "$tmp/$1" 2> "$tmp/build.log"; then
        cat "$tmp/build.log"
        echo "FAIL: building $1"
        exit 1
    fi
}
build mpi_zero_toy
build mpi_zero_overlap
bin="$tmp/mpi_zero_toy"
overlap="$tmp/mpi_zero_overlap"
pass "build (warning-free)"

# Open MPI wants these to run as root and to start more ranks than cores.
mpiflags=()
if mpirun --version 2>&1 | grep -q "Open MPI"; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    mpiflags=(--oversubscribe)
fi
export OMP_NUM_THREADS=1   # ranks share the cores

# run NAME NP MODE: must exit 0
run() {
    local name=$1 np=$2 mode=$3 log="$tmp/$1.log"
    if timeout 120 mpirun "${mpiflags[@]}" -np "$np" "$bin" "$mode" > "$log" 2>&1; then
        pass "$name ($(grep -o '[0-9]* checks passed' "$log" | tail -n 1))"
    else
        cat "$log"
        bad "$name"
    fi
}

run kernels 1 kernels
run errors 2 errors
grep -q 'zero: rank [01]: tensors 1 and 4 are both named "b0"' "$tmp/errors.log" ||
    { cat "$tmp/errors.log"; bad "errors: no message naming the duplicate name b0 and tensors 1 and 4"; }
grep -q 'zero: rank [01]: tensors 2 and 3 are both named "tensor2" (a tensor without a name is called tensor<i>)' "$tmp/errors.log" ||
    { cat "$tmp/errors.log"; bad "errors: no message naming tensor2, a nameless tensor 2 and one of that name"; }
# offload where a rank holds little: nothing at all (no swap file engine), one NVMe tile after a
# skipped step (under 16 NVMe jitter seeds)
for np in 2 3; do run "edges-np$np" "$np" edges; done
for np in 1 2 3 4; do run "stages-0-3-np$np" "$np" train; done
grep -h "stage\|reference" "$tmp/stages-0-3-np4.log" | sed 's/^/    /'

# The same checks with random sleeps before every queued stream operation and NVMe
# transfer: a missing wait in zero/ would let the model read a buffer a stream thread has
# not finished, or reuse an NVMe buffer a write has not finished with. The delayed update's
# stream is slowed besides, so that it lags behind the next step's accumulations (as a large
# model's CPU step does on a GPU) and they must wait for it.
for seed in 11 12 13; do
    for np in 2 4; do
        name="jitter-seed$seed-np$np"
        ZERO_HOST_JITTER=$seed ZERO_NVME_JITTER=$seed ZERO_HOST_SLOW=delayed-update:1000 run "$name" "$np" train
        grep -q "jitter is on (ZERO_HOST_JITTER=$seed)" "$tmp/$name.log" || bad "$name: no start-up line says jitter is on"
        grep -q "delayed-update stream .* waits 1000 us first (ZERO_HOST_SLOW)" "$tmp/$name.log" \
            || bad "$name: no start-up line says the delayed update is slowed"
    done
done

# What the model's stream waits for (recording backend).
for np in 1 2 4; do
    if timeout 120 mpirun "${mpiflags[@]}" -np "$np" "$overlap" > "$tmp/overlap$np.log" 2>&1; then
        pass "overlap np$np ($(grep -o '[0-9]* checks passed' "$tmp/overlap$np.log"))"
    else
        cat "$tmp/overlap$np.log"
        bad "overlap np$np"
    fi
done
sed 's/^/    /' "$tmp/overlap2.log" | grep -v checks

# Without a launcher: rank and world come from the environment and MPI is never started.
nolaunch=(env -u OMPI_COMM_WORLD_SIZE -u PMI_SIZE -u PMIX_RANK -u SLURM_STEP_NUM_TASKS)
if timeout 60 "${nolaunch[@]}" "$bin" errors > "$tmp/nolaunch.log" 2>&1; then
    pass "no launcher, world 1 ($(grep -o '[0-9]* checks passed' "$tmp/nolaunch.log"))"
else
    cat "$tmp/nolaunch.log"
    bad "no launcher, world 1"
fi
timeout 60 "${nolaunch[@]}" RANK=1 WORLD_SIZE=2 "$bin" errors > "$tmp/nolaunch2.log" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && grep -q "zero: rank 1: .*WORLD_SIZE=2 without an MPI launcher" "$tmp/nolaunch2.log"; then
    pass "no launcher, WORLD_SIZE=2 refused (exit $rc)"
else
    cat "$tmp/nolaunch2.log"
    bad "no launcher, WORLD_SIZE=2 refused (exit $rc)"
fi
# a launch environment that does not add up is refused naming the variables, before anything
# starts (the ranks would otherwise all be rank 0, or machines be taken for one)
refused_env() {   # refused_env WHAT PATTERN VAR=VALUE...
    local what=$1 want=$2
    shift 2
    timeout 60 "${nolaunch[@]}" "$@" "$bin" errors > "$tmp/env.log" 2>&1
    local rc=$?
    if [ "$rc" -ne 0 ] && grep -q "$want" "$tmp/env.log"; then pass "no launcher, $what refused (exit $rc)"
    else cat "$tmp/env.log"; bad "no launcher, $what refused (exit $rc)"; fi
}
refused_env "RANK unset" "zero: WORLD_SIZE=2 but RANK is unset" WORLD_SIZE=2
refused_env "WORLD_SIZE unset" "zero: RANK=1 but WORLD_SIZE is unset" RANK=1
refused_env "WORLD_SIZE unset beside LOCAL_RANK" "zero: LOCAL_RANK=0 but WORLD_SIZE is unset" LOCAL_RANK=0
refused_env "LOCAL_WORLD_SIZE not dividing" "zero: rank 1: LOCAL_WORLD_SIZE=3 does not divide WORLD_SIZE=4" \
    RANK=1 WORLD_SIZE=4 LOCAL_WORLD_SIZE=3
refused_env "LOCAL_WORLD_SIZE malformed" "zero: rank 1: LOCAL_WORLD_SIZE=2x does not divide" RANK=1 WORLD_SIZE=4 LOCAL_WORLD_SIZE=2x
refused_env "LOCAL_RANK against the numbering" "zero: rank 1: LOCAL_RANK=0, but RANK 1 on machines of 2 rank(s) (LOCAL_WORLD_SIZE=unset) is local rank 1" \
    RANK=1 WORLD_SIZE=2 LOCAL_RANK=0
refused_env "ZERO_BOOTSTRAP_TIMEOUT=5m" "zero: rank 0: ZERO_BOOTSTRAP_TIMEOUT=5m is not a number of seconds" ZERO_BOOTSTRAP_TIMEOUT=5m
refused_env "ZERO_BOOTSTRAP_TIMEOUT=inf" "ZERO_BOOTSTRAP_TIMEOUT=inf is not a number of seconds in (0, 1000000]" ZERO_BOOTSTRAP_TIMEOUT=inf

# A launcher variable that states another world size than MPI's is refused, naming it and
# both sizes: srun with PMIx sets PMIX_RANK in every task, and a process given RANK/WORLD_SIZE
# besides would otherwise start MPI as a world of one and train alone.
mpi_world() {   # mpi_world WHAT PATTERN VAR=VALUE...: one process, MPI started by the variables
    local what=$1 want=$2
    shift 2
    timeout 60 "${nolaunch[@]}" -u WORLD_SIZE -u RANK "$@" "$bin" errors > "$tmp/world.log" 2>&1
    local rc=$?
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q "$want" "$tmp/world.log" && ! grep -q "checks passed" "$tmp/world.log"
    then pass "MPI world, $what refused (exit $rc)"
    else cat "$tmp/world.log"; bad "MPI world, $what refused (exit $rc)"; fi
}
mpi_world "WORLD_SIZE=2 beside PMIX_RANK" \
    "zero: rank 0: WORLD_SIZE=2, but the MPI world this process joined (it started MPI because PMIX_RANK=0 is set) has 1 rank(s)" \
    PMIX_RANK=0 RANK=1 WORLD_SIZE=2
mpi_world "SLURM_STEP_NUM_TASKS=2 of srun" \
    "zero: rank 0: SLURM_STEP_NUM_TASKS=2, but the MPI world .*SLURM_STEP_NUM_TASKS=2 is set) has 1 rank(s).*give MPI Slurm's process manager (srun --mpi=pmix" \
    SLURM_STEP_NUM_TASKS=2
timeout 60 mpirun "${mpiflags[@]}" -np 2 -x WORLD_SIZE=3 "$bin" errors > "$tmp/world3.log" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q "zero: rank [01]: WORLD_SIZE=3, but the MPI world .* has 2 rank(s).*If mpirun started the ranks, unset this variable" "$tmp/world3.log"
then pass "mpirun -np 2 with WORLD_SIZE=3 refused (exit $rc)"
else cat "$tmp/world3.log"; bad "mpirun -np 2 with WORLD_SIZE=3 refused (exit $rc)"; fi
# A start-up failure on one rank once MPI runs ends the job: the other rank waits in the
# start-up's node split, where no watchdog watches yet.
start=$SECONDS
timeout 60 mpirun "${mpiflags[@]}" -np 2 bash -c '[ "$OMPI_COMM_WORLD_RANK" = 1 ] && export ZERO_BOOTSTRAP_TIMEOUT=abc
    exec "$0" errors' "$bin" > "$tmp/onerank.log" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q "zero: rank 1: ZERO_BOOTSTRAP_TIMEOUT=abc is not a number" "$tmp/onerank.log"
then pass "a start-up failure on rank 1 only ends the job (exit $rc after $((SECONDS - start)) s)"
else cat "$tmp/onerank.log"; bad "a start-up failure on rank 1 only ends the job (exit $rc after $((SECONDS - start)) s)"; fi

# One rank sleeps 60 s inside an all-reduce; the watchdog (timeout 1 s) must end the job
# with its message, well before the sleep ends.
start=$(date +%s)
timeout 120 mpirun "${mpiflags[@]}" -np 2 "$bin" timeout > "$tmp/timeout.log" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$elapsed" -lt 45 ] &&
   grep -Eq "^rank [01]: collective all_reduce on 8 bytes timed out after [0-9.]+ s" "$tmp/timeout.log" &&
   ! grep -q "did not fire" "$tmp/timeout.log"; then
    pass "timeout (exit $rc after ${elapsed} s: $(grep -m1 -E 'timed out' "$tmp/timeout.log"))"
else
    cat "$tmp/timeout.log"
    bad "timeout (exit $rc after ${elapsed} s)"
fi

# The same stall while the ranks open a stream's communicators (MPI_Comm_dup and the splits)
start=$SECONDS
timeout 120 mpirun "${mpiflags[@]}" -np 2 "$bin" timeout_open > "$tmp/timeout_open.log" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ $((SECONDS - start)) -lt 45 ] &&
   grep -Eq "^rank [01]: opening a stream's communicators \(MPI_Comm_dup, MPI_Comm_split\) timed out after [0-9.]+ s" \
       "$tmp/timeout_open.log" && ! grep -q "did not fire" "$tmp/timeout_open.log"; then
    pass "timeout opening a channel (exit $rc after $((SECONDS - start)) s)"
else
    cat "$tmp/timeout_open.log"
    bad "timeout opening a channel (exit $rc after $((SECONDS - start)) s)"
fi

# misuse MODE PATTERN: a hook out of order must end the job with a message matching PATTERN,
# and zero_step must not go on
misuse() {
    local mode=$1 pattern=$2 rc
    timeout 60 mpirun "${mpiflags[@]}" -np 2 "$bin" "$mode" > "$tmp/$mode.log" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q "$pattern" "$tmp/$mode.log" &&
       ! grep -q "zero_step accepted" "$tmp/$mode.log"; then
        pass "$mode (exit $rc)"
    else
        cat "$tmp/$mode.log"
        bad "$mode (exit $rc)"
    fi
}
# zero_step with only one unit's gradients ready
misuse misuse "zero: rank [01]: zero_step after 0 complete micro-steps and 1 of 5 units' grads_ready"
# zero_step after a complete micro-step and a backward fetch whose grads_ready never came
misuse misuse_bwd "zero: rank [01]: zero_step after a backward zero_fetch of unit 1 whose zero_grads_ready never came (1 complete"
# zero_step with t 0 after a complete micro-step (t counts optimizer steps from 1)
misuse step_t0 "zero: rank [01]: zero_step with t 0: t is the 1-based optimizer step"
# a reduce-scatter of count x ranks above MPI's int count, refused before MPI sees it
misuse bigcount "zero: rank [01]: reduce_scatter of bucket 7 in the world group (part 0): 1073741824 elements per rank x 2 ranks = 2147483648 exceed MPI's int count"

if [ "$fail" -eq 0 ]; then echo "test_zero_mpi: all passed"; else echo "test_zero_mpi: FAILED"; fi
exit "$fail"
