#!/usr/bin/env bash
# The CPU trainer, unsharded and with zero/'s host backend at one rank (-z 1), runs its
# AdamW through llmc/numerics/adamw_cpu.h: forcing each SIMD path this CPU has (ADAMW_CPU_PATH)
# gives the same losses and bit-identical parameters as the plain C path, and a path the
# CPU lacks or an unknown name stops the run with a message. Each run names the kernel it
# took, so the runs compared are the paths named.
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_adamw_cpu_paths: $*"; exit 1; }
args=(-e d2c64h2t64 -b 2 -t 32 -d 512 -x 8 -v 4 -m 4 -s 0 --threads 2)
losses() { grep trl "$1/main.log" | cut -d' ' -f1-2; }
has() { grep -qw "$1" /proc/cpuinfo; }
paths=(plain)
has avx2 && paths+=(avx2)
has avx512f && paths+=(avx512)

for route in unsharded z1; do
    extra=(); [ "$route" = z1 ] && extra=(-z 1)
    for p in "${paths[@]}"; do
        out="$tmp/$route-$p"
        ADAMW_CPU_PATH=$p ./train_gpt2 "${args[@]}" "${extra[@]}" -o "$out" > "$out.txt" 2>&1 \
            || { tail "$out.txt"; fail "$route run with ADAMW_CPU_PATH=$p failed"; }
        [ -s "$out/model_final.bin" ] || fail "no model_final.bin from $route, $p"
        grep -q "AdamW kernel $p\$" "$out.txt" || { grep "AdamW kernel" "$out.txt"; fail "$route run with ADAMW_CPU_PATH=$p ran another kernel"; }
        [ "$p" = plain ] && continue
        cmp -s "$tmp/$route-plain/model_final.bin" "$out/model_final.bin" \
            || fail "$route: parameters with path $p differ from the plain path"
        diff <(losses "$tmp/$route-plain") <(losses "$out") > /dev/null \
            || fail "$route: losses with path $p differ from the plain path"
    done
    echo "$route: paths ${paths[*]} give bit-identical parameters"
    bad=sse9
    has avx512f || bad=avx512
    ADAMW_CPU_PATH=$bad ./train_gpt2 "${args[@]}" "${extra[@]}" -o "$tmp/$route-bad" > "$tmp/$route-bad.txt" 2>&1 \
        && fail "$route: ADAMW_CPU_PATH=$bad was ignored (the run succeeded)"
    grep -q "ADAMW_CPU_PATH=$bad" "$tmp/$route-bad.txt" \
        || { tail -n 3 "$tmp/$route-bad.txt"; fail "$route: ADAMW_CPU_PATH=$bad failed without naming it"; }
done
echo "test_adamw_cpu_paths: ok"
