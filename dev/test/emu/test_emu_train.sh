#!/usr/bin/env bash
# The CUDA trainers on the emulated device (make emu), on the bundled data:
#  1. train_gpt2cu against the CPU reference train_gpt2, the same init, data and schedule,
#     20 steps: every step's loss, and the validation loss at steps 0, 10 and 20, within
#     5e-3. Why that bound: bf16 weights and activations
#     carry a relative rounding error of up to 2^-8 (stochastic rounding of the weights),
#     which at step 0 moves this loss (about 10.8) by about 1e-4 (test_gpt2_zero: 2e-5
#     relative); over 20 AdamW steps the two runs drift apart to about 7e-4 (measured). 5e-3
#     leaves room for that drift and still fails a wrong gradient of any tensor, which moves
#     the loss by 1e-2 or more within a few steps.
#  2. train_gpt2_zero at 1 rank, stages 0-3, against train_gpt2cu: the same model, losses
#     and gradient norms bit for bit after 8 steps whose clip bites every step, no
#     accumulation (dev/test/cuda/gpu_train_matrix.sh's `bitwise` part, on a smaller model).
#     With vocabulary tiles (--tile-vocab 8) too, and with them at stage 3 on NVMe.
#  3. ZeRO-Offload and ZeRO-Infinity: stages 1 and 3 with the optimizer in host memory or
#     on NVMe, stage 3 with the parameters there too: the same bits as the same stage
#     without offload.
#  4. accumulation 2: train_gpt2cu --micro-grads 1 (the default) = -z 2 and -z 3
#     at 1 rank, which add each micro-step's reduced gradient into their shard (acc = g0;
#     acc += g1); --micro-grads 0 differs from it and equals -z 1 (stages 0-1 accumulate
#     inside the backward's kernels).
#  5. B x T x NH not a multiple of 4 (B=1, T=63, NH=1): each layer's cuDNN softmax
#     statistics still start 16-byte aligned; 3 steps against the CPU within 5e-3.
#  6. a width whose LayerNorm backward needs more shared memory a block than the device
#     allows (C=3328 on compute capability 8.6: 104 KiB of 99) is refused at start-up,
#     naming C, both sizes and the widest C that fits.
#  7. the dry run of train_gpt2_zero predicts the attention a live run takes, and its
#     activations, under the cuDNN built against and under 9.14 at T=64 (the plain kernels:
#     exactly; with cuDNN the live run adds the engine's workspace).
# Prints the emulator's ms/step for this configuration (a CPU emulation: not a GPU speed).
set -u
cd "$(dirname "$0")/../../.."
source dev/test/emu/emu_common.sh
need_emu train_gpt2cu train_gpt2_zero
[ -x ./train_gpt2 ] && [ -x build/model_diff ] || { echo "FAIL: train_gpt2 or build/model_diff not built"; exit 1; }
export CUDA_EMU_QUIET=1 OMP_NUM_THREADS=2
# The runs here compare bits between configurations (or streams): their kernels keep the
# bounds, alignment and race checks (the race check on the first launch of each kernel,
# block and grid shape), but run one block at a time without forced switches. Interleaved blocks and
# forced switches run on a chosen subset: the kernels' own tests (test_gpt2_zero,
# gpu_zero_quant, gpu_zero_toy, gpu_attention_cudnn) and test_emu_seeds.sh
# (dev/cuda_emu/README.md, "Which checks run where").
export CUDA_EMU_BLOCKS=1 CUDA_EMU_PREEMPT=0
model=(-e d2c64h1t64 -b 2 -t 64 -v 0 -s 0 -l 1e-3)
same_bits() {   # same_bits A B WHAT: model file, losses and norms identical
    ran "$2" || return
    if ./build/model_diff "$tmp/$1/model_final.bin" "$tmp/$2/model_final.bin" 0 > "$tmp/$2.diff" 2>&1 &&
        diff <(grep trl "$tmp/$1/main.log" | cut -d' ' -f1,2,4) <(grep trl "$tmp/$2/main.log" | cut -d' ' -f1,2,4) > /dev/null
    then ok "$3"; else bad "$3: $(tail -n 1 "$tmp/$2.diff")"; fi
}

