#!/usr/bin/env bash
# The logic of the GPU benchmark against llm.c, with the emulated trainers standing in:
#  1. dev/bench/bench_vs_llmc.sh in a tiny mode (d2c64h1t64, B=2, T=64, 3 steps): the
#     emulated train_gpt2cu stands in for llm.c's binary (LLMC_BIN), its step lines
#     rewritten into llm.c's format and refusing B=4 as a GPU out of memory would. The table
#     must have every row with parsed numbers (steps 3, tok/s > 0, MFU, memory, losses),
#     train_gpt2cu and train_gpt2_zero (-z 1, and -z 2 with --offload-optimizer cpu) agreeing
#     with their reference (the same bits here: difference 0), train_gpt2cu --cudnn 2 (cuDNN's
#     atomic backward, its losses agreeing with llm.c's stand-in), the largest-B search stopping
#     at the stand-in's first failure and going on for train_gpt2cu (B=4, then 6), and
#     train_gpt2_zero -z 2 at 2 ranks with and without --fast-reduce (its losses agreeing
#     with the default's, its tok/s set over the default's).
#  2. bench_vs_llmc.sh --profile with a stand-in for Nsight Compute that writes ncu's CSV from
#     the emulator's trace (a row per kernel launch, cuBLASLt call and cuDNN execution, 2 us
#     each): the report's step must hold exactly one step's launches as the trace of a
#     2-step run less a 1-step run counts them (all, matmuls, attention, LayerNorm, AdamW),
#     for llm.c's stand-in, train_gpt2cu and train_gpt2_zero -z 3, and the matmuls' TFLOP/s
#     from the model file's shape (6 N B T over their time); and kernel_profile.py
#     on ncu's two CSV layouts (details and raw, with units and thousands separators, the
#     metric by name or label, an update cut short), its kinds of kernel, and its refusals
#     (no table, no whole step, a number in another locale's format), each naming the file;
#     an unreadable input beside readable ones named in the report (a -z 9 run that fails at
#     its start, too), and the exit status 1 unless it is --optional.
set -u
cd "$(dirname "$0")/../../.."
source dev/test/emu/emu_common.sh
need_emu train_gpt2cu train_gpt2_zero
[ -x build/model_bf16 ] || { echo "FAIL: build/model_bf16 not built (make build/model_bf16)"; exit 1; }
export CUDA_EMU_QUIET=1 OMP_NUM_THREADS=1 CUDA_EMU_BLOCKS=1 CUDA_EMU_PREEMPT=0
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
    ZERO_STAGES=1 OFFLOAD_STAGES=2 T=64 STEPS=3 PEAK_TFLOPS=0.01 DEADLINE=600 LOGDIR=$tmp/vs \
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
d=$(field "train_gpt2cu --cudnn 2 (atomic dQ)" 11); r=$(field "train_gpt2cu --cudnn 2 (atomic dQ)" 7)
if [ "$(field "train_gpt2cu --cudnn 2 (atomic dQ)" 4)" = ok ] && [[ $d =~ ^[0-9.]+e[-+][0-9]+\ at\ step\ [0-9]+\ of\ 3:\ agree$ ]] &&
   awk -v r="$r" 'BEGIN { exit !(r > 0) }' && grep -q "atomic dQ, workspace" "$tmp/vs/cu-atomic_d2c64h1t64_b2.txt"
then ok "row 'train_gpt2cu --cudnn 2': cuDNN's atomic backward ran, ratio to llm.c $r, losses against llm.c: $d"
else bad "row 'train_gpt2cu --cudnn 2': difference '$d', ratio '$r'"; fi
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
# MFU = ranks on the GPU x tok/s x (6 N + 6 L C T) / peak, d2c64h1t64 (L=2, C=64, Vp=50304):
# N = Vp C + L (12 C^2 + 13 C) + 2 C
for c in "train_gpt2cu:1" "train_gpt2_zero -z 2, 2 ranks (per-rank tok/s):2"; do
    l=${c%:*}; mfu=$(field "$l" 8); tk=$(field "$l" 6)
    want=$(awk -v t="$tk" -v r="${c##*:}" 'BEGIN { C = 64; L = 2; N = 50304 * C + L * (12 * C * C + 13 * C) + 2 * C
                                                   printf "%.1f%%", 100 * r * t * (6 * N + 6 * L * C * 64) / 0.01e12 }')
    [ "$mfu" = "$want" ] && ok "row '$l': MFU from the model file's shape, $mfu at $tk tok/s a rank, ${c##*:} rank(s) on the GPU" ||
        bad "row '$l': MFU '$mfu', want '$want' at $tk tok/s"
