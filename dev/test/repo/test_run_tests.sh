#!/usr/bin/env bash
# test_run_tests.sh: the test runner (dev/test/run_tests.sh) on made-up programs:
#  - it prints "=== k/N name" before each program, N counting every program of the run,
#    and before the closing line each program's seconds and CPU seconds, slowest first
#  - a cmocka program's "[  PASSED  ] N test(s)" and "[  FAILED  ] N test(s)" add up
#  - a program that exits 0 with a line starting with SKIP, and a shell test that exits 77,
#    count as skipped, and so do a cmocka program's "[  SKIPPED ] N test(s)"; the closing line
#    is "N passed, N failed, N skipped"
#  - a program with counts of its own that also skips a case: its counts and exit status hold
#  - exit status: 0 with no failure, 1 with one; a run of skips only is a failure
#  - each failed program's first failure lines come again before the closing lines; a shell
#    test's output shows as it runs, and a process it leaves behind does not hold the run
#  - the pool: the emulated programs (EMU_DIR, EMU_PROGS) and then the shell tests run side by
#    side, TEST_JOBS at a time and no more: each one's output and counts appear in the pool's
#    order, one not built is a failure; a shell test with a line "# run alone: ..." runs before
#    the pool, with nothing beside it, its output shown as it comes
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_run_tests: $*"; exit 1; }

mk() { printf '#!/usr/bin/env bash\n%s\n' "$2" > "$tmp/$1"; chmod +x "$tmp/$1"; }
mk cm_pass 'echo "[  PASSED  ] 3 test(s)."'
mk cm_fail 'echo "[  PASSED  ] 1 test(s)."; echo "[  FAILED  ] 2 test(s), listed below:"; exit 2'
mk no_gpu 'echo "SKIP: no CUDA device"'
mk sh_pass.sh 'exit 0'
mk sh_skip.sh 'echo "needs a tool that is not here"; exit 77'
mk sh_fail.sh 'echo "step 1 ok"; echo "FAIL the widget: 3 bytes differ"; echo "more output"; exit 3'
# leaves a process behind that holds its output open: the runner goes on when the test ends
mk sh_leak.sh 'sleep 30 & echo "left a sleep behind"; exit 0'

mk cm_skip 'echo "[  PASSED  ] 2 test(s)."; echo "[  SKIPPED ] 3 test(s), listed below:"'
mk counted_fail 'echo "SKIP B2_T64: not on this library"; echo "FAIL B4_T256"; echo "1 passed, 1 failed"; exit 1'
mk counted_skip_rc 'echo "SKIP: no CUDA device"; exit 1'

runner() { SHELL_TESTS="$1" GPU_PROGS="${GPU:-}" EMU_DIR= bash dev/test/run_tests.sh "${@:2}" > "$tmp/out" 2>&1; }

# all good: 3 + 1 passed, a SKIP program and an exit-77 shell test skipped
runner "$tmp/sh_pass.sh $tmp/sh_skip.sh" "$tmp/cm_pass" "$tmp/no_gpu"
rc=$?
[ "$rc" -eq 0 ] || { cat "$tmp/out"; fail "a run without failures exited $rc"; }
last=$(tail -n 1 "$tmp/out")
[ "$last" = "4 passed, 0 failed, 2 skipped" ] || { cat "$tmp/out"; fail "summary '$last'"; }
echo "$last" | grep -qE '^[0-9]+ passed, [0-9]+ failed' || fail "summary no longer matches 'N passed, N failed'"
# progress: k/4 before each program, in order
got=$(grep '^=== ' "$tmp/out" | sed 's|'"$tmp"'/||')
want=$'=== 1/4 cm_pass\n=== 2/4 no_gpu\n=== 3/4 sh_pass.sh\n=== 4/4 sh_skip.sh'
[ "$got" = "$want" ] || { cat "$tmp/out"; fail "progress lines: '$got'"; }
# the seconds of each program, slowest first, and the CPU seconds of its processes, before the
# closing line: slow.sh sleeps 2 s, burn.sh's child spins for 2 s
mk slow.sh 'sleep 2'
mk burn.sh 'timeout 2 bash -c "while :; do :; done"; exit 0'
runner "$tmp/sh_pass.sh $tmp/slow.sh $tmp/burn.sh" "$tmp/cm_pass"
laps=$(sed -n '/^the slowest programs (seconds, and the CPU seconds of their processes):$/,$p' "$tmp/out" | sed -n '2,5p' | sed 's|'"$tmp"'/||')
[ "$(echo "$laps" | head -n 2 | grep -cE '^  [2-9] \(cpu 0\) slow\.sh$|^  [2-9] \(cpu [12]\) burn\.sh$')" = 2 ] &&
    [ "$(echo "$laps" | grep -cE '^  [01] \(cpu 0\) ')" = 2 ] || { cat "$tmp/out"; fail "the slowest-programs list: '$laps'"; }

