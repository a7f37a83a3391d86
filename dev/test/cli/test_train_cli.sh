#!/usr/bin/env bash
# Command lines a trainer must refuse, and how it says so:
#  1. train_gpt2cu -h lists no ZeRO flag, and each ZeRO flag given to it is an error naming
#     the flag (before it looks for a GPU); train_gpt2 and train_gpt2_zero list them
#  2. several ranks of an unsharded trainer (mpirun -np 2, or WORLD_SIZE=2) are refused
#     before anything is written, with a message that names the launcher and says -z /
#     train_gpt2_zero; one rank under mpirun trains
#  3. a ZeRO start-up failure (--zero-max-live below a unit) exits non-zero with the
#     plugin's reason as the last line the ranks print (1 process and mpirun -np 2)
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_train_cli: $*"; exit 1; }
make -j2 train_gpt2cu train_gpt2_zero > "$tmp/make.txt" 2>&1 || { tail "$tmp/make.txt"; fail "cannot build the CUDA trainers"; }
small=(-e d2c64h2t64 -b 2 -t 32 -v 0 -s 0 --threads 1)
# the ranks' own lines: mpirun's closing banner (from a line of dashes on) cut off

# 1. ZeRO flags and train_gpt2cu
zero_flags=(-z --zero-bucket --zero-prefetch --zero-max-live --zero-persist --node-size --zero-timeout --dry-run
            --world --gpu-mem --qwz --hpz --qgz --hier-reduce --qwz-block --qgz-block)
./train_gpt2cu -h > "$tmp/cu_help.txt" 2>&1 || fail "train_gpt2cu -h exited non-zero"
./train_gpt2_zero -h > "$tmp/zero_help.txt" 2>&1 || fail "train_gpt2_zero -h exited non-zero"
./train_gpt2 -h > "$tmp/cpu_help.txt" 2>&1 || fail "train_gpt2 -h exited non-zero"
for flag in "${zero_flags[@]}"; do
    if grep -q -- "^ *$flag " "$tmp/cu_help.txt"; then fail "train_gpt2cu -h lists $flag, a flag it does not take"; fi
    grep -q -- "^ *$flag " "$tmp/zero_help.txt" || fail "train_gpt2_zero -h does not list $flag"
    grep -q -- "^ *$flag " "$tmp/cpu_help.txt" || fail "train_gpt2 -h does not list $flag"
    value=2; case $flag in --dry-run|--qwz|--qgz|--hier-reduce) value= ;; esac
    if ./train_gpt2cu $flag $value -o "$tmp/cu" > "$tmp/cu.txt" 2>&1; then fail "train_gpt2cu accepted $flag"; fi
    grep -q -- "error: $flag is a ZeRO option.*train_gpt2_zero" "$tmp/cu.txt" \
        || { cat "$tmp/cu.txt"; fail "train_gpt2cu $flag: no error naming the flag and train_gpt2_zero"; }
done
[ ! -e "$tmp/cu" ] || fail "train_gpt2cu wrote into its output folder before refusing a flag"
echo "train_gpt2cu: no ZeRO flag in -h, each of the ${#zero_flags[@]} refused by name"

# 2. several ranks without ZeRO
refused() {   # refused NAME PATTERN COMMAND...: fails unless COMMAND exits non-zero, says PATTERN, writes nothing
    local name=$1 pattern=$2; shift 2
    if "$@" -o "$tmp/$name" > "$tmp/$name.txt" 2>&1; then fail "$name: accepted"; fi
    grep -q -- "$pattern" "$tmp/$name.txt" || { cat "$tmp/$name.txt"; fail "$name: the message lacks '$pattern'"; }
    [ ! -e "$tmp/$name" ] || fail "$name: wrote into its output folder ($(ls "$tmp/$name"))"
}
refused np2_cpu "one of 2 ranks (OMPI_COMM_WORLD_SIZE=2).*Add -z STAGE" mpirun -np 2 ./train_gpt2 "${small[@]}" -x 1
refused env_cpu "one of 2 ranks (WORLD_SIZE=2).*Add -z STAGE" env WORLD_SIZE=2 RANK=0 ./train_gpt2 "${small[@]}" -x 1
refused np2_cu "one of 2 ranks (OMPI_COMM_WORLD_SIZE=2).*train_gpt2_zero" mpirun -np 2 ./train_gpt2cu -x 1
mpirun -np 1 ./train_gpt2 "${small[@]}" -x 1 -o "$tmp/np1" > "$tmp/np1.txt" 2>&1 || { cat "$tmp/np1.txt"; fail "mpirun -np 1 ./train_gpt2 refused"; }
grep -q '^s:0 trl:' "$tmp/np1/main.log" || fail "mpirun -np 1 ./train_gpt2 did not train"
echo "unsharded trainers on 2 ranks: refused (mpirun, WORLD_SIZE); 1 rank under mpirun trains"

