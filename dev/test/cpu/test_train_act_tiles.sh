#!/usr/bin/env bash
# Activation checkpointing (--act-checkpoint), its host offload (--act-offload) and tiled
# linears (--tile-linear) in the CPU trainer, unsharded and under ZeRO stage 3 at 1 and 2
# ranks, 6 steps (gradient accumulation 2) on the bundled corpus:
#  - checkpointing, with or without offload, recomputes each block from its kept input
#    with the same code: losses and final parameters bit-identical to the run without
#  - tiles: the same forward bits (step-1 loss identical), backward sums in another order:
#    final parameters within 1e-5 relative L2 of the untiled run, losses within 1e-5
#  - under stage 3 the units' fetches follow the order recorded in the first micro-step
#    (no prefetch-order warning), the host backend's stream jitter (ZERO_HOST_JITTER) changes
#    no bit of a tiled, checkpointed, offloaded run, and the offloaded block inputs are
#    reported as host bytes
#  - a tiled run's sharded checkpoint consolidates (zero_to_model) into its own final
#    model, which an untiled run loads and computes the same step-1 loss from
#  - the stage-3 dry run's peak gathered parameters shrink from a whole block to the
#    largest remaining unit (the embeddings) when a block's linears are tiled
#  - --act-offload nvme (the block inputs in a swap file under --nvme-path): the same bits as
#    the host tier, unsharded and at stage 3 on 2 ranks, a host slot instead of the tier, and
#    no file left behind
#  - refusals: K not dividing C, --act-offload without --act-checkpoint, nvme without a folder
set -u
cd "$(dirname "$0")/../../.."
export ZERO_HOST_JITTER=${ZERO_HOST_JITTER:-}   # empty: off; set for one run below
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_train_act_tiles: $*"; exit 1; }
args=(-e d2c64h2t64 -b 2 -t 32 -d 128 -x 6 -v 0 -s 0 --threads 1)
ckpt=(--act-checkpoint 1)
offl=(--act-checkpoint 1 --act-offload 1)
mpirun_args=(-x ZERO_HOST_JITTER)
source dev/test/cpu/train_runs.sh
run ref 0
run ref_ck 0 "${ckpt[@]}"
run ref_off 0 "${offl[@]}"
same ref ref_ck
same ref ref_off
grep -q "host tier (offloaded block inputs)" "$tmp/ref_off.txt" || fail "the unsharded run does not show the host tier"
run ref_t4 0 --tile-linear 4
close ref ref_t4
run ref_t4_off 0 --tile-linear 4 "${offl[@]}"
same ref_t4 ref_t4_off
mkdir -p "$tmp/swap"
offn=(--act-checkpoint 1 --act-offload nvme --nvme-path "$tmp/swap")
run ref_offn 0 "${offn[@]}"
same ref_off ref_offn
grep -q "checkpointed, offloaded to nvme" "$tmp/ref_offn.txt" || fail "the nvme run does not say where the block inputs go"

for np in 1 2; do
    run "z3n$np" "$np"
    run "z3n${np}_ck" "$np" "${ckpt[@]}"
    run "z3n${np}_off" "$np" "${offl[@]}"
    same "z3n$np" "z3n${np}_ck"
    same "z3n$np" "z3n${np}_off"
    run "z3n${np}_t2" "$np" --tile-linear 2
    run "z3n${np}_t4_off" "$np" --tile-linear 4 "${offl[@]}"
    close "z3n$np" "z3n${np}_t2"
    close "z3n$np" "z3n${np}_t4_off"
done
run z3n2_t4_offn 2 --tile-linear 4 "${offn[@]}"
same z3n2_t4_off z3n2_t4_offn
[ -z "$(ls -A "$tmp/swap")" ] || fail "activation swap files left behind: $(ls "$tmp/swap")"
ZERO_HOST_JITTER=7 run z3n2_t4_off_jitter 2 --tile-linear 4 "${offl[@]}"
grep -q "jitter is on (ZERO_HOST_JITTER=7)" "$tmp/z3n2_t4_off_jitter.txt" || fail "the jittered run does not say jitter is on"
same z3n2_t4_off z3n2_t4_off_jitter
python3 - "$tmp/z3n2_off/zero_report.json" "$tmp/z3n2/zero_report.json" <<'PY' || fail "the report's host activation bytes are wrong"
import json, sys
off, ref = (json.load(open(p))["ranks"][0] for p in sys.argv[1:])
# the host tier: block inputs 0..L-2 of the B x T x C residual stream, fp32 (L = 2)
want = 1 * 2 * 32 * 64 * 4
got = off["host"]["activations"]
print(f"stage 3, 2 ranks: activations per rank {ref['device']['activations']} bytes, checkpointed and offloaded "
      f"{off['device']['activations']} bytes + {got} bytes in the host tier")