done
# a loss that is not finite never agrees: llm.c's stand-in prints nan at step 2
cat > "$tmp/llmc_nan" <<EOF
#!/usr/bin/env bash
set -o pipefail
"$tmp/llmc" "\$@" | sed 's/^\(step *2\/2 | loss \)[^ ]*/\1-nan/'
EOF
chmod +x "$tmp/llmc_nan"
LLMC_BIN=$tmp/llmc_nan CU=$EMU/train_gpt2cu MODELS="d2c64h1t64:2" BIG_B= ZERO_STAGES= OFFLOAD_STAGES= FAST_STAGES= \
    T=64 STEPS=2 DEADLINE=600 LOGDIR=$tmp/vsnan OUT_MD=$tmp/nan.md bash dev/bench/bench_vs_llmc.sh > "$tmp/nan.log" 2>&1
rc=$?
d=$(awk -F'|' '{ t = $2; gsub(/^ +| +$/, "", t) } t == "train_gpt2cu" { v = $12; gsub(/^ +| +$/, "", v); print v }' "$tmp/nan.md")
[ $rc -ne 0 ] && [ "$d" = "a loss not finite at step 2 of 2: DIFFER" ] && ok "llm.c's loss -nan at step 2: '$d', exit $rc" ||
    bad "llm.c's loss -nan: difference '$d', exit $rc"
if ! grep -q "llm.c train_gpt2cu, largest B" "$tmp/table.md" && [ -f "$tmp/vs/llmc_d2c64h1t64_b4.txt" ] && [ ! -f "$tmp/vs/llmc_d2c64h1t64_b6.txt" ]
then ok "largest B: llm.c's search stopped at its first failure (B=4), no row for it"
else bad "largest B: llm.c's search did not stop at B=4"; fi
grep -q "^GPU: .*llm.c: " "$tmp/table.md" && ok "the table's header names the GPU, driver and commits" || bad "no header line"

# 2. --profile, Nsight Compute standing in as the emulator's trace in ncu's CSV
cat > "$tmp/ncu" <<'NCU'
#!/usr/bin/env bash
# ncu, as far as bench_vs_llmc.sh --profile can tell: each kernel launch, cuBLASLt call and
# cuDNN execution of the program (the emulator's trace) a row of ncu's CSV, 2000 ns each
[ "${1:-}" = --version ] && { echo "NVIDIA (R) Nsight Compute Command Line Profiler (stand-in)"; exit 0; }
log=; count=1000000000
while [ $# -gt 0 ]; do
    case $1 in
        --log-file) log=$2; shift 2 ;;
        --launch-count|-c) count=$2; shift 2 ;;
        --metrics|--clock-control|--cache-control) shift 2 ;;
        --*) shift ;;
        *) break ;;
    esac
