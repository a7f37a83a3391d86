#!/usr/bin/env bash
# test_ckpt_resume.sh: what -y 1 checks before it continues a run, with the CPU
# trainer, unsharded and under mpirun -np 2 -z 2:
#  1. -y 1 into a folder holding the other kind of checkpoint (unsharded ckpt_ and latest vs
#     sharded zero_N and latest_zero), or its own kind with the pointer file deleted, and a
#     new run (no -y 1) into one holding either: refused with a message saying what is
#     there; main.log, the model files and the checkpoints stay byte for byte
#  1b. latest_zero, a manifest.json or latest that is a FIFO or a symbolic link to /dev/zero:
#     refused at once by -y 1 (and zero_consolidate), naming the file and what it is
#  2. a sharded manifest whose stage, seed or last_t differs from the rank files': refused
#     by -y 1 and by zero_consolidate, naming the file and both values
#  3. an unsharded checkpoint of another step copied over the latest one (ckpt_2 over
#     ckpt_4, latest says 4): refused naming the file and both steps; a damaged byte in its
#     header's step: refused as corrupt (its CRC), not as another step's; one cut short:
#     refused with its size and the size it should have; a damaged byte in its version or
#     magic (read before the CRC): "corrupt, or" another version or file; -x below the saved
#     step, and a sharded resume on 4 ranks without -d (the default batch grows with the
#     ranks): refused, the second naming the -d that keeps the saved batch
#  4. settings changed on resume (-l, -c, --grad-clip, -u, --beta1, -x) are printed, and
#     run.json keeps the first part's record (settings and timing) with a "resumes" entry
#     per resume: its step and each changed setting from/to (a second resume compares with
#     the settings then in force), sharded and unsharded
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_ckpt_resume: $*"; exit 1; }
small=(-e d2c64h2t64 -b 2 -t 32 -v 0 -s 0 --threads 1 --seed 1337)
zero=(mpirun -np 2 ./train_gpt2 "${small[@]}" -z 2)
sums() { (cd "$1" && sha256sum main.log model_*.bin 2>/dev/null); }

# a sharded and an unsharded run to start from (checkpoints at 2 and 4)
"${zero[@]}" -x 4 -n 2 -o "$tmp/zbase" > "$tmp/zbase.txt" 2>&1 || { cat "$tmp/zbase.txt"; fail "the sharded base run failed"; }
./train_gpt2 "${small[@]}" -x 4 -n 2 -o "$tmp/base" > "$tmp/base.txt" 2>&1 || { cat "$tmp/base.txt"; fail "the unsharded base run failed"; }

# refused NAME WHAT CMD...: the command must exit non-zero, print WHAT, and leave main.log
# and the model files of its -o folder ($tmp/NAME) as they were
refused() {
    local name=$1 what=$2
    shift 2
    sums "$tmp/$name" > "$tmp/$name.before"
    if "$@" -o "$tmp/$name" > "$tmp/$name.txt" 2>&1; then cat "$tmp/$name.txt"; fail "$name: the run was not refused"; fi
    grep -qF -- "$what" "$tmp/$name.txt" || { cat "$tmp/$name.txt"; fail "$name: no message saying: $what"; }
    grep -q "starting fresh" "$tmp/$name.txt" && fail "$name: it says it starts fresh"
    sums "$tmp/$name" | cmp -s - "$tmp/$name.before" || fail "$name: main.log or a model file changed"
    echo "$name: refused, main.log and model files unchanged: $(grep -F -- "$what" "$tmp/$name.txt" | head -n 1 | cut -c1-220)"
}

# 1. -y 1 over the other kind, or over its own kind without the pointer file
cp -r "$tmp/zbase" "$tmp/unsharded_over_sharded"
refused unsharded_over_sharded "has no 'latest' naming an unsharded checkpoint to resume, but it holds 'latest_zero' (a step number), 2 sharded checkpoints (zero_2/ to zero_4/)" \
    ./train_gpt2 "${small[@]}" -x 6 -n 2 -y 1
cp -r "$tmp/base" "$tmp/sharded_over_unsharded"
refused sharded_over_unsharded "has no 'latest_zero' naming a sharded checkpoint to resume, but it holds 'latest' (a step number), 2 unsharded checkpoints (ckpt_00000002.bin to ckpt_00000004.bin)" \
    "${zero[@]}" -x 6 -n 2 -y 1
