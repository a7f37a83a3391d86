#!/usr/bin/env bash
# build/model_diff's verdict and exit status: the last line is "equal within tolerance"
# (exit 0) or "differ" (exit 1), a tolerance must be a non-negative number (else exit 2 with
# a message naming it, and no verdict). Checked on a model against its copy, against the
# same model trained from another seed (tolerances just above and below the printed
# relative L2 error), and against another shape.
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_model_diff: $*"; exit 1; }
train() { ./train_gpt2 -e "$1" -b 2 -t 32 -x 1 -n 1 -v 0 -s 0 --threads 1 --seed "$2" -o "$tmp/$3" > "$tmp/$3.txt" 2>&1 \
              || { tail "$tmp/$3.txt"; fail "training $3 failed"; }; }
train d2c64h2t64 1 a
train d2c64h2t64 2 b
train d1c64h2t64 1 small
a=$tmp/a/model_00000001.bin b=$tmp/b/model_00000001.bin
cp "$a" "$tmp/copy.bin"
expect() {   # expect STATUS VERDICT ARGS...
    local status=$1 verdict=$2; shift 2
    ./build/model_diff "$@" > "$tmp/out.txt" 2> "$tmp/err.txt"
    local rc=$?
    [ "$rc" -eq "$status" ] || { cat "$tmp/out.txt" "$tmp/err.txt"; fail "model_diff $*: exit $rc, expected $status"; }
    [ "$(tail -n 1 "$tmp/out.txt")" = "$verdict" ] || { cat "$tmp/out.txt"; fail "model_diff $*: verdict is not '$verdict'"; }
}
expect 0 "equal within tolerance" "$a" "$tmp/copy.bin"
expect 0 "equal within tolerance" "$a" "$tmp/copy.bin" 0
expect 1 "differ" "$a" "$b"
rel=$(sed -n 's/.*model max|diff| [^,]*, relative L2 \([^ ]*\) .*/\1/p' "$tmp/out.txt")
[ -n "$rel" ] || { cat "$tmp/out.txt"; fail "no whole-model relative L2 line"; }
above=$(awk -v r="$rel" 'BEGIN { printf "%.6e", r * 1.01 }'); below=$(awk -v r="$rel" 'BEGIN { printf "%.6e", r * 0.99 }')
expect 0 "equal within tolerance" "$a" "$b" "$above"
expect 1 "differ" "$a" "$b" "$below"
expect 1 "differ" "$a" "$tmp/small/model_00000001.bin" 1e9
echo "verdicts: copy equal, seeds differ at relative L2 $rel (equal at $above, differ at $below), shapes differ"
# a NaN in one weight (wte's 11th, byte 1024 + 40): the largest difference is NaN, not 0
cp "$a" "$tmp/nan.bin"
printf '\x00\x00\xc0\x7f' | dd of="$tmp/nan.bin" bs=1 seek=1064 conv=notrunc status=none
expect 1 "differ" "$a" "$tmp/nan.bin" 1e9
grep -qF 'model max|diff| nan,' "$tmp/out.txt" || { cat "$tmp/out.txt"; fail "a NaN weight: the largest difference is not nan"; }
cp "$tmp/nan.bin" "$tmp/nan2.bin"   # the same NaN on both sides: the same bits
expect 0 "equal within tolerance" "$tmp/nan.bin" "$tmp/nan2.bin" 0
grep -qF 'bit-identical; model max|diff| 0.000e+00, relative L2 0.000e+00' "$tmp/out.txt" \
    || { cat "$tmp/out.txt"; fail "the same NaN on both sides: not bit-identical with no difference"; }
echo "a NaN weight: the largest difference is nan, differ; the same NaN on both sides: bit-identical"
for tol in abc -1 nan inf 1e-3x "" " 1"; do
    expect 2 "" "$a" "$b" "$tol"
    grep -q "error: tolerance '$tol' is not a non-negative number" "$tmp/err.txt" \
        || { cat "$tmp/err.txt"; fail "tolerance '$tol': no message naming it"; }
done
echo "tolerances abc -1 nan inf 1e-3x '' ' 1': refused with exit status 2"
echo "PASS test_model_diff"