done
CUDA_EMU_TRACE=1 "$@" 2> "$log.trace"
rc=$?
grep -v "^cuda_emu: " "$log.trace" >&2
{
    echo "==PROF== Connected to process 1 ($1)"
    echo '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
    sed -n 's/^cuda_emu: stream [0-9]*: //p' "$log.trace" | awk -v max="$count" '
        $1 == "kernel" { n = "void " $2 "(float*, int)" }
        $1 == "cublasLtMatmul" { n = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_emulated" }
        $1 == "cudnnBackendExecute" { n = "cudnn_generated_fort_native_sdpa_sm90_emulated" }
        n != "" && id < max { printf "\"%d\",\"1\",\"p\",\"h\",\"%s\",\"1\",\"7\",\"(256, 1, 1)\",\"(1, 1, 1)\",\"0\",\"9.0\",\"Command line profiler metrics\",\"gpu__time_duration.sum\",\"nsecond\",\"2,000\"\n", id++, n }
        { n = "" }'
    echo "==PROF== Disconnected from process 1"
} > "$log"
exit $rc
NCU
chmod +x "$tmp/ncu"
NCU=$tmp/ncu LLMC_BIN=$tmp/llmc CU=$EMU/train_gpt2cu ZERO=$EMU/train_gpt2_zero MODELS="d2c64h1t64:2" T=64 \
    PROFILE_STEPS=2 PROFILE_STAGES="3 9" DEADLINE=300 LOGDIR=$tmp/prof OUT_MD=$tmp/profile.md \
    bash dev/bench/bench_vs_llmc.sh --profile > "$tmp/prof.log" 2>&1
rc=$?
[ $rc -eq 0 ] && ok "bench_vs_llmc.sh --profile exits 0" || { bad "bench_vs_llmc.sh --profile exit $rc"; tail -n 20 "$tmp/prof.log"; }
# a step's launches, per kind, as the trace counts them: a 2-step run less a 1-step run
trace_counts() {   # trace_counts STEPS BIN ARGS...: "all matmul attention layernorm adamw" of a traced run
    local s=$1; shift
    CUDA_EMU_TRACE=1 "$@" -i "$train" -j "$train" -t 64 -x "$s" -l 3e-4 -u 0 -k constant -q 1.0 -c 0.0 -v 100000 -m 1 -s 0 -a 1 -r 1 \
        -e "$tmp/prof/init_d2c64h1t64.bin" -b 2 --shuffle 0 -o "$tmp/tc" 2>&1 > /dev/null | sed -n 's/^cuda_emu: stream [0-9]*: //p' |
        awk '$1 == "kernel" || $1 == "cublasLtMatmul" || $1 == "cudnnBackendExecute" { a++ } $1 == "cublasLtMatmul" { m++ }
             $1 == "cudnnBackendExecute" { t++ } $1 == "kernel" && $2 ~ /layernorm/ { l++ } $1 == "kernel" && $2 ~ /adamw/ { w++ }
             END { print a + 0, m + 0, t + 0, l + 0, w + 0 }'
}
train=$(ls data/kjv/kjv_train_*.bin | head -n 1)
# field of the report's kind row: launches of trainer column K (1-based)
launches() { awk -F'|' -v k="$1" -v c="$2" '{ t = $2; gsub(/^ +| +$/, "", t) } t == k { v = $(2 + 2 * c); gsub(/[ ,]/, "", v); print v; exit }' "$tmp/profile.md"; }
micros() { awk -F'|' -v k="$1" -v c="$2" '{ t = $2; gsub(/^ +| +$/, "", t) } t == k { v = $(1 + 2 * c); gsub(/[ ,]/, "", v); print v; exit }' "$tmp/profile.md"; }
# columns 1-3: llm.c's stand-in (the emulated train_gpt2cu: train_gpt2cu's count is its reference), train_gpt2cu, -z 3
for who in "train_gpt2cu:$EMU/train_gpt2cu" "llm.c:" "zero -z 3:$EMU/train_gpt2_zero -z 3"; do
    label=${who%%:*}; read -r -a cmd <<< "${who#*:}"
    case $label in llm.c) col=1 ;; train_gpt2cu) col=2 ;; *) col=3 ;; esac
    if [ -n "${cmd[*]}" ]; then
        read -r a2 m2 t2 l2 w2 <<< "$(trace_counts 2 "${cmd[@]}")"
        read -r a1 m1 t1 l1 w1 <<< "$(trace_counts 1 "${cmd[@]}")"
    fi
    want="$((a2 - a1)) $((m2 - m1)) $((t2 - t1)) $((l2 - l1)) $((w2 - w1))"
    got="$(launches "all kernels" $col) $(launches matmul $col) $(launches attention $col) $(launches layernorm $col) $(launches adamw $col)"
    if [ "$want" = "$got" ] && [ "$(micros "all kernels" $col)" = "$(awk -v n="$((a2 - a1))" 'BEGIN { printf "%.1f", 2 * n }')" ]
    then ok "--profile, $label: one step's launches (all, matmul, attention, LayerNorm, AdamW: $got) as the trace counts them, 2 us each"
    else bad "--profile, $label: launches '$got', want '$want' (trace 2 steps less 1); all kernels us '$(micros "all kernels" $col)'"; fi
