#!/usr/bin/env bash
# The CUDA ZeRO trainer at 2 and 4 ranks on the emulated device (make emu), the ranks being
# processes started by scripts/launch_ranks.sh (NO_MPI=1) and joined by the emulated NCCL
# (dev/cuda_emu/nccl.cpp): with one micro-batch per rank, train_gpt2_zero at every stage
# gives the model file, losses and gradient norms of train_gpt2cu with the same total batch
# (-d) in 2 or 4 micro-batches, bit for bit (train_gpt2cu's default --micro-grads 1: each
# micro-batch's gradient added to the sum in rank order, which is what the reduction of
# the ranks' gradients computes). 3 steps whose clip bites. At 4 ranks also stage 3 with
# hpZ over two logical nodes (--hpz 2 --node-size 2: node communicators split from the
# world), which moves exact weights and so gives the same bits. dev/test/cuda/gpu_train_matrix.sh
# checks the same on a GPU. At 2 ranks also stage 3 under another emulator seed with random
# delays before queued stream work (CUDA_EMU_JITTER): a missing wait on a collective would
# change the bits. At 2 ranks also --fast-reduce (the emulated ncclReduceScatter in bf16):
# within 0.1% of the default's losses, not its bits, and the same bits at stages 0 and 2.
set -u
cd "$(dirname "$0")/../../.."
source dev/test/emu/emu_common.sh
need_emu train_gpt2cu train_gpt2_zero
[ -x build/model_diff ] || { echo "FAIL: build/model_diff not built"; exit 1; }
export CUDA_EMU_QUIET=1 OMP_NUM_THREADS=1
# The runs here compare bits between configurations (or streams): their kernels keep the
# bounds, alignment and race checks (the race check on the first launch of each kernel,
# block and grid shape), but run one block at a time without forced switches. Interleaved blocks and
# forced switches run on a chosen subset: the kernels' own tests (test_gpt2_zero,
# gpu_zero_quant, gpu_zero_toy, gpu_attention_cudnn) and test_emu_seeds.sh
# (dev/cuda_emu/README.md, "Which checks run where").
# (The run under another seed with jitter keeps them: 4 blocks, a switch every 64 accesses.)
export CUDA_EMU_BLOCKS=1 CUDA_EMU_PREEMPT=0
run() {   # run NAME COMMAND...: output in $tmp/NAME, log in $tmp/NAME.log
    local name=$1; shift
    if ! NO_MPI=1 timeout 600 "$@" -o "$tmp/$name" > "$tmp/$name.log" 2>&1; then
        bad "$name: $* failed"; tail -n 15 "$tmp/$name.log"; return 1
    fi
}
same_bits() {   # same_bits A B WHAT: model file, losses and norms identical
    if cmp -s "$tmp/$1/model_final.bin" "$tmp/$2/model_final.bin" &&
        diff <(grep trl "$tmp/$1/main.log" | cut -d' ' -f1,2,4) <(grep trl "$tmp/$2/main.log" | cut -d' ' -f1,2,4) > /dev/null &&
        [ "$(grep -c trl "$tmp/$2/main.log")" -eq 3 ]
    then ok "$3"
    else bad "$3: $(./build/model_diff "$tmp/$1/model_final.bin" "$tmp/$2/model_final.bin" 0 2>&1 | tail -n 2 | tr '\n' ' ')"
        paste <(grep trl "$tmp/$1/main.log") <(grep trl "$tmp/$2/main.log"); fi
}
for np in 2 4; do
    a=(-e d2c64h1t64 -b 2 -t 64 -v 0 -s 0 -l 1e-3 -d $((np * 128)) -x 3 --grad-clip 0.5)
    start=$(date +%s.%N)
    run "ref$np" "$EMU/train_gpt2cu" "${a[@]}" || continue
    if grep trl "$tmp/ref$np/main.log" | awk '{split($4,a,":"); if (a[2] <= 0.5) low++} END {exit low > 0}'; then
        ok "the clip 0.5 bites on every step of the $np-micro-batch reference"
    else bad "some norm of the $np-micro-batch reference is <= the clip 0.5"; fi
    for z in 0 1 2 3; do
        run "z${z}_$np" scripts/launch_ranks.sh "$np" "$EMU/train_gpt2_zero" "${a[@]}" -z "$z" &&
            same_bits "ref$np" "z${z}_$np" "train_gpt2_zero -z $z at $np ranks (one micro-batch each) = train_gpt2cu with $np micro-batches, 3 steps (model bytes, losses, norms)"
    done
    if [ "$np" -eq 2 ]; then   # another seed of the emulator, with random delays before queued stream work
        run jz3_2 env CUDA_EMU_SEED=2 CUDA_EMU_JITTER=3 CUDA_EMU_BLOCKS=4 CUDA_EMU_PREEMPT=64 scripts/launch_ranks.sh 2 "$EMU/train_gpt2_zero" "${a[@]}" -z 3 &&
            same_bits ref2 jz3_2 "train_gpt2_zero -z 3 at 2 ranks with CUDA_EMU_SEED=2 CUDA_EMU_JITTER=3 = train_gpt2cu with 2 micro-batches"
    fi
    if [ "$np" -eq 2 ]; then   # the library's bf16 reduce-scatter: close to the default, not its bits
        run fast2 scripts/launch_ranks.sh 2 "$EMU/train_gpt2_zero" "${a[@]}" -z 2 --fast-reduce &&
            if python3 - "$tmp/z2_2" "$tmp/fast2" << 'PY'
