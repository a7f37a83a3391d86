#!/usr/bin/env bash
# bench_launches.sh: what one training step asks of the device, counted on the emulated
# device (make emu): kernel launches, library calls (cuBLASLt, cuDNN, NCCL), copies,
# memsets and the host's waits for the device (stream, event or device synchronizations)
# per step of train_gpt2cu and of train_gpt2_zero at stages 0-3 (1 rank), at d12's
# parameter table (148 slices: 12 layers) with a tiny width. The count is the code's, not
# the emulator's: a GPU runs the same launches and waits. On a GPU each launch costs the
# host a few microseconds, and each wait drains the device's queue.
#   EMU=build/emu      the emulated binaries to count (another checkout's, to compare)
#   STEPS=3            steps of the longer run; a step's count is STEPS minus STEPS-1
#   KERNELS=1          also each kernel's launches a step
#   STAGES="0 1 2 3"   the train_gpt2_zero stages to count
# Usage: dev/bench/bench_launches.sh [-h]
set -u
cd "$(dirname "$0")/../.."
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
EMU=${EMU:-build/emu}
STEPS=${STEPS:-3}
for b in train_gpt2cu train_gpt2_zero; do
    [ -x "$EMU/$b" ] || { echo "bench_launches: $EMU/$b is not built (make emu)" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CUDA_EMU_TRACE=1 CUDA_EMU_RACECHECK=0 CUDA_EMU_BLOCKS=1 CUDA_EMU_PREEMPT=0 CUDA_EMU_QUIET=1
export OMP_NUM_THREADS=1
model=(-e d12c64h1t64 -b 2 -t 64 -v 0 -s 0 -l 1e-3 -n 0)

# ops NAME STEPS BIN ARGS...: "count op" lines of the run's stream operations
ops() {
    local name=$1 steps=$2 bin=$3; shift 3
    if ! "$bin" "${model[@]}" -x "$steps" "$@" -o "$tmp/$name.out" > "$tmp/$name.log" 2>&1; then
        echo "bench_launches: $bin ${model[*]} -x $steps $* failed:" >&2
        tail -n 5 "$tmp/$name.log" >&2
        exit 1
    fi
    # "cuda_emu: stream N: kernel NAME" / "cudaMemcpyAsync of ..." / ...; "cuda_emu: host: waits ..."
    sed -n -e 's/^cuda_emu: stream [0-9]*: //p' -e 's/^cuda_emu: host: waits.*/host_wait/p' "$tmp/$name.log" |
        awk '$1 == "kernel" { print "kernel", $2; next } { print "op", $1 }' | sort | uniq -c
}

# per_step LABEL BIN ARGS...: one row of the table (and the kernels, with KERNELS=1)
per_step() {
    local label=$1; shift
    ops "$label.a" "$STEPS" "$@" > "$tmp/a"
    ops "$label.b" "$((STEPS - 1))" "$@" > "$tmp/b"
    # a step = the longer run minus the shorter, per operation
    awk 'NR == FNR { n[$2 " " $3] += $1; next } { n[$2 " " $3] -= $1 }
         END { for (k in n) if (n[k] != 0) print n[k], k }' "$tmp/a" "$tmp/b" | sort -rn > "$tmp/step"
    local kernels library copies memsets waits
    kernels=$(awk '$2 == "kernel" { s += $1 } END { print s + 0 }' "$tmp/step")
    library=$(awk '$3 ~ /^(cublasLt|cudnn|nccl)/ { s += $1 } END { print s + 0 }' "$tmp/step")
    copies=$(awk '$3 ~ /Memcpy/ { s += $1 } END { print s + 0 }' "$tmp/step")
    memsets=$(awk '$3 ~ /Memset/ { s += $1 } END { print s + 0 }' "$tmp/step")
    waits=$(awk '$3 == "host_wait" { s += $1 } END { print s + 0 }' "$tmp/step")
    printf '%-24s %8s %8s %8s %8s %8s\n' "$label" "$kernels" "$library" "$copies" "$memsets" "$waits"
    if [ "${KERNELS:-0}" = 1 ]; then awk '$2 == "kernel" { printf "    %6d %s\n", $1, $3 }' "$tmp/step"; fi
}

echo "bench_launches: $EMU, d12's 148 slices at width 64, B=2 T=64, one step (1 rank)"
printf '%-24s %8s %8s %8s %8s %8s\n' trainer kernels library copies memsets waits
per_step "train_gpt2cu" "$EMU/train_gpt2cu"
for z in ${STAGES-0 1 2 3}; do per_step "train_gpt2_zero -z $z" "$EMU/train_gpt2_zero" -z "$z"; done
