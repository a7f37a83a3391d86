#!/usr/bin/env bash
# bench_vs_llmc.sh LLMC_DIR: train_gpt2cu against llm.c's train_gpt2cu on one otherwise idle
# GPU, one run after the other, the same model file, data and settings; and train_gpt2_zero
# at 1 rank (stages 0-3, and with --offload-optimizer cpu) against train_gpt2cu. Writes a
# markdown table (GPU, driver, library versions, commits) to OUT_MD. -h prints the usage.
set -u
usage() {
    cat <<'USAGE'
usage: dev/bench/bench_vs_llmc.sh [--build-only DEST | --profile] LLMC_DIR
       LLMC_BIN=BINARY dev/bench/bench_vs_llmc.sh [--profile] [LLMC_DIR]

Builds llm.c's train_gpt2cu in the llm.c checkout LLMC_DIR (its own Makefile, sm_90, bf16,
no NCCL or MPI; cuDNN attention when cudnn-frontend's headers are found: CUDNN_FRONTEND_PATH,
LLMC_DIR/cudnn-frontend/include or ~/cudnn-frontend/include; with CUDA 13, nvcc force-includes
dev/bench/llmc_cuda13_compat.h), then runs, in this order, each under what is left of DEADLINE:
  1. both trainers on the first model of MODELS at its B: llm.c, then train_gpt2cu; then
     train_gpt2cu --cudnn 2 (cuDNN's atomic dQ backward, the one llm.c runs: the price of
     the deterministic default) unless ATOMIC=0;
  2. train_gpt2_zero at 1 rank, -z for each of ZERO_STAGES, and each of OFFLOAD_STAGES
     with --offload-optimizer cpu, against train_gpt2cu's run of 1.;
  3. the largest B of BIG_B that each trainer fits (ascending, up to the first failure);
  4. the other models of MODELS, both trainers;
  5. train_gpt2_zero at 2 ranks on the one GPU, -z for each of FAST_STAGES with the default
     reduction and with --fast-reduce (the ratio is --fast-reduce's tok/s over the
     default's): last, as two ranks sharing one GPU time NCCL over loopback more than ZeRO.
Every run starts from one model file (train_gpt2cu's random init of the model, rounded to
bf16: llm.c's version-5 file, which both read) and trains STEPS steps on the first batch
of the train shard again and again (-a 1; llm.c always shuffles otherwise), so the two
trainers see the same tokens: -l 3e-4 -u 0 -k constant -q 1.0 -c 0 -r RECOMPUTE, clip 1.
Per run: tok/s (the median over the second half of the steps of B*T / the step's time,
from each trainer's step lines), MFU (tok/s x flops per token / PEAK_TFLOPS; flops per
token 6 N + 6 L C T, N the parameters without wpe, as train_gpt2cu counts them), peak
device memory (nvidia-smi polled every 100 ms, whole GPU; without nvidia-smi, what the
trainer itself prints it allocates), the first and last loss, and the largest relative
loss difference against the reference run of the same model and B (llm.c's for
train_gpt2cu, train_gpt2cu's for train_gpt2_zero): "agree" when it is at most LOSS_TOL.

  --build-only DEST   build llm.c's binary, copy it to DEST, write DEST.info, run nothing
  --profile           in place of 1.-4.: where a step's GPU time goes, kernel by kernel. Each
                      trainer (llm.c, train_gpt2cu, train_gpt2_zero -z each of PROFILE_STAGES)
                      runs PROFILE_STEPS steps of the first model under Nsight Compute (NCU),
                      which times every kernel alone; dev/bench/kernel_profile.py sums the last
                      whole step's kernels by kind (matmul, attention, LayerNorm, ...) side by
                      side, with the TFLOP/s the matmuls and attention reach, and lists each
                      trainer's heaviest kernels, into OUT_MD. ncu's CSVs
                      stay in LOGDIR. Exit status 0 when llm.c's and train_gpt2cu's steps parsed.
Environment (defaults in brackets):
  LLMC_BIN        llm.c's built binary, or any program that takes its flags: no build
  CU              our unsharded trainer [./train_gpt2cu]
  MODEL_BF16      dev/tools/model_bf16 (make build/model_bf16) [build/model_bf16]
  ZERO            how to start train_gpt2_zero at 1 rank [scripts/launch_ranks.sh 1 ./train_gpt2_zero]
  MODELS          DESCRIPTOR:B list, our descriptors [d12:64 d24c1024h16:64 d48c1600h25:16]
  BIG_B           B tried on the first model, ascending; B*T+1 tokens must fit in the
                  train shard (B <= 958 at T=1024 on data/kjv) [128 256 512]
  T, STEPS        sequence length and steps per run [1024, 20]
  ZERO_STAGES     [0 1 2 3]    OFFLOAD_STAGES [2]    FAST_STAGES [2]
  ZERO_RANKS      how to start train_gpt2_zero at 2 ranks [scripts/launch_ranks.sh 2 ./train_gpt2_zero]
  RECOMPUTE       -r of both trainers [1]
  ATOMIC          1: the train_gpt2cu --cudnn 2 row of 1. [1]
  DEADLINE        seconds for everything from the start; a run that would start with less
                  than MIN_LEFT seconds [60] left is listed as not run [1200]
  PEAK_TFLOPS     peak bf16 dense TFLOP/s for MFU [from the GPU's name: 989 for H100/H200]
  LOSS_TOL        relative loss difference that still counts as agreeing [0.02]
  LOGDIR          every run's output [/tmp/bench_vs_llmc]
  MODEL_DIR       the initial model files; when set, one there already is reused (the
                  benchmark, then --profile, naming the same folder) [LOGDIR, never reused]
  OUT_MD          the table [LOGDIR/bench_vs_llmc.md]
  BUILD_INFO      a file whose lines join the table's header (dev/gpu/bundle.sh writes
                  gpubundle/BUILD_INFO) [gpubundle/BUILD_INFO when it exists]
  NCU             --profile: Nsight Compute's command line [ncu on the PATH, else the toolkit's]
  PROFILE_STEPS   --profile: steps each trainer runs, 2 or more (the first is left out) [2]
  PROFILE_STAGES  --profile: the -z stages of train_gpt2_zero profiled at 1 rank [3]
  PROFILE_LAUNCHES --profile: kernels ncu times at most a run, from the start [5000]
Prints the table at the end; exit status 0 when the first pair ran and agreed.
USAGE
}
build_dest=; profile=0
case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    --build-only) build_dest=${2:?--build-only DEST}; shift 2 ;;
    --profile) profile=1; shift ;;