done
# the matmuls' rate from the model file's shape (d2c64h1t64: L=2, C=64, Vp=50304) at B=2, T=64:
# 6 (12 C^2 L + Vp C) B T FLOP over their 2 us launches
want=$(awk -v n="$(launches matmul 2)" 'BEGIN { printf "%.3g", 6 * (12 * 64 * 64 * 2 + 50304 * 64) * 2 * 64 / (2e-6 * n) / 1e12 }')
got=$(awk -F'|' '$2 ~ /^ train_gpt2cu $/ { gsub(/ /, "", $3); print $3 }' "$tmp/profile.md")
[ -n "$got" ] && [ "$got" = "$want" ] && ok "--profile: train_gpt2cu's matmul rate from the model's shape, $got TFLOP/s" ||
    bad "--profile: matmul TFLOP/s '$got', want '$want'"
grep -q "^GPU: .*ncu: NVIDIA (R) Nsight Compute" "$tmp/profile.md" && grep -q "heaviest kernels" "$tmp/profile.md" &&
    ok "--profile: the report names the GPU and ncu, and lists the heaviest kernels" || bad "--profile: report header or kernel lists missing"
# -z 9 is refused at its start: its run and its missing profile are named, and the exit stays 0
grep -q "^Run: zero -z 9: exit [1-9][0-9]*: .*" "$tmp/profile.md" && grep -q "^- No profile: zero -z 9: .*prof_zero-z9.csv: " "$tmp/profile.md" &&
    grep -q "^Time under ncu, start-up included: llm.c [0-9]* s, train_gpt2cu [0-9]* s, zero -z 3 [0-9]* s, zero -z 9 [0-9]* s\.$" "$tmp/profile.md" &&
    ! grep -q -e "^Run: zero -z 3" -e "^Run: train_gpt2cu" -e "No profile: zero -z 3" "$tmp/profile.md" &&
    ok "--profile: a run that failed (-z 9) is named, with no profile, and the others reported" ||
    bad "--profile: -z 9's failure not named: $(grep -e "^Run" -e "No profile" "$tmp/profile.md" | tr '\n' ';')"

# kernel_profile.py on ncu's raw page (a column per metric, its units in the next row) and its refusals
kp=dev/bench/kernel_profile.py
{
    echo '==PROF== Connected to process 9 (/x/t)'
    echo '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","gpu__time_duration.sum"'
    echo '"","","","","","","","usecond"'
    i=0
    # a step: a cast in template arguments, cuBLASLt's and CUTLASS's matmuls, a kernel whose
    # parameter type names AdamW (no update), then the update's two AdamW launches
    step=("void layernorm_forward_kernel<(int)3>(float*)" "sm90_xmma_gemm_x"
          "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_64x64_tn_align8>(T1::Params)"
          "void round_stochastic_kernel(__nv_bfloat16 *, const float *, AdamWBatch, unsigned long)" adamw_kernel adamw_kernel)
    for k in adamw_kernel "${step[@]}" "${step[@]}"; do
        echo "\"$i\",\"9\",\"t\",\"h\",\"$k\",\"1\",\"7\",\"1,$((i + 100)).5\""; i=$((i + 1))
    done
} > "$tmp/raw.csv"
# the last whole step: IDs 7-12 (layernorm 1107.5, the matmuls 1108.5 + 1109.5, the rounding
# 1110.5, AdamW 1111.5 + 1112.5)
out=$(python3 "$kp" r="$tmp/raw.csv")
if grep -q "^| layernorm | 1,107.5 | 1 |$" <<< "$out" && grep -q "^| matmul | 2,218.0 | 2 |$" <<< "$out" &&
   grep -q "^| roundings, ZeRO's sums | 1,110.5 | 1 |$" <<< "$out" && grep -q "^| adamw | 2,224.0 | 2 |$" <<< "$out" &&
   grep -q "^| all kernels | 6,660.0 | 6 |$" <<< "$out" &&
   grep -q "^- r: 6 kernels in step 3, the last whole one profiled (13 kernels profiled)" <<< "$out"
