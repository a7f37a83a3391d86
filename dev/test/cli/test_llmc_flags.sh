#!/usr/bin/env bash
# llm.c's flags (train_gpt2.cu's list): each works with llm.c's meaning or is
# refused by name with what to use instead, in all three trainers.
#  1. refused: -h 1 (HellaSwag; never the help with exit 0, also after an abbreviated long
#     option), -w 0, -ge, -lg N>0, the
#     multi-node -pn -pr -pg -pm -pi -ps -pp -pf, -r on the CPU, --micro-grads in train_gpt2_zero
#     (and a value other than 0|1 in train_gpt2cu):
#     non-zero exit, the flag's name in the message, nothing written
#  2. accepted without effect on the bits: -h 0, -f 0|1 (TF32: no fp32-input matmul here),
#     -w 1, -lg -1: the same model file as without them; -h alone is the help (exit 0)
#  3. -k cosine|linear|constant|wsd with -u and -q: every logged lr equals llm.c's formula
#     (schedulers.h), computed here in Python
#  4. -nk/-nm: the checkpoints left on disk (unsharded, and sharded under mpirun -z 1)
#  5. -a 1: every step trains on the first batch: the loss falls near 0 within 40 steps,
#     while the same run without -a stays high; under ZeRO (2 ranks) the same bits as
#     unsharded accumulation 2
#  6. -sl/-sg: a shard whose windows repeat one sequence except a stretch of random tokens
#     at step 135 (garbage in the data: a loss and norm spike): the update of step 135 and
#     only it is skipped (llm.c's 128-step window), the count is reported at the end;
#     unsharded and under ZeRO (mpirun -np 2 -z 2: the norm's veto inside the step)
#  7. --micro-grads 1 with accumulation: the memory table counts a second gradient buffer,
#     and the measured peak resident memory grows by its size (within 15%)
#  8. with make emu: the CUDA trainers' -k, -nk and -a on the emulated device
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0; failn=0
ok() { echo "PASS $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; failn=$((failn + 1)); }
small=(-e d2c64h2t64 -b 2 -t 32 -v 0 -s 0 --threads 1)
trainers=(./train_gpt2 ./train_gpt2cu ./train_gpt2_zero)
for t in "${trainers[@]}" build/model_diff; do [ -x "$t" ] || { echo "FAIL $t is not built (make all)"; exit 1; }; done

# 1. refused by name
refuse() {   # refuse TRAINER NAME PATTERN ARGS...
    local t=$1 name=$2 pattern=$3; shift 3
    local out="$tmp/r_$name"
    if "$t" "${small[@]}" -x 1 "$@" -o "$out" > "$out.txt" 2>&1; then bad "$t $*: accepted"; return; fi
    if grep -q "^usage:" "$out.txt"; then bad "$t $*: printed the help"; return; fi
    grep -q -- "$pattern" "$out.txt" || { cat "$out.txt"; bad "$t $*: the message lacks '$pattern'"; return; }
    [ ! -e "$out" ] || { bad "$t $*: wrote into its output folder"; return; }
    ok "$t $*: refused naming $pattern"
}
i=0
for t in "${trainers[@]}"; do
    for args in "-h 1" "-w 0" "-ge 2" "-lg 5" "-pn 2" "-pr 1" "-pg 8" "-pm tcp" "-pi fs" "-ps 10.0.0.1" "-pp /tmp" \
                "-pf /tmp"; do
        i=$((i + 1))
        # shellcheck disable=SC2086
        refuse "$t" "$i" "error: ${args%% *} " $args
    done
done
refuse ./train_gpt2 cpu_r "error: -r .*--act-checkpoint" -r 1
refuse ./train_gpt2cu cu_mg "error: --micro-grads expects" --micro-grads 2
refuse ./train_gpt2_zero zero_mg "error: --micro-grads is not train_gpt2_zero's" --micro-grads 1
refuse ./train_gpt2 cpu_zero_mg "error: --micro-grads is not a ZeRO run's (-z)" -z 2 --micro-grads 0
refuse ./train_gpt2 cpu_k "error: -k expects .*cosine, linear, constant or wsd" -k step
# a dry run plays every rank in one process: started by a launcher as one of several, refused
if OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 ./train_gpt2 -z 1 --dry-run --world 2 "${small[@]}" -o "$tmp/dry_r1" \
        > "$tmp/dry_r1.txt" 2>&1; then bad "a dry run as rank 1 of 2: accepted"
elif grep -q "error: --dry-run plays every rank in one process (--world N).*(OMPI_COMM_WORLD_SIZE=2)" "$tmp/dry_r1.txt" \
        && [ ! -e "$tmp/dry_r1" ]; then ok "a dry run as rank 1 of 2: refused, naming the launcher's variable"
else cat "$tmp/dry_r1.txt"; bad "a dry run as rank 1 of 2: not refused as it should be"; fi
refuse ./train_gpt2 cpu_nk "error: -nk expects" -nk k
refuse ./train_gpt2 cpu_sl "error: -sl expects" -sl -1
refuse ./train_gpt2 cpu_a "error: -a expects" -a 2
refuse ./train_gpt2 cpu_h2 "error: -h expects" -h 2
# after a long option abbreviated as getopt allows ("--shuf" for --shuffle, taking its value),
# llm.c's two-letter flags and -h N still read as llm.c's
refuse ./train_gpt2 cpu_abbrev_h "error: -h expects" --shuf 1 -h 2
refuse ./train_gpt2 cpu_abbrev_nk "error: -nk expects" --shuf 0 -nk k
for t in "${trainers[@]}"; do
    if "$t" -h > "$tmp/help.txt" 2>&1 && grep -q "^usage:" "$tmp/help.txt"; then ok "$t -h: the help, exit 0"
    else bad "$t -h: no help with exit 0"; fi
done

# 2. accepted, same bits
./train_gpt2 "${small[@]}" -x 3 -o "$tmp/plain" > "$tmp/plain.txt" 2>&1 || bad "the plain run failed"
if ./train_gpt2 "${small[@]}" -x 3 -h 0 -f 0 -w 1 -lg -1 -o "$tmp/noop" > "$tmp/noop.txt" 2>&1 &&
    cmp -s "$tmp/plain/model_final.bin" "$tmp/noop/model_final.bin"; then ok "-h 0 -f 0 -w 1 -lg -1: accepted, the same model"
else tail -n 3 "$tmp/noop.txt"; bad "-h 0 -f 0 -w 1 -lg -1: refused or a different model"; fi
if ./train_gpt2 "${small[@]}" -x 3 -f 1 -o "$tmp/f1" > /dev/null 2>&1 && cmp -s "$tmp/plain/model_final.bin" "$tmp/f1/model_final.bin"
then ok "-f 1: accepted, the same model"; else bad "-f 1: refused or a different model"; fi

# 3. -k against llm.c's formulas
for k in cosine linear constant wsd; do
    if ! ./train_gpt2 "${small[@]}" -x 10 -u 3 -l 1e-3 -q 0.2 -k "$k" -o "$tmp/k_$k" > "$tmp/k_$k.txt" 2>&1; then
        tail -n 3 "$tmp/k_$k.txt"; bad "-k $k: the run failed"; continue
    fi
    if python3 - "$k" "$tmp/k_$k/main.log" <<'PY'
import math, re, sys
kind, log = sys.argv[1], sys.argv[2]
peak, warmup, steps, frac = 1e-3, 3, 10, 0.2
def lr(s):   # llm.c's llmc/schedulers.h
    if kind == "constant": return peak
    if kind == "wsd":
        d = int(0.8 * steps)
        if s < warmup: return peak * (s + 1) / warmup
        if s < d: return peak
        r = (s - d) / (steps - d)
        return peak * frac + (1 - math.sqrt(r)) * (peak - peak * frac)
    if s < warmup: return peak * (s + 1) / warmup
    r = (s - warmup) / (steps - warmup)
    lo = peak * frac
    if kind == "cosine": return lo + 0.5 * (1 + math.cos(math.pi * r)) * (peak - lo)
    return peak - r * (peak - lo)
got = {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"s:(\d+) trl:\S+ lr:(\S+)", open(log).read())}
assert sorted(got) == list(range(steps)), got
bad = [(s, got[s], lr(s)) for s in got if abs(got[s] - lr(s)) > 1e-6 * peak]
if bad: print(bad); sys.exit(1)
PY
    then ok "-k $k -u 3 -q 0.2: each step's lr is llm.c's"; else bad "-k $k: the logged lr differs from llm.c's formula"; fi
