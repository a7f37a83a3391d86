#!/usr/bin/env bash
# test_zero_ckpt.sh: zero/'s sharded checkpoints, consolidation, accounting report and dry
# run (dev/test/zero/mpi_zero_ckpt.c with the toy model), under mpirun:
#   - save at step 3 of 6 and resume in a fresh process group, bit-exact (stages 0-3,
#     fp32 and bf16, 2 and 4 ranks)
#   - a 4-rank stage-3 checkpoint loaded at 2 ranks stage 1 and 1 rank stage 0, and into a
#     run with bf16 working weights (said in one line)
#   - consolidation (library and the zero_consolidate tool) against the stage-0 run
#   - every manifest records each rank file's own body CRC (not one shared residue)
#   - refusals: another model, corrupt / truncated / missing rank file, bad manifest, a
#     rank file of another run or of another step of the run (named, with both run ids)
#   - skipped steps (NaN gradient norm, a step the trainer rejects) change nothing
#   - the JSON report against zero_stats and the dry run at 1, 2, 4 ranks, stages 0-3
#   - the report's and checkpoint's metadata exchanges: a gather to rank 0, so rank 1
#     sends the same bytes at 2 and 4 ranks (plus 8 bytes per peer per agreement)
# Run from the repository root. Prints PASS/FAIL per case; exit 0 only if all pass.
set -u
cd "$(dirname "$0")/../../.."

