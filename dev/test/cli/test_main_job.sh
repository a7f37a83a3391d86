#!/usr/bin/env bash
# scripts/train.sh, the README's first command, shortened (-x 3, a tiny model after --):
#  - with no Open MPI settings in the environment it starts 4 ranks on this machine by
#    itself (as root: --allow-run-as-root; more ranks than cores: --oversubscribe)
#  - the unsharded and the ZeRO stage-3 run share seed, data and global batch (run.json),
#    the stage-3 run has 4 ranks, and the comparison table and compare.png come out
#  - -t after -- sets both runs' sequence, and the global batch follows it
#  - a GPU that nvidia-smi lists but CUDA cannot use gives the CPU path
#  - -h documents the flags; a bad stage, and -z, -d or -o after --, are refused
#  - a relative -o is taken from the folder the script is run from
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_main_job: $*"; exit 1; }
clean_env=(env -u OMPI_ALLOW_RUN_AS_ROOT -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM -u OMPI_MCA_rmaps_base_oversubscribe)

"${clean_env[@]}" scripts/train.sh -z 3 -n 4 -x 3 -o "$tmp/job" -- -e d2c64h2t64 -t 32 -v 3 -m 2 -s 0 > "$tmp/out.txt" 2>&1 \
    || { tail -n 30 "$tmp/out.txt"; fail "scripts/train.sh -n 4 -x 3 failed"; }
cores=$(lscpu -p=core,socket | grep -v '^#' | sort -u | wc -l)
launch=$(grep '^+ mpirun' "$tmp/out.txt") || fail "the sharded run was not started with mpirun"
if [ "$(id -u)" -eq 0 ]; then
    [[ "$launch" == *--allow-run-as-root* ]] || fail "as root without --allow-run-as-root: $launch"; fi
if [ "$cores" -lt 4 ]; then
    [[ "$launch" == *--oversubscribe* ]] || fail "4 ranks on $cores cores without --oversubscribe: $launch"; fi
[[ "$launch" == *"-np 4 "* ]] || fail "not 4 ranks: $launch"

python3 - "$tmp/job" <<'EOF' || fail "the two runs do not match as the main job promises"
import json, sys
job = sys.argv[1]
u, z = (json.load(open(f"{job}/{r}/run.json")) for r in ("unsharded", "zero3"))
for k in ("train_data", "val_data", "seed", "seq_len", "total_batch_tokens", "steps", "model"):
    if u[k] != z[k]: sys.exit(f"{k}: unsharded {u[k]}, zero3 {z[k]}")
if (u["zero_stage"], u["world_size"]) != ("unsharded", 1): sys.exit(f"unsharded run: {u['zero_stage']}, {u['world_size']} ranks")
if (z["zero_stage"], z["world_size"]) != (3, 4): sys.exit(f"zero3 run: stage {z['zero_stage']}, {z['world_size']} ranks")
if u["steps"] != 3 or u["model"] != "d2c64h2t64": sys.exit(f"-x / -- not passed on: {u['steps']} steps, {u['model']}")
if (u["seq_len"], u["total_batch_tokens"]) != (32, 1 * 32 * 4):   # -t after --: the global batch follows
    sys.exit(f"-- -t 32: sequence {u['seq_len']}, {u['total_batch_tokens']} tokens per step, not 32 and 128")
print(f"unsharded and zero3 (4 ranks): seed {u['seed']}, {u['total_batch_tokens']} tokens per step, {u['steps']} steps")
EOF
grep -qE '^unsharded \(train_gpt2, unsharded, 1 rank\) +3 ' "$tmp/out.txt" || { cat "$tmp/out.txt"; fail "no table row for the unsharded run"; }
grep -qE '^zero3 \(train_gpt2, ZeRO-3, 4 ranks\) +3 ' "$tmp/out.txt" || { cat "$tmp/out.txt"; fail "no table row for the stage-3 run"; }
grep -qF "wrote $tmp/job/compare.png" "$tmp/out.txt" || fail "the PNG path is not printed"
[ "$(head -c 8 "$tmp/job/compare.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "compare.png is not a PNG"
echo "main job: 4 ranks started by the script, table and $tmp/job/compare.png printed"

# A GPU that nvidia-smi lists but CUDA cannot use (here: a stand-in nvidia-smi, and a driver
# the toolkit's runtime refuses or none): the CPU path, not a failed job
if nvidia-smi -L > /dev/null 2>&1; then
    echo "SKIP the unusable-GPU case: this machine has a usable GPU"
else
    mkdir "$tmp/bin"
    printf '#!/bin/sh\necho "GPU 0: stand-in (UUID: GPU-0)"\n' > "$tmp/bin/nvidia-smi"
    chmod +x "$tmp/bin/nvidia-smi"
    PATH="$tmp/bin:$PATH" "${clean_env[@]}" scripts/train.sh -z 2 -n 2 -x 1 -o "$tmp/fallback" -- -e d2c64h2t64 -t 32 -v 0 -s 0 \
        > "$tmp/fb.txt" 2>&1 || { tail -n 30 "$tmp/fb.txt"; fail "a GPU CUDA cannot use: the job failed"; }
    if command -v nvcc > /dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
        grep -qF "error: no usable CUDA device (" "$tmp/fb.txt" || { cat "$tmp/fb.txt"; fail "train_gpt2cu did not say why"; }
        grep -qF "CUDA finds no usable device (above): the CPU path" "$tmp/fb.txt" || { cat "$tmp/fb.txt"; fail "no fallback line"; }
    else
        grep -qF "no CUDA toolkit" "$tmp/fb.txt" || { cat "$tmp/fb.txt"; fail "no nvcc: not said"; }
    fi
    grep -q '^+ ./train_gpt2 ' "$tmp/fb.txt" && grep -qE '^zero2 \(train_gpt2, ZeRO-2, 2 ranks\) +1 ' "$tmp/fb.txt" \
        || { cat "$tmp/fb.txt"; fail "the CPU path did not run both trainers to the table"; }
    echo "a GPU CUDA cannot use: the CPU path ran to the table"
fi

scripts/train.sh -h > "$tmp/h.txt" || fail "-h exited non-zero"
for f in "-z STAGE" "-n RANKS" "-x STEPS" "-o DIR" "-- ARGS"; do grep -qF -- "$f" "$tmp/h.txt" || fail "-h does not document $f"; done
if scripts/train.sh -z 4 > "$tmp/e.txt" 2>&1; then fail "-z 4 accepted"; fi
grep -qF "train.sh: -z expects a stage 0-3, got '4'" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "no clear error for -z 4"; }
for bad in "-z 1" "-d 128" "-o x"; do   # the script's own settings, not the trainers' after --
    if scripts/train.sh -- $bad > "$tmp/e.txt" 2>&1; then fail "-- $bad accepted"; fi
    grep -qF "train.sh: " "$tmp/e.txt" && ! grep -q "^+ " "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "-- $bad: no refusal before any run"; }
done
root=$PWD
(cd "$tmp" && "$root/scripts/train.sh" -z 1 -n 1 -x 1 -o rel/job -- -e d2c64h2t64 -t 32 -v 0 -s 0 > "$tmp/rel.txt" 2>&1) \
    || { tail -n 30 "$tmp/rel.txt"; fail "a relative -o: the job failed"; }
[ -s "$tmp/rel/job/compare.png" ] && [ ! -e "$root/rel/job" ] \
    || { ls "$tmp/rel/job" "$root/rel" 2>&1; fail "a relative -o was not taken from the current folder"; }
echo "a relative -o: the job's files are under the current folder"
echo "PASS test_main_job"
