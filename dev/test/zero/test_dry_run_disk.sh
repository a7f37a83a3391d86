#!/usr/bin/env bash
# The dry run's swap files against the free disk under --nvme-path: the plugin's (stage 3's
# parameters and optimizer on NVMe) and the CPU model's activation swap file
# (--act-offload nvme), per machine (every rank of the dry run's --world on this one), on
# the sharded and the unsharded trainer. Each need is checked against its formula: the
# plugin's from the report's per-rank NVMe bytes, the activation file's as L-1 slots of
# B x T x C floats (each rounded up to 4 KiB for O_DIRECT). A need past the free space exits
# 2 saying "does not fit"; a small one "fits" and exits 0. The dry run's report leaves the
# times it does not predict null.
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_dry_run_disk: $*"; exit 1; }
nv=$tmp/nvme
mkdir "$nv"
free=$(python3 -c 'import os, sys; s = os.statvfs(sys.argv[1]); print(s.f_bavail * s.f_frsize)' "$nv")

# act_file L C B T: the activation swap file's bytes
act_file() { python3 -c 'import sys; L, C, B, T = map(int, sys.argv[1:]); print((L - 1) * ((B * T * C * 4 + 4095) // 4096 * 4096))' "$@"; }
# expect NAME RC NEED_BYTES WHAT CMD...: exit RC, and the line naming WHAT with NEED_BYTES in GiB
expect() {
    local name=$1 want=$2 need=$3 what=$4
    shift 4
    "$@" --dry-run -o "$tmp/$name" > "$tmp/$name.txt" 2>&1
    local rc=$? gib verdict
    gib=$(python3 -c "print('%.2f' % ($need / 2**30))")
    verdict=$([ "$want" = 0 ] && echo fits || echo "does not fit")
    [ $rc -eq "$want" ] || { tail -n 5 "$tmp/$name.txt"; fail "$name: exit $rc, want $want"; }
    grep -q "^$what$gib GiB under $nv, which has [0-9.]* GiB free: $verdict$" "$tmp/$name.txt" \
        || { grep -E "GiB|disk|NVMe" "$tmp/$name.txt"; fail "$name: no line '$what$gib GiB ... $verdict'"; }
    echo "$name: $gib GiB, $verdict (exit $rc)"
}

small=(-e d4c64h2t64 -b 4096 -t 64 --act-checkpoint 1 --act-offload nvme --nvme-path "$nv")
# B large enough that 3 slots of B x 64 x 768 floats outgrow the disk: a prediction only
huge_b=$(python3 -c "print($free // (3 * 64 * 768 * 4) + 64)")
big=(-e d4c768h12t64 -b "$huge_b" -t 64 --act-checkpoint 1 --act-offload nvme --nvme-path "$nv")

expect unsharded_fits 0 "$(act_file 4 64 4096 64)" "disk: the activation swap file, " ./train_gpt2 "${small[@]}"
expect unsharded_over 2 "$(act_file 4 768 "$huge_b" 64)" "disk: the activation swap file, " ./train_gpt2 "${big[@]}"
# ZeRO without NVMe of its own: the model's files of every rank of the machine
expect z1_act_fits 0 $((4 * $(act_file 4 64 4096 64))) "disk: the swap files of 4 rank(s) a machine, " ./train_gpt2 -z 1 --world 4 "${small[@]}"
expect z1_act_over 2 $((4 * $(act_file 4 768 "$huge_b" 64))) "disk: the swap files of 4 rank(s) a machine, " \
    ./train_gpt2 -z 1 --world 4 "${big[@]}"

# stage 3 on NVMe, with and without the activation file: the report's NVMe bytes per rank
for act in 0 1; do
    a=(-e d4c64h2t64 -b 2 -t 64 -z 3 --world 4 --offload-param nvme --offload-optimizer nvme --nvme-path "$nv")
    [ $act = 1 ] && a+=(-b 4096 --act-checkpoint 1 --act-offload nvme)
    ./train_gpt2 "${a[@]}" --dry-run -o "$tmp/z3_$act" > "$tmp/z3_$act.txt" 2>&1 || { tail "$tmp/z3_$act.txt"; fail "z3 nvme dry run failed"; }
    need=$(python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print(4 * max(sum(e["nvme"].values()) - e["nvme"].get("total", 0) for e in r["ranks"]) + 4 * int(sys.argv[2]))' \
        "$tmp/z3_$act/zero_report.json" "$([ $act = 1 ] && act_file 4 64 4096 64 || echo 0)") \
        || fail "z3 nvme: no per-rank NVMe bytes in the report"
    expect "z3_nvme_act$act" 0 "$need" "disk: the swap files of 4 rank(s) a machine, " ./train_gpt2 "${a[@]}"
    # what the dry run does not predict is null, not 0: the time a step and the swap file take
    python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))["ranks"]
assert all(e["nvme_per_step"]["busy_seconds"] is None and e["seconds_per_step"] is None for e in r), r[0]' \
        "$tmp/z3_$act/zero_report.json" || fail "z3 nvme: the dry run's report gives times it did not predict"
done
echo "PASS test_dry_run_disk"