sys.exit(0 if got == want and ref["host"]["activations"] == 0 and off["device"]["activations"] < ref["device"]["activations"] else 1)
PY

# a tiled sharded checkpoint: consolidated, it is the run's final model, and it loads untiled
zargs=(-e d2c64h2t64 -b 2 -t 32 -d 128 -x 4 -n 4 -v 0 -s 0 --threads 1)
mpirun -np 2 ./train_gpt2 "${zargs[@]}" -z 3 --tile-linear 4 -o "$tmp/tck" > "$tmp/tck.txt" 2>&1 || { tail "$tmp/tck.txt"; fail "tiled run with checkpoints failed"; }
./zero_to_model "$tmp/tck" 4 "$tmp/tck.bin" > /dev/null || fail "zero_to_model of a tiled checkpoint failed"
cmp -s "$tmp/tck.bin" "$tmp/tck/model_final.bin" || fail "the consolidated tiled checkpoint differs from the run's final model"
for K in 1 4; do
    ./train_gpt2 -e "$tmp/tck.bin" -b 2 -t 32 -d 128 -x 1 -v 0 -s 0 --threads 1 --tile-linear $K -o "$tmp/load$K" \
        > "$tmp/load$K.txt" 2>&1 || { tail "$tmp/load$K.txt"; fail "loading the consolidated tiled model with K=$K failed"; }
done
[ "$(losses "$tmp/load1")" = "$(losses "$tmp/load4")" ] || fail "the consolidated model gives another loss untiled"
echo "tiled stage-3 checkpoint: consolidated == final model; loaded untiled and tiled: same loss ($(losses "$tmp/load1"))"

# the stage-3 dry run's peak gathered parameters in one step (the first: no recorded fetch
# order to prefetch by): a block's four weights (12 C^2; tensors below --zero-persist stay
# whole) untiled, then the embeddings (wte + wpe, (Vp + T) C), the largest unit once the
# block is in tiles; the pool (peak plus prefetch) shrinks with K
C=8192
for K in 1 2 4 8; do
    ./train_gpt2 --dry-run -z 3 --world 2 -e d2c${C}h64t64 -b 1 -t 64 -x 1 --tile-linear $K -o "$tmp/dry$K" > "$tmp/dry$K.txt" 2>&1 \
        || { cat "$tmp/dry$K.txt"; fail "dry run with --tile-linear $K failed"; }
done
python3 - "$tmp" "$C" <<'PY' || fail "the peak gathered parameters do not shrink with the tiles as expected"
import json, sys
tmp, C = sys.argv[1], int(sys.argv[2])
ok, prev = True, None
for K in (1, 2, 4, 8):
    pools = json.load(open(f"{tmp}/dry{K}/zero_report.json"))["ranks"][0]["pools"]
    peak, cap = pools["param_pool_peak"], pools["param_pool_elems"]
    want = 12 * C * C if K == 1 else max(4 * C * C // K, (50304 + 64) * C)
    print(f"--tile-linear {K}: peak gathered {peak} elements ({peak * 4 / 2**30:.2f} GiB fp32), pool {cap} elements")
    ok = ok and peak == want and (prev is None or cap < prev)
    prev = cap
sys.exit(0 if ok else 1)
PY

# refusals
if ./train_gpt2 "${args[@]}" --tile-linear 3 -o "$tmp/bad" > "$tmp/e.txt" 2>&1; then fail "--tile-linear 3 with C = 64 accepted"; fi
grep -q -- "--tile-linear 3: tiles K = 3 do not divide the channels C = 64" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "no clear error for K not dividing C"; }
if ./train_gpt2 "${args[@]}" --act-offload 1 -o "$tmp/bad" > "$tmp/e.txt" 2>&1; then fail "--act-offload without --act-checkpoint accepted"; fi
grep -q -- "--act-offload 1 .* give --act-checkpoint 1" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "no clear error for --act-offload alone"; }
if ./train_gpt2 "${args[@]}" --act-checkpoint 1 --act-offload nvme -o "$tmp/bad" > "$tmp/e.txt" 2>&1; then fail "--act-offload nvme without --nvme-path accepted"; fi
grep -q -- "needs --nvme-path DIR" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "no clear error for --act-offload nvme without a folder"; }
if [ -x ./train_gpt2cu ]; then
    if ./train_gpt2cu "${args[@]}" --act-checkpoint 1 --act-offload nvme -o "$tmp/bad" > "$tmp/e.txt" 2>&1; then
        fail "train_gpt2cu took --act-offload nvme"; fi
    grep -q -- "--act-offload nvme is the CPU trainer's" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "no clear refusal of nvme by train_gpt2cu"; }
fi
echo "PASS test_train_act_tiles"
