#!/usr/bin/env bash
# The CPU trainer (./train_gpt2) in the situations a preemptible job meets, unsharded and
# under mpirun with -z (sharded checkpoints):
#  1. -y 1 on a folder with no checkpoint yet starts fresh, says so, and trains
#  2. a model-file export that fails (its path is a folder) leaves `latest` naming the
#     good checkpoint of that step, and -y 1 resumes from it
#  3. temp files a crash left (NAME.tmp.PID, also inside checkpoint folders) are removed at
#     start with a line naming them; files that only look similar stay
#  4. a learning rate that makes the weights diverge (a real NaN, at some step K): the run
#     stops naming step K, and no checkpoint of step K exists (K-1's does); with --nan-skip
#     step K is reported skipped, the run goes on, and the state saved after step K
#     (parameters, AdamW m and v) equals the one saved before it
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_train_recovery: $*"; exit 1; }
small=(-e d2c64h2t64 -b 2 -t 32 -v 0 -s 0 --threads 1)
zero=(mpirun -np 2 ./train_gpt2 "${small[@]}" -z 2)

# 1. -y 1 with nothing to resume
./train_gpt2 "${small[@]}" -x 2 -y 1 -o "$tmp/fresh" > "$tmp/fresh.txt" 2>&1 || { cat "$tmp/fresh.txt"; fail "-y 1 on an empty folder exited non-zero"; }
grep -q "no checkpoint in '$tmp/fresh' yet: starting fresh" "$tmp/fresh.txt" || { cat "$tmp/fresh.txt"; fail "-y 1 on an empty folder does not say it starts fresh"; }
grep -q '^s:1 trl:' "$tmp/fresh/main.log" || fail "-y 1 on an empty folder did not train"
"${zero[@]}" -x 2 -y 1 -o "$tmp/zfresh" > "$tmp/zfresh.txt" 2>&1 || { cat "$tmp/zfresh.txt"; fail "sharded -y 1 on an empty folder exited non-zero"; }
grep -q "no checkpoint in '$tmp/zfresh' yet: starting fresh" "$tmp/zfresh.txt" || { cat "$tmp/zfresh.txt"; fail "sharded -y 1 on an empty folder does not say it starts fresh"; }
grep -q '^s:1 trl:' "$tmp/zfresh/main.log" || fail "sharded -y 1 on an empty folder did not train"
echo "-y 1 with no checkpoint yet: starts fresh (unsharded and -z 2)"

# 2. the export fails after the checkpoint of the same step
mkdir -p "$tmp/export/model_00000004.bin"
if ./train_gpt2 "${small[@]}" -x 4 -n 4 -o "$tmp/export" > "$tmp/export.txt" 2>&1; then fail "an export into a folder succeeded"; fi
grep -q "model_00000004.bin" "$tmp/export.txt" || { cat "$tmp/export.txt"; fail "the failed export is not named"; }
[ "$(cat "$tmp/export/latest" 2>/dev/null)" = "4" ] || fail "after a failed export 'latest' is '$(cat "$tmp/export/latest" 2>/dev/null)', not 4"
./train_gpt2 "${small[@]}" -x 4 -n 4 -y 1 -o "$tmp/export" > "$tmp/export2.txt" 2>&1 || { cat "$tmp/export2.txt"; fail "resume after a failed export failed"; }
grep -q "resumed from '$tmp/export' at step 4" "$tmp/export2.txt" || { cat "$tmp/export2.txt"; fail "did not resume from step 4"; }
mkdir -p "$tmp/zexport/model_final.bin"
if "${zero[@]}" -x 4 -n 4 -o "$tmp/zexport" > "$tmp/zexport.txt" 2>&1; then fail "a sharded run's export into a folder succeeded"; fi
[ "$(cat "$tmp/zexport/latest_zero" 2>/dev/null)" = "4" ] || fail "after a failed export 'latest_zero' is not 4"
"${zero[@]}" -x 4 -n 4 -y 1 -o "$tmp/zexport" > "$tmp/zexport2.txt" 2>&1 || true   # its export fails again
grep -q "resumed from '$tmp/zexport' at step 4" "$tmp/zexport2.txt" || { cat "$tmp/zexport2.txt"; fail "sharded: did not resume from step 4"; }
echo "a failed model export leaves latest at the good checkpoint (unsharded and -z 2)"

