#!/usr/bin/env bash
# Bad inputs stop the trainer with a message naming what is wrong (and exit non-zero).
set -u
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_train_errors: $*"; exit 1; }
expect_error() { # expect_error "pattern" args...
    local pattern=$1; shift
    if ./train_gpt2 "$@" -o "$tmp/out" -s 0 -x 1 > "$tmp/log" 2>&1; then fail "accepted: $*"; fi
    grep -q -- "$pattern" "$tmp/log" || { cat "$tmp/log"; fail "message for [$*] lacks '$pattern'"; }
}
expect_error "unknown option" --no-such-flag
expect_error "-b expects an integer" -b zero
expect_error "neither a model descriptor" -e nosuchmodel
expect_error "no shard files match" -i "$tmp/none_*.bin"
head -c 2000 data/kjv/kjv_val_000000.bin > "$tmp/trunc_000000.bin"
expect_error "trunc_000000.bin" -i "$tmp/trunc_*.bin"
printf 'not a model file at all, but long enough to have a header.......' > "$tmp/bad_model.bin"
head -c 4096 /dev/zero >> "$tmp/bad_model.bin"
expect_error "bad_model.bin" -e "$tmp/bad_model.bin"
# -y 1 with no checkpoint starts fresh (test_train_recovery.sh); a corrupt `latest` is an error
mkdir -p "$tmp/out" && printf 'garbage\n' > "$tmp/out/latest"
expect_error "'$tmp/out/latest' is corrupt" -y 1
rm -f "$tmp/out/latest"
expect_error "exceeds the model's maximum sequence length" -e d2c64h2t64 -t 128
echo "PASS test_train_errors"
