#!/usr/bin/env bash
# Runs every test program and prints one closing line "N passed, N failed, N skipped".
# Before each program it prints "=== k/N name", N being every program this run will start;
# before the closing line, the slowest programs with their seconds, and the first failure lines
# of each program that failed.
# Order: the cmocka programs (the arguments), one at a time; test_cuda_build.sh and the shell
# tests that must run alone (a line "# run alone: WHY" in the test), one at a time, with their
# output as it comes; the GPU programs, one at a time; then the pool: the emulated programs and
# the other shell tests side by side, TEST_JOBS at a time (default the core count, at most 4:
# most tests use one or two cores and some wait), each one's output shown once it and those
# before it in the pool have ended.
# EMU_DIR (set by make test when the CUDA toolkit is there): the emulated programs' folder;
# EMU_PROGS: which of them (below).
# SHELL_TESTS: the shell tests to run (default every dev/test/*/test_*.sh; "" runs none).
# GPU_PROGS: the GPU programs to run (default those built of the five below; "" runs none).
# cmocka programs report their own counts; shell tests (dev/test/*/test_*.sh) count as one
# test each (exit 0 = pass, exit 77 = skipped, as automake has it). A program that exits 0
# with a line starting with SKIP and no counts of its own counts as one skipped. A run
# that passes and fails nothing (nothing ran, or everything skipped) counts as a failure.
set -u
passed=0
failed=0
skipped=0
failed_names=()
logs=$(mktemp -d)
log=$logs/log
trap 'rm -rf "$logs"' EXIT

