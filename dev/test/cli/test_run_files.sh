#!/usr/bin/env bash
# A run's files: nothing lost silently, one run per output folder, and no temp file removed
# at start-up that a dead run of this project did not leave (llmc/run/run_lock.h,
# llmc/atomic_file.h). With the CPU trainer (./train_gpt2), unsharded and -z:
#  1. main.log on a full device (a symlink to /dev/full), and stdout on one: the run stops
#     with a non-zero exit naming the file and the error
#  2. a checkpoint past the file-size limit (ulimit -f; SIGXFSZ would kill the process
#     without a word): a message naming the file, a non-zero exit, and the previous
#     checkpoint intact and still the latest (unsharded, and -z 2's sharded checkpoint)
#  3. zero_report.json past the limit (live and --dry-run) or unwritable: named, non-zero
#  4. two runs on one -o: the second is refused at once naming the first's PID (rank 0's
#     under mpirun), and the first finishes with a whole log
#  5. start-up cleanup: a dead run's temp files (also in zero_N/) go; a user's notes.tmp.123,
#     a live process's temp file, one from before this boot, a symlink, another run's
#     folder below and a symlinked folder stay
#  6. a symbolic link planted at a temp file's name the run will use (its PID is known: the
#     shell execs the trainer) for run.json, a checkpoint, a sharded rank file, and at the
#     lock file .lock: the run stops naming it, the link's target is untouched, the link stays
#  7. zero_consolidate's output past ulimit -f: named, non-zero exit (no silent SIGXFSZ)
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
live_pid=
stopped=
cleanup() {
    [ -n "$stopped" ] && kill -CONT "$stopped" 2>/dev/null
    [ -n "$live_pid" ] && kill "$live_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL test_run_files: $*"; exit 1; }
small=(-e d2c64h2t64 -b 2 -t 32 -v 0 -s 0 --threads 1)
# limited KiB CMD...: CMD under `ulimit -f KiB`, its output through a pipe (a file written by
# the limited process would be cut at the limit, its error messages with it); exit status kept
limited() { local kib=$1; shift; (ulimit -f "$kib"; exec "$@") 2>&1 | cat; return "${PIPESTATUS[0]}"; }

# 1. main.log and stdout on a full device
mkdir -p "$tmp/full" && ln -s /dev/full "$tmp/full/main.log"
if ./train_gpt2 "${small[@]}" -x 5 -o "$tmp/full" > "$tmp/full.txt" 2>&1; then fail "a run whose main.log is on a full device exited 0"; fi
grep -q "main.log.*No space left on device" "$tmp/full.txt" || { cat "$tmp/full.txt"; fail "the failed main.log write is not named"; }
[ "$(grep -c '^error:' "$tmp/full.txt")" = 1 ] || fail "the main.log failure is not reported once"
if ./train_gpt2 "${small[@]}" -x 2 -o "$tmp/stdout" > /dev/full 2> "$tmp/stdout.txt"; then fail "a run whose stdout is a full device exited 0"; fi
grep -q "standard output ('/dev/full') failed" "$tmp/stdout.txt" || { cat "$tmp/stdout.txt"; fail "the failed stdout is not named"; }
echo "main.log and stdout on a full device: the run stops, naming them"