cp -r "$tmp/zbase" "$tmp/no_latest_zero"
rm "$tmp/no_latest_zero/latest_zero"
refused no_latest_zero "has no 'latest_zero' naming a sharded checkpoint to resume, but it holds 2 sharded checkpoints (zero_2/ to zero_4/)" \
    "${zero[@]}" -x 6 -n 2 -y 1
cp -r "$tmp/base" "$tmp/no_latest"
rm "$tmp/no_latest/latest"
refused no_latest "has no 'latest' naming an unsharded checkpoint to resume, but it holds 2 unsharded checkpoints" \
    ./train_gpt2 "${small[@]}" -x 6 -n 2 -y 1
# a new run (no -y 1) in a folder holding an earlier run's checkpoints: its first save would
# remove them, and without -n a later -y 1 would resume them as its own
cp -r "$tmp/base" "$tmp/new_over_unsharded"
refused new_over_unsharded "holds 'latest' (a step number), 2 unsharded checkpoints (ckpt_00000002.bin to ckpt_00000004.bin) of an earlier run" \
    ./train_gpt2 "${small[@]}" -x 2 -n 2
cp -r "$tmp/zbase" "$tmp/new_over_sharded"
refused new_over_sharded "holds 'latest_zero' (a step number), 2 sharded checkpoints (zero_2/ to zero_4/) of an earlier run" \
    "${zero[@]}" -x 3
[ -f "$tmp/new_over_unsharded/ckpt_00000004.bin" ] && [ -d "$tmp/new_over_sharded/zero_4" ] ||
    fail "a refused new run removed a checkpoint"

# 1b. a pointer file or manifest that is a FIFO or a symbolic link to /dev/zero: refused at
# once, naming the file and what it is (timeout: a reader that waits on the FIFO or reads
# /dev/zero without end fails here rather than hangs)
odd() {   # odd NAME FILE KIND: FILE, relative to the copy $tmp/NAME, becomes a FIFO or a link to /dev/zero
    rm "$tmp/$1/$2"
    if [ "$3" = fifo ]; then mkfifo "$tmp/$1/$2"; else ln -s /dev/zero "$tmp/$1/$2"; fi
}
said() { [ "$1" = fifo ] && echo "it is a FIFO (named pipe), not a regular file" || echo "it is a symbolic link (to /dev/zero), which is not followed"; }
for kind in fifo devzero; do
    for file in latest_zero zero_4/manifest.json; do
        name="odd_${file//\//_}_$kind"
        cp -r "$tmp/zbase" "$tmp/$name"
        odd "$name" "$file" "$kind"
        refused "$name" "cannot read $tmp/$name/$file: $(said "$kind")" timeout 60 "${zero[@]}" -x 6 -n 2 -y 1
        timeout 20 ./zero_consolidate "$tmp/$name" latest "$tmp/$name.out" > "$tmp/$name.cons" 2>&1
        rc=$?
        [ "$rc" -eq 1 ] && grep -qF "cannot read $tmp/$name/$file: $(said "$kind")" "$tmp/$name.cons" \
            || { cat "$tmp/$name.cons"; fail "$name: zero_consolidate (exit $rc) does not refuse it naming the file"; }
    done
    name="odd_latest_$kind"
    cp -r "$tmp/base" "$tmp/$name"
    odd "$name" latest "$kind"
    refused "$name" "'$tmp/$name/latest' $(said "$kind" | sed 's/^it //')" timeout 60 ./train_gpt2 "${small[@]}" -x 6 -n 2 -y 1
done
echo "a FIFO or a link to /dev/zero as latest_zero, manifest.json or latest: refused at once (-y 1 and zero_consolidate)"

# 2. a manifest's stage, seed or last_t against the rank files'
for edit in "stage 2 1" "last_t 4 5" "seed 1337 1338"; do
    set -- $edit
    field=$1 saved=$2 edited=$3 name="manifest_$1"
    cp -r "$tmp/zbase" "$tmp/$name"
    python3 - "$tmp/$name/zero_4/manifest.json" "$field" "$saved" "$edited" <<'EOF' || fail "cannot edit the manifest"
