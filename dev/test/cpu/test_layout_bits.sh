#!/usr/bin/env bash
# The tree's shape (zero/ and llmc/ in layered folders, struct Zero owned by its phases,
# train_gpt2.c's main as the unsharded loop with hooks) changes no bit: the CPU trainer
# built from BASE, a commit before any of it, and the one built here train the same 20
# steps, unsharded and under ZeRO stage 3 on 2 ranks, to the same losses and the same model
# file. The reference is rebuilt from the repository's history (git archive of BASE), so the
# comparison is against that code itself, not stored numbers. Gradient accumulation 1:
# --micro-grads changed the accumulation order on purpose since BASE. Set LAYOUT_BASE to
# compare against another commit.
set -u
cd "$(dirname "$0")/../../.."
BASE=${LAYOUT_BASE:-36688ec02d95938ea3ec36d483c2b6503fa957a7}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_layout_bits: $*"; exit 1; }

git rev-parse --git-dir > /dev/null 2>&1 || fail "not a git checkout: the reference is built from the history"
git cat-file -e "$BASE^{commit}" 2> /dev/null \
    || fail "commit $BASE is not in this clone (a shallow clone? git fetch --unshallow)"
mkdir -p "$tmp/base"
git archive "$BASE" | tar -x -C "$tmp/base" || fail "git archive $BASE"
make -C "$tmp/base" -j2 train_gpt2 > "$tmp/base_build.log" 2>&1 || { tail -n 20 "$tmp/base_build.log"; fail "building $BASE"; }
make train_gpt2 > "$tmp/build.log" 2>&1 || { tail -n 20 "$tmp/build.log"; fail "building the tree"; }

data=$PWD/data
args=(-e d2c64h2t64 -b 2 -t 32 -x 20 -v 10 -m 2 -s 0 -n 0 -i "$data/kjv/kjv_train_*.bin" -j "$data/kjv/kjv_val_*.bin"
      --tokenizer "$data/gpt2/gpt2_tokenizer.bin")
export OMP_NUM_THREADS=2 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun --oversubscribe -np 2)

compare() {   # compare NAME: out_base/NAME against out/NAME
    local a="$tmp/out_base/$1" b="$tmp/out/$1"
    grep -E '^s:[0-9]+ t[re]l:' "$a/main.log" > "$tmp/$1.base.loss"
    grep -E '^s:[0-9]+ t[re]l:' "$b/main.log" > "$tmp/$1.loss"
    [ "$(grep -c trl "$tmp/$1.loss")" -eq 20 ] || fail "$1: expected 20 train-loss lines, got $(grep -c trl "$tmp/$1.loss")"
    diff "$tmp/$1.base.loss" "$tmp/$1.loss" > /dev/null || { diff "$tmp/$1.base.loss" "$tmp/$1.loss" | head; fail "$1: losses differ"; }
    cmp "$a/model_final.bin" "$b/model_final.bin" || fail "$1: model_final.bin differs"
    echo "$1: 20 losses and model_final.bin ($(stat -c %s "$b/model_final.bin") bytes) identical to $BASE"
}
run_both() {   # run_both NAME LAUNCHER... -- TRAINER ARGS...
    local name=$1; shift
    for side in base here; do
        local bin=$PWD/train_gpt2 out=$tmp/out/$name
        [ $side = base ] && bin=$tmp/base/train_gpt2 out=$tmp/out_base/$name
        (cd "$tmp" && "$@" "$bin" "${args[@]}" -o "$out" "${extra[@]}") > "$tmp/$name.$side.log" 2>&1 \
            || { tail -n 20 "$tmp/$name.$side.log"; fail "$name: the $side trainer failed"; }
    done
    compare "$name"
}
extra=(); run_both unsharded env
extra=(-z 3); run_both zero3_2ranks "${mpi[@]}"
echo "PASS test_layout_bits"
