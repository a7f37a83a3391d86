#!/usr/bin/env bash
# test_ckpt_prune.sh: pruning old checkpoints deletes only what the checkpoint format
# wrote, and never through a symbolic link. The CPU trainer saves
# every 2 steps and keeps the two newest checkpoints:
#  sharded (mpirun -np 2, -z 2):
#   1. OUT/zero_1 is a symbolic link to a folder of a user's files (two of them named as the
#      format names its files): the folder and every file in it survive, the link too, and
#      the run says once that it left the link alone
#   2. a user's notes.txt inside the real checkpoint folder zero_2: when zero_2 is pruned its
#      rank files, manifest and extra blob go, notes.txt and the folder stay, said once; and
#      a save into zero_2 when it is a link to the user's folder is refused, writing nothing
#   3. a manifest never stands over files it does not vouch for: a zero_6 whose manifest
#      names a rank file that is gone is no kept checkpoint (-nk 3 keeps zero_4 in its place
#      and removes zero_6, saying why once); a save of step 8 again (latest_zero moved back
#      to 6) removes zero_8's manifest before any rank writes, so rank 1 failing its file
#      (ulimit -f) leaves zero_8 without one; a manifest this build cannot read (another
#      version) is not judged: its checkpoint is left alone and not counted among -nk
#  unsharded:
#   4. files named like checkpoints but not as the trainer names them (ckpt_1.bin,
#      model_7_notes.bin), a symbolic link ckpt_00000003.bin to a user's file, and a folder
#      model_00000001.bin all survive, while the trainer's old ckpt_/model_ files go
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_ckpt_prune: $*"; exit 1; }
small=(-e d2c64h2t64 -b 2 -t 32 -v 0 -s 0 --threads 1 -x 6 -n 2)

# a user's folder: its files and their checksums
user="$tmp/user"
mkdir -p "$user"
echo "thesis draft" > "$user/thesis.txt"
echo "not a checkpoint" > "$user/rank_00000.bin"
echo '{"mine": true}' > "$user/manifest.json"
(cd "$user" && sha256sum * > "$tmp/user.sums")

# 1 and 2: sharded
out="$tmp/zrun"
mkdir -p "$out/zero_2"
ln -s "$user" "$out/zero_1"
echo "my notes on step 2" > "$out/zero_2/notes.txt"
mpirun -np 2 ./train_gpt2 "${small[@]}" -z 2 -o "$out" > "$tmp/zrun.txt" 2>&1 || { cat "$tmp/zrun.txt"; fail "the sharded run failed"; }
[ "$(cat "$out/latest_zero")" = 6 ] || fail "the sharded run did not reach its checkpoint of step 6"
[ -L "$out/zero_1" ] || fail "the symbolic link zero_1 was removed"
(cd "$user" && sha256sum -c --quiet "$tmp/user.sums") || fail "files of the user's folder behind the link zero_1 were changed or removed"
[ "$(ls "$user" | wc -l)" = 3 ] || fail "the user's folder behind zero_1 holds $(ls "$user" | wc -l) files, not its 3"
[ "$(grep -c "zero_1 is a symbolic link, not a checkpoint folder: left alone" "$tmp/zrun.txt")" = 1 ] \
    || { cat "$tmp/zrun.txt"; fail "the link zero_1 left alone is not said exactly once"; }
echo "sharded: the symbolic link zero_1 and the user's folder behind it survive pruning (said once)"
[ "$(cat "$out/zero_2/notes.txt" 2>/dev/null)" = "my notes on step 2" ] || fail "notes.txt inside the pruned zero_2 was removed"
[ "$(ls "$out/zero_2")" = notes.txt ] || fail "pruned zero_2 still holds checkpoint files: $(ls "$out/zero_2" | tr '\n' ' ')"
[ "$(grep -c "removed old checkpoint $out/zero_2 but kept the folder: it also holds 1 file the checkpoint format does not name (notes.txt)" "$tmp/zrun.txt")" = 1 ] \
    || { cat "$tmp/zrun.txt"; fail "keeping notes.txt in zero_2 is not said exactly once"; }
