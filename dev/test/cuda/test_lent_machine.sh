#!/usr/bin/env bash
# The logic of dev/gpu/lent_machine.sh (the one script a lent GPU machine runs), no GPU needed:
#  1. its order, in a scratch copy of it with LANE_CMD recording each part's start and end:
#     the benchmark lane (vsllmc) runs alone before the correctness lanes, which then run at
#     once; profile, kernels and then offload-max run alone after it, each lane ended in time
#     to leave the ones after it their seconds (kernels, made to overrun, is stopped and
#     offload-max still runs); the tables land in LOGDIR, and in OUT as each lane ends, with
#     the lanes' PASS/FAIL/SKIP lines (progress.txt); a misspelt lane is refused before
#     anything runs; a process a lane leaves in a process group of its own is ended with the
#     lane, and a SIGTERM ends the script and its lane at once.
#  2. its own lanes with a bundle that has no programs: vsllmc and profile fail by name
#     without llm.c's binary, units names each of its programs.
# run alone: its lanes' deadlines are seconds, and tighter on a loaded machine
set -u
cd "$(dirname "$0")/../../.."
source dev/test/emu/emu_common.sh   # $tmp, ok and bad (no emulated program runs here)

# 1. the order of lanes, in a scratch tree
source dev/test/common/proc.sh   # running PID
mkdir -p "$tmp/tree/dev/gpu" "$tmp/tree/gpubundle/bin" "$tmp/tree/gpubundle/build" "$tmp/out"
cp dev/gpu/lent_machine.sh "$tmp/tree/dev/gpu/"
touch "$tmp/tree/gpubundle/bin/none" "$tmp/tree/gpubundle/build/none"
cat > "$tmp/lane" <<EOF
#!/usr/bin/env bash
echo "\$1 start \$(date +%s.%N) \$SOLO_AFTER" >> "$tmp/order"
echo "PASS stand-in \$1"
[ "\$1" = vsllmc ] && echo "| stand-in table |" > "\$GPU_LOGDIR/bench_vs_llmc.md"
[ "\$1" = profile ] && echo "| stand-in kernel table |" > "\$GPU_LOGDIR/profile.md"
# what OUT holds when kernels starts: the tables of the lanes before it, already there
[ "\$1" = kernels ] && { ls "\$OUT" > "$tmp/out_at_kernels"; sleep 60; }   # overruns: its deadline must end it in time for offload-max
# a straggler, as a nested timeout's ranks are: a process group of its own that outlives the lane
[ "\$1" = units ] && { timeout 300 sleep 299 & echo \$! > "$tmp/straggler"; }
# a failed check's line as test_backend_ops prints it (no FAIL at the line's start)
[ "\$1" = bitwise ] && echo "adamw cuda 3 slices: FAIL: a stand-in's failed check"
[ "\$1" = hang ] && { timeout 300 sleep 298 & echo \$! > "$tmp/hang_straggler"; sleep 60; }
sleep 1
echo "\$1 end \$(date +%s.%N)" >> "$tmp/order"
EOF
chmod +x "$tmp/lane"
# vsllmc's window: BENCH_DEADLINE less the 17 s it leaves, less the setup (which takes seconds
# on a loaded machine: copying the bundle, finding NVIDIA's libraries); offload-max's 12 s
# leave room for ending the overrunning kernels lane before it (a lane needs over 5 s)
LANE_CMD=$tmp/lane LOGDIR=$tmp/lm DEADLINE=60 BENCH_DEADLINE=40 PROFILE_S=2 KERNELS_S=3 OFFLOAD_MAX_S=12 OUT=$tmp/out \
    bash "$tmp/tree/dev/gpu/lent_machine.sh" units vsllmc profile kernels offload-max bitwise > "$tmp/lm.log" 2>&1
lm_rc=$?
at() { awk -v p="$1" -v e="$2" '$1 == p && $2 == e { print $3 }' "$tmp/order"; }
if [ -n "$(at vsllmc end)" ] && [ -n "$(at units start)" ] && [ -n "$(at bitwise start)" ] &&
   awk -v v="$(at vsllmc end)" -v u="$(at units start)" -v b="$(at bitwise start)" 'BEGIN { exit !(v <= u && v <= b) }'
