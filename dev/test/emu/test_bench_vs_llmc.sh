#!/usr/bin/env bash
# The logic of the GPU benchmark against llm.c, with the emulated trainers standing in:
#  1. dev/bench/bench_vs_llmc.sh in a tiny mode (d2c64h1t64, B=2, T=64, 3 steps): the
#     emulated train_gpt2cu stands in for llm.c's binary (LLMC_BIN), its step lines
#     rewritten into llm.c's format and refusing B=4 as a GPU out of memory would. The table
#     must have every row with parsed numbers (steps 3, tok/s > 0, MFU, memory, losses),
#     train_gpt2cu and train_gpt2_zero (-z 1, and -z 2 with --offload-optimizer cpu) agreeing
#     with their reference (the same bits here: difference 0), the largest-B search stopping
#     at the stand-in's first failure and going on for train_gpt2cu (B=4, then 6), and
#     train_gpt2_zero -z 2 at 2 ranks with and without --fast-reduce (its losses agreeing
#     with the default's, its tok/s set over the default's).
#  2. dev/gpu/lent_machine.sh's order, in a scratch copy of it with LANE_CMD recording each
#     part's start and end: the benchmark lane (vsllmc) runs alone before the correctness
#     lanes, which then run at once; kernels and then offload-max run alone after it, each
#     lane ended in time to leave the ones after it their seconds (kernels, made to overrun,
#     is stopped and offload-max still runs); the table lands in LOGDIR and OUT.
set -u
cd "$(dirname "$0")/../../.."
source dev/test/emu/emu_common.sh
need_emu train_gpt2cu train_gpt2_zero
[ -x build/model_bf16 ] || { echo "FAIL: build/model_bf16 not built (make build/model_bf16)"; exit 1; }
export LLMC_CUDNN_DETERMINISTIC=1 CUDA_EMU_QUIET=1 OMP_NUM_THREADS=1 CUDA_EMU_BLOCKS=1 CUDA_EMU_PREEMPT=0
emu=$(realpath "$EMU")

# 1. the benchmark in a tiny mode
cat > "$tmp/llmc" <<EOF
#!/usr/bin/env bash
# llm.c's train_gpt2cu, as far as bench_vs_llmc.sh can tell: its flags, its step lines
set -o pipefail
case " \$* " in *" -b 4 "*) echo "[CUDA ERROR] at file llmc/cuda_common.h: out of memory"; exit 1 ;; esac
echo "device memory usage: 123 MiB / 143771 MiB"
"$emu/train_gpt2cu" "\$@" --shuffle 0 | sed -E 's/^(step +[0-9]+\/[0-9]+) \| loss ([^ ]+) \| norm ([^ ]+) \| lr ([^ ]+) \| ([^ ]+) ms \| ([^ ]+) tok\/s .*/\1 | loss \2 (+0.00z)| norm \3 (+0.00z)| lr \4 | \5 ms | -100.0% bf16 MFU | \6 tok\/s/'
EOF
chmod +x "$tmp/llmc"
if bash dev/bench/bench_vs_llmc.sh --help | grep -q "^usage: dev/bench/bench_vs_llmc.sh"; then ok "--help prints the usage"
else bad "--help prints no usage"; fi
if bash dev/bench/bench_vs_llmc.sh > /dev/null 2>&1; then bad "no LLMC_DIR and no LLMC_BIN: accepted"
else ok "no LLMC_DIR and no LLMC_BIN: refused"; fi
start=$(date +%s)
LLMC_BIN=$tmp/llmc CU=$EMU/train_gpt2cu ZERO=$EMU/train_gpt2_zero MODELS="d2c64h1t64:2" BIG_B="4 6" \
    ZERO_RANKS="env NO_MPI=1 scripts/launch_ranks.sh 2 $EMU/train_gpt2_zero" FAST_STAGES=2 \
    ZERO_STAGES=1 OFFLOAD_STAGES=2 T=64 STEPS=3 PEAK_TFLOPS=1 DEADLINE=600 LOGDIR=$tmp/vs \
    OUT_MD=$tmp/table.md bash dev/bench/bench_vs_llmc.sh > "$tmp/bench.log" 2>&1