done

# 4. -nk / -nm
steps_of() { ls "$1" | sed -n "s/^$2_0*\([0-9][0-9]*\)\(\.bin\)\{0,1\}$/\1/p" | sort -n | tr '\n' ' '; }
keep_case() {   # keep_case NAME EXPECTED ARGS...
    local name=$1 want=$2; shift 2
    if ! ./train_gpt2 "${small[@]}" -x 10 -n 2 "$@" -o "$tmp/$name" > "$tmp/$name.txt" 2>&1; then
        tail -n 3 "$tmp/$name.txt"; bad "$name: the run failed"; return
    fi
    local c m
    c=$(steps_of "$tmp/$name" ckpt); m=$(steps_of "$tmp/$name" model)
    if [ "$c" = "$want" ] && [ "$m" = "$want" ]; then ok "-n 2 -x 10 $*: checkpoints and model files of steps $want"
    else bad "-n 2 -x 10 $*: checkpoints '$c', model files '$m', expected '$want'"; fi
}
keep_case nk_default "8 10 "
keep_case nk1 "10 " -nk 1
keep_case nk0 "2 4 6 8 10 " -nk 0
keep_case nk2nm4 "4 8 10 " -nk 2 -nm 4
keep_case nk1nm6 "6 10 " -nk 1 -nm 6
if mpirun -np 2 ./train_gpt2 "${small[@]}" -x 10 -n 2 -z 1 -nk 2 -nm 4 -o "$tmp/zk" > "$tmp/zk.txt" 2>&1; then
    z=$(ls "$tmp/zk" | sed -n 's/^zero_\([0-9]*\)$/\1/p' | sort -n | tr '\n' ' '); m=$(steps_of "$tmp/zk" model)
    if [ "$z" = "4 8 10 " ] && [ "$m" = "4 8 10 " ]; then ok "sharded -nk 2 -nm 4: zero_4 zero_8 zero_10 and their model files"
    else bad "sharded -nk 2 -nm 4: folders '$z', model files '$m', expected '4 8 10 '"; fi
