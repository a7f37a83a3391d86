#!/usr/bin/env bash
# A step's fixed work on the device stays per model, not per tensor: dev/bench/bench_launches.sh
# (kernels, copies, memsets and host waits of one step at d12's 148 slices, counted on the
# emulated device) for train_gpt2cu and train_gpt2_zero -z 3 at 1 rank. A kernel, copy or
# memset issued once per tensor adds 148 a step, so each of the ZeRO step's counts must stay
# within 148 / 4 of train_gpt2cu's; a wait of the host added to zero_step must show too.
# train_gpt2cu's AdamW runs at most 128 slices a launch: 2 launches for 148 slices.
set -u
cd "$(dirname "$0")/../../.."
source dev/test/emu/emu_common.sh
need_emu train_gpt2cu train_gpt2_zero
SLICES=148 PER_TENSOR=$((148 / 4))
if ! KERNELS=1 STAGES=3 STEPS=2 EMU=$EMU dev/bench/bench_launches.sh > "$tmp/out" 2>&1; then
    cat "$tmp/out"; bad "bench_launches.sh failed"; echo "$pass passed, $failn failed"; exit 1
fi
cat "$tmp/out"
# row NAME COLUMN: the figure in column COLUMN (2 kernels .. 6 waits) of the row starting NAME
row() { awk -v name="$1" -v col="$2" 'index($0, name) == 1 { n = split(substr($0, 25), f, " "); print f[col - 1] }' "$tmp/out"; }
cu="train_gpt2cu" z3="train_gpt2_zero -z 3"
names=("" "" kernels "library calls" copies memsets "host waits")
for col in 2 4 5; do
    a=$(row "$cu" $col) b=$(row "$z3" $col)
    if [ -n "$a" ] && [ -n "$b" ] && [ "$b" -le $((a + PER_TENSOR)) ]; then
        ok "${names[$col]} a step: -z 3 $b, train_gpt2cu $a (within $PER_TENSOR: none per tensor)"
    else bad "${names[$col]} a step: -z 3 ${b:-?}, train_gpt2cu ${a:-?}: more than $PER_TENSOR apart (one per tensor of $SLICES?)"; fi
done
a=$(row "$cu" 3) b=$(row "$z3" 3)
[ -n "$a" ] && [ "$a" = "$b" ] && ok "library calls a step: the same ($a)" || bad "library calls a step: -z 3 ${b:-?}, train_gpt2cu ${a:-?}"
a=$(row "$cu" 6) b=$(row "$z3" 6)
if [ -n "$a" ] && [ -n "$b" ] && [ "$b" -le $((a + 1)) ]; then
    ok "host waits a step: -z 3 $b, train_gpt2cu $a (the norm's one more)"
else bad "host waits a step: -z 3 ${b:-?}, train_gpt2cu ${a:-?}: more than the norm's one more"; fi
adamw=$(awk '/^train_gpt2cu/ { in_cu = 1; next } /^train_gpt2_zero/ { in_cu = 0 } in_cu && $2 ~ /^adamw/ { s += $1 } END { print s + 0 }' "$tmp/out")
[ "$adamw" -ge 1 ] && [ "$adamw" -le $(((SLICES + 127) / 128)) ] &&
    ok "train_gpt2cu's AdamW: $adamw launches a step for $SLICES slices" ||
    bad "train_gpt2cu's AdamW: $adamw launches a step for $SLICES slices (at most $(((SLICES + 127) / 128)))"
echo "$pass passed, $failn failed"
[ "$failn" -eq 0 ]