# failures: counted, named, exit status 1
runner "$tmp/sh_fail.sh $tmp/sh_skip.sh" "$tmp/cm_fail" "$tmp/no_gpu"
rc=$?
[ "$rc" -eq 1 ] || { cat "$tmp/out"; fail "a run with failures exited $rc"; }
[ "$(tail -n 1 "$tmp/out")" = "1 passed, 3 failed, 2 skipped" ] || { cat "$tmp/out"; fail "summary with failures"; }
grep -q "^failed: .*cm_fail .*sh_fail.sh" "$tmp/out" || { cat "$tmp/out"; fail "the failed programs are not named"; }
# their failure lines again before the closing lines, each with its program
grep -q "^step 1 ok$" "$tmp/out" || { cat "$tmp/out"; fail "a shell test's output is not shown"; }
digest=$(sed -n '/^the first failure lines of each program that failed:$/,/^failed: /p' "$tmp/out" | sed 's|'"$tmp"'/||')
echo "$digest" | grep -qx "  sh_fail.sh: FAIL the widget: 3 bytes differ" &&
    echo "$digest" | grep -qx "  cm_fail: \[  FAILED  \] 2 test(s), listed below:" && ! echo "$digest" | grep -q "more output" ||
    { cat "$tmp/out"; fail "the failure lines before the closing lines: '$digest'"; }
# a shell test that leaves a process holding its output: its output shown, the run goes on
start=$SECONDS
runner "$tmp/sh_leak.sh" "$tmp/cm_pass"
rc=$?
[ "$rc" -eq 0 ] && [ $((SECONDS - start)) -lt 20 ] && grep -q "^left a sleep behind$" "$tmp/out" ||
    { cat "$tmp/out"; fail "a test that left a process behind: exit $rc after $((SECONDS - start)) s"; }

# a program's own counts hold beside a case it skipped, and a SKIP with a failing exit is a failure
GPU="$tmp/counted_fail $tmp/counted_skip_rc" runner "$tmp/sh_pass.sh" "$tmp/cm_skip"
rc=$?
[ "$rc" -eq 1 ] && [ "$(tail -n 1 "$tmp/out")" = "4 passed, 2 failed, 3 skipped" ] ||
    { cat "$tmp/out"; fail "counts beside skips: exit $rc"; }
grep -q "^failed: .*counted_fail .*counted_skip_rc" "$tmp/out" || { cat "$tmp/out"; fail "the failed programs are not named"; }

# only skips: nothing was proven, so the run fails
runner "$tmp/sh_skip.sh" "$tmp/no_gpu"
rc=$?
[ "$rc" -ne 0 ] || { cat "$tmp/out"; fail "a run of skips only passed"; }
[ "$(tail -n 1 "$tmp/out")" = "0 passed, 1 failed, 2 skipped" ] || { cat "$tmp/out"; fail "summary of skips only"; }
# the pool: "first" ends only once "second" has started (it waits for its mark), so run one
# after the other it would fail; outputs and counts follow the pool's order (the emulated
# programs, then the shell tests: sh_a.sh and sh_b.sh each wait for the other too); alone.sh
# runs before them all and sees none of them running
emu="$tmp/emu"
mkdir -p "$emu"
# each stays a second after it has seen the other, so "skips", third in the list, would find
# both running if the runner started more than TEST_JOBS=2 at once
mk emu/first 'touch "'"$tmp"'/running.first"; for i in $(seq 100); do [ -e "'"$tmp"'/mark" ] && break; sleep 0.1; done
[ -e "'"$tmp"'/mark" ] || { echo "0 passed, 1 failed"; exit 1; }; sleep 1; rm "'"$tmp"'/running.first"
echo "out of first"; echo "2 passed, 0 failed"'
mk emu/second 'touch "'"$tmp"'/running.second" "'"$tmp"'/mark"; sleep 1; rm "'"$tmp"'/running.second"
echo "out of second $1"; echo "1 passed, 1 failed"; exit 1'
mk emu/skips 'n=$(ls "'"$tmp"'"/running.* 2> /dev/null | wc -l); [ "$n" -le 1 ] || { echo "0 passed, 1 failed ($n running)"; exit 1; }
echo "SKIP: not here"'
mk sh_a.sh 'touch "'"$tmp"'/mark.a"; for i in $(seq 100); do [ -e "'"$tmp"'/mark.b" ] && exit 0; sleep 0.1; done; echo "FAIL no b"; exit 1'
mk sh_b.sh 'touch "'"$tmp"'/mark.b"; for i in $(seq 100); do [ -e "'"$tmp"'/mark.a" ] && exit 0; sleep 0.1; done; echo "FAIL no a"; exit 1'
mk alone.sh '# run alone: a made-up reason
n=$(ls "'"$tmp"'"/running.* "'"$tmp"'"/mark* 2> /dev/null | wc -l); echo "out of alone: $n running"; [ "$n" = 0 ]'
EMU_DIR=$emu EMU_PROGS="first,second part,skips,,absent" TEST_JOBS=2 SHELL_TESTS="$tmp/sh_a.sh $tmp/alone.sh $tmp/sh_b.sh" GPU_PROGS= \
    bash dev/test/run_tests.sh > "$tmp/out" 2>&1
rc=$?
[ "$rc" -eq 1 ] && [ "$(tail -n 1 "$tmp/out")" = "6 passed, 2 failed, 1 skipped" ] ||
    { cat "$tmp/out"; fail "the pool: exit $rc"; }
got=$(grep -E '^=== |^out of' "$tmp/out" | sed 's|'"$tmp"'/||')
want=$'=== 1/7 alone.sh\nout of alone: 0 running\n=== 2/7 emu/first\nout of first\n=== 3/7 emu/second part\nout of second part\n=== 4/7 emu/skips\n=== 5/7 emu/absent\n=== 6/7 sh_a.sh\n=== 7/7 sh_b.sh'
[ "$got" = "$want" ] || { cat "$tmp/out"; fail "the pool: order of outputs '$got'"; }
grep -q "^failed: .*emu/second part .*emu/absent" "$tmp/out" || { cat "$tmp/out"; fail "the failed emulated programs are not named"; }
echo "test_run_tests: OK"
