#!/usr/bin/env bash
# The emulated NCCL across processes (dev/cuda_emu/nccl.cpp), ranks started by
# scripts/launch_ranks.sh with NO_MPI=1:
#  1. test_nccl_emu (dev/cuda_emu/test/test_nccl_emu.cpp) at 2 and 4 ranks, and at 2 with
#     random delays before queued stream work (CUDA_EMU_JITTER): all-gathers, rings and
#     all-to-alls of grouped sends and receives, splits, and broken callers (different
#     sizes, a peer that never comes, ncclCommAbort).
#  2. refusals of the set-up: a rank joining with another nranks (every rank refused, at
#     once), a rank whose peer never starts (refused after CUDA_EMU_NCCL_TIMEOUT, naming it),
#     and ranks that disagree on LOCAL_WORLD_SIZE (refused by zero's set-up, before the split).
#  3. gpu_zero_toy (zero/'s CUDA backend against the host backend and the unsharded toy) at 2
#     and 4 ranks: collectives, the ZeRO++ groups, training at stages 0-3 against the
#     unsharded reference, the configuration errors, and a misuse that must end the job with
#     its message. (Its kernels do not depend on the ranks: run_tests.sh runs them at 1 rank.)
#     Its watchdog death: a rank stalled past the timeout ends the job, and no rank goes on
#     from the collective that the watchdog's ncclCommAbort ended; with its ring of 256
#     collectives full around unfinished ones, a stalled one among them is still watched.
#  4. nothing is left in /dev/shm.
# run alone: it counts every /dev/shm/cuda_emu_nccl_* (another emulated NCCL job's would
# count), and its watchdogs' timeouts are seconds
set -u
cd "$(dirname "$0")/../../.."
source dev/test/emu/emu_common.sh
need_emu test_nccl_emu gpu_zero_toy
export CUDA_EMU_QUIET=1 OMP_NUM_THREADS=1 NO_MPI=1
shm_before=$(ls /dev/shm | grep -c '^cuda_emu_nccl_')

# ranks_ok LOG NP: every rank printed "rank R: N passed, 0 failed"
ranks_ok() {
    local r
    for r in $(seq 0 $(($2 - 1))); do grep -Eq "^rank $r: [0-9]+ passed, 0 failed" "$1" || return 1; done
}
counts() { grep -Eo '^rank [0-9]+: [0-9]+ passed' "$1" | awk '{s += $3} END {print s + 0}'; }

# 1. the cases
for v in "2" "4" "2 3"; do
    set -- $v
    np=$1 jitter=${2:-}
    log=$tmp/cases_$np$jitter.log
    start=$(date +%s.%N)
    CUDA_EMU_JITTER=${jitter:-0} timeout 300 scripts/launch_ranks.sh "$np" "$EMU/test_nccl_emu" > "$log" 2>&1
    rc=$?
    secs=$(echo "$(date +%s.%N) - $start" | bc | cut -c1-4)
    what="test_nccl_emu at $np ranks${jitter:+ (CUDA_EMU_JITTER=$jitter)}"
    if [ "$rc" -eq 0 ] && ranks_ok "$log" "$np"; then ok "$what: $(counts "$log") checks over all ranks (${secs} s)"
    else bad "$what (exit $rc)"; grep -v '^cuda_emu: NCCL' "$log" | tail -n 20; fi
done