rc=$?
echo "bench_vs_llmc.sh (tiny, emulated): exit $rc after $(( $(date +%s) - start )) s"
[ $rc -eq 0 ] && ok "bench_vs_llmc.sh exits 0" || { bad "bench_vs_llmc.sh exit $rc"; tail -n 20 "$tmp/bench.log"; }
[ -s "$tmp/table.md" ] || { bad "no table in OUT_MD"; tail -n 20 "$tmp/bench.log"; echo "$pass passed, $failn failed"; exit 1; }
hdr=$(od -An -t d4 -N 8 "$tmp/vs/init_d2c64h1t64.bin" 2> /dev/null | xargs)
[ "$hdr" = "20240326 5" ] && ok "the shared init is an llm.c bf16 model file (version 5)" || bad "init file header '$hdr'"
grep -q "(+0.00z)| norm" "$tmp/vs/llmc_d2c64h1t64_b2.txt" && ok "the stand-in printed llm.c's step lines" || bad "the stand-in's step lines are not llm.c's"
# field N of the table row whose trainer column is LABEL (the row's fields: | trainer | model | B | status | steps | tok/s | ratio | MFU | peak | losses | difference |)
field() { awk -F'|' -v l="$1" -v n="$2" '{ t = $2; gsub(/^ +| +$/, "", t) } t == l { v = $(n + 1); gsub(/^ +| +$/, "", v); print v; exit }' "$tmp/table.md"; }
check_row() {   # check_row LABEL B DIFF: ok, 3 steps, tok/s > 0, MFU, memory and losses parsed, difference DIFF
    local l=$1
    local b st n tk mfu pk ls df
    b=$(field "$l" 3); st=$(field "$l" 4); n=$(field "$l" 5); tk=$(field "$l" 6); mfu=$(field "$l" 8); pk=$(field "$l" 9); ls=$(field "$l" 10); df=$(field "$l" 11)
    if [ "$b" = "$2" ] && [ "$st" = ok ] && [ "$n" = 3 ] && awk -v t="$tk" 'BEGIN { exit !(t + 0 > 0) }' &&
       [[ $mfu =~ ^[0-9]+\.[0-9]%$ ]] && [[ $pk =~ ^[0-9]+\ \((own|smi)\)$ ]] && [[ $ls =~ ^[0-9.]+\ -\>\ [0-9.]+$ ]] &&
       [[ $df == "$3" ]]; then ok "row '$l': B=$b, $n steps, $tk tok/s, MFU $mfu, peak $pk, loss $ls${df:+, difference $df}"
    else bad "row '$l': B='$b' status='$st' steps='$n' tok/s='$tk' MFU='$mfu' peak='$pk' losses='$ls' difference='$df' (want '$3')"; fi
}
check_row "llm.c train_gpt2cu" 2 ""
check_row "train_gpt2cu" 2 "0.00e+00 at step 1 of 3: agree"
check_row "train_gpt2_zero -z 1 (1 rank)" 2 "0.00e+00 at step 1 of 3: agree"
check_row "train_gpt2_zero -z 2 --offload-optimizer cpu" 2 "0.00e+00 at step 1 of 3: agree"
check_row "train_gpt2cu, largest B of: 4 6" 6 ""
check_row "train_gpt2_zero -z 2, 2 ranks (per-rank tok/s)" 2 ""
d=$(field "train_gpt2_zero -z 2 --fast-reduce, 2 ranks" 11); r=$(field "train_gpt2_zero -z 2 --fast-reduce, 2 ranks" 7)
if [[ $d =~ ^[0-9.]+e[-+][0-9]+\ at\ step\ [0-9]+\ of\ 3:\ agree$ ]] && awk -v r="$r" 'BEGIN { exit !(r > 0) }'
then ok "row '--fast-reduce, 2 ranks': its tok/s over the default's ($r), losses against the default: $d"
else bad "row '--fast-reduce, 2 ranks': difference '$d', ratio '$r'"; fi
[ "$(field "llm.c train_gpt2cu" 9)" = "123 (own)" ] && ok "llm.c's own memory print parsed (123 MiB)" || bad "llm.c's memory print: '$(field "llm.c train_gpt2cu" 9)'"
r=$(field "train_gpt2cu" 7)
awk -v r="$r" 'BEGIN { exit !(r > 0) }' && ok "train_gpt2cu's tok/s ratio to llm.c parsed ($r)" || bad "ratio '$r'"
if ! grep -q "llm.c train_gpt2cu, largest B" "$tmp/table.md" && [ -f "$tmp/vs/llmc_d2c64h1t64_b4.txt" ] && [ ! -f "$tmp/vs/llmc_d2c64h1t64_b6.txt" ]
then ok "largest B: llm.c's search stopped at its first failure (B=4), no row for it"
else bad "largest B: llm.c's search did not stop at B=4"; fi
grep -q "^GPU: .*llm.c: " "$tmp/table.md" && ok "the table's header names the GPU, driver and commits" || bad "no header line"

