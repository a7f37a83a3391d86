#!/usr/bin/env bash
# The logic of dev/test/cuda/gpu_train_matrix.sh's run limit, in a scratch tree with
# stand-ins for the GPU (nvidia-smi), make, model_diff and the two trainers: a trainer run
# that hangs (train_gpt2cu's reference, or one offload case's ranks under the real
# scripts/launch_ranks.sh) is ended after RUN_LIMIT seconds with all of its processes,
# counts as a failure, and the cases after it still run and pass.
# run alone: its hung runs must end within seconds of their 3-second limit
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'pkill -f "$tmp/tree" 2> /dev/null; rm -rf "$tmp"' EXIT
pass=0 failn=0
ok() { echo "PASS $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; failn=$((failn + 1)); }
tree=$tmp/tree
mkdir -p "$tree/dev/test/cuda" "$tree/scripts" "$tree/build" "$tmp/bin"
cp dev/test/cuda/gpu_train_matrix.sh "$tree/dev/test/cuda/"
cp scripts/launch_ranks.sh "$tree/scripts/"
printf '#!/bin/sh\nexit 0\n' > "$tmp/bin/make"
printf '#!/bin/sh\necho "GPU 0: stand-in"\n' > "$tmp/bin/nvidia-smi"
printf '#!/bin/sh\ncmp -s "$1" "$2" || { echo "differ"; exit 1; }\necho "max rel diff 0"\necho "max abs diff 0"\n' > "$tree/build/model_diff"
# a trainer: 3 logged steps whose norm (3.0) the clip 0.5 bites, one model file; it hangs
# (its PID in $tmp/hung) when its arguments contain HANG and it is HANG_IN
cat > "$tree/trainer" << EOF
#!/usr/bin/env bash
name=\${0##*/}
if [ -n "\${HANG:-}" ] && [ "\$name" = "\$HANG_IN" ] && [[ " \$* " == *" \$HANG "* ]]; then
    echo \$\$ >> "$tmp/hung"; sleep 300; exit 0
fi
out=
while [ \$# -gt 0 ]; do [ "\$1" = -o ] && out=\$2; shift; done
mkdir -p "\$out"
for s in 1 2 3; do echo "s:\$s trl:2.5 lr:1e-3 norm:3.0"; done > "\$out/main.log"
printf 'stand-in model' > "\$out/model_final.bin"
echo "step 1/3 | 100 tok/s"
EOF
chmod +x "$tree/trainer" "$tree/build/model_diff" "$tmp/bin/"*
ln -s trainer "$tree/train_gpt2cu"; ln -s trainer "$tree/train_gpt2_zero"
matrix() {   # matrix LOG PART: the copy of gpu_train_matrix.sh, limit 3 s, 2 ranks without MPI
    mkdir -p "$tmp/keep_$1"
    PATH=$tmp/bin:$PATH NO_MPI=1 NPS=2 RUN_LIMIT=3 KEEP_DIR=$tmp/keep_$1 bash "$tree/dev/test/cuda/gpu_train_matrix.sh" "$2" > "$tmp/$1.log" 2>&1
}
source dev/test/common/proc.sh   # running PID, alive FILE

# 1. one offload case's two ranks hang: that case fails alone, the six after it pass
start=$SECONDS
HANG="--offload-param nvme --offload-optimizer nvme" HANG_IN=train_gpt2_zero matrix off offload
rc=$? took=$((SECONDS - start))
nh=$(wc -l < "$tmp/hung" 2> /dev/null || echo 0)
if [ $rc -eq 1 ] && [ "$nh" -eq 2 ] && [ "$took" -lt 30 ] &&
   grep -q "^FAIL train_gpt2_zero np=2 z=3 --offload-param nvme --offload-optimizer nvme$" "$tmp/off.log" &&
   grep -q "^PASS np=2 z=3 --offload-param nvme: bit-identical" "$tmp/off.log" &&
   grep -q "^PASS np=2 z=3 --offload-param cpu --offload-optimizer cpu: bit-identical" "$tmp/off.log" &&
   grep -q "^7 passed, 1 failed$" "$tmp/off.log"
then ok "a hung offload case (2 ranks) fails after RUN_LIMIT, in $took s, and the 6 cases after it pass"
else bad "hung offload case: exit $rc after $took s, $nh hung ranks"; cat "$tmp/off.log"; fi
[ "$(alive "$tmp/hung")" -eq 0 ] && ok "the hung case's ranks were ended" || bad "$(alive "$tmp/hung") hung ranks live on"

# 2. train_gpt2cu's reference hangs: it fails, and the stage runs after it still run
rm -f "$tmp/hung"
start=$SECONDS
HANG="--grad-clip 0.5" HANG_IN=train_gpt2cu matrix cu bitwise
rc=$? took=$((SECONDS - start))
if [ $rc -eq 1 ] && [ "$took" -lt 40 ] && grep -q "^FAIL train_gpt2cu (bitwise reference)" "$tmp/cu.log" &&
   [ -f "$tmp/keep_cu/bw_z3/model_final.bin" ] && [ "$(alive "$tmp/hung")" -eq 0 ]
then ok "a hung train_gpt2cu fails after RUN_LIMIT, in $took s, ended, and stage 3 still ran"
else bad "hung train_gpt2cu: exit $rc after $took s, $(alive "$tmp/hung") alive"; cat "$tmp/cu.log"; fi

# 3. nothing hangs: every case of the part passes
rm -f "$tmp/hung"
matrix clean offload
grep -q "^8 passed, 0 failed$" "$tmp/clean.log" && ok "no hang: 8 passed, 0 failed" || { bad "no hang"; cat "$tmp/clean.log"; }
echo "$pass passed, $failn failed"
[ "$failn" -eq 0 ]
