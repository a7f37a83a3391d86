#!/usr/bin/env bash
# dev/gpu/bundle.sh keeps its build copy between bundles and lets make rebuild what changed.
# A copy whose bytes differ from the working tree's must be replaced with a fresh time even
# when the copy looks newer (a tree's times can run backwards between checkouts), or make
# keeps an object built from other bytes; a copy with the same bytes keeps its time, so
# nothing is rebuilt for it. A source the tree no longer has goes from the copy (the
# Makefile's wildcards would build it); build outputs stay.
set -u
cd "$(dirname "$0")/../../.."
pass=0; failn=0
ok() { echo "PASS $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; failn=$((failn + 1)); }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
src=$tmp/src
BUNDLE_SRC=$src bash dev/gpu/bundle.sh --sync-only > "$tmp/log" 2>&1 || { cat "$tmp/log"; bad "first sync failed"; }
cmp -s Makefile "$src/Makefile" && cmp -s zero/comm/mpi_stub/mpi_stub.c "$src/zero/comm/mpi_stub/mpi_stub.c" &&
    ok "first sync: the tree's files copied" || bad "first sync: files missing or different"
[ -x "$src/dev/gpu/bundle.sh" ] && ok "first sync: modes kept (scripts executable)" || bad "first sync: bundle.sh not executable"
# a stale copy (other bytes) that looks newer than anything, and an unchanged one marked old
echo "/* other bytes */" >> "$src/zero/comm/mpi_stub/mpi_stub.c"
touch -d "2099-01-01" "$src/zero/comm/mpi_stub/mpi_stub.c"
touch -d "2001-01-01" "$src/Makefile"
before=$(date +%s)
BUNDLE_SRC=$src bash dev/gpu/bundle.sh --sync-only > "$tmp/log" 2>&1 || { cat "$tmp/log"; bad "second sync failed"; }
t=$(stat -c %Y "$src/zero/comm/mpi_stub/mpi_stub.c")
if cmp -s zero/comm/mpi_stub/mpi_stub.c "$src/zero/comm/mpi_stub/mpi_stub.c" && [ "$t" -ge "$before" ] && [ "$t" -lt 4000000000 ]; then
    ok "a copy with other bytes is replaced, with a fresh time"
else bad "a copy with other bytes: $(cmp -s zero/comm/mpi_stub/mpi_stub.c "$src/zero/comm/mpi_stub/mpi_stub.c" && echo same bytes || echo still differs), time $t"; fi
[ "$(stat -c %Y "$src/Makefile")" = "$(date -d 2001-01-01 +%s)" ] &&
    ok "a copy with the same bytes keeps its time" || bad "a copy with the same bytes was rewritten"
# a source removed from the tree since the last sync, beside build outputs
echo "int old_module;" > "$src/llmc/old_module.c"
mkdir -p "$src/build/sub" && echo x > "$src/build/sub/kept.c" && echo x > "$src/train_gpt2cu"
BUNDLE_SRC=$src bash dev/gpu/bundle.sh --sync-only > "$tmp/log" 2>&1 || { cat "$tmp/log"; bad "third sync failed"; }
[ ! -e "$src/llmc/old_module.c" ] && [ -e "$src/build/sub/kept.c" ] && [ -e "$src/train_gpt2cu" ] && cmp -s Makefile "$src/Makefile" &&
    ok "a source the tree no longer has is removed from the copy; build outputs stay" ||
    bad "after a source left the tree: old_module.c $([ -e "$src/llmc/old_module.c" ] && echo kept || echo removed), build outputs $([ -e "$src/build/sub/kept.c" ] && [ -e "$src/train_gpt2cu" ] && echo kept || echo removed)"
echo "$pass passed, $failn failed"
[ "$failn" -eq 0 ]
