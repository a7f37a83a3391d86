#!/usr/bin/env bash
# -e MODEL.bin under ZeRO (mpirun -np 2): partition at init and a streamed export.
#  - a run that starts from a model file of trained values (which no seed's init gives)
#    trains bit-identically to the unsharded run from that file (stages 1 and 3: final model
#    files and losses), and at lr 0 exports the file unchanged, so each rank read the right
#    values for its shards
#  - the ranks together read each parameter byte of the file exactly once, rank 0 half
#  - memory, as the kernel counts it (VmHWM), on a 101M-parameter model (387 MiB fp32):
#    loading from the file peaks no higher than initializing from the descriptor (the
#    old loader held the whole file on every rank: +387 MiB), and the final export
#    grows the resident set by one slice (wte, 98 MiB), not by the model
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_zero_model_file: $*"; exit 1; }
losses() { grep trl "$1/main.log" | cut -d' ' -f1-2; }
run() { # run OUT_NAME args...: mpirun -np 2, output in $tmp/OUT_NAME{,.txt}
    local name=$1; shift
    mpirun -np 2 ./train_gpt2 "$@" -o "$tmp/$name" > "$tmp/$name.txt" 2>&1 || { tail "$tmp/$name.txt"; fail "run $name failed: $*"; }
}
mib() { sed -n "s/.*$2 \([0-9.]*\) MiB.*/\1/p" "$1" | head -n 1; }

# 1. Bit-identical training from the file. One trained step makes init/model_final.bin hold
# values no init gives, so a loader that fell back to the seed's init cannot pass.
small=(-b 2 -t 32 -d 128 -v 0 -s 0 --threads 1 --seed 7)
run init -e d2c64h2t64 "${small[@]}" -x 1 -l 1e-3 -u 0 -z 3
./train_gpt2 -e "$tmp/init/model_final.bin" "${small[@]}" -x 6 -o "$tmp/ref" > "$tmp/ref.txt" 2>&1 \
    || { tail "$tmp/ref.txt"; fail "the unsharded run from the model file failed"; }
for stage in 1 3; do
    run file_z$stage -e "$tmp/init/model_final.bin" "${small[@]}" -x 6 -z $stage
    cmp -s "$tmp/ref/model_final.bin" "$tmp/file_z$stage/model_final.bin" \
        || fail "stage $stage: training from the model file differs from the unsharded run from it"
    diff <(losses "$tmp/ref") <(losses "$tmp/file_z$stage") > /dev/null \
        || fail "stage $stage: losses from the model file differ from the unsharded run's"
done
run lr0 -e "$tmp/init/model_final.bin" "${small[@]}" -x 1 -l 0 -z 3
cmp -s "$tmp/init/model_final.bin" "$tmp/lr0/model_final.bin" || fail "stage 3 at lr 0 did not export the file it loaded"
echo "training from a model file of trained values == the unsharded run from it (stages 1, 3; 6 steps; bit-identical)"

# 2. Who read what: "rank 0 read R of its P parameter bytes, all ranks A".
line=$(grep "^model file '$tmp/init/model_final.bin': rank 0 read" "$tmp/file_z3.txt") || fail "no bytes-read line"
read -r r0 total all <<< "$(echo "$line" | sed 's/.*rank 0 read \([0-9]*\) of its \([0-9]*\) parameter bytes, all ranks \([0-9]*\).*/\1 \2 \3/')"
[ "$total" -eq $(( $(stat -c %s "$tmp/init/model_final.bin") - 1024 )) ] || fail "parameter bytes $total do not match the file"
[ "$all" -eq "$total" ] || fail "the ranks read $all bytes in all, the file holds $total: each byte must be read exactly once"
awk -v r="$r0" -v t="$total" 'BEGIN { exit !(r > 0.45 * t && r < 0.55 * t) }' || fail "rank 0 read $r0 of $total bytes, not about half"
echo "2 ranks read the $total parameter bytes exactly once between them; rank 0: $r0"

# 3. Memory on a model where a full copy shows: d24c512, 101M parameters.
big=(-b 1 -t 16 -d 32 -x 1 -v 0 -s 0 -z 3)
run big_desc -e d24c512h8t64 "${big[@]}" -l 1e-3 -u 0   # a trained step: values no init gives
model="$tmp/big_desc/model_final.bin"
run big_file -e "$model" "${big[@]}" -l 0
cmp -s "$model" "$tmp/big_file/model_final.bin" || fail "d24c512: the file loaded and exported again (lr 0) changed"
full=$(awk -v b="$(stat -c %s "$model")" 'BEGIN { printf "%.1f", (b - 1024) / 1048576 }')
load_desc=$(mib "$tmp/big_desc.txt" "host memory after loading the model: peak")
load_file=$(mib "$tmp/big_file.txt" "host memory after loading the model: peak")
export_peak=$(mib "$tmp/big_file.txt" "host memory during the export: peak")
export_before=$(sed -n 's/.*MiB, \([0-9.]*\) MiB resident before it.*/\1/p' "$tmp/big_file.txt")
[ -n "$load_desc" ] && [ -n "$load_file" ] && [ -n "$export_peak" ] && [ -n "$export_before" ] \
    || { grep "host memory" "$tmp/big_file.txt" "$tmp/big_desc.txt"; fail "host memory figures missing"; }
echo "d24c512 ($full MiB fp32), rank 0: load peak $load_file MiB from the file, $load_desc MiB from the descriptor;" \
     "export peak $export_peak MiB over $export_before MiB resident"
awk -v f="$load_file" -v d="$load_desc" -v m="$full" 'BEGIN { exit !(f - d < 0.25 * m) }' \
    || fail "loading the model file took $load_file MiB against $load_desc MiB from the descriptor: a full copy ($full MiB)?"
awk -v p="$export_peak" -v b="$export_before" -v m="$full" 'BEGIN { exit !(p - b < 0.5 * m) }' \
    || fail "the export grew the resident set by more than half the model ($export_before -> $export_peak MiB, model $full MiB)"
echo "PASS test_zero_model_file"