for s in 4 6; do [ -f "$out/zero_$s/manifest.json" ] && [ -f "$out/zero_$s/rank_00001.bin" ] || fail "checkpoint zero_$s is incomplete"; done
./zero_consolidate "$out" 4 "$tmp/c4" > /dev/null || fail "the kept checkpoint zero_4 does not consolidate"
echo "sharded: a user's file in the real checkpoint folder zero_2 survives its pruning (said once); zero_4, zero_6 kept"
# a link named as a step the run saves: the save refuses to write through it
out="$tmp/zlink"
mkdir -p "$out"
ln -s "$user" "$out/zero_2"
if mpirun -np 2 ./train_gpt2 "${small[@]}" -z 2 -o "$out" > "$tmp/zlink.txt" 2>&1; then fail "a save through the link zero_2 succeeded"; fi
grep -q "saving checkpoint: $out/zero_2 is a symbolic link, not a folder of this run: nothing is written through it" "$tmp/zlink.txt" \
    || { cat "$tmp/zlink.txt"; fail "the refused save through the link zero_2 is not explained"; }
(cd "$user" && sha256sum -c --quiet "$tmp/user.sums") && [ "$(ls "$user" | wc -l)" = 3 ] || fail "the save wrote into the user's folder behind zero_2"
echo "sharded: a save into zero_2, a link to a user's folder, is refused; the folder is untouched"

# 3. manifests over files they do not vouch for
zbase="$tmp/zbase"
mpirun -np 2 ./train_gpt2 "${small[@]}" -z 2 -x 8 -nk 0 -o "$zbase" > "$tmp/zbase.txt" 2>&1 || { cat "$tmp/zbase.txt"; fail "the sharded base run failed"; }
out="$tmp/zstale"
cp -r "$zbase" "$out"
rm "$out/zero_6/rank_00001.bin"
mpirun -np 2 ./train_gpt2 "${small[@]}" -z 2 -x 10 -nk 3 -y 1 -o "$out" > "$tmp/zstale.txt" 2>&1 || { cat "$tmp/zstale.txt"; fail "the resume over zero_6 without its rank 1 file failed"; }
[ -e "$out/zero_6" ] && fail "zero_6, a manifest over a missing rank file, was kept as one of the 3 newest checkpoints"
[ -e "$out/zero_2" ] && fail "zero_2, the 5th newest, was not pruned"
for s in 4 8 10; do [ -f "$out/zero_$s/manifest.json" ] && [ -f "$out/zero_$s/rank_00001.bin" ] || fail "checkpoint zero_$s is incomplete"; done
[ "$(grep -c "removed $out/zero_6: it holds a manifest but is no complete checkpoint (rank_00001.bin: No such file or directory), so it did not count among the 3 kept" "$tmp/zstale.txt")" = 1 ] \
    || { cat "$tmp/zstale.txt"; fail "removing zero_6 is not said once, naming its missing file"; }
./zero_consolidate "$out" 4 "$tmp/c4s" > /dev/null || fail "zero_4, kept in zero_6's place, does not consolidate"
echo "sharded: a manifest over a missing rank file is no kept checkpoint: zero_4 stays in its place, zero_6 goes (said once)"
# a manifest this build cannot read (another format version): not judged, so kept and counted
other="$tmp/zother"
cp -r "$zbase" "$other"
sed -i 's/"version":[[:space:]]*[0-9]*/"version": 99/' "$other/zero_2/manifest.json"
grep -q '"version": 99' "$other/zero_2/manifest.json" || fail "cannot set zero_2's manifest version"
mpirun -np 2 ./train_gpt2 "${small[@]}" -z 2 -x 10 -nk 2 -y 1 -o "$other" > "$tmp/zother.txt" 2>&1 || { cat "$tmp/zother.txt"; fail "the resume beside an unreadable manifest failed"; }
[ -f "$other/zero_2/rank_00001.bin" ] && ! grep -q "removed $other/zero_2" "$tmp/zother.txt" \
    || { cat "$tmp/zother.txt"; fail "zero_2, whose manifest this build cannot read, was removed"; }