esac
[ $# -eq 1 ] || { [ $# -eq 0 ] && [ -n "${LLMC_BIN:-}" ] && [ -z "$build_dest" ]; } || { usage >&2; exit 2; }
llmc_dir=${1:+$(realpath -m "$1")}
[ -n "$build_dest" ] && build_dest=$(realpath -m "$build_dest")
cd "$(dirname "$0")/../.."
t_start=$(date +%s)

# --- llm.c's binary ---------------------------------------------------------------------------
llmc_commit=$( { [ -n "$llmc_dir" ] && git -C "$llmc_dir" rev-parse --short HEAD 2> /dev/null; } || echo "${LLMC_COMMIT:-unknown}")
build_llmc() {   # build_llmc: LLMC_DIR/train_gpt2cu with llm.c's Makefile; sets llmc_cudnn
    local fe=${CUDNN_FRONTEND_PATH:-} home=$HOME ld="-lcublas -lcublasLt"
    [ -z "$fe" ] && [ -d "$llmc_dir/cudnn-frontend/include" ] && fe=$llmc_dir/cudnn-frontend/include
    [ -z "$fe" ] && [ -d "$HOME/cudnn-frontend/include" ] && fe=$HOME/cudnn-frontend/include
    local flags=(GPU_COMPUTE_CAPABILITY=90 NO_MULTI_GPU=1 NO_USE_MPI=1)
    if [ -n "$fe" ] && [ -f "$fe/cudnn_frontend.h" ]; then
        # llm.c's Makefile looks for $HOME/cudnn-frontend/include: a home that has it there
        home=$(mktemp -d); mkdir -p "$home/cudnn-frontend"; ln -s "$(realpath "$fe")" "$home/cudnn-frontend/include"
        flags+=(USE_CUDNN=1); llmc_cudnn="cuDNN attention (cudnn-frontend $(awk '/define CUDNN_FRONTEND_(MAJOR|MINOR|PATCH)_VERSION/ { v = v (v == "" ? "" : ".") $3 } END { print v }' "$fe/cudnn_frontend_version.h"))"
        ld="$ld -lcudnn -lnvrtc"   # recent cudnn-frontends compile kernels with NVRTC
    else
        echo "bench_vs_llmc: no cudnn-frontend headers: llm.c builds with USE_CUDNN=0 (its own attention kernels)"
        flags+=(USE_CUDNN=0); llmc_cudnn="its own attention (USE_CUDNN=0)"
    fi
    # llm.c uses NVML where the toolkit has nvml.h
    local cuda_inc; cuda_inc=$(dirname "$(dirname "$(command -v nvcc)")")/include
    { [ -f "$cuda_inc/nvml.h" ] || [ -f /usr/include/nvml.h ]; } && ld="$ld -lnvidia-ml"
    flags+=(NVCC_LDFLAGS="$ld")
    local t0; t0=$(date +%s)
    echo "bench_vs_llmc: building llm.c's train_gpt2cu in $llmc_dir: make train_gpt2cu ${flags[*]}"
    # CUDA 13's cudaMemAdvise signature: dev/bench/llmc_cuda13_compat.h, force-included
    HOME=$home NVCC_APPEND_FLAGS="${NVCC_APPEND_FLAGS:-} -include $PWD/dev/bench/llmc_cuda13_compat.h" \
        make -C "$llmc_dir" train_gpt2cu "${flags[@]}" > "$llmc_dir/build_train_gpt2cu.log" 2>&1 ||
        { tail -n 30 "$llmc_dir/build_train_gpt2cu.log"; echo "bench_vs_llmc: llm.c's build failed"; exit 1; }
    [ "$home" != "$HOME" ] && rm -rf "$home"
    echo "bench_vs_llmc: built $llmc_dir/train_gpt2cu in $(( $(date +%s) - t0 )) s"
}
if [ -n "${LLMC_BIN:-}" ]; then
    llmc_bin=$LLMC_BIN; llmc_cudnn=${LLMC_CUDNN:-as built}
else
    command -v nvcc > /dev/null || { echo "bench_vs_llmc: no nvcc to build llm.c (or set LLMC_BIN)"; exit 1; }
    build_llmc; llmc_bin=$llmc_dir/train_gpt2cu
fi
if [ -n "$build_dest" ]; then
    mkdir -p "$(dirname "$build_dest")" && cp -p "$llmc_bin" "$build_dest" || exit 1
    printf 'llm.c: %s, %s, built with %s\n' "$llmc_commit" "$llmc_cudnn" \
        "CUDA $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')" > "$build_dest.info"
    echo "bench_vs_llmc: $build_dest ($(cat "$build_dest.info"))"
    exit 0
fi
binfo=${BUILD_INFO:-gpubundle/BUILD_INFO}
llmc_info="llm.c: $llmc_commit, $llmc_cudnn"
if [ -f "$llmc_bin.info" ]; then llmc_info=$(cat "$llmc_bin.info")
elif [ -f "$binfo" ] && grep -q "^llm.c: " "$binfo"; then llmc_info=$(grep -m 1 "^llm.c: " "$binfo"); fi

# llm.c flushes its step lines only when it samples: into a file they are block-buffered, and a
# run stopped at the deadline would leave none (ours set line buffering themselves)
llmc_run=("$llmc_bin"); command -v stdbuf > /dev/null && llmc_run=(stdbuf -oL "$llmc_bin")

# --- settings ---------------------------------------------------------------------------------
CU=${CU:-./train_gpt2cu}; model_bf16=${MODEL_BF16:-build/model_bf16}
read -r -a zero <<< "${ZERO:-scripts/launch_ranks.sh 1 ./train_gpt2_zero}"
read -r -a models <<< "${MODELS:-d12:64 d24c1024h16:64 d48c1600h25:16}"
read -r -a big_b <<< "${BIG_B-128 256 512}"
read -r -a zstages <<< "${ZERO_STAGES-0 1 2 3}"
read -r -a ostages <<< "${OFFLOAD_STAGES-2}"
read -r -a fstages <<< "${FAST_STAGES-2}"
read -r -a zero_n <<< "${ZERO_RANKS:-scripts/launch_ranks.sh 2 ./train_gpt2_zero}"
T=${T:-1024}; STEPS=${STEPS:-20}; R=${RECOMPUTE:-1}
[ $profile = 1 ] && STEPS=${PROFILE_STEPS:-2}
deadline=${DEADLINE:-1200}; min_left=${MIN_LEFT:-60}; tol=${LOSS_TOL:-0.02}
log=${LOGDIR:-/tmp/bench_vs_llmc}; mkdir -p "$log"
out_md=${OUT_MD:-$log/bench_vs_llmc.md}
train=$(ls data/kjv/kjv_train_*.bin | head -n 1)
have_smi=0; nvidia-smi -L > /dev/null 2>&1 && have_smi=1
gpu_name=unknown; driver=unknown
if [ $have_smi = 1 ]; then
    gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
    driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1)
