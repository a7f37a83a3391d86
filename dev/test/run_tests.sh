#!/usr/bin/env bash
# Runs every test program and prints one closing line "N passed, N failed, N skipped".
# Before each program it prints "=== k/N name", N being every program this run will start;
# before the closing line, the slowest programs with their seconds, and the first failure lines
# of each program that failed.
# EMU_DIR (set by make test when the CUDA toolkit is there): the emulated programs' folder;
# EMU_JOBS: how many of them run at once (default the core count); EMU_PROGS: which (below).
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
gpu_progs=()
# GPU programs (built by test_cuda_build.sh) print "SKIP: reason" without a GPU.
for gpu in ${GPU_PROGS-./test_gpt2_zero build/gpu_attention_cudnn build/gpu_zero_toy build/gpu_zero_quant build/gpu_backend_ops}; do
    [ -x "$gpu" ] && gpu_progs+=("$gpu")
done
emu_progs=()
# The same CUDA sources on the emulated device (make emu; dev/cuda_emu/README.md), and the
# emulator's own tests: they run wherever the CUDA toolkit is, GPU or not.
# They run side by side (EMU_JOBS at a time, default the core count: the emulator runs a
# kernel on one core), the longest first; each program's output shows once it has ended.
# test_gpt2_zero runs as its parts.
# EMU_PROGS: another list, comma-separated.
if [ -n "${EMU_DIR:-}" ] && [ -n "${EMU_PROGS+set}" ]; then
    IFS=, read -r -a listed <<< "$EMU_PROGS"
    for entry in "${listed[@]}"; do [ -n "${entry// /}" ] && emu_progs+=("$entry"); done
elif [ -n "${EMU_DIR:-}" ]; then
    emu_progs=("test_gpt2_zero model" "test_gpt2_zero checkpoints" "test_gpt2_zero tiles" gpu_backend_ops
               "gpu_zero_toy all" gpu_zero_quant gpu_attention_cudnn "test_gpt2_zero kernels" "test_gpt2_zero ref"
               emu_selftest test_cublaslt_emu test_cudnn_emu)
fi
n_sh=0
for sh in "${shell_tests[@]}"; do [ -e "$sh" ] && n_sh=$((n_sh + 1)); done
total=$(($# + n_sh + ${#gpu_progs[@]} + ${#emu_progs[@]}))
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
for sh in "${shell_tests[@]}"; do
    [ -e "$sh" ] || continue
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
    if [ "$rc" -eq 77 ]; then skipped=$((skipped + 1))
    elif [ "$rc" -eq 0 ]; then passed=$((passed + 1))
    else failed=$((failed + 1)); failed_names+=("$sh"); digest "$sh" "$shlog"; fi
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
if [ ${#emu_progs[@]} -gt 0 ]; then
    # OMP_WAIT_POLICY: OpenMP's idle threads do not spin (dev/cuda_emu/README.md, Cost)
    export LLMC_CUDNN_DETERMINISTIC=1 CUDA_EMU_QUIET=1 OMP_WAIT_POLICY=passive
    jobs_max=${EMU_JOBS:-$(nproc 2>/dev/null || echo 1)}
    case $jobs_max in ''|*[!0-9]*|0) echo "EMU_JOBS=$jobs_max is not a count of programs: 1 at a time"; jobs_max=1 ;; esac
    lap   # the program before ends here, not when these do
    echo "(the ${#emu_progs[@]} emulated programs run $jobs_max at a time: each one's output shows once it and those before it have ended)"
    shown=0
    show_ended() {   # prints and counts the programs that have ended, in the list's order
        while [ "$shown" -lt ${#emu_progs[@]} ]; do
            set -- ${emu_progs[$shown]}
            [ ! -x "$EMU_DIR/$1" ] || [ -e "$logs/emu$shown.rc" ] || return 0
            k=$((k + 1)); echo "=== $k/$total $EMU_DIR/$*"
            if [ ! -x "$EMU_DIR/$1" ]; then
                echo "$EMU_DIR/$1: not built"; failed=$((failed + 1)); failed_names+=("$EMU_DIR/$1")
            else
                cp "$logs/emu$shown" "$log"
                cat "$log"
                read -r rc secs cpu < "$logs/emu$shown.rc"
                laps+=("$secs (cpu $cpu) $EMU_DIR/$*")
                count_log "$rc" "$EMU_DIR/$*"
            fi
            shown=$((shown + 1))
        done
    }
    for i in "${!emu_progs[@]}"; do
        set -- ${emu_progs[$i]}
        [ -x "$EMU_DIR/$1" ] || continue
        while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; show_ended; done
        { t0=$SECONDS; cpu_s; c0=$cpu; "$EMU_DIR/$1" "${@:2}" > "$logs/emu$i" 2>&1; rc=$?; cpu_s
          echo "$rc $((SECONDS - t0)) $((cpu - c0))" > "$logs/emu$i.rt"
          mv "$logs/emu$i.rt" "$logs/emu$i.rc"; } &
    done
    while [ -n "$(jobs -rp)" ]; do wait -n; show_ended; done
    wait
    show_ended
fi
lap
if [ ${#laps[@]} -gt 0 ]; then
    # the 30 slowest and the sum of all: where a long run's time goes
    echo "the slowest programs (seconds, and the CPU seconds of their processes):"
    printf '%s\n' "${laps[@]}" | sort -rn | head -n 30 | sed 's/^/  /'
    printf '%s\n' "${laps[@]}" | awk '{s += $1; c += $3} END {print "  (" s " s in all programs, the emulated ones side by side counted each; cpu " c " s)"}'
fi
[ "$passed" -eq 0 ] && [ "$failed" -eq 0 ] && { echo "no test passed or failed"; failed=1; }
if [ ${#failed_names[@]} -gt 0 ]; then
    [ -s "$logs/digest" ] && { echo "the first failure lines of each program that failed:"; cat "$logs/digest"; }
    echo "failed: ${failed_names[*]}"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