import json, sys
path, field, saved, edited = sys.argv[1:]
m = json.load(open(path))
if str(m[field]) != saved: sys.exit(f"{path}: {field} is {m[field]!r}, not {saved}")
m[field] = edited if field == "seed" else int(edited)
json.dump(m, open(path, "w"), indent=1)
EOF
    msg="rank_00000.bin (rank 0 of 2) was saved with $field $saved, but $tmp/$name/zero_4/manifest.json says $edited"
    refused "$name" "$msg" "${zero[@]}" -x 6 -n 2 -y 1
    if ./zero_consolidate "$tmp/$name" latest "$tmp/$name.out" > "$tmp/$name.cons" 2>&1; then fail "$name: zero_consolidate accepted it"; fi
    grep -qF "$msg" "$tmp/$name.cons" || { cat "$tmp/$name.cons"; fail "$name: zero_consolidate does not name the file and both values"; }
done
echo "manifest stage, last_t and seed are checked against the rank files (-y 1 and zero_consolidate)"

# 3. ckpt_2 copied over ckpt_4
cp -r "$tmp/base" "$tmp/step_copied"
cp "$tmp/step_copied/ckpt_00000002.bin" "$tmp/step_copied/ckpt_00000004.bin"
refused step_copied "checkpoint '$tmp/step_copied/ckpt_00000004.bin' holds step 2, but its name (and '$tmp/step_copied/latest') says step 4" \
    ./train_gpt2 "${small[@]}" -x 6 -n 2 -y 1
# a damaged byte in the header (the step field): corrupt, by its CRC, not "another step's"
cp -r "$tmp/base" "$tmp/header_flip"
printf '\x7f' | dd of="$tmp/header_flip/ckpt_00000004.bin" bs=1 seek=16 conv=notrunc status=none
refused header_flip "checkpoint '$tmp/header_flip/ckpt_00000004.bin' is corrupt: CRC" ./train_gpt2 "${small[@]}" -x 6 -n 2 -y 1
# a checkpoint cut short: refused with its size and the size a checkpoint of this model has
cp -r "$tmp/base" "$tmp/cut_short"
full=$(stat -c %s "$tmp/cut_short/ckpt_00000004.bin")
truncate -s $((full - 100)) "$tmp/cut_short/ckpt_00000004.bin"
refused cut_short "checkpoint '$tmp/cut_short/ckpt_00000004.bin' has a damaged trailer: it is $((full - 100)) bytes, a checkpoint of this model is $full (cut short)" \
    ./train_gpt2 "${small[@]}" -x 6 -n 2 -y 1
# a damaged byte in the version or the magic, read before the CRC can vouch for them: corrupt, or another file
cp -r "$tmp/base" "$tmp/version_flip"
printf '\x06' | dd of="$tmp/version_flip/ckpt_00000004.bin" bs=1 seek=8 conv=notrunc status=none
refused version_flip "checkpoint '$tmp/version_flip/ckpt_00000004.bin' is corrupt, or has version 6: this build reads version 2" \
    ./train_gpt2 "${small[@]}" -x 6 -n 2 -y 1
cp -r "$tmp/base" "$tmp/magic_flip"
printf 'g' | dd of="$tmp/magic_flip/ckpt_00000004.bin" bs=1 seek=0 conv=notrunc status=none
refused magic_flip "'$tmp/magic_flip/ckpt_00000004.bin' is corrupt, or not a training checkpoint: its magic is" \
    ./train_gpt2 "${small[@]}" -x 6 -n 2 -y 1

# 3b. -x below the checkpoint's step: refused (the loop would not run); another batch size
# without -d: refused, naming this run's B and ranks and the -d that keeps the saved batch
cp -r "$tmp/base" "$tmp/x_below"
refused x_below "the checkpoint is at step 4, past the 3 steps this run trains (-x): give -x 4 or more" \
    ./train_gpt2 "${small[@]}" -x 3 -n 2 -y 1
cp -r "$tmp/zbase" "$tmp/ranks_changed"
refused ranks_changed "saved with 128 tokens per step, this run uses 256 (B=2, T=32, 4 ranks): give -d 128 to train on" \
    mpirun -np 4 ./train_gpt2 "${small[@]}" -z 2 -x 6 -n 2 -y 1