# ZeRO++ switches: part of ZeRO; qwZ and hpZ need stage 3
refused pp_no_z "ZeRO++ (--qwz, --hpz, --qgz, --hier-reduce) is part of ZeRO: give -z STAGE" ./train_gpt2 "${small[@]}" -x 1 --qgz
refused pp_z2 "--qwz needs -z 3" ./train_gpt2 "${small[@]}" -x 1 -z 2 --qwz
refused pp_hpz_z1 "--hpz 2 needs -z 3" ./train_gpt2 "${small[@]}" -x 1 -z 1 --hpz 2
echo "ZeRO++ switches without -z, or qwZ/hpZ below stage 3: refused"

# the batch geometry and the numbers' ranges in the CUDA trainers too (the ZeRO trainer's dry
# run needs no GPU; flags are refused before a GPU is looked for), and -h says so
for t in train_gpt2 train_gpt2cu train_gpt2_zero; do
    ./$t -h | grep -q -- "--nan-skip-limit N  with --nan-skip" || fail "$t -h does not document --nan-skip-limit"
    ./$t -h | grep -q -- "at most 65536 micro-batches per rank" || fail "$t -h does not give -d's accumulation bound"
done
refused cu_x0 "-x expects -1 (one epoch of the train data) or a number of optimizer steps in \[1, 1073741824\], got '0'" ./train_gpt2cu -x 0
refused cu_seed "--seed expects an integer in \[0, 9223372036854775807\]" ./train_gpt2cu --seed 9223372036854775808
refused zero_d0 "-d 0 is less than one micro-batch on every rank, B\*T\*ranks = 2\*32\*2 = 128 tokens" \
    ./train_gpt2_zero --dry-run --world 2 -e d2c64h2t64 -b 2 -t 32 -d 0
refused zero_dbig "-d 549755813888 is 4294967296 micro-batches of B\*T\*ranks = 2\*32\*2 = 128 tokens per rank" \
    ./train_gpt2_zero --dry-run --world 2 -e d2c64h2t64 -b 2 -t 32 -d 549755813888
echo "-x 0, --seed past its range, -d below a micro-batch or past the accumulation bound: refused in the CUDA trainers"

# 3. ZeRO start-up fails: the reason is the last line
reason="zero: rank [01]: max_live_elems 10 is smaller than unit"
if ./train_gpt2 "${small[@]}" -x 2 -z 3 --zero-max-live 10 -o "$tmp/live1" > "$tmp/live1.txt" 2>&1; then
    fail "--zero-max-live 10 accepted"; fi
tail -n 1 "$tmp/live1.txt" | grep -q "^$reason" || { cat "$tmp/live1.txt"; fail "1 process: the last line is not the plugin's reason"; }
# mpirun forwards each rank's stdout and stderr through pipes of their own and merges them in
# any order (across ranks, and between one rank's stdout and stderr), so each rank's own
# stderr is checked (--tag-output): the reason is its last line there
if mpirun --tag-output -np 2 ./train_gpt2 "${small[@]}" -x 2 -z 3 --zero-max-live 10 -o "$tmp/live2" > "$tmp/live2.txt" 2>&1; then
    fail "mpirun -np 2 --zero-max-live 10 accepted"; fi
for r in 0 1; do
    rank_lines() { sed -n "s/^\[[0-9]*,$r\]<stderr>: *//p" "$tmp/live2.txt" | grep -v '^$'; }
    [ "$(rank_lines | grep -c "^$reason")" -eq 1 ] || { cat "$tmp/live2.txt"; fail "2 ranks: rank $r does not print the reason once"; }
    rank_lines | tail -n 1 | grep -q "^$reason" || { cat "$tmp/live2.txt"; fail "2 ranks: rank $r's last line on stderr is not the plugin's reason"; }
done
echo "ZeRO start-up failure: the plugin's reason is the last line (1 process; each of 2 ranks on its stderr)"
echo "PASS test_train_cli"
