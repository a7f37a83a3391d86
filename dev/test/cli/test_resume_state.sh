#!/usr/bin/env bash
# test_resume_state.sh: a resumed run goes on as the uninterrupted run did, also where that
# depends on more than the weights and the data position. The CPU trainer, unsharded and
# under mpirun -np 2 -z 2:
#  1. -sg's window: at a learning rate so low that the gradient norm only wanders, -sg 0.1
#     makes outliers of some steps after the window fills (step 128); a run resumed at
#     step 132 skips the same steps after it and ends with the same model, byte for byte,
#     as the run it was cut from
#  2. --nan-skip's streak: a run that diverges (a real NaN at step K, and every step after)
#     with --nan-skip-limit 3 stops at step K+2 ("3 such steps in a row"); resumed from the
#     checkpoint after step K+1 it stops at the same step with the same count, and says
#     that 2 of the 3 came before the resume; a run whose every step is skipped (a NaN
#     weight in its model file) still checkpoints (zero AdamW moments) and resumes
#  3. the data: a resume whose -i matches other shards (one more file, or a shard of
#     another size under the same name) is refused naming both shard counts and windows
#     checkpoints of format 1 (unsharded version 1, a sharded trainer state of 80 bytes):
#     refused naming the model file to start a new run from; zero_to_model still exports one
#  4. the CUDA trainers on the emulated device (make emu; skipped without it): train_gpt2cu,
#     and train_gpt2_zero -z 3 at 2 ranks resumed at 1 rank, cut at step 2 of 4 and resumed,
#     end with the model of the uninterrupted run, byte for byte
# The CUDA trainer's bf16 weights after a skipped last step (the rounding of the last
# applied update) are test_gpt2_zero's "resume from a checkpoint after a skipped step":
# -sg needs 129 steps, about 100 s each run on the emulated device.
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_resume_state: $*"; exit 1; }
small=(-e d2c64h2t64 -b 2 -t 32 -v 0 -s 0 --threads 1 --seed 1337)
# trains NAME ARGS...: runs ./train_gpt2 ARGS (or mpirun -np 2 ... -z 2 when NAME starts
# with z) into $tmp/NAME, output in $tmp/NAME.txt; returns its exit status
trains() {
    local name=$1
    shift
    case $name in
        z*) mpirun -np 2 ./train_gpt2 "${small[@]}" -z 2 "$@" -o "$tmp/$name" > "$tmp/$name.txt" 2>&1 ;;
        *) ./train_gpt2 "${small[@]}" "$@" -o "$tmp/$name" > "$tmp/$name.txt" 2>&1 ;;
    esac
}
skips() { grep -c "skipped (-sg)" "$1"; }

