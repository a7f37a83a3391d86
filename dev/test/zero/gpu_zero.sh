#!/usr/bin/env bash
# gpu_zero.sh: for a machine with a GPU. Builds zero/'s CUDA backend (zero/cuda/) with dev/test/zero/gpu_zero_toy.c and
# dev/test/zero/test_backend_ops.c and runs them: every backend kernel against its C reference, the NCCL collectives (also in the ZeRO++ groups, at every node size and hpZ size
# that divides the world: 4 ranks include nodes of 2 with hpZ 2), and mpi_zero_toy.c's
# stage 0-3 checks at 1, 2 and 4 ranks sharing one GPU; then the refusals and the two
# deaths (a collective stalled past the watchdog's timeout, a hang in the communicators'
# teardown, a hook called out of order), with
# the watchdog's non-death (a collective queued behind slow work) and its full ring (a
# stalled collective among 256 is still watched).
# Ranks start under mpirun when there is one, else as processes with RANK / WORLD_SIZE /
# LOCAL_RANK and ZERO_BOOTSTRAP_FILE or ZERO_BOOTSTRAP_TCP (one launch without MPI is
# always run). Each rank gets its own NCCL_HOSTID with NCCL_SOCKET_IFNAME=lo (NCCL < 2.30)
# and NCCL_MULTI_RANK_GPU_ENABLE=1 (NCCL >= 2.30). Without MPI headers, comm_mpi.c builds
# against zero/comm/mpi_stub.
# Run from anywhere; prints PASS/FAIL per case; exit 0 only if all pass, or after
# "SKIP: no CUDA device". Arguments pick cases (default all of them): kernels np1 np2 np4
# env errors bootstrap deaths. Knobs: NVCC, NCCL_HOME, CUDA_ARCHS, LIMIT (seconds per
# launch, default 400), KEEP=1 (keep the build dir and logs), PREBUILT=DIR (run DIR's
# gpu_zero_toy and gpu_backend_ops, as dev/gpu/bundle.sh built them, and build nothing).
set -u
cd "$(dirname "$0")/../../.."
cases=" ${*:-kernels np1 np2 np4 env errors bootstrap deaths} "
want() { [[ "$cases" == *" $1 "* ]]; }

