#!/usr/bin/env bash
# Hostile model and data inputs stop the trainer with a message (exit status 1, never a
# crash), naming the file and the offending field or token:
#  - a 1 KB model file whose header sizes wrap around 2^64 (L=1, C=2^30, Vp=2^31-1,
#    maxT chosen so that 4 * parameters wraps to exactly 0 and the header "fits" the
#    file; it crashed the trainer with a segfault), unsharded and under ZeRO
#  - descriptors whose numbers overflow long or int (d9223372036854775807, d4294967297,
#    which used to wrap to 1 layer and train)
#  - a token shard holding id 50300 (>= the GPT-2 vocabulary 50257) at token 1234,
#    far from the windows the first step reads: refused when the shard is first read
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_model_inputs: $*"; exit 1; }
# expect_refusal "needle"... -- command...: exit status 1 (not a signal) and every needle in the output
expect_refusal() {
    local needles=()
    while [ "$1" != "--" ]; do needles+=("$1"); shift; done
    shift
    "$@" > "$tmp/log" 2>&1
    local rc=$?
    [ "$rc" -eq 1 ] || { tail -n 5 "$tmp/log"; fail "exit status $rc (want 1) from: $*"; }
    for n in "${needles[@]}"; do
        grep -qF -- "$n" "$tmp/log" || { cat "$tmp/log"; fail "output of [$*] lacks '$n'"; }
    done
}
int32le() { # little-endian int32 bytes of $1
    local v=$(( $1 & 0xffffffff ))
    printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $((v & 255)) $((v >> 8 & 255)) $((v >> 16 & 255)) $((v >> 24 & 255)))"
}
args=(-b 2 -t 32 -x 1 -v 0 -s 0 --threads 1)

# the wrapping header: magic, version 3, maxT, V, L, NH, C, Vp, then zeros to 1024 bytes
wrap="$tmp/wrap.bin"
for v in 20240326 3 2147483634 50257 1 1 1073741824 2147483647; do int32le $v; done > "$wrap"
head -c $((1024 - 32)) /dev/zero >> "$wrap"
[ "$(stat -c %s "$wrap")" -eq 1024 ] || fail "the crafted file is not 1 KB"
expect_refusal "$wrap" "channels (C) = 1073741824 is outside [1, 65536]" -- ./train_gpt2 -e "$wrap" "${args[@]}" -o "$tmp/o"
expect_refusal "$wrap" "channels (C) = 1073741824" -- mpirun -np 2 ./train_gpt2 -e "$wrap" "${args[@]}" -z 3 -o "$tmp/o"
echo "wrapping 1 KB model header: refused (unsharded and -z 3)"

expect_refusal "d9223372036854775807 (layers) is outside [1, 1024]" -- ./train_gpt2 -e d9223372036854775807 "${args[@]}" -o "$tmp/o"
expect_refusal "d4294967297 (layers) is outside [1, 1024]" -- ./train_gpt2 -e d4294967297 "${args[@]}" -o "$tmp/o"
expect_refusal "c4294967360 (channels) is outside [1, 65536]" -- ./train_gpt2 -e d2c4294967360 "${args[@]}" -o "$tmp/o"
echo "overflowing descriptors: refused"

# token 1234 of a copy of the bundled val shard becomes 50300 (0xc47c)
shard="$tmp/bad_000000.bin"
cp data/kjv/kjv_val_000000.bin "$shard"
printf '\x7c\xc4' | dd of="$shard" bs=1 seek=$((1024 + 2 * 1234)) conv=notrunc 2> /dev/null
expect_refusal "$shard': token 1234 (byte offset 3492) is 50300, outside the vocabulary [0, 50257)" -- \
    ./train_gpt2 -e d2c64h2t64 -i "$shard" "${args[@]}" -o "$tmp/o"
expect_refusal "$shard': token 1234 (byte offset 3492) is 50300" -- \
    ./train_gpt2 -e d2c64h2t64 -j "$shard" "${args[@]}" -v 1 -o "$tmp/o"
echo "token id 50300 in a shard: refused naming the shard and the offset (train and val)"
echo "PASS test_model_inputs"