# 2. a checkpoint past ulimit -f
./train_gpt2 "${small[@]}" -x 4 -n 2 -o "$tmp/ckpt" > "$tmp/ckpt.txt" 2>&1 || { cat "$tmp/ckpt.txt"; fail "checkpointed run failed"; }
sum=$(cksum < "$tmp/ckpt/ckpt_00000004.bin")
if limited 2048 ./train_gpt2 "${small[@]}" -x 8 -n 2 -y 1 -o "$tmp/ckpt" > "$tmp/ckpt2.txt"; then fail "a checkpoint past ulimit -f succeeded"; fi
grep -q "ckpt_00000006.bin.*File too large" "$tmp/ckpt2.txt" || { cat "$tmp/ckpt2.txt"; fail "the checkpoint past ulimit -f is not named"; }
[ "$(cat "$tmp/ckpt/latest")" = 4 ] || fail "latest moved off the intact checkpoint 4"
[ "$(cksum < "$tmp/ckpt/ckpt_00000004.bin")" = "$sum" ] || fail "checkpoint 4 changed"
ls "$tmp/ckpt" | grep -q '\.tmp\.' && fail "the failed save left a temp file: $(ls "$tmp/ckpt")"
# -z 2 on one rank (MPI itself writes files that a low limit under mpirun would cut)
./train_gpt2 "${small[@]}" -z 2 -x 2 -n 2 -o "$tmp/zckpt" > "$tmp/zckpt.txt" 2>&1 || { cat "$tmp/zckpt.txt"; fail "sharded checkpointed run failed"; }
zsum=$(cat "$tmp/zckpt/zero_2"/* | cksum)
if limited 8192 ./train_gpt2 "${small[@]}" -z 2 -x 4 -n 2 -y 1 -o "$tmp/zckpt" > "$tmp/zckpt2.txt"; then fail "a sharded checkpoint past ulimit -f succeeded"; fi
grep -q "zero_4/rank_00000.bin.*File too large" "$tmp/zckpt2.txt" || { cat "$tmp/zckpt2.txt"; fail "the sharded checkpoint past ulimit -f is not named"; }
[ "$(cat "$tmp/zckpt/latest_zero")" = 2 ] && [ "$(cat "$tmp/zckpt/zero_2"/* | cksum)" = "$zsum" ] || fail "sharded checkpoint 2 is not intact and latest"
echo "checkpoints past ulimit -f: named, non-zero exit, the previous one intact (unsharded and -z 2)"

# 3. zero_report.json
if limited 2 ./train_gpt2 "${small[@]}" -z 2 -x 2 -o "$tmp/report" > "$tmp/report.txt"; then fail "a zero_report.json past ulimit -f succeeded"; fi
grep -q "zero_report.json.*File too large" "$tmp/report.txt" || { cat "$tmp/report.txt"; fail "zero_report.json past ulimit -f is not named"; }
if limited 2 ./train_gpt2 "${small[@]}" -z 2 --dry-run -o "$tmp/dry" > "$tmp/dry.txt"; then fail "a dry run's report past ulimit -f succeeded"; fi
grep -q "zero_report.json.*File too large" "$tmp/dry.txt" || { cat "$tmp/dry.txt"; fail "the dry run's zero_report.json is not named"; }
mkdir -p "$tmp/rdir/zero_report.json"
if ./train_gpt2 "${small[@]}" -z 2 -x 2 -o "$tmp/rdir" > "$tmp/rdir.txt" 2>&1; then fail "a zero_report.json that is a folder was written"; fi
grep -q "cannot write '$tmp/rdir/zero_report.json'" "$tmp/rdir.txt" || { cat "$tmp/rdir.txt"; fail "the unwritable zero_report.json is not named"; }
echo "zero_report.json that cannot be written: named, non-zero exit (live and dry run)"

# 4. two runs, one folder: the first is stopped (SIGSTOP) while the second tries, so the
# first surely holds the folder then
# wait_lock DIR: until DIR/main.log has a line; prints the PID in DIR/.lock
wait_lock() {
    for _ in $(seq 1 600); do [ -s "$1/main.log" ] && break; sleep 0.05; done
    [ -s "$1/main.log" ] || return 1
    cut -d' ' -f1 "$1/.lock"
}
steps_whole() {   # steps_whole LOG N: train lines s:0 .. s:N-1, each once and in order
    [ "$(grep trl "$1" | cut -d' ' -f1 | tr '\n' ' ')" = "$(seq 0 $(($2 - 1)) | sed 's/^/s:/' | tr '\n' ' ')" ]
}
for mode in unsharded zero; do
    if [ $mode = unsharded ]; then ./train_gpt2 "${small[@]}" -x 20 -o "$tmp/two_$mode" > "$tmp/first_$mode.txt" 2>&1 &
    else mpirun -np 2 ./train_gpt2 "${small[@]}" -z 2 -x 20 -o "$tmp/two_$mode" > "$tmp/first_$mode.txt" 2>&1 & fi
    first=$!
    holder=$(wait_lock "$tmp/two_$mode") || { cat "$tmp/first_$mode.txt"; fail "$mode: the first run did not start"; }
    [ $mode = zero ] || [ "$holder" = "$first" ] || fail "the lock file names PID $holder, not the run's $first"
    kill -STOP "$holder"; stopped=$holder
    if ./train_gpt2 "${small[@]}" -x 20 -o "$tmp/two_$mode" > "$tmp/second_$mode.txt" 2>&1; then fail "$mode: a second run on the same -o exited 0"; fi
    kill -CONT "$holder"; stopped=
    grep -q "is in use by another run: process $holder " "$tmp/second_$mode.txt" || { cat "$tmp/second_$mode.txt"; fail "$mode: the refusal does not name PID $holder"; }
    wait "$first" || { cat "$tmp/first_$mode.txt"; fail "$mode: the first run failed"; }
    steps_whole "$tmp/two_$mode/main.log" 20 || { cat "$tmp/two_$mode/main.log"; fail "$mode: the first run's main.log is not whole"; }
done
echo "a second run on a folder in use is refused naming the holder's PID; the first finishes whole (unsharded and -z 2)"

# 5. start-up cleanup
sleep 300 & live_pid=$!
true & dead=$!; wait "$dead"   # a PID no process has (now)
d="$tmp/stale"
mkdir -p "$d/zero_4" "$d/sub" "$tmp/elsewhere/zero_9"
touch "$d/ckpt_00000002.bin.tmp.$dead" "$d/zero_4/rank_00001.bin.tmp.$dead" "$d/main.log.tmp.$dead" \
      "$d/zero_to_model_00000004.bin.tmp.$dead" \
      "$d/notes.tmp.123" "$d/notes.tmp.$dead" "$d/run.json.tmp.$live_pid" "$d/sub/main.log.tmp.$dead" \
      "$tmp/elsewhere/zero_9/rank_00000.bin.tmp.$dead" "$tmp/user.txt"
touch -d 2001-01-01 "$d/latest.tmp.$dead"
ln -s "$tmp/user.txt" "$d/model_final.bin.tmp.$dead"
ln -s "$tmp/elsewhere/zero_9" "$d/zero_9"
./train_gpt2 "${small[@]}" -x 1 -o "$d" > "$tmp/stale.txt" 2>&1 || { cat "$tmp/stale.txt"; fail "run over stale temp files failed"; }
grep -q "removed 4 stale temp files of an interrupted run from '$d'" "$tmp/stale.txt" || { cat "$tmp/stale.txt"; fail "no line saying 4 temp files were removed"; }
for f in "ckpt_00000002.bin.tmp.$dead" "zero_4/rank_00001.bin.tmp.$dead" "main.log.tmp.$dead" "zero_to_model_00000004.bin.tmp.$dead"; do
    [ -e "$d/$f" ] && fail "the dead run's $f was not removed"
done
for f in notes.tmp.123 "notes.tmp.$dead" "run.json.tmp.$live_pid" "sub/main.log.tmp.$dead" "latest.tmp.$dead" \
         "zero_9/rank_00000.bin.tmp.$dead"; do
    [ -e "$d/$f" ] || fail "$f was removed"
done
[ -L "$d/model_final.bin.tmp.$dead" ] && [ -e "$tmp/user.txt" ] || fail "a symlink of a temp file's name, or its target, was removed"
grep -q "run.json.tmp.$live_pid (process $live_pid is running)" "$tmp/stale.txt" || { cat "$tmp/stale.txt"; fail "the live process's temp file is not named as kept"; }
grep -q "latest.tmp.$dead (older than this boot)" "$tmp/stale.txt" || { cat "$tmp/stale.txt"; fail "the file from before this boot is not named as kept"; }
echo "start-up cleanup: a dead run's temp files removed; a user's, a live process's, older ones and symlinks kept"
# a temp file named with the trainer's own PID (exec keeps the shell's): an earlier process
# that had this PID left it (a restarted container gives out the same PIDs), so it goes, and
# the checkpoint is saved
d="$tmp/own_pid"
mkdir -p "$d/zero_2"
bash -c 'touch "$1/ckpt_00000002.bin.tmp.$$" "$1/zero_2/rank_00000.bin.tmp.$$" && shift && exec "$@"' _ "$d" \
    ./train_gpt2 "${small[@]}" -x 2 -n 2 -z 2 -o "$d" > "$tmp/own_pid.txt" 2>&1 || { cat "$tmp/own_pid.txt"; fail "a run over temp files named with its own PID failed"; }
grep -q "removed 2 stale temp files of an interrupted run from '$d'" "$tmp/own_pid.txt" && [ -f "$d/zero_2/manifest.json" ] \
    && [ -z "$(find "$d" -name '*.tmp.*')" ] || { cat "$tmp/own_pid.txt"; ls -R "$d"; fail "temp files named with the run's own PID were not removed, or step 2 not saved"; }
echo "start-up cleanup: temp files named with the run's own PID (an earlier process's) removed, step 2 saved"

# 6. planted symbolic links: exec keeps the shell's PID, so "$$" names the trainer's temp files
echo "a user's file" > "$tmp/victim.txt"
vsum=$(cksum < "$tmp/victim.txt")
planted() {   # planted NAME LINK WHAT TRAINER-FLAGS...: LINK (relative to the -o folder) -> victim
    local name=$1 link=$2 what=$3
    shift 3
    local d="$tmp/plant_$name"
    mkdir -p "$d/$(dirname "$link")"
    if bash -c 'ln -s "$1" "$2/${3//PID/$$}" && shift 3 && exec "$@"' _ "$tmp/victim.txt" "$d" "$link" \
            ./train_gpt2 "$@" -o "$d" > "$tmp/plant_$name.txt" 2>&1; then
        cat "$tmp/plant_$name.txt"; fail "$name: a run with a symbolic link planted at $link exited 0"
    fi
    grep -qF -- "$what" "$tmp/plant_$name.txt" || { cat "$tmp/plant_$name.txt"; fail "$name: no message saying: $what"; }
    [ "$(cksum < "$tmp/victim.txt")" = "$vsum" ] || fail "$name: the file behind the link planted at $link was written"
    [ -n "$(find "$d" -type l)" ] || fail "$name: the planted link was removed"
}
planted run_json run.json.tmp.PID "run.json.tmp." "${small[@]}" -x 2
grep -q "a symbolic link is already there, and this process did not make it; nothing is written through it" \
    "$tmp/plant_run_json.txt" || fail "run_json: the refusal does not say what is there"
planted ckpt ckpt_00000002.bin.tmp.PID "ckpt_00000002.bin.tmp." "${small[@]}" -x 2 -n 2
planted rank zero_2/rank_00000.bin.tmp.PID "zero_2/rank_00000.bin.tmp." "${small[@]}" -z 2 -x 2 -n 2
grep -q "a symbolic link is already there" "$tmp/plant_rank.txt" || fail "rank: the refusal does not say what is there"
planted lock .lock "lock file '$tmp/plant_lock/.lock' is a symbolic link" "${small[@]}" -x 2
echo "symbolic links planted at temp file names (run.json, checkpoint, rank file) and at .lock: refused, targets untouched"

# a plain temp file named with the run's PID from before this boot (a restarted machine or
# container hands out the same PIDs): start-up cleanup keeps it (its PID says nothing), and
# the writer, whose name it has, replaces it, saying so
stale_pid() {   # stale_pid NAME FILE TRAINER-FLAGS...: FILE (relative to the -o folder, PID for the PID)
    local name=$1 file=$2 d="$tmp/stale_$1"
    shift 2
    mkdir -p "$d/$(dirname "$file")"
    bash -c 'f="$2/${3//PID/$$}"; echo stale > "$f" && touch -d 2000-01-01 "$f" && shift 3 && exec "$@"' _ "$name" "$d" "$file" \
        ./train_gpt2 "$@" -o "$d" > "$tmp/stale_$name.txt" 2>&1 || { cat "$tmp/stale_$name.txt"; fail "$name: a stale $file stopped the run"; }
    grep -q "removing '\?$d/${file//PID/[0-9]*}'\?, a temp file an earlier process with this PID left" "$tmp/stale_$name.txt" \
        && [ -z "$(find "$d" -name '*.tmp.*')" ] || { cat "$tmp/stale_$name.txt"; ls -R "$d"; fail "$name: the stale $file not replaced, or not said"; }
}
stale_pid run_json run.json.tmp.PID "${small[@]}" -x 2
stale_pid rank zero_2/rank_00000.bin.tmp.PID "${small[@]}" -z 2 -x 2 -n 2
echo "a stale temp file of an earlier process with the run's PID (run.json, rank file): replaced, said"

# 7. zero_consolidate past ulimit -f (the sharded checkpoint of 2. above)
if limited 8 ./zero_consolidate "$tmp/zckpt" 2 "$tmp/cons" > "$tmp/cons.txt"; then fail "zero_consolidate past ulimit -f succeeded"; fi
grep -q "File too large" "$tmp/cons.txt" || { cat "$tmp/cons.txt"; fail "zero_consolidate past ulimit -f is not named"; }
echo "zero_consolidate past ulimit -f: named, non-zero exit"
echo "PASS test_run_files"