fi
peak=${PEAK_TFLOPS:-}
if [ -z "$peak" ]; then
    case $gpu_name in *H100*PCIe*) peak=756 ;; *H100*|*H200*|*H800*) peak=989 ;; *A100*) peak=312 ;; esac
fi
# both trainers get llm.c's flags; ours also --shuffle 0 (llm.c's -a 1 reads the first batch in file order)
common=(-i "$train" -j "$train" -t "$T" -x "$STEPS" -l 3e-4 -u 0 -k constant -q 1.0 -c 0.0 -v 100000 -m 1 -s 0 -a 1 -r "$R")

left() { echo $(( deadline - ($(date +%s) - t_start) )); }
skipped=()
# run NAME B MODEL_FILE COMMAND...: the trainer's output in LOG/NAME.txt, memory in LOG/NAME.mem;
# returns the trainer's status (124: stopped by the deadline; 99: not started)
run() {
    local name=$1 b=$2 mf=$3; shift 3
    local l; l=$(left)
    rm -f "$log/$name.txt" "$log/$name.rc" "$log/$name.mem"   # an earlier invocation's, in the same LOGDIR
    if [ "$l" -lt "$min_left" ]; then
        skipped+=("$name"); echo 99 > "$log/$name.rc"; echo "bench_vs_llmc: $name not run ($l s left)"; return 99
    fi
    local smi=
    if [ $have_smi = 1 ]; then
        nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$log/$name.mem" 2> /dev/null &
        smi=$!
    fi
    echo "bench_vs_llmc: $name: $* ${common[*]} -e $mf -b $b -o $log/$name.out"
    timeout -k 10 "$l" "$@" "${common[@]}" -e "$mf" -b "$b" -o "$log/$name.out" > "$log/$name.txt" 2>&1
    local rc=$?
    [ -n "$smi" ] && { kill "$smi" 2> /dev/null; wait "$smi" 2> /dev/null; }
    echo "$rc" > "$log/$name.rc"
    rm -f "$log/$name.out"/*.bin   # the final model (GBs at d48): no use here
    echo "bench_vs_llmc: $name: exit $rc after $(( $(date +%s) - t_start )) s"
    return $rc
}
# losses NAME: "step loss" per step line; both trainers print "step k/N | loss X ... | Y ms |"
losses() {
    awk '/^step +[0-9]+\/[0-9]+ \|/ { split($2, s, "/"); for (i = 1; i <= NF; i++) if ($i == "loss") { print s[1], $(i + 1); break } }' "$log/$1.txt"
}
# toks NAME B: median over the second half of the steps of B*T*1000 / ms
toks() {
    awk -v bt=$(( $2 * T )) '/^step +[0-9]+\/[0-9]+ \|/ { split($2, s, "/"); n = s[2]
            for (i = 2; i <= NF; i++) if ($i == "ms") { ms[s[1]] = $(i - 1); break } }
        END { k = 0; for (st in ms) if (st + 0 > n / 2 && ms[st] > 0) v[++k] = bt * 1000 / ms[st]
              if (k == 0) { print "?"; exit }   # stopped before the second half: no figure, not 0
              for (i = 2; i <= k; i++) { x = v[i]; j = i - 1; while (j > 0 && v[j] > x) { v[j + 1] = v[j]; j-- } v[j + 1] = x }
              printf "%.0f", (k % 2) ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2 }' "$log/$1.txt"
}
# peak_mib NAME: nvidia-smi's largest reading, else the trainer's own allocation print
peak_mib() {
    if [ -s "$log/$1.mem" ]; then echo "$(sort -n "$log/$1.mem" | tail -n 1) (smi)"; return; fi
    awk '/^device memory usage:/ { l = $4 } /^(memory|zero): +total / { gsub(",", "", $3); v = sprintf("%.0f", $3 / 1048576) }
         END { if (l != "") v = l; if (v != "") print v " (own)"; else print "?" }' "$log/$1.txt"
}
# header FILE: a model file's first 8 ints on one line (magic, version, maxT, V, L, NH, C, Vp);
# od prints 4 a line unless told the width
header() { od -An -t d4 -w32 -N 32 "$1"; }
# flops per token of a model file: 6 N + 6 L C T, N without wpe
flops_tok() {
    header "$1" | awk -v T="$T" '{ L = $5; C = $7; Vp = $8
        N = Vp * C + L * (12 * C * C + 13 * C) + 2 * C; printf "%.0f", 6 * N + 6 * L * C * T }'
}
# init DESC: MODEL_DIR/init_DESC.bin, train_gpt2cu's random init of DESC (one step at lr 0 leaves it
# unchanged), rounded to bf16 (llm.c's version 5, which llm.c's bf16 build requires)
init_model() {
    local d=$1 f=${MODEL_DIR:-$log}/init_$1.bin
    [ -n "${MODEL_DIR:-}" ] && [ -s "$f" ] && { echo "$f"; return 0; }   # made by an earlier run named the same MODEL_DIR
    if [ "$(left)" -lt "$min_left" ]; then return 1; fi
    mkdir -p "$(dirname "$f")"
    timeout -k 10 "$(left)" "$CU" -e "$d" -b 1 -t 64 -x 1 -l 0 -v 0 -s 0 --shuffle 0 -o "$log/init_$d" > "$log/init_$d.txt" 2>&1 ||
        { echo "bench_vs_llmc: init of $d failed: $(tail -n 1 "$log/init_$d.txt")" >&2; return 1; }
    "$model_bf16" "$log/init_$d/model_final.bin" "$f.tmp" > /dev/null && mv "$f.tmp" "$f" || return 1
    rm -rf "$log/init_$d"
    echo "$f"
}

# run_status NAME [WIDTH]: how run NAME ended: ok, not run (deadline), stopped at the
# deadline, or its exit status with the last line of its log (WIDTH characters, default 80)
run_status() {
    local rc; rc=$(cat "$log/$1.rc" 2> /dev/null || echo 99)
    case $rc in
        0) echo ok ;;
        99) echo "not run (deadline)" ;;
        124) echo "stopped at the deadline" ;;
        *) echo "exit $rc: $(grep -v '^\s*$' "$log/$1.txt" | tail -n 1 | cut -c1-"${2:-80}")" ;;
    esac
}

rows=()
# row NAME LABEL MODEL B MODEL_FILE REF_NAME RATIO_TO [RATIO_B [RANKS]]: one table row from run
# NAME's log; RANKS (default 1) ranks share the GPU, each printing its own tok/s: the GPU's MFU
# counts them all
row() {
    local name=$1 label=$2 model=$3 b=$4 mf=$5 ref=$6 ratio_to=$7 ratio_b=${8:-$4} ranks=${9:-1}
    local status; status=$(run_status "$name" | tr '|' '/')
    if [ "$status" = "not run (deadline)" ]; then rows+=("| $label | $model | $b | $status | | | | | | | |"); return; fi
    local tk mfu_t pk first last n
    tk=$(toks "$name" "$b"); pk=$(peak_mib "$name")
    n=$(losses "$name" | wc -l)
    first=$(losses "$name" | head -n 1 | cut -d' ' -f2); last=$(losses "$name" | tail -n 1 | cut -d' ' -f2)
    mfu_t="n/a"
    [ -n "$peak" ] && [ "$tk" != "?" ] && mfu_t=$(awk -v t="$tk" -v f="$(flops_tok "$mf")" -v p="$peak" -v r="$ranks" 'BEGIN { printf "%.1f%%", 100 * r * t * f / (p * 1e12) }')
    local ratio="" vs=""
    if [ -n "$ratio_to" ] && [ -f "$log/$ratio_to.txt" ]; then
        local rt; rt=$(toks "$ratio_to" "$ratio_b")
        ratio=$(awk -v a="$tk" -v r="$rt" 'BEGIN { if (r + 0 > 0 && a + 0 > 0) printf "%.3f", a / r }')
    fi
    if [ -n "$ref" ] && [ -f "$log/$ref.txt" ]; then
        vs=$(join <(losses "$ref" | sort -k1,1) <(losses "$name" | sort -k1,1) |
             awk -v tol="$tol" 'tolower($2 $3) ~ /nan|inf/ { if (!bad) bad = $1 }
                 { d = $3 - $2; if (d < 0) d = -d; r = d / ($2 > 0 ? $2 : 1); if (!n || r > m) { m = r; s = $1 } n++ }
                 END { if (!n) { print "no common steps"; exit }
                       if (bad) { printf "a loss not finite at step %d of %d: DIFFER", bad, n; exit }
                       printf "%.2e at step %d of %d: %s", m, s, n, (m <= tol ? "agree" : "DIFFER") }')
    fi
    rows+=("| $label | $model | $b | $status | $n | $tk | ${ratio:-} | $mfu_t | $pk | ${first:-?} -> ${last:-?} | ${vs:-} |")
}

m0=${models[0]%%:*}; b0=${models[0]##*:}

# --- --profile: each trainer's kernels under Nsight Compute --------------------------------------
# ncu runs every kernel alone and reports its duration (one metric: a single pass, nothing
# replayed); the clocks and caches are left as the run finds them.
profile_kernels() {
    local ncu=${NCU:-}
    [ -z "$ncu" ] && ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -n 1)
    [ -n "$ncu" ] || { echo "bench_vs_llmc: --profile needs Nsight Compute's ncu (set NCU)"; return 1; }
    local mf; mf=$(init_model "$m0") || { echo "bench_vs_llmc: no model file for $m0"; return 1; }
    local flags=(--csv --metrics gpu__time_duration.sum --clock-control none --cache-control none
                 --launch-count "${PROFILE_LAUNCHES:-5000}")
    local names=(llmc cu) labels=("llm.c" "train_gpt2cu") z
    rm -f "$log"/prof_*.csv "$log"/prof_*.rc
    # LC_ALL=C: ncu's numbers as 1,234.5 whatever the machine's locale
    local secs=() t   # each run's seconds under ncu: what the next plan of GPU time is sized from
    t=$(date +%s); run prof_llmc "$b0" "$mf" env LC_ALL=C "$ncu" "${flags[@]}" --log-file "$log/prof_llmc.csv" "$llmc_bin"
    secs+=($(( $(date +%s) - t )))
    t=$(date +%s); run prof_cu "$b0" "$mf" env LC_ALL=C "$ncu" "${flags[@]}" --log-file "$log/prof_cu.csv" "$CU" --shuffle 0
    secs+=($(( $(date +%s) - t )))
    for z in ${PROFILE_STAGES-3}; do
        t=$(date +%s)
        run "prof_zero-z$z" "$b0" "$mf" env LC_ALL=C "$ncu" "${flags[@]}" --log-file "$log/prof_zero-z$z.csv" \
            "${zero[@]}" -z "$z" --shuffle 0
        secs+=($(( $(date +%s) - t )))
        names+=("zero-z$z"); labels+=("zero -z $z")
    done
    local args=() optional=() runs=() i st dims rc
    local took=()
    for i in "${!names[@]}"; do
        st=$(run_status "prof_${names[$i]}" 120)
        [ "$st" = ok ] || runs+=("${labels[$i]}: $st")
        took+=("${labels[$i]} ${secs[$i]} s")
        args+=("${labels[$i]}=$log/prof_${names[$i]}.csv")
        [ "$i" -ge 2 ] && optional+=("${labels[$i]}")   # train_gpt2_zero's: the report without them still answers
    done
    dims=$(header "$mf" | awk -v B="$b0" -v T="$T" '{ print $5 "," $7 "," $8 "," B "," T }')
    {
        python3 dev/bench/kernel_profile.py --title "Kernel time of one training step: $m0, B=$b0, T=$T ($(date -u +%Y-%m-%d))" \
            --model "$dims" --optional "$(IFS=,; echo "${optional[*]}")" "${args[@]}"
        rc=$?
        echo
        echo "GPU: $gpu_name, driver $driver; $llmc_info; ncu: $("$ncu" --version 2> /dev/null | tail -n 1)."
        echo "Each trainer ran $STEPS steps (${common[*]} -b $b0) under ncu ${flags[*]}."
        for i in "${runs[@]}"; do echo "Run: $i."; done
        echo "Time under ncu, start-up included: $(IFS=,; echo "${took[*]}" | sed 's/,/, /g')."
    } > "$out_md"
    cat "$out_md"
    return $rc
}
if [ $profile = 1 ]; then profile_kernels; exit; fi

# --- the runs, in priority order ----------------------------------------------------------------
first_ok=1
mf0=$(init_model "$m0") || { echo "bench_vs_llmc: no model file for $m0"; exit 1; }
run "llmc_${m0}_b$b0" "$b0" "$mf0" "${llmc_run[@]}"
run "cu_${m0}_b$b0" "$b0" "$mf0" "$CU" --shuffle 0
row "llmc_${m0}_b$b0" "llm.c train_gpt2cu" "$m0" "$b0" "$mf0" "" ""
row "cu_${m0}_b$b0" "train_gpt2cu" "$m0" "$b0" "$mf0" "llmc_${m0}_b$b0" "llmc_${m0}_b$b0"
grep -q "agree" <<< "${rows[1]}" && [ "$(cat "$log/cu_${m0}_b$b0.rc")" = 0 ] && [ "$(cat "$log/llmc_${m0}_b$b0.rc")" = 0 ] || first_ok=0
# the price of deterministic attention: train_gpt2cu with cuDNN's atomic dQ backward (--cudnn 2),
# the variant llm.c runs; its ratio is to llm.c (over the default row's: the price). Should
# cuDNN decline the atomic backward, the row says that the deterministic one ran.
if [ "${ATOMIC:-1}" = 1 ]; then
    run "cu-atomic_${m0}_b$b0" "$b0" "$mf0" "$CU" --shuffle 0 --cudnn 2
    label="train_gpt2cu --cudnn 2 (atomic dQ)"
    grep -q "atomic dQ, workspace" "$log/cu-atomic_${m0}_b$b0.txt" || label="train_gpt2cu --cudnn 2 (declined: deterministic dQ)"
    row "cu-atomic_${m0}_b$b0" "$label" "$m0" "$b0" "$mf0" "llmc_${m0}_b$b0" "llmc_${m0}_b$b0"
fi
for z in "${zstages[@]}"; do
    run "zero-z${z}_${m0}_b$b0" "$b0" "$mf0" "${zero[@]}" -z "$z" --shuffle 0
    row "zero-z${z}_${m0}_b$b0" "train_gpt2_zero -z $z (1 rank)" "$m0" "$b0" "$mf0" "cu_${m0}_b$b0" "cu_${m0}_b$b0"
done
for z in "${ostages[@]}"; do
    run "zero-z${z}_offcpu_${m0}_b$b0" "$b0" "$mf0" "${zero[@]}" -z "$z" --offload-optimizer cpu --shuffle 0
    row "zero-z${z}_offcpu_${m0}_b$b0" "train_gpt2_zero -z $z --offload-optimizer cpu" "$m0" "$b0" "$mf0" "cu_${m0}_b$b0" "cu_${m0}_b$b0"
done
# the largest B of BIG_B each trainer fits: ascending, stopping at the first that fails
rc=0
for who in llmc cu; do
    [ ${#big_b[@]} -gt 0 ] || break
    best=
    for b in "${big_b[@]}"; do
        if [ $who = llmc ]; then run "llmc_${m0}_b$b" "$b" "$mf0" "${llmc_run[@]}"; else run "cu_${m0}_b$b" "$b" "$mf0" "$CU" --shuffle 0; fi
        rc=$?
        [ $rc = 0 ] && best=$b || break
    done
    [ -n "$best" ] && eval "big_$who=$best"
    [ $rc = 99 ] && break
done
for who in llmc cu; do
    b=$(eval echo "\${big_$who:-}")
    [ -n "$b" ] || continue
    if [ $who = llmc ]; then row "llmc_${m0}_b$b" "llm.c train_gpt2cu, largest B of: ${big_b[*]}" "$m0" "$b" "$mf0" "" ""
    else row "cu_${m0}_b$b" "train_gpt2cu, largest B of: ${big_b[*]}" "$m0" "$b" "$mf0" "llmc_${m0}_b$b" "llmc_${m0}_b${big_llmc:-x}" "${big_llmc:-1}"; fi
done
for m in "${models[@]:1}"; do
    d=${m%%:*}; b=${m##*:}
    mf=$(init_model "$d") || { rows+=("| both | $d | $b | not run (no model file: deadline or init failed) | | | | | | | |"); continue; }
    run "llmc_${d}_b$b" "$b" "$mf" "${llmc_run[@]}"; run "cu_${d}_b$b" "$b" "$mf" "$CU" --shuffle 0
    row "llmc_${d}_b$b" "llm.c train_gpt2cu" "$d" "$b" "$mf" "" ""
    row "cu_${d}_b$b" "train_gpt2cu" "$d" "$b" "$mf" "llmc_${d}_b$b" "llmc_${d}_b$b"
done

# the price of determinism: 2 ranks on the GPU, the default reduction (fp32, rank order)
# against --fast-reduce (NCCL's bf16 reduce-scatter), the same micro-batch per rank
for z in "${fstages[@]}"; do
    run "zero2-z${z}_${m0}_b$b0" "$b0" "$mf0" "${zero_n[@]}" -z "$z" --shuffle 0
    run "zero2-z${z}_fast_${m0}_b$b0" "$b0" "$mf0" "${zero_n[@]}" -z "$z" --fast-reduce --shuffle 0
    row "zero2-z${z}_${m0}_b$b0" "train_gpt2_zero -z $z, 2 ranks (per-rank tok/s)" "$m0" "$b0" "$mf0" "" "" "$b0" 2
    row "zero2-z${z}_fast_${m0}_b$b0" "train_gpt2_zero -z $z --fast-reduce, 2 ranks" "$m0" "$b0" "$mf0" "zero2-z${z}_${m0}_b$b0" "zero2-z${z}_${m0}_b$b0" "$b0" 2
done

# --- the table ----------------------------------------------------------------------------------
ours_commit=$(git rev-parse --short HEAD 2> /dev/null || sed -n 's/^gpt2-zero commit \([^ ,]*\).*/\1/p' "$binfo" 2> /dev/null)
# the fused attention's own line ("...: cuDNN 91400 fused attention ready"), not the fallback's notice
cudnn_seen=$(grep -o -m 1 'cuDNN [0-9]* fused attention ready' "$log/cu_${m0}_b$b0.txt" 2> /dev/null | cut -d' ' -f1-2 || true)
{
    echo "## train_gpt2cu against llm.c's train_gpt2cu ($(date -u +%Y-%m-%d))"
    echo
    echo "GPU: $gpu_name, driver $driver; ours: commit ${ours_commit:-unknown}${cudnn_seen:+, $cudnn_seen at run time}; $llmc_info."
    [ -f "$binfo" ] && grep -v "^llm.c: " "$binfo" | sed 's/^/Build: /; s/$/  /'
    echo "Settings: T=$T, $STEPS steps, the first batch of $train each step (-a 1), one bf16 model file for both,"
    echo "-l 3e-4 -u 0 -k constant -q 1.0 -c 0 -r $R, clip 1; tok/s: median over steps $((STEPS / 2 + 1))-$STEPS of B*T / step time;"
    echo "MFU at ${peak:-unknown} TFLOP/s bf16 dense; peak memory in MiB (smi: nvidia-smi, whole GPU; own: the trainer's allocation print)."
    echo "Loss difference: the largest relative difference at one step against the run named (agree: at most $tol)."
    echo
    echo "| trainer | model | B | status | steps | tok/s | ratio | MFU | peak MiB | loss first -> last | loss difference |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    printf '%s\n' "${rows[@]}"
    echo
    echo "ratio: train_gpt2cu / llm.c at the same B (with --cudnn 2 too: train_gpt2cu's deterministic attention costs the first ratio over the --cudnn 2 one); train_gpt2_zero / train_gpt2cu. Loss difference against: llm.c for train_gpt2cu, train_gpt2cu for train_gpt2_zero."
    echo "2 ranks share the one GPU: their rows' tok/s is one rank's, their MFU the GPU's (both ranks' tokens)."
    [ ${#skipped[@]} -gt 0 ] && echo "Not run (deadline ${deadline} s): ${skipped[*]}."
} > "$out_md"
cat "$out_md"
echo "bench_vs_llmc: $out_md, logs in $log ($(( $(date +%s) - t_start )) s)"
[ $first_ok = 1 ]