# 2b. a run stopped between `latest` and its model file: the resume writes the file, the
# same bytes the export would have written
for kind in plain zero; do
    d="$tmp/killed_$kind" cmd=(./train_gpt2 "${small[@]}")
    [ $kind = zero ] && cmd=("${zero[@]}")
    "${cmd[@]}" -x 4 -n 2 -o "$d" > "$d.txt" 2>&1 || { cat "$d.txt"; fail "$kind: the first run failed"; }
    mv "$d/model_00000004.bin" "$tmp/model4_$kind.bin" && cp "$d/model_00000002.bin" "$tmp/model2_$kind.bin" || fail "$kind: no model files"
    "${cmd[@]}" -x 4 -n 2 -y 1 -o "$d" > "$d.2.txt" 2>&1 || { cat "$d.2.txt"; fail "$kind: the resume failed"; }
    grep -qF "$d/model_00000004.bin" "$d.2.txt" || { cat "$d.2.txt"; fail "$kind: the missing model file is not named"; }
    cmp -s "$d/model_00000004.bin" "$tmp/model4_$kind.bin" || fail "$kind: the rewritten model_00000004.bin differs from the export's"
    cmp -s "$d/model_00000002.bin" "$tmp/model2_$kind.bin" || fail "$kind: model_00000002.bin changed"
done
echo "a run stopped before its model export: the resume writes the same file (unsharded and -z 2)"

# 3. temp files of an interrupted run (PIDs above Linux's PID_MAX_LIMIT, 4194304: their
# writers are surely gone; test_run_files.sh has live and dead ones, and what else stays)
for d in stale zstale; do
    mkdir -p "$tmp/$d/zero_4" "$tmp/$d/sub"
    touch "$tmp/$d/latest.tmp.4242424" "$tmp/$d/ckpt_00000002.bin.tmp.7777777" "$tmp/$d/zero_4/rank_00001.bin.tmp.9999999" \
          "$tmp/$d/notes.tmp.txt" "$tmp/$d/x.tmp." "$tmp/$d/sub/keep.bin"
done
./train_gpt2 "${small[@]}" -x 1 -o "$tmp/stale" > "$tmp/stale.txt" 2>&1 || { cat "$tmp/stale.txt"; fail "run over stale temp files failed"; }
"${zero[@]}" -x 1 -o "$tmp/zstale" > "$tmp/zstale.txt" 2>&1 || { cat "$tmp/zstale.txt"; fail "sharded run over stale temp files failed"; }
for d in stale zstale; do
    grep -q "removed 3 stale temp files of an interrupted run from '$tmp/$d'" "$tmp/$d.txt" || { cat "$tmp/$d.txt"; fail "$d: no line saying 3 temp files were removed"; }
    for f in latest.tmp.4242424 ckpt_00000002.bin.tmp.7777777 zero_4/rank_00001.bin.tmp.9999999; do
        [ -e "$tmp/$d/$f" ] && fail "$d: stale $f was not removed"
        grep -q "$f" "$tmp/$d.txt" || fail "$d: the removal of $f is not named"
    done
    for f in notes.tmp.txt x.tmp. sub/keep.bin; do [ -e "$tmp/$d/$f" ] || fail "$d: $f was removed"; done
done
echo "stale temp files removed at start, others kept (unsharded and -z 2)"

