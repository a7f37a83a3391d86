#!/usr/bin/env bash
# scripts/gpu_session.sh's exit status, with stand-ins for the GPU programs (no GPU here):
#  - a part whose program fails, or crashes after another passed, makes the script exit 1
#    naming the part, and the program's exit status shows among the lines it prints
#  - parts whose programs pass exit 0
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_gpu_session: $*"; exit 1; }
# a copy of the script in a tree of stand-ins; make and nvidia-smi do nothing
mkdir -p "$tmp/tree/scripts" "$tmp/tree/build" "$tmp/bin"
cp scripts/gpu_session.sh "$tmp/tree/scripts/"
printf '#!/bin/sh\nexit 0\n' > "$tmp/bin/make"
printf '#!/bin/sh\necho "GPU 0: stand-in"\n' > "$tmp/bin/nvidia-smi"
stand_in() {   # stand_in PATH LINE STATUS: prints LINE, then exits with STATUS (crash: a SIGSEGV)
    if [ "$3" = crash ]; then printf '#!/bin/sh\necho "%s"\nkill -SEGV $$\n' "$2" > "$1"
    else printf '#!/bin/sh\necho "%s"\nexit %s\n' "$2" "$3" > "$1"; fi
}
stand_in "$tmp/tree/test_gpt2_zero" "12 passed, 0 failed" 0
stand_in "$tmp/tree/build/gpu_attention_cudnn" "attention: starting" crash
stand_in "$tmp/tree/build/gpu_zero_quant" "5 passed, 0 failed" 0
stand_in "$tmp/tree/build/gpu_backend_ops" "FAIL wire_pack: mismatch" 1
chmod +x "$tmp/bin/"* "$tmp/tree/test_gpt2_zero" "$tmp/tree/build/"*
session() { PATH="$tmp/bin:$PATH" OUT="$tmp/logs" bash "$tmp/tree/scripts/gpu_session.sh" "$@"; }

session tests quant > "$tmp/1.txt" 2>&1 && { cat "$tmp/1.txt"; fail "failing parts: exit 0"; }
grep -q "^FAIL ./build/gpu_attention_cudnn exited with 139" "$tmp/1.txt" \
    && grep -q "gpu_session.sh: failed: tests quant" "$tmp/1.txt" \
    || { cat "$tmp/1.txt"; fail "the crash after a passing program, or the failed parts, not said"; }
echo "a crash after a passing program and a failing one: exit 1, both parts named"
stand_in "$tmp/tree/build/gpu_attention_cudnn" "3 passed, 0 failed" 0
stand_in "$tmp/tree/build/gpu_backend_ops" "7 passed, 0 failed" 0
session tests quant > "$tmp/2.txt" 2>&1 || { cat "$tmp/2.txt"; fail "passing parts: not exit 0"; }
echo "passing parts: exit 0"
echo "PASS test_gpu_session"