# Every run starts first, side by side (spawn, emu_common.sh); the comparisons follow once
# all have ended. Each writes its output folder $tmp/NAME.
sched=("${model[@]}" -x 20 -u 2 -q 0.1 -c 0 -v 10 -m 4)
spawn cu "$EMU/train_gpt2cu" "${sched[@]}" -o "$tmp/cu"
spawn cpu ./train_gpt2 "${sched[@]}" -o "$tmp/cpu"
bw=("${model[@]}" -d 128 -x 8 --grad-clip 0.5)
spawn bw_ref "$EMU/train_gpt2cu" "${bw[@]}" -o "$tmp/bw_ref"
for z in 0 1 2 3; do spawn "bw_z$z" "$EMU/train_gpt2_zero" "${bw[@]}" -z "$z" -o "$tmp/bw_z$z"; done
spawn kv_ref "$EMU/train_gpt2cu" "${bw[@]}" --tile-vocab 8 -o "$tmp/kv_ref"
spawn kv_z3 "$EMU/train_gpt2_zero" "${bw[@]}" -z 3 --tile-vocab 8 -o "$tmp/kv_z3"
mkdir -p "$tmp/nvme_kv"
spawn kv_z3_nvme "$EMU/train_gpt2_zero" "${bw[@]}" -z 3 --tile-vocab 8 --offload-param nvme --offload-optimizer nvme \
    --nvme-path "$tmp/nvme_kv" -o "$tmp/kv_z3_nvme"
offload=("1 opt_cpu --offload-optimizer cpu"
         "1 opt_nvme --offload-optimizer nvme --nvme-path NVME"
         "3 opt_cpu --offload-optimizer cpu"
         "3 opt_nvme --offload-optimizer nvme --nvme-path NVME"
         "3 both_cpu --offload-optimizer cpu --offload-param cpu"
         "3 both_nvme --offload-optimizer nvme --offload-param nvme --nvme-path NVME"
         "3 param_nvme --offload-param nvme --nvme-path NVME"
         "3 ratio --offload-optimizer cpu --offload-optimizer-ratio 0.01")
for v in "${offload[@]}"; do
    set -- $v
    name="off_z$1_$2" z=$1; shift 2
    mkdir -p "$tmp/nvme_$name"
    # a first launch waits for the device as a lazy load may: the backend's spin wait for a
    # host stream must not deadlock with it (dev/cuda_emu/README.md)
    spawn "$name" env CUDA_EMU_HANG_S=120 CUDA_EMU_LOAD_SYNC=1 "$EMU/train_gpt2_zero" "${bw[@]}" -z "$z" \
        "${@/#NVME/$tmp/nvme_$name}" -o "$tmp/$name"
done
acc=("${model[@]}" -d 256 -x 4 --grad-clip 0.5)
spawn acc_mg1 "$EMU/train_gpt2cu" "${acc[@]}" -o "$tmp/acc_mg1"
for z in 1 2 3; do spawn "acc_z$z" "$EMU/train_gpt2_zero" "${acc[@]}" -z "$z" -o "$tmp/acc_z$z"; done
spawn acc_mg0 "$EMU/train_gpt2cu" "${acc[@]}" --micro-grads 0 -o "$tmp/acc_mg0"
odd=(-e d2c64h1t64 -b 1 -t 63 -v 0 -s 0 -l 1e-3 -x 3 -u 2 -q 0.1 -c 0)
spawn odd_cu "$EMU/train_gpt2cu" "${odd[@]}" -o "$tmp/odd_cu"
spawn odd_cpu ./train_gpt2 "${odd[@]}" -o "$tmp/odd_cpu"
spawn sm86 env CUDA_EMU_ARCH=sm_86 "$EMU/train_gpt2cu" -e d1c3328h26t64 -b 1 -t 8 -x 1 -v 0 -s 0 -o "$tmp/sm86"
dry=(-z 1 -e d2c64h1t64 -b 2 -t 64 -v 0 -s 0)
for v in "" 91400; do
    spawn "dry$v" env CUDA_EMU_CUDNN_VERSION=$v "$EMU/train_gpt2_zero" "${dry[@]}" --dry-run --world 1 -o "$tmp/dry$v"
    spawn "live$v" env CUDA_EMU_CUDNN_VERSION=$v "$EMU/train_gpt2_zero" "${dry[@]}" -x 1 -o "$tmp/live$v"
done
spawn dry_atomic "$EMU/train_gpt2_zero" "${dry[@]}" --cudnn 2 --dry-run --world 1 -o "$tmp/dry_atomic"
spawn live_atomic "$EMU/train_gpt2_zero" "${dry[@]}" --cudnn 2 -x 1 -o "$tmp/live_atomic"
wait

