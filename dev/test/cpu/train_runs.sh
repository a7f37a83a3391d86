# train_runs.sh: sourced by the CPU trainer's shell tests. Needs tmp (a folder), args (the
# trainer flags every run shares) and fail (prints and exits); mpirun_args (optional) goes
# to mpirun, e.g. (-x ZERO_HOST_JITTER).
losses() { grep trl "$1/main.log" | cut -d' ' -f1-2; }
run() {   # run NAME NP|0 FLAGS...: NP 0 = unsharded, else mpirun -np NP ... -z 3
    local name=$1 np=$2
    shift 2
    if [ "$np" = 0 ]; then
        ./train_gpt2 "${args[@]}" "$@" -o "$tmp/$name" > "$tmp/$name.txt" 2>&1 || { tail "$tmp/$name.txt"; fail "$name failed"; }
    else
        mpirun -np "$np" ${mpirun_args[@]+"${mpirun_args[@]}"} ./train_gpt2 "${args[@]}" -z 3 "$@" -o "$tmp/$name" \
            > "$tmp/$name.txt" 2>&1 || { tail "$tmp/$name.txt"; fail "$name failed"; }
        ! grep -q "not in the order recorded" "$tmp/$name.txt" || fail "$name: fetches left the recorded order"
    fi
    [ -s "$tmp/$name/model_final.bin" ] || fail "no model_final.bin from $name"
}
same() {   # same A B: bit-identical losses and final parameters
    cmp -s "$tmp/$1/model_final.bin" "$tmp/$2/model_final.bin" || fail "$2: parameters differ from $1"
    diff <(losses "$tmp/$1") <(losses "$tmp/$2") > /dev/null || fail "$2: losses differ from $1"
    echo "$2 == $1: losses and parameters bit-identical"
}
close() {   # close A B: same step-1 loss, final parameters within 1e-5 relative L2, losses within 1e-5
    [ "$(losses "$tmp/$1" | head -n 1)" = "$(losses "$tmp/$2" | head -n 1)" ] || fail "$2: step-1 loss differs from $1"
    ./build/model_diff "$tmp/$1/model_final.bin" "$tmp/$2/model_final.bin" 1e-5 > "$tmp/diff.txt" \
        || { cat "$tmp/diff.txt"; fail "$2: parameters differ from $1 beyond 1e-5"; }
    paste <(losses "$tmp/$1") <(losses "$tmp/$2") | awk -v what="$2 vs $1" '
        { split($2, a, ":"); split($4, b, ":"); d = a[2] - b[2]; if (d < 0) d = -d; if (d > m) m = d }
        END { printf "%s: step-1 loss identical, max loss difference %.2e, parameters %s\n", what, m, p; exit !(m < 1e-5) }' \
        p="$(tail -n 2 "$tmp/diff.txt" | head -n 1 | sed "s/.*; //")" || fail "$2: losses differ from $1 by 1e-5 or more"
}