fail=0
pass() { echo "PASS: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

tmp=$(mktemp -d)
if [ "${KEEP:-0}" = 1 ]; then echo "build and logs in $tmp"; else trap 'rm -rf "$tmp"' EXIT; fi

if [ -n "${PREBUILT:-}" ]; then
    bin=$PREBUILT/gpu_zero_toy ops=$PREBUILT/gpu_backend_ops
    [ -x "$bin" ] && [ -x "$ops" ] || { echo "FAIL: PREBUILT=$PREBUILT has no gpu_zero_toy and gpu_backend_ops"; exit 1; }
    have_mpirun=0   # ranks under mpirun only when the build has MPI (not the stub)
    command -v mpirun > /dev/null && ldd "$bin" 2> /dev/null | grep -q libmpi && have_mpirun=1
    echo "prebuilt: $bin and $ops"
else
    nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
    [ -x "$nvcc" ] || { echo "FAIL: nvcc not found (set NVCC)"; exit 1; }
    cuda_home=$(dirname "$(dirname "$(readlink -f "$nvcc")")")

    # NCCL: header and library from the same installation
    find_nccl() {
        local cands=() d l lib py
        [ -n "${NCCL_HOME:-}" ] && cands+=("$NCCL_HOME")
        cands+=("$cuda_home" /usr/local/cuda /usr /usr/local)
        for py in python3 /opt/*/.venv/bin/python3; do
            d=$("$py" -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null) && cands+=("$d")
        done
        cands+=(/usr/local/lib/python3*/*-packages/nvidia/nccl /usr/lib/python3/dist-packages/nvidia/nccl)
        for d in "${cands[@]}"; do
            [ -f "$d/include/nccl.h" ] || continue
            for l in "$d/lib" "$d/lib64" "$d/lib/x86_64-linux-gnu" /usr/lib/x86_64-linux-gnu; do
                lib=$(ls "$l"/libnccl.so "$l"/libnccl.so.2 2>/dev/null | head -n 1)
                [ -n "$lib" ] && { echo "$d/include|$l|$lib"; return 0; }
            done
        done
        return 1
    }
    nccl=$(find_nccl) || { echo "FAIL: NCCL (nccl.h + libnccl.so) not found (set NCCL_HOME)"; exit 1; }
    IFS='|' read -r nccl_inc nccl_lib nccl_so <<< "$nccl"

    # MPI for comm_mpi.c: the real one when there is one, else the stub
    mpi_link=()
    if command -v mpicc > /dev/null; then
        cc=mpicc
        link_flags=$(mpicc --showme:link 2>/dev/null || mpicc -link_info 2>/dev/null | cut -d' ' -f2-)
        for tok in $link_flags; do
            case $tok in
                -L*|-l*) mpi_link+=("$tok") ;;
                -Wl,*) mpi_link+=(-Xlinker "${tok#-Wl,}") ;;
                -pthread) mpi_link+=(-lpthread) ;;
                *) mpi_link+=(-Xcompiler "$tok") ;;
            esac
        done
        mpi_inc=()
    else
        cc=${CC:-gcc}
        mpi_inc=(-Izero/comm/mpi_stub)
        echo "note: no mpicc: building comm_mpi.c against zero/comm/mpi_stub (launches without MPI only)"
    fi
    have_mpirun=0
    command -v mpirun > /dev/null && [ "$cc" = mpicc ] && have_mpirun=1

    echo "build: $nvcc, NCCL from $nccl_inc and $nccl_so, C compiler $cc"
    cflags=(-std=c11 -D_GNU_SOURCE -O2 -fopenmp -ffp-contract=off -Wall -Wextra -Werror "${mpi_inc[@]}"
            -I"$cuda_home/include" -I"$nccl_inc")
    # no --use_fast_math / -ftz=true: the kernels must keep subnormals to match the host's bits
    archs=${CUDA_ARCHS:--gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90}
    nvflags=(-O3 -std=c++17 $archs -I. -I"$nccl_inc" -Xcompiler -Wall,-Wextra)
    # zero/io/nvme.c uses liburing when its header is there (as the Makefile decides)
    uring=$(printf '#include <liburing.h>\n' | $cc -E -x c - > /dev/null 2>&1 && echo -luring)
    # the checkpoint files that build here (their headers present) need their libraries too
    ckpt_libs=$(printf '#include <zlib.h>\n' | $cc -E -x c - > /dev/null 2>&1 && echo -lz)
    printf '#include <cjson/cJSON.h>\n' | $cc -E -x c - > /dev/null 2>&1 && ckpt_libs="$ckpt_libs -lcjson"
    objs=()
    build_ok=1
    source dev/test/zero/zero_sources.sh
    for f in "${ZERO_HOST_SRC[@]}" zero/cuda/*.c; do
        o="$tmp/$(basename "$f" .c).o"
        if $cc "${cflags[@]}" -c "$f" -o "$o" 2> "$tmp/cc.log"; then
            objs+=("$o")
        else
            case $(basename "$f") in
                # zckpt.c too: zero/state.c names each run with its run id (cJSON's header needed)
                arena.c|backend_host.c|bootstrap_tcp.c|comm_mpi.c|gather.c|partition.c|reduce.c|state.c|watchdog.c|zckpt.c|zero.c)
                    cat "$tmp/cc.log"; build_ok=0 ;;
                # the report and consolidation files need cJSON and zlib headers; the test does not use them
                *) echo "note: skipping $f here: $(grep -m1 -E 'error' "$tmp/cc.log")" ;;
            esac
        fi
    done
    [ ${#mpi_inc[@]} -gt 0 ] && {
        $cc -std=c11 -O2 -Wall -Wextra -Werror -c zero/comm/mpi_stub/mpi_stub.c -o "$tmp/mpi_stub.o" || build_ok=0
        objs+=("$tmp/mpi_stub.o")
    }
    $cc "${cflags[@]}" -c dev/test/zero/gpu_zero_toy.c -o "$tmp/gpu_zero_toy.o" || build_ok=0
    $cc "${cflags[@]}" -DZERO_TEST_CUDA -c dev/test/zero/test_backend_ops.c -o "$tmp/gpu_backend_ops.o" || build_ok=0
    ar rcs "$tmp/libzero.a" "${objs[@]}" || build_ok=0
    cuda_objs=()
    for f in zero/cuda/*.cu; do
        cuda_objs+=("$tmp/$(basename "$f" .cu).cu.o")
        "$nvcc" "${nvflags[@]}" -c "$f" -o "$tmp/$(basename "$f" .cu).cu.o" 2> "$tmp/nvcc.log" || { cat "$tmp/nvcc.log"; build_ok=0; }
        if grep -i "warning" "$tmp/nvcc.log" | grep -v -i "deprecated" > /dev/null; then cat "$tmp/nvcc.log"; bad "warnings in $f"; fi
    done
    bin="$tmp/gpu_zero_toy" ops="$tmp/gpu_backend_ops"
    for t in gpu_zero_toy gpu_backend_ops; do
        [ $build_ok = 1 ] && "$nvcc" -o "$tmp/$t" "$tmp/$t.o" "${cuda_objs[@]}" "$tmp/libzero.a" \
            "$nccl_so" -Xlinker -rpath,"$nccl_lib" "${mpi_link[@]}" $uring $ckpt_libs -lcrypto -lgomp -lpthread -lm || build_ok=0
    done
    [ $build_ok = 1 ] || { echo "FAIL: build"; exit 1; }
    pass "build (warning-free)"
fi

export NCCL_SOCKET_IFNAME=lo NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_IB_DISABLE=1 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export OMP_NUM_THREADS=2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nolaunch=(-u OMPI_COMM_WORLD_SIZE -u PMI_SIZE -u PMIX_RANK -u SLURM_STEP_NUM_TASKS)
limit=${LIMIT:-400}

# one process, no launcher: the collectives, and the kernels when asked for (with the 1 GiB norm)
for k in collectives kernels; do
    [ $k = kernels ] && ! want kernels && continue
    cmd=("$bin" collectives); [ $k = kernels ] && cmd=("$ops")
    if ! env "${nolaunch[@]}" timeout "$limit" "${cmd[@]}" > "$tmp/$k.log" 2>&1; then
        grep -v ": ok$" "$tmp/$k.log" | tail -n 60; bad "$k, 1 rank"
    elif grep -q "^SKIP: no CUDA device" "$tmp/$k.log"; then
        echo "SKIP: no CUDA device"; exit 0
    else
        head -n 1 "$tmp/$k.log"; pass "$k, 1 rank ($(grep -o '[0-9]* passed, [0-9]* failed' "$tmp/$k.log"))"
    fi
done

# launch NP BOOT LOG MODE: BOOT is mpi, file or tcp
launch() {
    local np=$1 boot=$2 log=$3 mode=$4 r p rc=0 e pids=() bootenv secret
    rm -f "$log" "$log".*
    if [ "$boot" = mpi ]; then
        printf '#!/bin/sh\nNCCL_HOSTID="zero-gpu-test-${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}"\nexport NCCL_HOSTID\nexec "$@"\n' > "$tmp/rank.sh"
        chmod +x "$tmp/rank.sh"
        timeout "$limit" mpirun --oversubscribe -np "$np" "$tmp/rank.sh" "$bin" "$mode" > "$log" 2>&1
        return $?
    fi
    if [ "$boot" = file ]; then bootenv="ZERO_BOOTSTRAP_FILE=$tmp/boot.$np.$RANDOM"
    else bootenv="ZERO_BOOTSTRAP_TCP=127.0.0.1:$((20000 + RANDOM % 20000))"; fi
    secret=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')   # the job's bootstrap secret (zero/comm/bootstrap_tcp.c)
    for ((r = 0; r < np; r++)); do
        env "${nolaunch[@]}" RANK=$r WORLD_SIZE=$np LOCAL_RANK=$r LOCAL_WORLD_SIZE=$np NCCL_HOSTID=zero-gpu-test-$r "$bootenv" \
            ZERO_BOOTSTRAP_SECRET="$secret" \
            timeout "$limit" "$bin" "$mode" > "$log.$r" 2>&1 &
        pids+=($!)
    done
    # the first rank that fails ends the others, as mpirun does (a rank whose peer died would
    # otherwise wait for it until its own watchdog or the limit)
    while :; do
        wait -n "${pids[@]}" 2> /dev/null; e=$?
        [ $e -eq 127 ] && break   # none left
        if [ $e -ne 0 ] && [ $rc -eq 0 ]; then rc=$e; kill "${pids[@]}" 2> /dev/null; fi
    done
    cat "$log".* > "$log"
    return $rc
}

# run NAME NP BOOT MODE: must exit 0 with no failed check
run() {
    local name=$1 np=$2 boot=$3 mode=$4 log="$tmp/$1.log"
    if launch "$np" "$boot" "$log" "$mode" && grep -q "^[0-9]* passed, 0 failed" "$log"; then
        pass "$name ($(grep -o '[0-9]* passed, [0-9]* failed' "$log" | tail -n 1))"
    else
        tail -n 80 "$log"
        bad "$name"
    fi
}

multi=file; [ $have_mpirun = 1 ] && multi=mpi
want np1 && run "all, 1 rank" 1 file all
want np2 && run "all, 2 ranks ($multi)" 2 "$multi" all
if want np4; then
    m4=$multi; [ $have_mpirun = 1 ] || m4=tcp
    run "all, 4 ranks ($m4)" 4 "$m4" all
    grep -h "stage\|reference" "$tmp/all, 4 ranks ($m4).log" | sed 's/^/    /'
fi
if want env; then
    run "collectives, 2 ranks without MPI (TCP bootstrap)" 2 tcp collectives
    run "collectives, 3 ranks without MPI (file bootstrap)" 3 file collectives
fi
want errors && run "errors, 2 ranks" 2 "$multi" errors

# the bootstrap alone (no GPU involved)
want bootstrap && for boot in file tcp; do
    if launch 3 "$boot" "$tmp/boot-$boot.log" bootstrap && [ "$(grep -c ': ok$' "$tmp/boot-$boot.log")" = 3 ]; then
        pass "bootstrap over $boot, 3 ranks"
    else
        cat "$tmp/boot-$boot.log"; bad "bootstrap over $boot"
    fi
done

if ! want deaths; then
    if [ "$fail" -eq 0 ]; then echo "gpu_zero: all passed"; else echo "gpu_zero: FAILED"; fi
    exit "$fail"
fi

# death MODE SECONDS PATTERN: gpu_zero_toy MODE at 2 ranks must end the job (not by the
# launch's limit) within SECONDS with a line matching PATTERN, and no rank may print that it
# went on ("did not fire") or a failed check.
death() {
    local mode=$1 secs=$2 pattern=$3 start rc elapsed
    start=$(date +%s)
    launch 2 "$multi" "$tmp/$mode.log" "$mode"
    rc=$?
    elapsed=$(( $(date +%s) - start ))
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$elapsed" -lt "$secs" ] && grep -Eq "$pattern" "$tmp/$mode.log" &&
       ! grep -q -e "did not fire" -e "FAIL" "$tmp/$mode.log"; then
        pass "$mode (exit $rc after ${elapsed} s: $(grep -E 'timed out' "$tmp/$mode.log" | tr '\n' ' '))"
    else
        cat "$tmp/$mode.log"; bad "$mode (exit $rc after ${elapsed} s)"
    fi
}

# One rank sleeps 60 s inside an all-reduce; the watchdog (timeout 1 s) must end the job
# with its message: the stalled rank from the host side, the other from the GPU side.
death timeout 45 "^rank [01]: collective all_reduce on 8 bytes timed out after [0-9.]+ s"

# The last rank hangs 60 s in the NCCL communicators' teardown (as behind a peer that died):
# the watchdog (timeout 1 s) still watches there and ends the job, naming it.
death teardown 45 "^rank 1: releasing the NCCL communicators timed out after [0-9.]+ s"

# An all-gather queued behind 4 s of earlier work under a 2 s watchdog is not stuck:
# its clock starts when that work is done, and it completes.
launch 2 "$multi" "$tmp/queued.log" queued
rc=$?
if [ "$rc" -eq 0 ] && ! grep -q "timed out" "$tmp/queued.log"; then
    pass "queued (a collective behind 4 s of work, 2 s timeout)"
else
    cat "$tmp/queued.log"; bad "queued (exit $rc)"
fi

# The watchdog's ring of 256 collectives filled twice behind an unfinished one (40 s of work
# ahead), with one more unfinished in between (behind a gate) that only the last rank joins:
# compaction makes room for it and keeps it, so it ends the job within seconds of the gate
# opening (unwatched, the other rank's summary times out after its 60 s sleep).
death ring 40 "^rank 1: collective all_gather on [0-9]+ bytes timed out after [0-9.]+ s \\(the all-gather only the last rank joins"

# zero_step with only one unit's gradients ready must stop with a message naming it.
launch 2 "$multi" "$tmp/misuse.log" misuse
rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] &&
   grep -q "zero: rank [01]: zero_step after 0 complete micro-steps and 1 of 5 units' grads_ready" "$tmp/misuse.log" &&
   ! grep -q "accepted an incomplete" "$tmp/misuse.log"; then
    pass "misuse (exit $rc)"
else
    cat "$tmp/misuse.log"; bad "misuse (exit $rc)"
fi

if [ "$fail" -eq 0 ]; then echo "gpu_zero: all passed"; else echo "gpu_zero: FAILED"; fi
exit "$fail"