fail=0
pass() { echo "PASS: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

for tool in mpicc mpirun; do
    command -v "$tool" >/dev/null || { echo "FAIL: $tool not found (install OpenMPI)"; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source dev/test/zero/zero_sources.sh
# zero/io/nvme.c uses liburing when its header is there (as the Makefile decides)
uring=$(printf '#include <liburing.h>\n' | ${CC:-cc} -E -x c - > /dev/null 2>&1 && echo -luring)
bin="$tmp/mpi_zero_ckpt"
if ! mpicc -std=c11 -D_GNU_SOURCE -O2 -fopenmp -ffp-contract=off -Wall -Wextra -Werror \
        dev/test/zero/mpi_zero_ckpt.c "${ZERO_HOST_SRC[@]}" -lcjson -lz $uring -lcrypto -lm -o "$bin" 2> "$tmp/build.log"; then
    cat "$tmp/build.log"
    echo "FAIL: building mpi_zero_ckpt"
    exit 1
fi
tool="$tmp/zero_consolidate"
if ! ${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror zero/tools/zero_consolidate_main.c \
        zero/io/consolidate.c zero/io/zckpt.c zero/io/zfile.c zero/partition.c -lcjson -lz -o "$tool" 2> "$tmp/build2.log"; then
    cat "$tmp/build2.log"
    echo "FAIL: building zero_consolidate (no MPI)"
    exit 1
fi
# the same tool keeping at most one file open, as with more saved ranks than descriptors
if ! ${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -DZCK_MAX_OPEN=1 zero/tools/zero_consolidate_main.c \
        zero/io/consolidate.c zero/io/zckpt.c zero/io/zfile.c zero/partition.c -lcjson -lz -o "$tool.fd1" 2>> "$tmp/build2.log"; then
    cat "$tmp/build2.log"
    echo "FAIL: building zero_consolidate (one open file)"
    exit 1
fi
pass "build (warning-free; zero_consolidate without MPI)"

mpiflags=()
if mpirun --version 2>&1 | grep -q "Open MPI"; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    mpiflags=(--oversubscribe)
fi
export OMP_NUM_THREADS=1
base="$tmp/ckpt"
mkdir -p "$base"

# run NAME NP MODE: must exit 0; the log stays in $tmp/NAME.log
run() {
    local name=$1 np=$2 mode=$3 log="$tmp/$1.log"
    if timeout 120 mpirun "${mpiflags[@]}" -np "$np" "$bin" "$mode" "$base" > "$log" 2>&1; then
        pass "$name ($(grep -o '[0-9]* checks passed' "$log" | tail -n 1))"
    else
        cat "$log"
        bad "$name"
    fi
}

for np in 2 4; do
    run "save-np$np" "$np" save
    run "resume-np$np (fresh process group)" "$np" resume
    grep -h "resume\|differ from t" "$tmp/save-np$np.log" "$tmp/resume-np$np (fresh process group).log" | sed 's/^/    /'
done
run "load 4-rank stage 3 at 2 ranks stage 1" 2 cross
run "load 4-rank stage 3 at 1 rank stage 0, consolidate" 1 cross
grep -h "cross\|consolidate:" "$tmp/load 4-rank stage 3 at 2 ranks stage 1.log" \
    "$tmp/load 4-rank stage 3 at 1 rank stage 0, consolidate.log" | grep -v "mpi_zero_ckpt" | sed 's/^/    /'
# the fp32 checkpoint loaded into a run with bf16 working weights: said, in one line
for log in "$tmp/load 4-rank stage 3 at 2 ranks stage 1.log" "$tmp/load 4-rank stage 3 at 1 rank stage 0, consolidate.log"; do
    if [ "$(grep -c "^zero: loading [^ ]*/np4/s3/zero_3, saved with fp32 working parameters, into a run with bf16 ones" "$log")" = 1 ]; then
        pass "a change of parameter precision on load is said ($(basename "$log" .log))"
    else
        bad "the fp32 checkpoint loaded into a bf16 run is not said once: $(basename "$log" .log)"
    fi
done

# the command-line tool, without MPI, on the 4-rank stage-3 checkpoint
if "$tool" "$base/np4/s3" latest "$tmp/consolidated.f32" > "$tmp/tool.log" 2>&1 &&
   cmp -s "$tmp/consolidated.f32" "$base/np4/s3/at_save.f32" &&
   cmp -s "$tmp/consolidated.f32" "$base/np4/s0/at_save.f32" &&
   "$tool.fd1" "$base/np4/s3" 3 "$tmp/consolidated1.f32" >> "$tmp/tool1.log" 2>&1 &&
   cmp -s "$tmp/consolidated.f32" "$tmp/consolidated1.f32" &&
   grep -q '"name":[[:space:]]*"W1"' "$tmp/consolidated.f32.json"; then
    pass "zero_consolidate tool: raw fp32 equals the gathered master ($(cat "$tmp/tool.log"))"
else
    cat "$tmp/tool.log"
    bad "zero_consolidate tool"
fi

# refusals, each with a message naming the file (or tensor) and the rank
run errors 2 errors
log="$tmp/errors.log"
expect() {
    if grep -Eq "$1" "$log"; then pass "message: $(grep -Eo "$1" "$log" | head -n 1)"; else bad "no message matching: $1"; cat "$log"; fi
}
expect "zero: rank [01]: checkpoint [^ ]*/np2/s2/zero_3 is for a different model: tensor c has 14 elements here, 13 in the checkpoint"
expect "zero: rank 1: checkpoint file [^ ]*/bad_corrupt/zero_3/rank_00001.bin \(rank 1 of 2\) is corrupt"
expect "zero: rank 0: checkpoint file [^ ]*/bad_trunc/zero_3/rank_00000.bin \(rank 0 of 2\) is truncated: [0-9]+ bytes, the manifest says [0-9]+"
expect "zero: rank 1: checkpoint file [^ ]*/bad_missing/zero_3/rank_00001.bin \(rank 1 of 2\) is missing"
expect "checkpoint manifest [^ ]*/bad_manifest/zero_3/manifest.json is not valid JSON"
expect "holds [0-9]+ bytes of trainer data, the trainer expects [0-9]+"
expect "cannot create folder /proc/zero_cannot_write_here"
# a rank file of another run, or of another step of the same run: named, with both ids
other=$(sed -n 's/^  ids: other run \([0-9a-f]*\)$/\1/p' "$log")
steps=$(sed -n 's/^  ids: two-step run \([0-9a-f]*\)$/\1/p' "$log")
ckpt=$(sed -n 's/^  ids: checkpoint run \([0-9a-f]*\)$/\1/p' "$log")
if [ ${#other} -eq 32 ] && [ ${#steps} -eq 32 ] && [ ${#ckpt} -eq 32 ] && [ "$other" != "$ckpt" ] && [ "$steps" != "$ckpt" ]; then
    pass "run ids: 32 hex digits, distinct per run"
else
    bad "run ids: other '$other', two-step '$steps', checkpoint '$ckpt'"
fi
expect "zero: rank 1: checkpoint file [^ ]*/bad_other_run/zero_3/rank_00001.bin \(rank 1 of 2\) was saved by run $other at step 3, but its manifest is for run $ckpt at step 3: a rank file of another run was copied in"
expect "zero: rank 1: checkpoint file [^ ]*/bad_other_step/zero_3/rank_00001.bin \(rank 1 of 2\) was saved by run $steps at step 4, but its manifest is for run $steps at step 3: a rank file of another step of this run was copied in"
expect "latest_zero is malformed"

for np in 1 2 4; do run "skipped steps leave the state alone, np $np" "$np" skip; done
grep -h "skip s" "$tmp/skipped steps leave the state alone, np 4.log" | sed 's/^/    /'

for np in 1 2 4; do run "report and dry run, np $np" "$np" report; done
grep -h "zero:\|report,\|^    r" "$tmp/report and dry run, np 4.log" | sed 's/^/    /'
# rank 1's gather payloads do not grow with the world (an all-reduce of slots would)
for what in report save; do
    g2=$(sed -n "s/^  exchange $what: rank 1 of 2 sent [0-9]* B: gather \([0-9]*\) B.*/\1/p" "$tmp/report and dry run, np 2.log")
    g4=$(sed -n "s/^  exchange $what: rank 1 of 4 sent [0-9]* B: gather \([0-9]*\) B.*/\1/p" "$tmp/report and dry run, np 4.log")
    if [ -n "$g2" ] && [ "$g2" = "$g4" ] && [ "$g2" -gt 0 ]; then
        pass "$what metadata: rank 1 sends a $g2-byte gather at 2 and at 4 ranks"
    else
        bad "$what metadata: rank 1's gather is '$g2' B at 2 ranks, '$g4' B at 4"
    fi
done
grep -h "exchange .*rank 1 of 4" "$tmp/report and dry run, np 4.log" | sed 's/^/    /'

if [ "$fail" -eq 0 ]; then echo "test_zero_ckpt: all passed"; else echo "test_zero_ckpt: FAILED"; fi
exit "$fail"
