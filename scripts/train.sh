#!/usr/bin/env bash
# The main job: trains GPT-2 on the bundled corpus (data/kjv) twice with the same seed,
# data and global batch, once unsharded and once with ZeRO (stage 3 on 4 ranks unless
# told otherwise), then compares the two loss curves with scripts/compare_runs.py.
# With a GPU (nvidia-smi lists one, nvcc is installed and the CUDA runtime finds the device):
# train_gpt2cu against train_gpt2_zero; without: the CPU trainer train_gpt2 against itself
# under mpirun with -z.
set -euo pipefail
caller=$PWD   # -o is taken from here; the trainers run from the repository's root
cd "$(dirname "$0")/.."

usage() {
    cat <<'EOF'
usage: scripts/train.sh [-z STAGE] [-n RANKS] [-x STEPS] [-o DIR] [-- TRAINER_ARGS...]

Trains GPT-2 on the bundled corpus (data/kjv) unsharded and with ZeRO, with the same
seed, data and global batch, then prints a comparison table (steps, final losses, the
largest train-loss difference, tokens/s, per-rank memory) and writes DIR/compare.png.
It installs what it needs (scripts/install_deps.sh) and builds the trainers (make).
The GPU path runs when nvidia-smi lists a GPU, nvcc is installed ($NVCC, PATH or
/usr/local/cuda/bin, as the Makefile looks) and the CUDA runtime finds the device;
otherwise the CPU path.

  -z STAGE   ZeRO stage of the sharded run, 0-3 (default 3)
  -n RANKS   ranks of the sharded run (default 4)
  -x STEPS   optimizer steps of both runs (default: 40 on the CPU, one epoch on a GPU)
  -o DIR     output folder (default out/main_job in the repository): DIR/unsharded,
             DIR/zeroSTAGE, DIR/compare.png; a relative DIR is taken from the current folder
  -h         this help
  -- ARGS    passed to both trainers after the script's own flags, so they take
             precedence (e.g. -- -e d6 -l 1e-3); -b and -t set the micro-batch and
             sequence of both (the global batch, B*T*RANKS, follows); not -o, -z or -d.
             The trainers run in the repository's root (where their default data lies):
             relative paths in ARGS are taken from there

CPU: model d12c384h6t128 (40.7M parameters), micro-batch 1 per rank, sequence 64, global
batch 64*RANKS tokens (the unsharded run accumulates RANKS micro-batches), both runs with
--tile-vocab 16 --tile-linear 4 (memory-centric tiling: ZeRO stage 3 gathers one tile at a
time, 1/16 of the token embedding or 1/4 of a linear, not the whole embedding or block;
the unsharded run computes the same tiles, so the two stay bit-identical). The model is
parameter-heavy with small activations, so stage 3 on 4 ranks holds at most half of the
unsharded run's memory per rank. Under mpirun with
--allow-run-as-root when run as root and --oversubscribe when RANKS exceeds the cores
(Open MPI). Without mpirun the CPU trainer cannot start more than one rank (its ZeRO
ranks talk over MPI): the sharded run then uses 1 rank and the same global batch.
GPU: model d12, micro-batch 4 per rank, sequence 1024, ranks started by
scripts/launch_ranks.sh (several ranks may share one GPU), cuDNN's deterministic attention
backward (the trainers' default, --cudnn 1) so that the two runs can agree bit for bit. Ranks
sharing one GPU talk through NCCL over loopback sockets: the sharded run is much slower
than on one GPU per rank (on an H200 shared with other test runs: 4 to 12 s per step
against 0.5 s unsharded; the unsharded run alone: 0.05 s).
EOF
}

stage=3 ranks=4 steps="" out=out/main_job
is_int() { [[ "$1" =~ ^-?[0-9]+$ ]]; }
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        -z|-n|-x|-o)
            [ $# -ge 2 ] || { echo "train.sh: $1 needs a value (-h for help)" >&2; exit 1; }
            case "$1" in
                -z) [[ "$2" =~ ^[0-3]$ ]] || { echo "train.sh: -z expects a stage 0-3, got '$2'" >&2; exit 1; }
                    stage=$2 ;;
                -n) is_int "$2" && [ "$2" -ge 1 ] || { echo "train.sh: -n expects ranks >= 1, got '$2'" >&2; exit 1; }
                    ranks=$2 ;;
                -x) is_int "$2" && { [ "$2" -ge 1 ] || [ "$2" -eq -1 ]; } \
                        || { echo "train.sh: -x expects steps >= 1 (or -1: one epoch), got '$2'" >&2; exit 1; }
                    steps=$2 ;;
                -o) out=$2; [[ $out = /* ]] || out=$caller/$out ;;
            esac
            shift 2 ;;
        --) shift; break ;;
        *) echo "train.sh: unknown argument '$1' (trainer flags go after --; -h for help)" >&2; exit 1 ;;
    esac
done
extra=("$@")
# -b and -t after -- set both runs' micro-batch and sequence (the last one given counts), and
# the global batch follows from them; the output folder, the stage and the global batch are
# the script's own
user_B="" user_T=""
for ((i = 0; i < ${#extra[@]}; i++)); do
    case "${extra[i]}" in
        -o) echo "train.sh: give the output folder as train.sh -o DIR, not after --" >&2; exit 1 ;;
        -z) echo "train.sh: give the stage as train.sh -z STAGE, not after -- (the unsharded run takes none)" >&2; exit 1 ;;
        -d) echo "train.sh: -d is the script's: both runs train on B*T*RANKS tokens a step (set -b and -t after --)" >&2
            exit 1 ;;
        -b|-t)
            is_int "${extra[i + 1]:-}" && [ "${extra[i + 1]}" -ge 1 ] ||
                { echo "train.sh: ${extra[i]} after -- expects a number >= 1, got '${extra[i + 1]:-}'" >&2; exit 1; }
            if [ "${extra[i]}" = -b ]; then user_B=${extra[i + 1]}; else user_T=${extra[i + 1]}; fi ;;
    esac
done

bash scripts/install_deps.sh
t_start=$(date +%s.%N)
unsharded="$out/unsharded" sharded="$out/zero$stage"
run() { echo "+ $*"; "$@"; }

# The CUDA trainers; the CPU trainer's job when the CUDA runtime finds no usable device.
gpu_job() {
    make -j"$(nproc)" train_gpt2cu train_gpt2_zero
    B=${user_B:-4} T=${user_T:-1024}
    common=(-b $B -t $T -d $((B * T * ranks)) -x "${steps:--1}")
    # exit 69: the CUDA runtime finds no usable device (a driver older than the toolkit, say)
    local rc=0
    run ./train_gpt2cu "${common[@]}" -o "$unsharded" "${extra[@]}" || rc=$?
    if [ "$rc" -eq 69 ]; then
        echo "nvidia-smi lists a GPU but CUDA finds no usable device (above): the CPU path"
        cpu_job
        return
    fi
    [ "$rc" -eq 0 ] || exit "$rc"
    run bash scripts/launch_ranks.sh "$ranks" ./train_gpt2_zero -z "$stage" "${common[@]}" -o "$sharded" "${extra[@]}"
}

# The CPU trainer, unsharded and under mpirun with -z.
cpu_job() {
    echo "the CPU trainer, unsharded against ZeRO stage $stage on $ranks ranks"
    make -j2 train_gpt2
    # parameter-heavy with small activations, tiled: stage 3 shows its saving (usage above)
    B=${user_B:-1} T=${user_T:-64}
    common=(-e d12c384h6t128 -b $B -t $T -d $((B * T * ranks)) -x "${steps:-40}" --tile-vocab 16 --tile-linear 4)
    cpus=$(nproc)
    run ./train_gpt2 "${common[@]}" -o "$unsharded" "${extra[@]}"
    if command -v mpirun > /dev/null 2>&1; then
        launch=(mpirun)
        if mpirun --version 2>&1 | grep -q "Open MPI"; then
            # Open MPI refuses root unless told, and by default gives one rank per core
            [ "$(id -u)" -ne 0 ] || launch+=(--allow-run-as-root)
            cores=$(lscpu -p=core,socket 2> /dev/null | grep -v '^#' | sort -u | wc -l || true)   # (no lscpu: $cpus)
            [ "$cores" -gt 0 ] && [ "$cores" -le "$cpus" ] || cores=$cpus
            [ "$ranks" -le "$cores" ] || launch+=(--oversubscribe)
        fi
        launch+=(-np "$ranks")
        threads=$((cpus / ranks > 0 ? cpus / ranks : 1))   # ranks share the cores
    else
        echo "no mpirun: the CPU trainer's ZeRO ranks talk over MPI, so the sharded run uses 1 rank with the" \
             "same global batch (bash scripts/install_deps.sh installs Open MPI for $ranks ranks)"
        launch=() threads=$cpus
    fi
    run "${launch[@]}" ./train_gpt2 -z "$stage" --threads "$threads" "${common[@]}" -o "$sharded" "${extra[@]}"
}

if ! command -v nvidia-smi > /dev/null 2>&1 || ! nvidia-smi -L > /dev/null 2>&1; then
    echo "no GPU found (nvidia-smi lists none)"
    cpu_job
elif ! command -v "${NVCC:-nvcc}" > /dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
    echo "a GPU but no CUDA toolkit (no nvcc on PATH or in /usr/local/cuda/bin): the CPU path"
    cpu_job
else
    echo "GPU found: train_gpt2cu (unsharded) against train_gpt2_zero (ZeRO stage $stage, $ranks ranks)"
    gpu_job
fi
echo
echo "comparison (scripts/compare_runs.py $unsharded $sharded -o $out/compare.png):"
scripts/compare_runs.py "$unsharded" "$sharded" -o "$out/compare.png"
awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN { printf "main job: %.0f s of training and comparison\n", b - a }'
