#!/usr/bin/env bash
# The shape of zero/ and llmc/ (dev/tools/check_layout.py, the folders' READMEs): the tree
# as it is passes, with the built objects' calls; and the checker is shown to fail, naming
# the file, on each kind of decay planted in a copy of the tree: an include that runs
# upward (host backend -> CUDA backend), an include circle, a call from a lower layer into
# a higher one (a kernel calling the orchestrator, through a built object), a call between
# sibling phases, a trainer header reached from llmc/, a file placed in no layer, and
# struct Zero's state written outside its owner (a phase's sub-struct, the world, an alias).
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_layout: $*"; exit 1; }
check=dev/tools/check_layout.py

[ -n "$(find build/zero build/llmc -name '*.o' 2>/dev/null | head -n 1)" ] || fail "no objects under build/: run make first"
python3 "$check" > "$tmp/tree.log" 2>&1 || { cat "$tmp/tree.log"; fail "the tree itself breaks its layout"; }
grep -q "(includes and calls): ok" "$tmp/tree.log" || { cat "$tmp/tree.log"; fail "the checker did not check calls"; }
echo "tree: $(tail -n 1 "$tmp/tree.log")"

# expect_violation NAME PATTERN: the copy in $tmp/t (objects in $tmp/b) fails, saying PATTERN
expect_violation() {
    if python3 "$check" --root "$tmp/t" --build "$tmp/b" > "$tmp/$1.log" 2>&1; then
        cat "$tmp/$1.log"; fail "$1: the checker passed a tree with the defect"
    fi
    grep -q -- "$2" "$tmp/$1.log" || { cat "$tmp/$1.log"; fail "$1: no message matching '$2'"; }
    echo "$1: refused: $(grep -m1 -- "$2" "$tmp/$1.log")"
}
# fresh: a copy of the sources and a tree of links to the real objects
fresh() {
    rm -rf "$tmp/t" "$tmp/b"
    mkdir -p "$tmp/t" "$tmp/b"
    cp -r zero llmc "$tmp/t/"
    cp train_gpt2.c "$tmp/t/"
    cp -rs "$PWD/build/zero" "$PWD/build/llmc" "$tmp/b/"
}

fresh
python3 "$check" --root "$tmp/t" --build "$tmp/b" > "$tmp/copy.log" 2>&1 || { cat "$tmp/copy.log"; fail "the copy fails before any defect"; }

fresh
sed -i '0,/#include "backend_host.h"/s//#include "backend_host.h"\n#include "..\/cuda\/backend_cuda.h"/' "$tmp/t/zero/host/backend_host.c"
expect_violation upward-include "zero/host/backend_host.c:[0-9]*: includes ../cuda/backend_cuda.h\|host code uses a cuda/ folder: zero/host/backend_host.c"

fresh
printf '#include "../run/train_config.h"\n' >> "$tmp/t/llmc/model/gpt2_config.h"
printf '#include "../model/gpt2_config.h"\n' >> "$tmp/t/llmc/run/train_config.h"
expect_violation include-circle "include circle: .*llmc/model/gpt2_config.h"

fresh
printf '#include "../../train_gpt2.c"\n' >> "$tmp/t/llmc/run/logger.c"
expect_violation trainer-include "llmc/run/logger.c:[0-9]*: includes train_gpt2.c, a file of the repository's top level"

fresh
printf '// a file nobody placed\n' > "$tmp/t/zero/stray.c"
expect_violation unplaced "zero/stray: in no layer"

# calls come from the objects: build one kernel that calls the orchestrator, one phase
# that calls its sibling
fresh
printf '#include "../zero.h"\nvoid stray_kernel(Zero *z) { zero_begin_step(z, 1); }\n' > "$tmp/t/zero/kernels/stray.c"
cc -c -I. "$tmp/t/zero/kernels/stray.c" -o "$tmp/b/zero/kernels/stray.o" || fail "building the planted kernel"
expect_violation upward-call "upward: zero/kernels/stray (zero kernels) uses zero/zero (zero orchestrator): zero/kernels/stray calls zero_begin_step"

fresh
rm "$tmp/b/zero/reduce.o"
printf 'void zero_gather_micro_end(void *z);\nvoid planted(void *z) { zero_gather_micro_end(z); }\n' > "$tmp/planted.c"
cc -c "$tmp/planted.c" -o "$tmp/planted.o" && ld -r "$tmp/planted.o" "build/zero/reduce.o" -o "$tmp/b/zero/reduce.o" \
    || fail "building the planted sibling call"
expect_violation sibling-call "siblings: zero/reduce and zero/gather"

# struct Zero's state: each phase's sub-struct written only by its own file, the world only
# by zero.c
fresh
printf 'void planted(Zero *z) { z->reduce.micro++; }\n' >> "$tmp/t/zero/gather.c"
expect_violation phase-state "zero/gather.c:[0-9]*: writes z->reduce, owned by zero/reduce.c"
fresh
printf 'void planted(Zero *z) { z->stage = 1; }\n' >> "$tmp/t/zero/report.c"
expect_violation world-state "zero/report.c:[0-9]*: writes z->stage (the world), owned by zero/zero.c"
fresh
printf 'void planted(Zero *z) { ZeroOffload *o = &z->off; o->tile = 1; }\n' >> "$tmp/t/zero/checkpoint.c"
expect_violation state-alias "zero/checkpoint.c:[0-9]*: writes z->off, owned by zero/offload.c"
fresh
printf 'void planted(ZeroTensorState *t) { t->reduce.parked = 1; }\n' >> "$tmp/t/zero/offload.c"
expect_violation row-state "zero/offload.c:[0-9]*: writes a tensor's reduce marks, owned by zero/reduce.c"

# the fork diff: what a user adds to an llm.c-style CUDA trainer to plug zero/ in stays short,
# at most 150 changed lines (zero/README.md promises it)
[ -f train_gpt2.cu ] && [ -f train_gpt2_zero.cu ] || fail "train_gpt2.cu or train_gpt2_zero.cu is missing"
fork=$(diff train_gpt2.cu train_gpt2_zero.cu | grep -c '^[<>]')
[ "$fork" -gt 0 ] || fail "diff train_gpt2.cu train_gpt2_zero.cu finds no changed line: the fork adds nothing?"
[ "$fork" -le 150 ] || fail "the fork diff (diff train_gpt2.cu train_gpt2_zero.cu) is $fork changed lines, over 150"
echo "fork diff: $fork changed lines (at most 150)"

echo "PASS test_layout"