# 1. against the CPU reference (with validation at steps 0, 10 and 20: the CUDA trainer's
#    evaluation path against the CPU's, under the same bound)
if ran cu cpu; then
    worst=$(paste <(grep trl "$tmp/cu/main.log") <(grep trl "$tmp/cpu/main.log") |
            awk '{split($2,a,":"); split($6,b,":"); d=a[2]-b[2]; if (d<0) d=-d; if (d>m) {m=d; s=$1}} END {printf "%.2e at %s", m, s}')
    n=$(grep -c trl "$tmp/cu/main.log")
    if [ "$n" -eq 20 ] && awk -v w="${worst%% *}" 'BEGIN {exit !(w <= 5e-3)}'; then
        ok "train_gpt2cu (emulated) vs train_gpt2 (CPU), 20 steps: max |loss difference| $worst (bound 5e-3)"
    else bad "train_gpt2cu vs train_gpt2: $n steps, max |loss difference| $worst (bound 5e-3)"; fi
    vworst=$(paste <(grep tel "$tmp/cu/main.log") <(grep tel "$tmp/cpu/main.log") |
             awk '{split($2,a,":"); split($4,b,":"); d=a[2]-b[2]; if (d<0) d=-d; if (d>m) {m=d; s=$1}} END {printf "%.2e at %s", m, s}')
    nv=$(grep -c tel "$tmp/cu/main.log")
    if [ "$nv" -eq 3 ] && [ "$(grep -c tel "$tmp/cpu/main.log")" -eq 3 ] && awk -v w="${vworst%% *}" 'BEGIN {exit !(w <= 5e-3)}'; then
        ok "train_gpt2cu (emulated) vs train_gpt2 (CPU), validation at steps 0, 10, 20: max |loss difference| $vworst (bound 5e-3)"
    else bad "train_gpt2cu vs train_gpt2 validation: $nv evaluations, max |loss difference| $vworst (bound 5e-3)"; fi
    ms=$(grep -o '| [0-9.]* ms |' "$tmp/cu.log" | awk '{s+=$2; n++} END {if (n) printf "%.0f", s/n}')
    echo "emulator: train_gpt2cu d2c64h1t64 B=2 T=64: $ms ms/step on this machine's CPU, beside another run (an emulation: no GPU speed)"
fi

# 2. every stage at 1 rank against train_gpt2cu, bit for bit
if ran bw_ref; then
    if grep trl "$tmp/bw_ref/main.log" | awk '{split($4,a,":"); if (a[2] <= 0.5) low++} END {exit low > 0}'; then
        ok "the clip 0.5 bites on every step of the bitwise reference"
    else bad "some norm of the bitwise reference is <= the clip 0.5"; fi
    for z in 0 1 2 3; do
        same_bits bw_ref "bw_z$z" "train_gpt2_zero -z $z (1 rank) = train_gpt2cu after 8 clipped steps (model, losses, norms)"
    done
fi

# vocabulary tiles: the unsharded trainer and stage 3 compute the same tiles (so the same
# bits), and stage 3 with parameters and optimizer on NVMe reads the same tiled units
if ran kv_ref; then
    same_bits kv_ref kv_z3 "train_gpt2_zero -z 3 --tile-vocab 8 (1 rank) = train_gpt2cu --tile-vocab 8 (model, losses, norms)"
    same_bits kv_ref kv_z3_nvme "train_gpt2_zero -z 3 --tile-vocab 8, parameters and optimizer on NVMe = train_gpt2cu --tile-vocab 8"
fi

# 3. offload: the same bits as without
for v in "${offload[@]}"; do
    set -- $v
    name="off_z$1_$2" z=$1; shift 2
    [ "$(cat "$tmp/bw_z$z.rc")" = 0 ] || continue   # its failure is said above
    same_bits "bw_z$z" "$name" "train_gpt2_zero -z $z ${*/#NVME/(a folder)} = -z $z without offload"
done

# 4. accumulation 2: the micro-batch gradient buffers give ZeRO's bits; without them, not
if ran acc_mg1; then
    for z in 2 3; do
        same_bits acc_mg1 "acc_z$z" "accumulation 2: train_gpt2_zero -z $z (1 rank) = train_gpt2cu --micro-grads 1"
    done
    if ran acc_mg0; then
        if ./build/model_diff "$tmp/acc_mg1/model_final.bin" "$tmp/acc_mg0/model_final.bin" 0 > /dev/null 2>&1
        then bad "accumulation 2: --micro-grads 0 gives --micro-grads 1's model: the case above proves nothing"
        else ok "accumulation 2: --micro-grads 0 (accumulation inside the kernels) differs from --micro-grads 1"; fi
        same_bits acc_mg0 acc_z1 "accumulation 2: train_gpt2_zero -z 1 (1 rank) = train_gpt2cu --micro-grads 0"
    fi
