#!/usr/bin/env bash
# The memory tables printed at start-up, against what the run measured:
#  - the unsharded CPU trainer prints one like the ZeRO table, all host RAM: parameters and
#    gradients 4 bytes per parameter, AdamW's m and v 8, and the activations that the same
#    model measured under -z 1 (zero_report.json, written after the steps)
#  - the ZeRO table on the CPU names its device column host RAM and shows the activations
#    at start-up: every row equals the report's measured figure
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_train_memory: $*"; exit 1; }
args=(-e d2c64h2t64 -b 3 -t 40 -x 2 -v 0 -s 0 --threads 1)
row() { sed -n "s/^$1:   $2  *\([0-9,]*\).*/\1/p" "$3" | tr -d ,; }   # first column of a table row
report() { grep -m1 "\"$1\"" "$2/zero_report.json" | tr -dc '0-9'; }  # rank 0's device figure

./train_gpt2 "${args[@]}" -o "$tmp/plain" > "$tmp/plain.txt" 2>&1 || { tail "$tmp/plain.txt"; fail "unsharded run failed"; }
./train_gpt2 "${args[@]}" -z 1 -o "$tmp/z1" > "$tmp/z1.txt" 2>&1 || { tail "$tmp/z1.txt"; fail "-z 1 run failed"; }
grep -q '^memory:   bytes  *host RAM$' "$tmp/plain.txt" || { cat "$tmp/plain.txt"; fail "no host RAM memory table from the unsharded trainer"; }
n=$(sed -n 's/.*, \([0-9]*\) parameters, .*/\1/p' "$tmp/plain.txt")
[ -n "$n" ] || fail "no parameter count printed"
act=$(report activations "$tmp/z1")
[ -n "$act" ] && [ "$act" -gt 0 ] || fail "zero_report.json holds no activations"
for kind in "parameters $((4 * n))" "gradients $((4 * n))" "optimizer states $((8 * n))" "activations $act" \
            "total $((16 * n + act))"; do
    label=${kind% *}; want=${kind##* }
    got=$(row memory "$label" "$tmp/plain.txt")
    [ "$got" = "$want" ] || fail "unsharded table: $label $got bytes, expected $want"
done
echo "unsharded CPU memory table: $n parameters, activations $act bytes as measured"

grep -q '^zero:   rank 0 bytes  *device (host RAM on the CPU backend)  *host$' "$tmp/z1.txt" \
    || { grep '^zero:' "$tmp/z1.txt"; fail "the ZeRO table on the CPU does not say its device memory is host RAM"; }
for kind in parameters gradients "optimizer states" activations buffers total; do
    got=$(row zero "$kind" "$tmp/z1.txt")
    want=$(report "${kind/ /_}" "$tmp/z1")
    [ -n "$got" ] && [ "$got" = "$want" ] || fail "ZeRO start-up table: $kind $got bytes, the report measured $want"
done
echo "ZeRO table on the CPU: device column is host RAM, activations $act bytes at start-up"
echo "PASS test_train_memory"