# 2. refusals of the set-up
log=$tmp/mismatch.log
timeout 120 scripts/launch_ranks.sh 2 "$EMU/test_nccl_emu" mismatch > "$log" 2>&1
rc=$?
# refused, not timed out: each rank's ncclCommInitRank returned well within its 60 s timeout
quick=$(awk '/ncclCommInitRank\(nranks [0-9]+\) returned/ { for (i = 1; i < NF; i++) if ($i == "after") n += $(i + 1) < 30 }
             END { print n + 0 }' "$log")
if [ "$rc" -eq 0 ] && ranks_ok "$log" 2 && [ "$quick" -eq 2 ] && grep -q "joined with nranks 3" "$log"; then
    ok "a rank joining with nranks 3 of a 2-rank id: both ranks refused at once ($(grep -m1 'joined with nranks' "$log" | sed 's/.*: //'))"
else bad "nranks mismatch (exit $rc)"; cat "$log"; fi
log=$tmp/alone.log
RANK=0 WORLD_SIZE=2 ZERO_BOOTSTRAP_FILE=$tmp/alone_id timeout 60 "$EMU/test_nccl_emu" alone > "$log" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && ranks_ok "$log" 1 && grep -q "waited 2 s to join for rank(s) 1" "$log"; then
    ok "a rank whose peer never starts: refused after CUDA_EMU_NCCL_TIMEOUT naming rank 1"
else bad "a missing peer at ncclCommInitRank (exit $rc)"; cat "$log"; fi

# ranks that disagree on LOCAL_WORLD_SIZE (ranks 0-1 say 2, ranks 2-3 say 4) split into
# nodes of different sizes and hang in the first collective: zero's NCCL set-up refuses
# them at once, before the split
# ends_job WHAT LIMIT PATTERN ABSENT ARGS...: launch_ranks.sh ARGS must fail (not by `timeout`
# LIMIT) with a line matching PATTERN (grep -E) and none containing ABSENT
ends_job() {
    local what=$1 limit=$2 pattern=$3 absent=$4 log=$tmp/ends_job.log rc
    shift 4
    timeout "$limit" scripts/launch_ranks.sh "$@" > "$log" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -Eq "$pattern" "$log" && ! grep -q "$absent" "$log"; then
        ok "$what (exit $rc)"
    else bad "$what (exit $rc)"; cat "$log"; fi
}
printf '#!/bin/sh\nif [ "$RANK" -lt 2 ]; then export LOCAL_WORLD_SIZE=2; fi\nexec "$@"\n' > "$tmp/machines.sh"
chmod +x "$tmp/machines.sh"
ends_job "ranks with LOCAL_WORLD_SIZE 2 and 4 are refused before the node split" 60 \
    "zero: rank ([01]: .*: rank 2 has LOCAL_WORLD_SIZE 4, rank [01] has 2|[23]: .*: rank 0 has LOCAL_WORLD_SIZE 2, rank [23] has 4);" \
    ncclCommSplit 4 "$tmp/machines.sh" "$EMU/gpu_zero_toy" collectives

# 3. gpu_zero_toy across ranks
for np in 2 4; do
    for mode in collectives groups train errors; do
        log=$tmp/toy_${np}_$mode.log
        start=$(date +%s.%N)
        timeout 300 scripts/launch_ranks.sh "$np" "$EMU/gpu_zero_toy" "$mode" > "$log" 2>&1
        rc=$?
        secs=$(echo "$(date +%s.%N) - $start" | bc | cut -c1-4)
        counts=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
        if [ "$rc" -eq 0 ] && [[ "$counts" =~ ^[1-9][0-9]*\ passed,\ 0\ failed ]]; then
            ok "gpu_zero_toy $mode at $np ranks: $counts (${secs} s)"
        else bad "gpu_zero_toy $mode at $np ranks (exit $rc): $counts"; grep -E 'FAIL|rank [0-9]+:|zero:' "$log" | head -n 20; fi
    done
done
ends_job "gpu_zero_toy misuse at 2 ranks ends the job with its message" 120 \
    "zero: rank [01]: zero_step after 0 complete micro-steps and 1 of 5 units' grads_ready" \
    "accepted an incomplete" 2 "$EMU/gpu_zero_toy" misuse

# watchdog_death MODE SECONDS PATTERN WHAT: gpu_zero_toy MODE at 2 ranks must end the job
# (not by `timeout`) within SECONDS with a line matching PATTERN, and no rank may print that
# it went on ("did not fire") or a failed check.
watchdog_death() {
    local mode=$1 secs=$2 pattern=$3 what=$4 log=$tmp/toy_$1.log start rc elapsed
    start=$(date +%s)
    timeout 120 scripts/launch_ranks.sh 2 "$EMU/gpu_zero_toy" "$mode" > "$log" 2>&1
    rc=$?
    elapsed=$(( $(date +%s) - start ))
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$elapsed" -lt "$secs" ] && grep -Eq "$pattern" "$log" &&
       ! grep -q -e "did not fire" -e "FAIL" "$log"; then
        ok "gpu_zero_toy $mode at 2 ranks: $what (exit $rc after ${elapsed} s)"
    else bad "gpu_zero_toy $mode at 2 ranks (exit $rc after ${elapsed} s)"; cat "$log"; fi
}

# the watchdog's death: one rank sleeps 60 s inside an all-reduce, the watchdog (timeout 1 s)
# ends the job with its message. Its ncclCommAbort ends the other rank's stalled all-gather
# (NCCL's documented effect); every wait after the abort parks (zero_comm_park_if_ending), so
# no rank's main thread runs on with the aborted result ("the stalled all-reduce returned").
watchdog_death timeout 45 "^rank [01]: collective all_reduce on 8 bytes timed out after [0-9.]+ s" \
    "the watchdog ends the job, no rank goes on from the aborted collective"

# not a death: an all-gather queued behind 4 s of work (its stream waits for the main
# stream's) under a 2 s watchdog is timed from when that work is done, and completes
log=$tmp/toy_queued.log
timeout 120 scripts/launch_ranks.sh 2 "$EMU/gpu_zero_toy" queued > "$log" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && grep -q "^[1-9][0-9]* passed, 0 failed" "$log" && ! grep -q "timed out" "$log"; then
    ok "gpu_zero_toy queued at 2 ranks: a collective behind 4 s of earlier work is not taken for a stuck one (2 s timeout)"
else bad "gpu_zero_toy queued at 2 ranks (exit $rc)"; cat "$log"; fi

# the watchdog's ring filled twice behind an unfinished collective (40 s of work ahead of
# it), with one more unfinished in between (behind a gate) that only the last rank joins:
# compaction makes room for that one and then keeps it, so it is watched and ends the job
# within seconds of the gate opening (without compaction, or with one that dropped it, the
# other ranks' summary times out after their 60 s sleep instead)
watchdog_death ring 40 "^rank 1: collective all_gather on [0-9]+ bytes timed out after [0-9.]+ s \\(the all-gather only the last rank joins" \
    "the ring filled twice around unfinished collectives, the one in between then stalled and still watched"

# 4. no shared memory left behind
shm_after=$(ls /dev/shm | grep -c '^cuda_emu_nccl_')
if [ "$shm_after" -le "$shm_before" ]; then ok "no /dev/shm/cuda_emu_nccl_* left behind"
else bad "$((shm_after - shm_before)) /dev/shm/cuda_emu_nccl_* left behind: $(ls /dev/shm | grep '^cuda_emu_nccl_' | head -n 5)"; fi
echo "$pass passed, $failn failed"
[ "$failn" -eq 0 ]