# 2. lent_machine.sh's order of lanes, in a scratch tree
mkdir -p "$tmp/tree/dev/gpu" "$tmp/tree/gpubundle/bin" "$tmp/tree/gpubundle/build" "$tmp/out"
cp dev/gpu/lent_machine.sh "$tmp/tree/dev/gpu/"
touch "$tmp/tree/gpubundle/bin/none" "$tmp/tree/gpubundle/build/none"
cat > "$tmp/lane" <<EOF
#!/usr/bin/env bash
echo "\$1 start \$(date +%s.%N) \$SOLO_AFTER" >> "$tmp/order"
[ "\$1" = vsllmc ] && echo "| stand-in table |" > "\$GPU_LOGDIR/bench_vs_llmc.md"
[ "\$1" = kernels ] && sleep 60   # overruns: its deadline must end it in time for offload-max
sleep 1
echo "\$1 end \$(date +%s.%N)" >> "$tmp/order"
EOF
chmod +x "$tmp/lane"
LANE_CMD=$tmp/lane LOGDIR=$tmp/lm DEADLINE=40 BENCH_DEADLINE=20 KERNELS_S=3 OFFLOAD_MAX_S=8 OUT=$tmp/out bash "$tmp/tree/dev/gpu/lent_machine.sh" units vsllmc kernels offload-max bitwise > "$tmp/lm.log" 2>&1
at() { awk -v p="$1" -v e="$2" '$1 == p && $2 == e { print $3 }' "$tmp/order"; }
if [ -n "$(at vsllmc end)" ] && [ -n "$(at units start)" ] && [ -n "$(at bitwise start)" ] &&
   awk -v v="$(at vsllmc end)" -v u="$(at units start)" -v b="$(at bitwise start)" 'BEGIN { exit !(v <= u && v <= b) }'
then ok "lent_machine.sh: the benchmark lane ran alone, before the correctness lanes"
else bad "lent_machine.sh: order $(tr '\n' ';' < "$tmp/order" 2> /dev/null)"; fi
# kernels, then offload-max after vsllmc, alone too; vsllmc was told to leave them 3 + 8 s, and
# kernels, which overran, was ended in time to leave offload-max its 8 s
if [ "$(awk '$1 == "vsllmc" && $2 == "start" { print $4 }' "$tmp/order")" = 11 ] &&
   [ "$(awk '$1 == "kernels" && $2 == "start" { print $4 }' "$tmp/order")" = 8 ] &&
   awk -v v="$(at vsllmc end)" -v k0="$(at kernels start)" -v o0="$(at offload-max start)" \
       -v o1="$(at offload-max end)" -v u="$(at units start)" 'BEGIN { exit !(k0 != "" && o0 != "" && v <= k0 && k0 < o0 && o1 <= u) }'
then ok "lent_machine.sh: kernels, then offload-max alone after vsllmc, which leaves them 3 + 8 s"
else bad "lent_machine.sh: order $(tr '\n' ';' < "$tmp/order" 2> /dev/null)"; fi
grep -q "^lane kernels: exit 124" "$tmp/lm/summary.txt" && [ -n "$(at offload-max end)" ] &&
    ok "lent_machine.sh: the overrunning kernels lane was stopped, and offload-max still ran" ||
    bad "lent_machine.sh: kernels $(grep "^lane kernels" "$tmp/lm/summary.txt"), offload-max end $(at offload-max end)"
if awk -v u0="$(at units start)" -v u1="$(at units end)" -v b0="$(at bitwise start)" -v b1="$(at bitwise end)" \
       'BEGIN { exit !(u0 != "" && b0 != "" && u0 < b1 && b0 < u1) }'
then ok "lent_machine.sh: the correctness lanes ran at once"
else bad "lent_machine.sh: the correctness lanes did not overlap"; fi
if grep -q "stand-in table" "$tmp/lm/summary.txt" && [ -f "$tmp/out/bench_vs_llmc.md" ] && [ "$(grep -c "^lane .*: exit 0" "$tmp/lm/summary.txt")" -eq 4 ]
then ok "lent_machine.sh: the four other lanes exit 0; the table in summary.txt and OUT"
else bad "lent_machine.sh: summary or OUT incomplete"; tail -n 5 "$tmp/lm.log"; fi

echo "$pass passed, $failn failed"
[ "$failn" -eq 0 ]