# 4. a real NaN: learning rate 10 with weight decay 10 blows the weights up (constant lr: -q 1)
nan=(-l 10 -c 10 -u 0 -q 1 -n 1)
# nan_step LOG: the step the stop message names
nan_step() { sed -n 's/^error: step \([0-9]*\)\/[0-9]*: loss .*gradient norm .*: not finite, so training stops here.*/\1/p' "$1"; }
# body_equal A B: the parameters, m and v of two unsharded checkpoints (4096-byte header, 8-byte trailer)
body_equal() { local n=$(( $(stat -c %s "$1") - 4104 )); cmp -s -n "$n" -i 4096 "$1" "$2"; }
if ./train_gpt2 "${small[@]}" "${nan[@]}" -x 30 -o "$tmp/nan" > "$tmp/nan.txt" 2>&1; then fail "a run that diverged to NaN exited 0"; fi
k=$(nan_step "$tmp/nan.txt")
[ -n "$k" ] && [ "$k" -gt 2 ] || { cat "$tmp/nan.txt"; fail "no message naming the NaN step"; }
prev=$(printf '%08d' $((k - 1))); kk=$(printf '%08d' "$k")
grep -Eq "^step +$((k - 1))/30 \| loss [0-9.]+ \| norm [0-9.]+ " "$tmp/nan.txt" || fail "step $((k - 1)) before the NaN was not finite"
[ -e "$tmp/nan/ckpt_$kk.bin" ] || [ -e "$tmp/nan/model_$kk.bin" ] && fail "a checkpoint of the NaN step $k was saved"
[ -e "$tmp/nan/ckpt_$prev.bin" ] && [ "$(cat "$tmp/nan/latest")" = "$((k - 1))" ] || fail "the checkpoint of step $((k - 1)) is not the latest"
echo "NaN at step $k: stopped, naming it; latest checkpoint is step $((k - 1))"
./train_gpt2 "${small[@]}" "${nan[@]}" -x "$k" --nan-skip -o "$tmp/skip" > "$tmp/skip.txt" 2>&1 || { cat "$tmp/skip.txt"; fail "--nan-skip run exited non-zero"; }
grep -Eq "^step +$k/$k \| loss -?nan \| norm -?nan \| skipped \(--nan-skip\)" "$tmp/skip.txt" || { cat "$tmp/skip.txt"; fail "step $k is not reported skipped"; }
cmp -s "$tmp/skip/model_$prev.bin" "$tmp/skip/model_$kk.bin" || fail "--nan-skip: parameters after the skipped step $k differ from before it"
body_equal "$tmp/skip/ckpt_$prev.bin" "$tmp/skip/ckpt_$kk.bin" || fail "--nan-skip: parameters or AdamW state changed across the skipped step"
echo "--nan-skip: step $k reported skipped; parameters and AdamW state unchanged across it"

# the same under mpirun -np 2 -z 2 (the step may differ: the sums are taken in another order)
if "${zero[@]}" "${nan[@]}" -x 30 -o "$tmp/znan" > "$tmp/znan.txt" 2>&1; then fail "a sharded run that diverged to NaN exited 0"; fi
k=$(nan_step "$tmp/znan.txt")
[ -n "$k" ] && [ "$k" -gt 2 ] || { cat "$tmp/znan.txt"; fail "sharded: no message naming the NaN step"; }
[ "$(grep -c "^error: step $k/" "$tmp/znan.txt")" = 1 ] || fail "sharded: the NaN message is not printed once"
[ -e "$tmp/znan/zero_$k" ] && fail "sharded: a checkpoint of the NaN step $k was saved"
[ -d "$tmp/znan/zero_$((k - 1))" ] && [ "$(cat "$tmp/znan/latest_zero")" = "$((k - 1))" ] || fail "sharded: step $((k - 1)) is not the latest checkpoint"
echo "-z 2, NaN at step $k: stopped, naming it; latest checkpoint is step $((k - 1))"
"${zero[@]}" "${nan[@]}" -x "$k" --nan-skip -o "$tmp/zskip" > "$tmp/zskip.txt" 2>&1 || { cat "$tmp/zskip.txt"; fail "sharded --nan-skip run exited non-zero"; }
grep -Eq "^step +$k/$k \| loss -?nan \| norm -?nan \| skipped \(--nan-skip\)" "$tmp/zskip.txt" || { cat "$tmp/zskip.txt"; fail "sharded: step $k is not reported skipped"; }
for state in master m v; do
    ./zero_consolidate --state $state "$tmp/zskip" $((k - 1)) "$tmp/before.$state" > /dev/null || fail "consolidating step $((k - 1))"
    ./zero_consolidate --state $state "$tmp/zskip" "$k" "$tmp/after.$state" > /dev/null || fail "consolidating step $k"
    cmp -s "$tmp/before.$state" "$tmp/after.$state" || fail "sharded --nan-skip: $state changed across the skipped step $k"
done
echo "-z 2 --nan-skip: step $k reported skipped; master, m and v unchanged across it"
echo "PASS test_train_recovery"