import json, re, sys
a, b = ([(float(l), float(n)) for l, n in re.findall(r"trl:([0-9.]+) .*norm:([0-9.]+)", open(d + "/main.log").read())]
        for d in sys.argv[1:3])
assert len(a) == len(b) == 3, f"{len(a)} and {len(b)} steps"
assert all(abs(x[0] - y[0]) < 1e-3 * x[0] and abs(x[1] - y[1]) < 1e-2 * x[1] for x, y in zip(a, b)), f"{a} against {b}"
assert open(sys.argv[1] + "/model_final.bin", "rb").read() != open(sys.argv[2] + "/model_final.bin", "rb").read(), "the same bits"
s = json.load(open(sys.argv[2] + "/zero_report.json"))["ranks"][0]["sent_per_step"]
assert s["reduce_scatter"]["calls"] > 0 and s["all_to_all"]["calls"] == 0, s
PY
            then ok "train_gpt2_zero -z 2 --fast-reduce at 2 ranks (ncclReduceScatter in bf16): losses within 0.1% and norms within 1% of -z 2, other bits"
            else bad "train_gpt2_zero -z 2 --fast-reduce at 2 ranks: off the default (above)"; fi
        # stage 0 gathers the bf16 sums: the bits of stage 2 (a sum of two is one in any order)
        run fast0 scripts/launch_ranks.sh 2 "$EMU/train_gpt2_zero" "${a[@]}" -z 0 --fast-reduce &&
            same_bits fast2 fast0 "train_gpt2_zero --fast-reduce at 2 ranks: -z 0 (a bf16 all-reduce in two halves) = -z 2"
    fi
    if [ "$np" -eq 4 ]; then
        run hpz4 scripts/launch_ranks.sh 4 "$EMU/train_gpt2_zero" "${a[@]}" -z 3 --hpz 2 --node-size 2 &&
            same_bits ref4 hpz4 "train_gpt2_zero -z 3 --hpz 2 --node-size 2 at 4 ranks = train_gpt2cu with 4 micro-batches"
    fi
    echo "($np ranks: $(echo "$(date +%s.%N) - $start" | bc | cut -d. -f1) s)"
done
echo "$pass passed, $failn failed"
[ "$failn" -eq 0 ]