fi

# 5. every layer's attention statistics aligned when B x T x NH is odd
if ran odd_cu odd_cpu; then
    worst=$(paste <(grep trl "$tmp/odd_cu/main.log") <(grep trl "$tmp/odd_cpu/main.log") |
            awk '{split($2,a,":"); split($6,b,":"); d=a[2]-b[2]; if (d<0) d=-d; if (d>m) m=d} END {printf "%.2e", m}')
    if [ "$(grep -c trl "$tmp/odd_cu/main.log")" -eq 3 ] && awk -v w="$worst" 'BEGIN {exit !(w <= 5e-3)}'
    then ok "B=1 T=63 NH=1 (cuDNN statistics of 63 floats a layer): train_gpt2cu vs train_gpt2, max |loss difference| $worst"
    else bad "B=1 T=63 NH=1: max |loss difference| $worst (bound 5e-3)"; fi
fi

# 6. the device's shared memory per block against the width
rc=$(cat "$tmp/sm86.rc")
want="C=3328: the LayerNorm backward needs 106496 bytes of shared memory a block, and this GPU (compute capability 8.6) allows 101376: C up to 3072 trains on it"
if [ "$rc" -ne 0 ] && grep -qF "$want" "$tmp/sm86.log"; then ok "C=3328 on compute capability 8.6: refused at start-up (exit $rc)"
else bad "C=3328 on compute capability 8.6: exit $rc, no '$want'"; tail -n 3 "$tmp/sm86.log"; fi

# 7. the dry run predicts the attention a live run takes: a runtime cuDNN before 9.15.1 and T
#    not a multiple of 128 take the plain kernels, whose score buffers the activations hold
act() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["ranks"][0]["device"]["activations"])' "$1"; }
for v in "" 91400; do
    what="cuDNN ${v:-as built}, T=64"
    ran "dry$v" "live$v" || continue
    a_dry=$(act "$tmp/dry$v/zero_report.json") a_live=$(act "$tmp/live$v/zero_report.json")
    plain_dry=$(grep -c "attention: the plain kernels" "$tmp/dry$v.log") plain_live=$(grep -c "using the fallback" "$tmp/live$v.log")
    # exact for the plain kernels; cuDNN's live figure adds its engine workspace, which only the
    # built plan knows (the prediction says it leaves it out): at most 1 MiB here
    if [ "$plain_dry" = "$plain_live" ] && { [ -z "$v" ] || [ "$plain_dry" = 1 ]; } &&
        if [ "$plain_dry" = 1 ]; then [ "$a_dry" = "$a_live" ]; else [ "$a_dry" -le "$a_live" ] && [ "$a_live" -lt $((a_dry + 1048576)) ]; fi
    then ok "$what: the dry run predicts the live attention (plain: $plain_dry) and its activations, $a_dry bytes (live $a_live)"
    else bad "$what: predicted $a_dry bytes of activations (plain kernels: $plain_dry), live $a_live (fallback: $plain_live)"; fi
done
# --cudnn 2: cuDNN's atomic backward, whose fp32 dQ accumulator (B x T x C floats: 32 KiB) the
# workspace holds besides the deterministic one's; the live run says it runs that variant
if ran dry_atomic live_atomic dry; then
    a_dry=$(act "$tmp/dry_atomic/zero_report.json") a_live=$(act "$tmp/live_atomic/zero_report.json") a_det=$(act "$tmp/dry/zero_report.json")
    if [ $((a_dry - a_det)) = $((2 * 64 * 64 * 4)) ] && [ "$a_dry" -le "$a_live" ] && [ "$a_live" -lt $((a_dry + 1048576)) ] &&
        grep -q "atomic dQ, workspace" "$tmp/live_atomic.log"
    then ok "--cudnn 2: the atomic backward runs, the dry run predicts its accumulator ($a_dry - $a_det bytes) and the live activations ($a_live)"
    else bad "--cudnn 2: predicted $a_dry bytes of activations (deterministic $a_det), live $a_live"; grep -m 2 attention_cudnn "$tmp/live_atomic.log"; fi
fi
echo "$pass passed, $failn failed"
[ "$failn" -eq 0 ]
