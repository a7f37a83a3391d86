# emu_common.sh (sourced by the emulated tests, from the repository root): EMU, the emulated
# programs' folder (EMU_DIR, default build/emu); $tmp, a scratch folder removed at exit;
# ok/bad, which print PASS/FAIL lines and count them in pass/failn; need_emu PROG..., which
# stops the test with a FAIL line when one of the emulated programs is not built; spawn and
# ran, which run commands side by side and check how they ended; side_by_side, which runs a
# function of the test once per argument, side by side, and adds up their PASS/FAIL counts.
EMU=${EMU_DIR:-build/emu}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0; failn=0
ok() { echo "PASS $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; failn=$((failn + 1)); }
# OpenMP's idle threads wait passively: by default each spins for a while at the end of
# every parallel region (the emulated cuBLASLt's, the host references'), which on the
# 2-core CI machine was a third of the emulated tests' CPU time (dev/cuda_emu/README.md, Cost).
export OMP_WAIT_POLICY=passive
need_emu() {
    for p in "$@"; do [ -x "$EMU/$p" ] || { echo "FAIL: $EMU/$p not built (make emu, or make test)"; exit 1; }; done
}
# spawn NAME COMMAND...: COMMAND in the background, EMU_JOBS at a time (default the core
# count: the emulator runs a kernel on one core), its output in $tmp/NAME.log and, once it
# has ended, its exit status in $tmp/NAME.rc. `wait` then waits for them all.
spawn() {
    local name=$1; shift
    wait_for_slot
    { timeout 900 "$@" > "$tmp/$name.log" 2>&1; echo $? > "$tmp/$name.rc"; } &
}
wait_for_slot() {   # returns once fewer than EMU_JOBS background jobs run
    local most=${EMU_JOBS:-$(nproc 2> /dev/null || echo 1)}
    case $most in ''|*[!0-9]*|0) most=1 ;; esac
    while [ "$(jobs -rp | wc -l)" -ge "$most" ]; do wait -n; done
}
ran() {   # ran NAME...: each exited 0 (else a FAIL line with its log's tail)
    local name rc
    for name in "$@"; do
        rc=$(cat "$tmp/$name.rc" 2> /dev/null)
        [ "$rc" = 0 ] && continue
        bad "$name: exit ${rc:-unknown}"; tail -n 15 "$tmp/$name.log"; return 1
    done
}
# side_by_side FUNC ARG...: FUNC ARG for each ARG, EMU_JOBS at a time, each in a subshell that
# counts its own PASS/FAIL lines from 0 (its output in $tmp/FUNC.ARG.out); once all have ended,
# their outputs in ARG's order, their counts added to pass/failn. FUNC sees every ARG's results
# only after side_by_side returns.
side_by_side() {
    local fn=$1 arg p f; shift
    for arg in "$@"; do
        wait_for_slot
        ( pass=0 failn=0; "$fn" "$arg"; echo "$pass $failn" > "$tmp/$fn.$arg.counts" ) > "$tmp/$fn.$arg.out" 2>&1 &
    done
    wait
    for arg in "$@"; do
        cat "$tmp/$fn.$arg.out"
        { read -r p f < "$tmp/$fn.$arg.counts"; } 2> /dev/null || { p=0; f=1; echo "FAIL $fn $arg: it ended before counting"; }
        pass=$((pass + p)); failn=$((failn + f))
    done
}
