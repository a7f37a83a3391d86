#!/usr/bin/env bash
# The logic of dev/gpu/sanitize.sh (compute-sanitizer's four tools over the trainers and
# test_gpt2_zero on a GPU), with a stand-in for compute-sanitizer that runs nothing and
# prints what the real one prints: a clean run passes, a race report fails naming the tool,
# the program and the log and shows the report's lines, the deadline skips what is left, a
# device the tools refuse and a missing compute-sanitizer skip with a message; every tool
# runs over the trainers (at T=128, where cuDNN's fused attention runs) before any tool
# over test_gpt2_zero, the longest run.
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 failn=0
ok() { echo "PASS $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; failn=$((failn + 1)); }
cat > "$tmp/san" << 'SAN'
#!/usr/bin/env bash
# --tool T --error-exitcode E --print-limit N PROGRAM ARGS...
tool=$2 prog=$7
[ -n "${ORDER:-}" ] && echo "$tool ${prog##*/} $*" >> "$ORDER"
case "$MODE:$tool:$prog" in
    unsupported:*) echo "========= Error: Device not supported"; exit 1 ;;
    race:racecheck:*test_gpt2_zero)
        echo "========= Error: Race reported between Write access at layernorm_backward+0x80"
        echo "=========     and Read access at layernorm_backward+0x90 [4 hazards]"
        echo "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"; exit 86 ;;
esac
[[ " $* " == *" --offload-param nvme "* ]] && [ "$MODE:$tool" = race:initcheck ] &&
    { echo "========= Uninitialized __global__ memory read of size 4 bytes"; echo "========= ERROR SUMMARY: 257 errors"
      echo "========= ERROR SUMMARY: 207 errors were not printed. Use --print-limit option to adjust the number of printed errors"
      exit 86; }
echo "========= ERROR SUMMARY: 0 errors"
SAN
chmod +x "$tmp/san"
ORDER=$tmp/order MODE=race SANITIZER=$tmp/san LOGDIR=$tmp/log bash dev/gpu/sanitize.sh > "$tmp/out.txt" 2>&1
rc=$?
np=$(grep -c "^PASS sanitize" "$tmp/out.txt"); nf=$(grep -c "^FAIL sanitize" "$tmp/out.txt")
if [ $rc -eq 1 ] && [ "$np" -eq 14 ] && [ "$nf" -eq 2 ]; then ok "four tools over four programs: 14 clean, 2 reported, exit 1"
else bad "exit $rc, $np PASS and $nf FAIL lines (want 1, 14, 2)"; cat "$tmp/out.txt"; fi
want="memcheck racecheck synccheck initcheck"
got_trainers=$(head -n 12 "$tmp/order" | awk '$2 != "test_gpt2_zero" && / -t 128 / { print $1 }' | uniq | tr '\n' ' ')
got_tests=$(tail -n 4 "$tmp/order" | awk '$2 == "test_gpt2_zero" { print $1 }' | tr '\n' ' ')
[ "$(wc -l < "$tmp/order")" -eq 16 ] && [ "$got_trainers" = "$want " ] && [ "$got_tests" = "$want " ] &&
    ok "the order: each tool over the three trainers at T=128, then each over test_gpt2_zero" ||
    { bad "the order of runs"; cut -c1-60 "$tmp/order"; }
grep -q "^FAIL sanitize racecheck test_gpt2_zero: 1 errors, exit 86 ($tmp/log/racecheck_test_gpt2_zero.txt)" "$tmp/out.txt" &&
    grep -q "Race reported between Write access at layernorm_backward" "$tmp/out.txt" &&
    ok "a race report: the tool, the program, the count from RACECHECK SUMMARY, the log and the report's lines" ||
    { bad "the race report's line"; cat "$tmp/out.txt"; }
grep -q "^FAIL sanitize initcheck zero3_nvme: 257 errors" "$tmp/out.txt" && grep -q "Uninitialized __global__ memory read" "$tmp/out.txt" &&
    ok "an initcheck report on the NVMe run: named, with its line, all 257 errors counted past the print limit" ||
    { bad "the initcheck report"; grep "initcheck zero3_nvme" "$tmp/out.txt"; }
MODE=clean SANITIZER=$tmp/san LOGDIR=$tmp/log2 LANE_LEFT=10 bash dev/gpu/sanitize.sh memcheck > "$tmp/dl.txt" 2>&1
[ $? -eq 0 ] && [ "$(grep -c "^SKIP sanitize memcheck .*not run (deadline)" "$tmp/dl.txt")" -eq 4 ] &&
    ok "under 20 s left: every run listed as not run, exit 0" || { bad "the deadline"; cat "$tmp/dl.txt"; }
MODE=unsupported SANITIZER=$tmp/san LOGDIR=$tmp/log3 bash dev/gpu/sanitize.sh > "$tmp/un.txt" 2>&1
[ $? -eq 0 ] && grep -q "^SKIP sanitize: compute-sanitizer does not support this device" "$tmp/un.txt" &&
    ok "a device the tools refuse: one SKIP line, exit 0" || { bad "an unsupported device"; cat "$tmp/un.txt"; }
PATH=/usr/bin:/bin SANITIZER=$tmp/none bash dev/gpu/sanitize.sh > "$tmp/no.txt" 2>&1
[ $? -eq 0 ] && grep -q "^SKIP sanitize: no compute-sanitizer" "$tmp/no.txt" && ok "no compute-sanitizer: SKIP with a message" ||
    { bad "no compute-sanitizer"; cat "$tmp/no.txt"; }
echo "$pass passed, $failn failed"
[ "$failn" -eq 0 ]