if [ -n "${SHELL_TESTS+set}" ]; then read -r -a shell_tests <<< "$SHELL_TESTS"
else
    # the CUDA build's own test first: it builds the CUDA trainers (and sees their compiler
    # warnings), which tests of other folders then run
    shell_tests=(dev/test/cuda/test_cuda_build.sh)
    for sh in dev/test/*/test_*.sh; do [ "$sh" = dev/test/cuda/test_cuda_build.sh ] || shell_tests+=("$sh"); done
fi
# The shell tests that take longest on CI's 2 cores start first in the pool, so that none is
# left running alone at its end (their seconds: the list at the end of a run).
long_first=(dev/test/emu/test_emu_train.sh dev/test/emu/test_emu_asan.sh dev/test/emu/test_emu_seeds.sh
            dev/test/emu/test_emu_train_ranks.sh dev/test/zero/test_zero_pp_loss.sh dev/test/emu/test_bench_vs_llmc.sh
            dev/test/zero/test_zero_offload.sh dev/test/emu/test_emu_mutate.sh dev/test/zero/test_zero_pp.sh
            dev/test/cli/test_llmc_flags.sh dev/test/zero/test_zero_mpi.sh dev/test/emu/test_emu_slow.sh)
alone_tests=() pool_tests=()
for sh in "${shell_tests[@]}"; do
    [ -e "$sh" ] || continue
    if [ "$sh" = dev/test/cuda/test_cuda_build.sh ] || grep -q '^# run alone:' "$sh"; then alone_tests+=("$sh")
    else pool_tests+=("$sh"); fi
done
ordered=()
for sh in "${long_first[@]}"; do [[ " ${pool_tests[*]} " == *" $sh "* ]] && ordered+=("$sh"); done
for sh in "${pool_tests[@]}"; do [[ " ${long_first[*]} " == *" $sh "* ]] || ordered+=("$sh"); done
pool_tests=("${ordered[@]}")
gpu_progs=()
# GPU programs (built by test_cuda_build.sh) print "SKIP: reason" without a GPU.
for gpu in ${GPU_PROGS-./test_gpt2_zero build/gpu_attention_cudnn build/gpu_zero_toy build/gpu_zero_quant build/gpu_backend_ops}; do
    [ -x "$gpu" ] && gpu_progs+=("$gpu")
done
emu_progs=()
# The same CUDA sources on the emulated device (make emu; dev/cuda_emu/README.md), and the
# emulator's own tests: they run wherever the CUDA toolkit is, GPU or not.
# They run in the pool (the emulator runs a kernel on one core), the longest first, before the
# shell tests there; test_gpt2_zero runs as its parts.
# EMU_PROGS: another list, comma-separated.
if [ -n "${EMU_DIR:-}" ] && [ -n "${EMU_PROGS+set}" ]; then
    IFS=, read -r -a listed <<< "$EMU_PROGS"
    for entry in "${listed[@]}"; do [ -n "${entry// /}" ] && emu_progs+=("$entry"); done
elif [ -n "${EMU_DIR:-}" ]; then
    emu_progs=("test_gpt2_zero model" "test_gpt2_zero checkpoints" "test_gpt2_zero tiles" gpu_backend_ops
               "gpu_zero_toy all" gpu_zero_quant gpu_attention_cudnn "test_gpt2_zero kernels" "test_gpt2_zero ref"
               emu_selftest test_cublaslt_emu test_cudnn_emu)
fi
total=$(($# + ${#alone_tests[@]} + ${#gpu_progs[@]} + ${#emu_progs[@]} + ${#pool_tests[@]}))
k=0
laps=() cur= start=0 cpu0=0   # each program's seconds, for the slowest-first list at the end
# cpu_s: sets cpu to the CPU seconds (user + system) of the calling shell's ended children so
# far (bash's times; in a background subshell, that subshell's own children)
cpu_s() {
    local f=$logs/times.$BASHPID
    times > "$f"
    cpu=$(awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); n += a[1] * 60 + a[2] } printf "%.0f", n }' "$f")
}
# a program's line in the list: wall seconds, then its processes' CPU seconds (on the CI
# machine's 2 cores, a program using under a core's worth leaves one idle)
lap() { [ -n "$cur" ] && { cpu_s; laps+=("$((SECONDS - start)) (cpu $((cpu - cpu0))) $cur"); }; cur=; }
# digest NAME [FILE]: the first failure lines of FILE (default $log), NAME's output, kept for
# the end of the run (a long run's failures are otherwise far above its closing lines)
digest() {
    grep -m 6 -E '(^|[^A-Za-z_])FAIL|\[  FAILED  \]|ERROR: AddressSanitizer|runtime error' "${2:-$log}" | cut -c1-240 |
        sed "s|^|  $1: |" >> "$logs/digest"
}
next() { lap; k=$((k + 1)); echo "=== $k/$total $*"; cpu_s; cur="$*" start=$SECONDS cpu0=$cpu; }

# A cmocka program: its "[  PASSED  ] N test(s)", "[  FAILED  ] N test(s)" and "[  SKIPPED ] N
# test(s)" lines count.
for bin in "$@"; do
    next "$bin"
    "$bin" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
    s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
    skipped=$((skipped + s))
    if [ "$rc" -eq 0 ] && [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && grep -q '^SKIP' "$log"; then
        skipped=$((skipped + 1)); continue
    fi
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi   # crashed before reporting
    passed=$((passed + p)); failed=$((failed + f))
    [ "$f" -gt 0 ] && { failed_names+=("$bin"); digest "$bin"; }
done
# count_sh RC NAME [LOG]: a shell test's exit status counted (77: skipped)
count_sh() {
    if [ "$1" -eq 77 ]; then skipped=$((skipped + 1))
    elif [ "$1" -eq 0 ]; then passed=$((passed + 1))
    else failed=$((failed + 1)); failed_names+=("$2"); digest "$2" "${3:-$log}"; fi
}
for sh in "${alone_tests[@]}"; do
    next "$sh"
    # its output as it comes, and in a log of its own (tee): the test runs in the foreground
    # (Ctrl-C reaches it); a process it leaves behind holding the output keeps only tee alive,
    # for which the runner waits 2 s at most
    shlog=$logs/sh$k
    exec {out}> >(tee "$shlog")
    teepid=$!
    bash "$sh" >&$out 2>&1 {out}>&-
    rc=$?
    exec {out}>&-
    for _ in $(seq 40); do kill -0 "$teepid" 2> /dev/null || break; sleep 0.05; done
    count_sh "$rc" "$sh" "$shlog"
done
# A program that prints its own "N passed, N failed" (or "SKIP: reason" and exits 0): its counts
# join ours. A SKIP line beside counts is a case the program skipped: its counts still hold.
count_log() {   # count_log RC NAME: the counts of $log, the output of NAME that exited RC
    local rc=$1 counts p f
    counts=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    if [ "$rc" -eq 0 ] && [ -z "$counts" ] && grep -q '^SKIP' "$log"; then skipped=$((skipped + 1)); return; fi
    p=$(echo "$counts" | awk '{print $1+0}'); f=$(echo "$counts" | awk '{print $3+0}')
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    if [ -z "$counts" ] && [ "$rc" -eq 0 ]; then f=1; echo "($2 printed no counts)"; fi
    passed=$((passed + p)); failed=$((failed + f))
    [ "$f" -gt 0 ] && { failed_names+=("$2"); digest "$2"; }
}
run_counted() {
    next "$*"
    "$@" 2>&1 | tee "$log"
    count_log "${PIPESTATUS[0]}" "$*"
}
for gpu in "${gpu_progs[@]}"; do run_counted "$gpu"; done
# The pool: entry i is "emu PROG ARGS..." or "sh TEST"; each runs in a process group of its
# own (setsid), so that an interrupted run ends them all.
pool=()
for e in "${emu_progs[@]}"; do pool+=("emu $e"); done
for sh in "${pool_tests[@]}"; do pool+=("sh $sh"); done
if [ ${#pool[@]} -gt 0 ]; then
    jobs_max=${TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
    case $jobs_max in ''|*[!0-9]*|0) echo "TEST_JOBS=$jobs_max is not a count of programs: 1 at a time"; jobs_max=1 ;; esac
    [ -n "${TEST_JOBS:-}" ] || [ "$jobs_max" -le 4 ] || jobs_max=4
    lap   # the program before ends here, not when these do
    echo "(the ${#pool[@]} programs of the pool run $jobs_max at a time, from $SECONDS s into this run: each one's output shows once it and those before it have ended)"
    trap 'for g in "$logs"/pool*.pid; do [ -e "$g" ] && kill -TERM -- "-$(cat "$g")" 2> /dev/null; done; exit 130' INT TERM
    shown=0
    show_ended() {   # prints and counts the programs that have ended, in the pool's order
        local kind name
        while [ "$shown" -lt ${#pool[@]} ]; do
            read -r kind name <<< "${pool[$shown]}"
            set -- $name
            if [ "$kind" = emu ] && [ ! -x "$EMU_DIR/$1" ]; then
                k=$((k + 1)); echo "=== $k/$total $EMU_DIR/$name"
                echo "$EMU_DIR/$1: not built"; failed=$((failed + 1)); failed_names+=("$EMU_DIR/$1")
                shown=$((shown + 1)); continue
            fi
            [ -e "$logs/pool$shown.rc" ] || return 0
            [ "$kind" = emu ] && name="$EMU_DIR/$name"
            k=$((k + 1)); echo "=== $k/$total $name"
            cp "$logs/pool$shown" "$log"
            cat "$log"
            read -r rc secs cpu < "$logs/pool$shown.rc"
            laps+=("$secs (cpu $cpu) $name")
            if [ "$kind" = emu ]; then count_log "$rc" "$name"; else count_sh "$rc" "$name"; fi
            shown=$((shown + 1))
        done
    }
    for i in "${!pool[@]}"; do
        read -r kind name <<< "${pool[$i]}"
        set -- $name
        if [ "$kind" = emu ]; then
            [ -x "$EMU_DIR/$1" ] || continue
            # OMP_WAIT_POLICY: OpenMP's idle threads do not spin (dev/cuda_emu/README.md, Cost)
            set -- env CUDA_EMU_QUIET=1 OMP_WAIT_POLICY=passive "$EMU_DIR/$1" "${@:2}"
        else set -- bash "$name"; fi
        while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; show_ended; done
        { t0=$SECONDS; cpu_s; c0=$cpu
          setsid "$@" > "$logs/pool$i" 2>&1 < /dev/null &
          echo $! > "$logs/pool$i.pid"
          wait $!; rc=$?; cpu_s; rm -f "$logs/pool$i.pid"
          echo "$rc $((SECONDS - t0)) $((cpu - c0))" > "$logs/pool$i.rt"
          mv "$logs/pool$i.rt" "$logs/pool$i.rc"; } &
    done
    while [ -n "$(jobs -rp)" ]; do wait -n; show_ended; done
    wait
    show_ended
    echo "(the pool ended $SECONDS s into this run)"
    trap - INT TERM
fi
lap
if [ ${#laps[@]} -gt 0 ]; then
    # the 30 slowest and the sum of all: where a long run's time goes
    echo "the slowest programs (seconds, and the CPU seconds of their processes):"
    printf '%s\n' "${laps[@]}" | sort -rn | head -n 30 | sed 's/^/  /'
    printf '%s\n' "${laps[@]}" | awk '{s += $1; c += $3} END {print "  (" s " s in all programs, those of the pool side by side counted each; cpu " c " s)"}'
fi
[ "$passed" -eq 0 ] && [ "$failed" -eq 0 ] && { echo "no test passed or failed"; failed=1; }
if [ ${#failed_names[@]} -gt 0 ]; then
    [ -s "$logs/digest" ] && { echo "the first failure lines of each program that failed:"; cat "$logs/digest"; }
    echo "failed: ${failed_names[*]}"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