else tail -n 3 "$tmp/zk.txt"; bad "sharded -nk run failed"; fi

# 5. -a 1
last_loss() { grep '^s:' "$1" | tail -n 1 | sed 's/.*trl:\([^ ]*\).*/\1/'; }
if ./train_gpt2 "${small[@]}" -x 40 -l 1e-2 -k constant -a 1 -o "$tmp/a1" > "$tmp/a1.txt" 2>&1 &&
    ./train_gpt2 "${small[@]}" -x 40 -l 1e-2 -k constant -o "$tmp/a0" > "$tmp/a0.txt" 2>&1; then
    l1=$(last_loss "$tmp/a1/main.log"); l0=$(last_loss "$tmp/a0/main.log")
    if awk -v a="$l1" -v b="$l0" 'BEGIN {exit !(a < 0.5 && b > 3)}'; then ok "-a 1: loss $l1 after 40 steps (without -a: $l0)"
    else bad "-a 1: loss $l1 after 40 steps, without -a $l0 (expected < 0.5 and > 3)"; fi
else bad "-a runs failed"; fi

# -a under ZeRO: each rank takes its part of the first step's windows every step, so 2 ranks
# give the bits of accumulation 2 on one (test_exact_accum.sh)
if ./train_gpt2 "${small[@]}" -b 1 -d 64 -x 8 -l 1e-2 -a 1 -o "$tmp/a_u" > "$tmp/a_u.txt" 2>&1 &&
    mpirun -np 2 ./train_gpt2 "${small[@]}" -b 1 -x 8 -l 1e-2 -a 1 -z 1 -o "$tmp/a_z" > "$tmp/a_z.txt" 2>&1; then
    if ./build/model_diff "$tmp/a_u/model_final.bin" "$tmp/a_z/model_final.bin" 0 > "$tmp/a_diff.txt" 2>&1
    then ok "-a 1 under ZeRO-1 on 2 ranks: the bits of the unsharded -a 1 run (accumulation 2)"
    else bad "-a 1 under ZeRO differs from the unsharded run: $(tail -n 1 "$tmp/a_diff.txt")"; fi