# 4. changed settings on resume: printed, and kept in run.json with the first part's record
check_record() {   # check_record RUN.JSON PYTHON-ASSERTIONS...
    python3 - "$@" <<'EOF' || fail "run.json does not keep the history (see above)"
import json, sys
r = json.load(open(sys.argv[1]))
for a in sys.argv[2:]:
    if not eval(a):
        print(json.dumps(r, indent=1)[:3000])
        sys.exit(f"{sys.argv[1]}: not true: {a}")
EOF
}
run="$tmp/history"
./train_gpt2 "${small[@]}" -x 4 -n 2 -o "$run" > "$tmp/h1.txt" 2>&1 || { cat "$tmp/h1.txt"; fail "history: first part failed"; }
./train_gpt2 "${small[@]}" -x 6 -n 2 -y 1 -l 0.001 -c 0.05 --grad-clip 0.5 -u 2 --beta1 0.85 -o "$run" > "$tmp/h2.txt" 2>&1 \
    || { cat "$tmp/h2.txt"; fail "history: the resume with changed settings failed"; }
for line in "-l (lr) changed from 0.002 to 0.001" "-c (weight_decay) changed from 0 to 0.05" \
            "--grad-clip (grad_clip) changed from 1 to 0.5" "-u (warmup_steps) changed from 3 to 2" \
            "--beta1 (beta1) changed from 0.9 to 0.85" "-x (steps) changed from 4 to 6"; do
    grep -qF -- "resume at step 4: $line" "$tmp/h2.txt" || { cat "$tmp/h2.txt"; fail "history: the resume does not print: $line"; }
done
./train_gpt2 "${small[@]}" -x 8 -n 2 -y 1 -l 0.001 -c 0.05 --grad-clip 0.5 -u 2 --beta1 0.85 -o "$run" > "$tmp/h3.txt" 2>&1 \
    || { cat "$tmp/h3.txt"; fail "history: the second resume failed"; }
[ "$(grep -c "^resume at step 6: " "$tmp/h3.txt")" = 2 ] && grep -qF "resume at step 6: -x (steps) changed from 6 to 8" "$tmp/h3.txt" \
    && grep -q "^resume at step 6: its learning rate is [0-9.e-]* by this part's schedule, [0-9.e-]* by the one before$" "$tmp/h3.txt" \
    || { cat "$tmp/h3.txt"; fail "history: the second resume does not print just -x's change and the learning rate it moves"; }
# The learning rate a resumed step gets, by llm.c's cosine (warmup, then a half cosine from the
# peak to -q x peak at the last step), under the schedule before and after each resume
python3 - "$run/run.json" <<'EOF' || fail "run.json's lr_at_step is not the cosine schedule's (see above)"
import json, math, sys
r = json.load(open(sys.argv[1]))
def lr(peak, warmup, steps, frac, step):
    if step < warmup: return peak * (step + 1) / warmup
    lo = frac * peak
    return lo + 0.5 * (1 + math.cos(math.pi * (step - warmup) / (steps - warmup))) * (peak - lo)
q = r["final_lr_frac"]
want = [(4, lr(0.002, 3, 4, q, 4), lr(0.001, 2, 6, q, 4)), (6, lr(0.001, 2, 6, q, 6), lr(0.001, 2, 8, q, 6))]
for part, (step, before, after) in zip(r["resumes"], want):
    got = part.get("lr_at_step")
    if part["step"] != step or got is None or abs(got["from"] - before) > 1e-6 * before or abs(got["to"] - after) > 1e-6 * after:
        sys.exit(f"resume at step {part['step']}: lr_at_step {got}, want from {before:.7g} to {after:.7g}")
EOF
check_record "$run/run.json" \
    'r["lr"] == 0.002 and r["steps"] == 4 and r["grad_clip"] == 1 and r["warmup_steps"] == 3 and r["beta1"] == 0.9' \
    'r["seed"] == 1337 and len(r["timing"]["step_seconds"]) == 4' \
    'len(r["resumes"]) == 2 and r["resumes"][0]["step"] == 4 and r["resumes"][1]["step"] == 6' \
    'r["resumes"][0]["changed"] == {"lr": {"from": 0.002, "to": 0.001}, "weight_decay": {"from": 0, "to": 0.05}, "grad_clip": {"from": 1, "to": 0.5}, "warmup_steps": {"from": 3, "to": 2}, "beta1": {"from": 0.9, "to": 0.85}, "steps": {"from": 4, "to": 6}}' \
    'len(r["resumes"][0]["timing"]["step_seconds"]) == 2 and len(r["resumes"][1]["timing"]["step_seconds"]) == 2' \
    'r["resumes"][1]["changed"] == {"steps": {"from": 6, "to": 8}}'