then ok "lent_machine.sh: the benchmark lane ran alone, before the correctness lanes"
else bad "lent_machine.sh: order $(tr '\n' ';' < "$tmp/order" 2> /dev/null)"; fi
# profile, kernels, then offload-max after vsllmc, alone too; vsllmc was told to leave them
# 2 + 3 + 12 s, and kernels, which overran, was ended in time to leave offload-max its 12 s
after() { awk -v p="$1" '$1 == p && $2 == "start" { print $4 }' "$tmp/order"; }
if [ "$(after vsllmc)" = 17 ] && [ "$(after profile)" = 15 ] && [ "$(after kernels)" = 12 ] &&
   awk -v v="$(at vsllmc end)" -v p0="$(at profile start)" -v p1="$(at profile end)" -v k0="$(at kernels start)" \
       -v o0="$(at offload-max start)" -v o1="$(at offload-max end)" -v u="$(at units start)" \
       'BEGIN { exit !(p0 != "" && k0 != "" && o0 != "" && v <= p0 && p1 <= k0 && k0 < o0 && o1 <= u) }'
then ok "lent_machine.sh: profile, kernels, then offload-max alone after vsllmc, which leaves them 2 + 3 + 12 s"
else bad "lent_machine.sh: order $(tr '\n' ';' < "$tmp/order" 2> /dev/null)"; fi
grep -q "^lane kernels: exit 124" "$tmp/lm/summary.txt" && [ -n "$(at offload-max end)" ] &&
    ok "lent_machine.sh: the overrunning kernels lane was stopped, and offload-max still ran" ||
    bad "lent_machine.sh: kernels $(grep "^lane kernels" "$tmp/lm/summary.txt"), offload-max end $(at offload-max end)"
if awk -v u0="$(at units start)" -v u1="$(at units end)" -v b0="$(at bitwise start)" -v b1="$(at bitwise end)" \
       'BEGIN { exit !(u0 != "" && b0 != "" && u0 < b1 && b0 < u1) }'
then ok "lent_machine.sh: the correctness lanes ran at once"
else bad "lent_machine.sh: the correctness lanes did not overlap"; fi
[ -s "$tmp/straggler" ] && ! running "$(cat "$tmp/straggler")" &&
    ok "lent_machine.sh: a process the units lane left in a process group of its own was ended with the lane" ||
    { bad "lent_machine.sh: the straggler $(cat "$tmp/straggler" 2>&1) lives on"; kill "$(cat "$tmp/straggler")" 2> /dev/null; }
if grep -q "stand-in table" "$tmp/lm/summary.txt" && grep -q "stand-in kernel table" "$tmp/lm/summary.txt" &&
   [ -f "$tmp/out/bench_vs_llmc.md" ] && [ -f "$tmp/out/profile.md" ] && [ "$(grep -c "^lane .*: exit 0" "$tmp/lm/summary.txt")" -eq 5 ]
then ok "lent_machine.sh: the five other lanes exit 0; both tables in summary.txt and OUT"
else bad "lent_machine.sh: summary or OUT incomplete"; tail -n 5 "$tmp/lm.log"; fi
grep -qx bench_vs_llmc.md "$tmp/out_at_kernels" && grep -qx profile.md "$tmp/out_at_kernels" &&
    grep -qx lanes.txt "$tmp/out_at_kernels" && grep -q "stand-in kernel table" "$tmp/lm.log" &&
    ok "lent_machine.sh: each lane's table in OUT as the lane ends (before the next), and in the output" ||
    bad "lent_machine.sh: OUT held '$(tr '\n' ' ' < "$tmp/out_at_kernels" 2>&1)' when kernels started"
grep -q "^vsllmc: PASS stand-in vsllmc" "$tmp/out/progress.txt" && grep -q "^bitwise: PASS stand-in bitwise" "$tmp/out/progress.txt" &&
    grep -qx progress.txt "$tmp/out_at_kernels" && grep -q "^units: PASS stand-in units" "$tmp/lm.log" &&
    ok "lent_machine.sh: each lane's PASS/FAIL/SKIP lines in OUT/progress.txt as it ends, and in the output" ||
    bad "lent_machine.sh: progress.txt: $(tr '\n' ';' < "$tmp/out/progress.txt" 2>&1)"