else tail -n 3 "$tmp/a_z.txt"; bad "-a runs under ZeRO failed"; fi

# 6. -sl / -sg: a spike planted in the data at step 135 (windows 268, 269 of 280)
python3 - "$tmp/spike_000000.bin" <<'PY'
import random, struct, sys
random.seed(3)
T, windows = 32, 280
seq = [random.randrange(50257) for _ in range(T)]
tokens = (seq * windows) + [seq[0]]
for i in range(268 * T, 270 * T + 1):
    tokens[i] = random.randrange(50257)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253)))
    f.write(struct.pack(f"<{len(tokens)}H", *tokens))
PY
spike=("${small[@]}" -x 140 -l 1e-2 -k constant -u 0 --shuffle 0 -i "$tmp/spike_000000.bin")
skip_case() {   # skip_case NAME FLAG RANKS ARGS...
    local name=$1 flag=$2 np=$3; shift 3
    local cmd=(./train_gpt2)
    [ "$np" -gt 1 ] && cmd=(mpirun -np "$np" ./train_gpt2)
    if ! timeout 900 "${cmd[@]}" "${spike[@]}" "$@" -o "$tmp/$name" > "$tmp/$name.txt" 2>&1; then
        tail -n 3 "$tmp/$name.txt"; bad "$name: the run failed"; return
    fi
    local lines
    lines=$(grep -c "skipped (-$flag)" "$tmp/$name.txt")
    if [ "$lines" = 1 ] && grep -q "^step  135/140 .*skipped (-$flag)" "$tmp/$name.txt" &&
        grep -q "^-sl/-sg: 1 of the 140 updates of this run skipped" "$tmp/$name.txt"; then
        ok "$name: $* skips the planted spike's update (step 135) and only it, 1 reported at the end"
    else grep "skipped\|^-sl" "$tmp/$name.txt" | head; bad "$name: $*: expected step 135 alone skipped and reported"; fi
}
./train_gpt2 "${spike[@]}" -o "$tmp/nospike" > "$tmp/nospike.txt" 2>&1
jump=$(awk '/^s:134 /{split($2,a,":"); print a[2]}' "$tmp/nospike/main.log")
if grep -q "skipped" "$tmp/nospike.txt"; then bad "without -sl/-sg a step was skipped"
elif awk -v j="$jump" 'BEGIN {exit !(j > 8)}'; then ok "the planted data spike: loss $jump at step 135 without -sl, nothing skipped"
else bad "the planted spike gives loss $jump at step 135: the case checks less"; fi
skip_case sl sl 1 -sl 3
skip_case sg sg 1 -sg 3
skip_case sl_zero sl 2 -sl 3 -z 2 -b 1
skip_case sg_zero sg 2 -sg 3 -z 2 -b 1
# 7. --micro-grads: the memory table (memory_report.json) counts its gradient-sized buffer
# with accumulation, and the process's measured peak resident memory grows by about that
mg_case() {   # mg_case NAME MICRO_GRADS -d
    /usr/bin/time -f "%M" -o "$tmp/$1.rss" ./train_gpt2 "${small[@]}" -t 64 -x 2 -d "$3" --micro-grads "$2" \
        -o "$tmp/$1" > "$tmp/$1.txt" 2>&1 || { tail -n 3 "$tmp/$1.txt"; bad "$1: the run failed"; }
}
if [ -x /usr/bin/time ]; then
    mg_case mg1 1 512; mg_case mg0 0 512; mg_case mg1a1 1 128
    if python3 - "$tmp" <<'PY'