then ok "kernel_profile.py: ncu's raw page (usecond, thousands separators), templates and namespaces, the last whole step, its kinds"
else bad "kernel_profile.py on the raw page: $(tr '\n' ';' <<< "$out")"; fi
# the details page with the metric's label (Duration), cuBLASLt's fused-bias matmul, llm.c's
# bias kernel, and a last update cut short by --launch-count (1 of its 2 AdamW launches)
details() {   # details NAME:US...: ncu's details page, a row per kernel
    echo '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Section Name","Metric Name","Metric Unit","Metric Value"'
    local i=0 k
    for k in "$@"; do echo "\"$i\",\"9\",\"t\",\"h\",\"${k%:*}\",\"1\",\"7\",\"GPU Speed Of Light Throughput\",\"Duration\",\"usecond\",\"${k##*:}\""; i=$((i + 1)); done
}
step=("layernorm_forward_kernel3:2" "gelu_forward_kernel2:2" "fused_classifier_kernel5:2"
      "nvjet_sm90_tst_192x208_64x4_2x1_v_bz_coopB_bias_TNT:10" "void matmul_backward_bias_kernel9<float, (bool)1>(float *):3"
      "adamw_kernel3:1" "adamw_kernel3:1")
details "adamw_kernel3:1" "${step[@]}" "${step[@]}" "${step[@]:0:6}" > "$tmp/label.csv"
out=$(python3 "$kp" l="$tmp/label.csv")
if grep -q "^| matmul | 10.0 | 1 |$" <<< "$out" && grep -q "^| bias gradient | 3.0 | 1 |$" <<< "$out" &&
   grep -q "^| adamw | 2.0 | 2 |$" <<< "$out" && grep -q "^- l: 7 kernels in step 3, " <<< "$out"
then ok "kernel_profile.py: the metric by its label, a fused-bias matmul as a matmul, and an update cut short left out"
else bad "kernel_profile.py on the details page: $(tr '\n' ';' <<< "$out")"; fi
details "adamw_kernel3:1" "nvjet_x:1.234,5" "adamw_kernel3:1" "nvjet_x:1" "adamw_kernel3:1" > "$tmp/locale.csv"
head -n 3 "$tmp/raw.csv" > "$tmp/one.csv"; echo '"0","9","t","h","adamw_kernel","1","7","5"' >> "$tmp/one.csv"
for c in "one.csv:no whole step" "prof.log:no ncu CSV table" "locale.csv:'1.234,5' is not a number"; do
    f=${c%%:*}; want=${c#*:}
    if err=$(python3 "$kp" "x=$tmp/$f" 2>&1 > /dev/null); then bad "kernel_profile.py accepted $f"
    elif grep -q "$tmp/$f: .*$want" <<< "$err"; then ok "kernel_profile.py refuses $f, naming it: $err"
    else bad "kernel_profile.py on $f: '$err'"; fi
done
# an unreadable input among readable ones: named in the report, the others reported; the exit
# status 1 unless it is --optional
out=$(python3 "$kp" r="$tmp/raw.csv" x="$tmp/one.csv" 2> /dev/null); rc=$?
out_opt=$(python3 "$kp" --optional x,y r="$tmp/raw.csv" x="$tmp/one.csv" 2> /dev/null); rc_opt=$?
if [ $rc = 1 ] && [ $rc_opt = 0 ] && grep -q "^- No profile: x: $tmp/one.csv: .*no whole step" <<< "$out" &&
   grep -q "^| all kernels | 6,660.0 | 6 |$" <<< "$out" && [ "$out" = "$out_opt" ]
then ok "kernel_profile.py: an unreadable input is named and the others reported; exit 1, or 0 when --optional"
else bad "kernel_profile.py with an unreadable input: exit $rc (--optional: $rc_opt): $(tr '\n' ';' <<< "$out")"; fi

echo "$pass passed, $failn failed"
[ "$failn" -eq 0 ]