# a misspelt lane: refused at once, before the bundle is copied or any lane runs
LOGDIR=$tmp/lm4 bash "$tmp/tree/dev/gpu/lent_machine.sh" units offload_max > "$tmp/lm4.log" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "no lane 'offload_max' (lanes: units .*offload-max" "$tmp/lm4.log" && [ ! -e "$tmp/lm4/units.txt" ] &&
    ok "lent_machine.sh: an unknown lane (offload_max) refused before anything runs" ||
    bad "lent_machine.sh offload_max: exit $rc, $(head -n 2 "$tmp/lm4.log")"
[ $lm_rc -ne 0 ] && grep -q "^lent_machine: [0-9]* PASS lines, 1 FAIL lines, 1 lanes not exit 0" "$tmp/lm/summary.txt" &&
    ok "lent_machine.sh: a check's 'name: FAIL: why' line counts as a failure (exit $lm_rc)" ||
    bad "lent_machine.sh: exit $lm_rc, verdict $(grep "^lent_machine: " "$tmp/lm/summary.txt")"
# stopped by a signal while a lane runs: the script ends at once, and so do the lane's processes
LANE_CMD=$tmp/lane LOGDIR=$tmp/lm3 DEADLINE=100 bash "$tmp/tree/dev/gpu/lent_machine.sh" hang > "$tmp/lm3.log" 2>&1 &
lm=$!
for _ in $(seq 50); do [ -s "$tmp/hang_straggler" ] && break; sleep 0.2; done
t_kill=$SECONDS; kill -TERM $lm; wait $lm; rc=$?
[ -s "$tmp/hang_straggler" ] && [ $((SECONDS - t_kill)) -le 5 ] && ! running "$(cat "$tmp/hang_straggler")" &&
    ! pgrep -f "$tmp/lane hang" > /dev/null &&
    ok "lent_machine.sh stopped by SIGTERM (exit $rc): at once, with the lane and what it left running" ||
    { bad "SIGTERM: exit $rc after $((SECONDS - t_kill)) s, straggler $(cat "$tmp/hang_straggler" 2>&1), lane $(pgrep -f "$tmp/lane hang")"
      pkill -f "$tmp/lane hang"; kill "$(cat "$tmp/hang_straggler")" 2> /dev/null; }

# 2. its own lanes with a bundle that has no programs: vsllmc and profile without
# llm.c's binary, units without any of its five programs, each failure named
rm -f "$tmp/tree/gpubundle/bin/llmc_train_gpt2cu"
LOGDIR=$tmp/lm2 DEADLINE=60 PROFILE_S=5 bash "$tmp/tree/dev/gpu/lent_machine.sh" vsllmc profile units > "$tmp/lm2.log" 2>&1
rc=$?
nu=0
for prog in ./test_gpt2_zero ./build/gpu_attention_cudnn ./build/gpu_zero_quant ./build/gpu_backend_ops ./bench_wire_cuda; do
    grep -q "units.txt:FAIL units: $prog exit 127$" "$tmp/lm2/summary.txt" && nu=$((nu + 1))
done
[ $rc -ne 0 ] && grep -q "FAIL vsllmc: no llm.c binary in the bundle" "$tmp/lm2/summary.txt" &&
    grep -q "FAIL profile: no llm.c binary in the bundle" "$tmp/lm2/summary.txt" && [ $nu = 5 ] &&
    grep -q "^lane units: exit 1 " "$tmp/lm2/summary.txt" && grep -q "^lent_machine: 0 PASS lines, 7 FAIL lines, 3 lanes not exit 0" "$tmp/lm2/summary.txt" &&
    ok "lent_machine.sh: vsllmc and profile fail by name without llm.c's binary, units names each of its 5 programs (exit $rc)" ||
    bad "lent_machine.sh without programs: exit $rc, $nu of 5 units programs named, $(grep -e FAIL -e '^lane' "$tmp/lm2/summary.txt" | tr '\n' ';')"

echo "$pass passed, $failn failed"
[ "$failn" -eq 0 ]