echo "unsharded: changed settings printed on resume; run.json keeps the first part and both resumes"
echo '{"not": "a run record"' > "$run/run.json"
./train_gpt2 "${small[@]}" -x 10 -n 2 -y 1 -l 0.001 -c 0.05 --grad-clip 0.5 -u 2 --beta1 0.85 -o "$run" > "$tmp/h4.txt" 2>&1 \
    || { cat "$tmp/h4.txt"; fail "history: the resume over a damaged run.json failed"; }
[ "$(cat "$run/run.json.unreadable")" = '{"not": "a run record"' ] || fail "history: the damaged run.json was not kept aside"
grep -qF "resume at step 8: $run/run.json was not a run record (kept aside as $run/run.json.unreadable)" "$tmp/h4.txt" \
    || { cat "$tmp/h4.txt"; fail "history: the damaged run.json is not reported"; }
check_record "$run/run.json" 'r["steps"] == 10 and r["lr"] == 0.001 and len(r["resumes"]) == 1 and r["resumes"][0]["step"] == 8' \
    '"kept aside" in r["resumes"][0]["note"] and len(r["resumes"][0]["timing"]["step_seconds"]) == 2'
echo "unsharded: a damaged run.json is kept aside (run.json.unreadable), and a new record says so"
zrun="$tmp/zhistory"
"${zero[@]}" -x 2 -n 2 -o "$zrun" > "$tmp/z1.txt" 2>&1 || { cat "$tmp/z1.txt"; fail "sharded history: first part failed"; }
"${zero[@]}" -x 4 -n 2 -y 1 -l 0.001 -o "$zrun" > "$tmp/z2.txt" 2>&1 || { cat "$tmp/z2.txt"; fail "sharded history: resume failed"; }
grep -qF "resume at step 2: -l (lr) changed from 0.002 to 0.001" "$tmp/z2.txt" || { cat "$tmp/z2.txt"; fail "sharded: the lr change is not printed"; }
check_record "$zrun/run.json" 'r["lr"] == 0.002 and r["steps"] == 2 and r["zero_stage"] == 2 and len(r["timing"]["step_seconds"]) == 2' \
    'r["resumes"][0]["changed"] == {"lr": {"from": 0.002, "to": 0.001}, "steps": {"from": 2, "to": 4}}'
echo "sharded: the same record across a resume"
# ZeRO++'s quantized gradients sum other bits: a resume that turns them on says so
"${zero[@]}" -x 6 -n 2 -y 1 -l 0.001 --qgz -o "$zrun" > "$tmp/z3.txt" 2>&1 || { cat "$tmp/z3.txt"; fail "sharded history: resume with --qgz failed"; }
grep -qF "resume at step 4: --qgz (qgz) changed from 0 to 1" "$tmp/z3.txt" || { cat "$tmp/z3.txt"; fail "sharded: turning --qgz on is not printed"; }
check_record "$zrun/run.json" 'r["qgz"] == 0 and r["resumes"][1]["changed"] == {"qgz": {"from": 0, "to": 1}, "steps": {"from": 4, "to": 6}}'
echo "sharded: a resume that turns on --qgz says so"
# ranks that read different steps from latest_zero (here: a folder each) stop, naming both
stale="$tmp/zstale"
cp -r "$zrun" "$stale" && echo 4 > "$stale/latest_zero"
timeout 120 mpirun -np 1 ./train_gpt2 "${small[@]}" -z 2 -x 8 -n 2 -y 1 -o "$zrun" : \
    -np 1 ./train_gpt2 "${small[@]}" -z 2 -x 8 -n 2 -y 1 -o "$stale" > "$tmp/z4.txt" 2>&1
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -qF "zero: rank 1: $stale/latest_zero names step 4 here and step 6 on rank 0" "$tmp/z4.txt" \
    || { cat "$tmp/z4.txt"; fail "sharded: ranks reading different latest_zero steps (exit $rc) were not stopped with both named"; }
echo "sharded: ranks that read different checkpoint steps stop, naming both"
echo "PASS test_ckpt_resume"