[ ! -e "$other/zero_4" ] && [ ! -e "$other/zero_6" ] && [ -f "$other/zero_8/manifest.json" ] && [ -f "$other/zero_10/manifest.json" ] \
    || { ls "$other"; fail "-nk 2 beside an unjudged zero_2: not exactly zero_8 and zero_10 kept of the others"; }
echo "sharded: a checkpoint whose manifest this build cannot read is left alone and not counted: -nk 2 keeps zero_8, zero_10"
out="$tmp/zresave"
cp -r "$zbase" "$out"
echo 6 > "$out/latest_zero"
args=("${small[@]}" -z 2 -x 8 -nk 0 -y 1 -o "$out")
if timeout 120 mpirun -np 1 ./train_gpt2 "${args[@]}" : -np 1 bash -c 'ulimit -f 8192 && exec "$@"' _ ./train_gpt2 "${args[@]}" \
        > "$tmp/zresave.txt" 2>&1; then
    fail "the save of step 8 again, with rank 1 held under ulimit -f, succeeded"
fi
grep -q "zero: rank 1: saving checkpoint: writing $out/zero_8/rank_00001.bin.tmp.[0-9]* failed: File too large" "$tmp/zresave.txt" &&
    grep -qF "zero: rank 0: checkpoint $out/zero_8 not published: rank 1 failed to write its file" "$tmp/zresave.txt" \
    || { cat "$tmp/zresave.txt"; fail "rank 1's failed file and the unpublished zero_8 are not said"; }
[ -e "$out/zero_8/manifest.json" ] && fail "the save of step 8 again left zero_8's earlier manifest over its rewritten rank files"
[ "$(cat "$out/latest_zero")" = 6 ] || fail "latest_zero moved from 6 to $(cat "$out/latest_zero")"
./zero_consolidate "$out" latest "$tmp/c6" > /dev/null || fail "zero_6, latest_zero's, does not consolidate after the failed save"
echo "sharded: saving step 8 again removes zero_8's manifest before the ranks write: rank 1's failure leaves none"

# 4: unsharded
out="$tmp/run"
mkdir -p "$out/model_00000001.bin"
echo "a user's run notes" > "$out/ckpt_1.bin"
echo "a user's model notes" > "$out/model_7_notes.bin"
echo "a user's file behind a link" > "$tmp/linked.bin"
ln -s "$tmp/linked.bin" "$out/ckpt_00000003.bin"
./train_gpt2 "${small[@]}" -o "$out" > "$tmp/run.txt" 2>&1 || { cat "$tmp/run.txt"; fail "the unsharded run failed"; }
[ "$(cat "$out/latest")" = 6 ] || fail "the unsharded run did not reach its checkpoint of step 6"
[ "$(cat "$out/ckpt_1.bin" 2>/dev/null)" = "a user's run notes" ] || fail "ckpt_1.bin (not a name the trainer writes) was removed"
[ "$(cat "$out/model_7_notes.bin" 2>/dev/null)" = "a user's model notes" ] || fail "model_7_notes.bin was removed"
[ -L "$out/ckpt_00000003.bin" ] && [ "$(cat "$tmp/linked.bin")" = "a user's file behind a link" ] \
    || fail "the symbolic link ckpt_00000003.bin or the file behind it was removed"
[ -d "$out/model_00000001.bin" ] || fail "the folder model_00000001.bin was removed"
[ -e "$out/ckpt_00000002.bin" ] || [ -e "$out/model_00000002.bin" ] && fail "the trainer's old checkpoint of step 2 was not pruned"
for f in ckpt_00000004.bin ckpt_00000006.bin model_00000004.bin model_00000006.bin; do [ -f "$out/$f" ] || fail "$f is missing"; done
echo "unsharded: ckpt_1.bin, model_7_notes.bin, a link and a folder named like checkpoints survive; step 2's files pruned"
echo "PASS test_ckpt_prune"