import json, sys
t = sys.argv[1]
grads = {n: json.load(open(f"{t}/{n}/memory_report.json"))["ranks"][0]["device"]["gradients"] for n in ("mg1", "mg0", "mg1a1")}
params = json.load(open(f"{t}/mg0/memory_report.json"))["ranks"][0]["device"]["parameters"]
assert grads == {"mg1": 2 * params, "mg0": params, "mg1a1": params}, (grads, params)
rss = {n: int(open(f"{t}/{n}.rss").read().split()[-1]) * 1024 for n in ("mg1", "mg0")}
grew = rss["mg1"] - rss["mg0"]
assert 0.85 * params < grew < 1.15 * params, (rss, params)
print(f"gradients {params} bytes; measured peak grows by {grew}")
PY
    then ok "--micro-grads 1 at accumulation 4: two gradient buffers in the table (one without accumulation or with 0), and the peak resident memory grows by one"
    else bad "--micro-grads: the memory table or the measured peak is not as expected"; fi
else echo "SKIP --micro-grads memory: no /usr/bin/time"; fi
# 8. the CUDA trainers on the emulated device (make emu; skipped without it): -k constant
# and -nk 1 in train_gpt2cu, -a 1 in train_gpt2_zero (-sl/-sg need 129+ steps: too slow
# emulated; their code is the CPU trainer's outlier_step and gpt2_zero_step's veto)
EMU=${EMU_DIR:-build/emu}
if [ -x "$EMU/train_gpt2cu" ] && [ -x "$EMU/train_gpt2_zero" ]; then
    export CUDA_EMU_QUIET=1
    emu=(-e d2c64h1t64 -b 2 -t 32 -v 0 -s 0)
    if timeout 900 "$EMU/train_gpt2cu" "${emu[@]}" -x 6 -k constant -l 1e-3 -u 3 -n 2 -nk 1 -o "$tmp/ecu" > "$tmp/ecu.txt" 2>&1; then
        lrs=$(sed -n 's/.* lr:\([^ ]*\).*/\1/p' "$tmp/ecu/main.log" | sort -u | tr '\n' ' ')
        c=$(steps_of "$tmp/ecu" ckpt)
        if [ "$lrs" = "1.000000e-03 " ] && [ "$c" = "6 " ]; then ok "emulated train_gpt2cu: -k constant keeps lr 1e-3 (warmup ignored, as llm.c), -nk 1 keeps ckpt 6 alone"
        else bad "emulated train_gpt2cu: lrs '$lrs', checkpoints '$c'"; fi
    else tail -n 3 "$tmp/ecu.txt"; bad "emulated train_gpt2cu failed"; fi
    if timeout 900 "$EMU/train_gpt2_zero" "${emu[@]}" -x 15 -k constant -l 1e-2 -a 1 -o "$tmp/eza" > "$tmp/eza.txt" 2>&1; then
        l=$(last_loss "$tmp/eza/main.log")
        if awk -v a="$l" 'BEGIN {exit !(a < 4)}'; then ok "emulated train_gpt2_zero -a 1: loss $l after 15 steps (from 10.8)"
        else bad "emulated train_gpt2_zero -a 1: loss $l after 15 steps, expected < 4"; fi
    else tail -n 3 "$tmp/eza.txt"; bad "emulated train_gpt2_zero failed"; fi
elif [ -n "${EMU_DIR:-}" ]; then bad "the emulated trainers are not in EMU_DIR=$EMU_DIR"   # make test built them
else echo "(the CUDA trainers emulated not run: $EMU not built, make emu)"; fi
echo "$pass passed, $failn failed"
[ "$failn" -eq 0 ]