# 1. -sg's window across a resume
for kind in cpu zcpu; do
    trains "${kind}_sg" -x 140 -n 132 -l 1e-5 -sg 0.1 || { cat "$tmp/${kind}_sg.txt"; fail "$kind: the -sg run failed"; }
    late=$(grep -E "^step +13[3-9]/140 .*skipped \(-sg\)|^step +140/140 .*skipped \(-sg\)" "$tmp/${kind}_sg.txt" | wc -l)
    [ "$late" -gt 0 ] || { cat "$tmp/${kind}_sg.txt"; fail "$kind: no step after 132 was an outlier: the case shows nothing"; }
    # the copy goes back to the checkpoint of step 132 (the run's last one, 140, goes)
    r=$tmp/${kind}_sg_resumed
    cp -r "$tmp/${kind}_sg" "$r"
    rm -r "$r/model_final.bin" "$r"/*140*
    if [ "$kind" = zcpu ]; then echo 132 > "$r/latest_zero"; else echo 132 > "$r/latest"; fi
    trains "${kind}_sg_resumed" -x 140 -n 132 -l 1e-5 -sg 0.1 -y 1 || { cat "$tmp/${kind}_sg_resumed.txt"; fail "$kind: the resume failed"; }
    grep -q "at step 132" "$tmp/${kind}_sg_resumed.txt" || { cat "$tmp/${kind}_sg_resumed.txt"; fail "$kind: did not resume at 132"; }
    [ "$(skips "$tmp/${kind}_sg_resumed.txt")" = "$late" ] ||
        fail "$kind: resumed at 132 it skipped $(skips "$tmp/${kind}_sg_resumed.txt") steps, the uninterrupted run $late after 132"
    cmp -s "$tmp/${kind}_sg/model_final.bin" "$tmp/${kind}_sg_resumed/model_final.bin" ||
        fail "$kind: the final model resumed at 132 differs from the uninterrupted run's"
    echo "$kind: -sg 0.1 resumed at step 132: the same $late outlier steps after it, the same final model"
done

# 2. --nan-skip's streak across a resume: lr 10 with weight decay 10 blows the weights up
nan=(-l 10 -c 10 -u 0 -q 1 -n 1 --nan-skip --nan-skip-limit 3)
stop_line() { sed -n 's/^error: step \([0-9]*\)\/40: .*not finite, \([0-9]*\) such steps in a row.*/\1 \2/p' "$1"; }
for kind in cpu zcpu; do
    if trains "${kind}_nan" -x 40 "${nan[@]}"; then fail "$kind: the diverging run did not stop"; fi
    read -r stop inrow <<< "$(stop_line "$tmp/${kind}_nan.txt")"
    [ "${inrow:-}" = 3 ] || { cat "$tmp/${kind}_nan.txt"; fail "$kind: no stop after 3 non-finite steps in a row"; }
    k=$((stop - 2))
    grep -Eq "^step +$k/40 .*skipped \(--nan-skip\)" "$tmp/${kind}_nan.txt" || fail "$kind: step $k is not the first skipped"
    latest=$(cat "$tmp/${kind}_nan/latest" 2>/dev/null || cat "$tmp/${kind}_nan/latest_zero")
    [ "$latest" = $((k + 1)) ] || fail "$kind: the latest checkpoint is step $latest, not $((k + 1))"
    if trains "${kind}_nan" -x 40 "${nan[@]}" -y 1; then fail "$kind: the resumed diverging run did not stop"; fi
    grep -q "at step $((k + 1))" "$tmp/${kind}_nan.txt" || { cat "$tmp/${kind}_nan.txt"; fail "$kind: did not resume at $((k + 1))"; }
    [ "$(stop_line "$tmp/${kind}_nan.txt")" = "$stop 3" ] ||
        { cat "$tmp/${kind}_nan.txt"; fail "$kind: resumed after steps $k and $((k + 1)) were skipped, it did not stop at step $stop with 3 in a row"; }
    grep -q "3 such steps in a row (2 of them before the checkpoint this run resumed from)" "$tmp/${kind}_nan.txt" ||
        { cat "$tmp/${kind}_nan.txt"; fail "$kind: the stop does not say that 2 of the 3 came before the resume"; }
    echo "$kind: --nan-skip-limit 3: resumed inside a streak of non-finite steps, it stops at step $stop as the uninterrupted run"
done

# every step skipped before a checkpoint (a NaN weight from the model file: no update is ever
# applied): the checkpoint holds zero AdamW moments and a resume goes on from it
python3 - "$tmp/cpu_sg/model_final.bin" "$tmp/nan_model.bin" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], 'rb').read())
b[1024:1028] = struct.pack('<f', float('nan'))   # the first weight after the 256-int header
open(sys.argv[2], 'wb').write(b)
PY
allnan=(-e "$tmp/nan_model.bin" -b 2 -t 32 -v 0 -s 0 --threads 1 -n 1 --nan-skip --nan-skip-limit 10 -o "$tmp/allnan")
./train_gpt2 "${allnan[@]}" -x 2 > "$tmp/allnan.txt" 2>&1 || { cat "$tmp/allnan.txt"; fail "every step skipped: no checkpoint"; }
[ "$(grep -c 'skipped (--nan-skip)' "$tmp/allnan.txt")" = 2 ] && [ -s "$tmp/allnan/ckpt_00000002.bin" ] ||
    { cat "$tmp/allnan.txt"; fail "every step skipped: not 2 skipped steps and a checkpoint at step 2"; }
./train_gpt2 "${allnan[@]}" -x 3 -y 1 > "$tmp/allnan2.txt" 2>&1 && grep -q "at step 2" "$tmp/allnan2.txt" ||
    { cat "$tmp/allnan2.txt"; fail "every step skipped: the resume from step 2 failed"; }
echo "cpu: every step skipped (a NaN weight): checkpoints at steps 1 and 2, resumed from step 2"

# 3. other data under -i
mkdir -p "$tmp/data"
cp data/kjv/kjv_train_000000.bin "$tmp/data/a_000000.bin"
trains data -x 2 -n 2 -i "$tmp/data/a_*.bin" || { cat "$tmp/data.txt"; fail "the run over one shard failed"; }
cp data/kjv/kjv_val_000000.bin "$tmp/data/a_000001.bin"
if trains data -x 4 -n 2 -i "$tmp/data/a_*.bin" -y 1; then fail "a resume over one more shard was not refused"; fi
grep -q "the training data differs from the checkpoint's: it was saved over 1 shard with [0-9]* windows .*-i now matches 2 shards" "$tmp/data.txt" ||
    { cat "$tmp/data.txt"; fail "the refusal does not name both shard counts"; }
rm "$tmp/data/a_000001.bin"
head -c $(( $(stat -c %s "$tmp/data/a_000000.bin") - 4096 )) data/kjv/kjv_train_000000.bin > "$tmp/short.bin"
# the header's token count must match the shorter file: rewrite it (int32 at byte 8)
python3 - "$tmp/short.bin" <<'PY'
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
struct.pack_into("<i", b, 8, (len(b) - 1024) // 2)
open(p, "wb").write(b)
PY
mv "$tmp/short.bin" "$tmp/data/a_000000.bin"
if trains data -x 4 -n 2 -i "$tmp/data/a_*.bin" -y 1; then fail "a resume over a shorter shard of the same name was not refused"; fi
grep -q "the training data differs from the checkpoint's" "$tmp/data.txt" || { cat "$tmp/data.txt"; fail "the shorter shard is not named as other data"; }
echo "a resume over other shards (one more, or one shorter) is refused naming both"

# 3b. checkpoints of format 1 (a trainer state without what the above needs): refused naming
# the model file to start from; zero_to_model still makes the model file of a sharded one
# (the folders resumed in 1, taken back to step 132 again)
cp -r "$tmp/cpu_sg_resumed" "$tmp/v1"
rm -r "$tmp/v1/model_final.bin" "$tmp/v1"/*140*
echo 132 > "$tmp/v1/latest"
printf '\x01' | dd of="$tmp/v1/ckpt_00000132.bin" bs=1 seek=8 conv=notrunc 2> /dev/null
if trains v1 -x 140 -n 132 -l 1e-5 -sg 0.1 -y 1; then fail "an unsharded checkpoint of version 1 was resumed"; fi
grep -q "has version 1, which lacks what a bit-exact resume needs.*model_00000132.bin (-e)" "$tmp/v1.txt" ||
    { cat "$tmp/v1.txt"; fail "the version-1 refusal does not name the model file"; }
cp -r "$tmp/zcpu_sg_resumed" "$tmp/zv1"
rm -r "$tmp/zv1/model_final.bin" "$tmp/zv1"/*140*
echo 132 > "$tmp/zv1/latest_zero"
python3 - "$tmp/zv1/zero_132" <<'PY'
import json, sys, zlib
d = sys.argv[1]
blob = open(f"{d}/extra.bin", "rb").read()[:80]   # format 1: the fields up to tokens_per_step
open(f"{d}/extra.bin", "wb").write(blob)
m = json.load(open(f"{d}/manifest.json"))
m["extra"]["bytes"], m["extra"]["crc32"] = len(blob), zlib.crc32(blob)
json.dump(m, open(f"{d}/manifest.json", "w"))
PY
if trains zv1 -x 140 -n 132 -l 1e-5 -sg 0.1 -y 1; then fail "a sharded checkpoint of format 1 was resumed"; fi
grep -q "zero_132' holds the trainer state of format 1 (80 bytes).*model_00000132.bin (-e)" "$tmp/zv1.txt" ||
    { cat "$tmp/zv1.txt"; fail "the format-1 refusal does not name the model file"; }
./zero_to_model "$tmp/zv1" 132 "$tmp/zv1.bin" > "$tmp/zv1_model.txt" 2>&1 || { cat "$tmp/zv1_model.txt"; fail "zero_to_model refused format 1"; }
cmp -s "$tmp/zv1.bin" "$tmp/zv1/model_00000132.bin" || fail "zero_to_model of a format-1 checkpoint differs from its model file"
echo "checkpoints of format 1: refused naming the model file; zero_to_model still exports a sharded one"

# 4. the CUDA trainers emulated
EMU=${EMU_DIR:-build/emu}
if [ -x "$EMU/train_gpt2cu" ] && [ -x "$EMU/train_gpt2_zero" ]; then
    export CUDA_EMU_QUIET=1 OMP_NUM_THREADS=1 CUDA_EMU_BLOCKS=1 CUDA_EMU_PREEMPT=0
    emu=(-e d2c64h1t64 -b 2 -t 32 -v 0 -s 0 -l 1e-3 -d 128 -x 4 -n 2)
    # emu_pair NAME CMD... / RESUME_CMD...: the run, then a copy taken back to its checkpoint
    # of step 2 and resumed with the second command; both must end with the same model
    emu_pair() {
        local name=$1 full=() part=()
        shift
        while [ "$1" != / ]; do full+=("$1"); shift; done
        shift
        part=("$@")
        NO_MPI=1 timeout 600 "${full[@]}" "${emu[@]}" -o "$tmp/$name" > "$tmp/$name.txt" 2>&1 ||
            { tail -n 15 "$tmp/$name.txt"; fail "emulated $name failed"; }
        local r=$tmp/${name}_resumed
        cp -r "$tmp/$name" "$r"
        rm -r "$r/model_final.bin" "$r"/*0004*
        rm -rf "$r/zero_4"
        if [ -e "$r/latest" ]; then echo 2 > "$r/latest"; else echo 2 > "$r/latest_zero"; fi
        NO_MPI=1 timeout 600 "${part[@]}" "${emu[@]}" -y 1 -o "$r" > "$r.txt" 2>&1 ||
            { tail -n 15 "$r.txt"; fail "emulated $name: the resume failed"; }
        grep -q "resumed from '$r' at step 2" "$r.txt" || { cat "$r.txt"; fail "emulated $name did not resume at step 2"; }
        cmp -s "$tmp/$name/model_final.bin" "$r/model_final.bin" ||
            fail "emulated $name: resumed at step 2 it ends with another model than the uninterrupted run"
    }
    emu_pair cu "$EMU/train_gpt2cu" / "$EMU/train_gpt2cu"
    emu_pair z3 scripts/launch_ranks.sh 2 "$EMU/train_gpt2_zero" -z 3 / "$EMU/train_gpt2_zero" -z 3
    echo "emulated: train_gpt2cu, and train_gpt2_zero -z 3 from 2 ranks onto 1, resumed at step 2 end bit-identical"
elif [ -n "${EMU_DIR:-}" ]; then   # make test built the emulated trainers where nvcc is: one missing is a failure
    fail "the emulated trainers are not in EMU_DIR=$EMU_DIR"
else
    echo "(the CUDA trainers emulated not run: $EMU not built, make emu)"
fi
echo "PASS test_resume_state"
