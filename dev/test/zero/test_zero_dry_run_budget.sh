#!/usr/bin/env bash
# --gpu-mem SIZE with --dry-run: every rank's device total (model states, buffers,
# activations; on the CPU trainer, whose device is host memory, the process's predicted peak:
# the host tier and the runtime too) against the budget. A budget of exactly the largest total fits, one byte
# less does not (exit status 2); the verdicts are printed per group of ranks and written
# per rank to zero_report.json. Sizes parse as documented (80G = 80 x 2^30, 80GB =
# 80 x 10^9, fractions); malformed ones are refused naming the value. Both ZeRO trainers
# (train_gpt2_zero when it was built: its dry run needs no GPU). --host-mem (train_gpt2_zero):
# the host side against it; with both budgets, the largest --offload-optimizer-ratio that fits.
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_zero_dry_run_budget: $*"; exit 1; }
world=4

# check TRAINER MODEL: the boundary, the verdict lines, the JSON fields
check() {
    local trainer=$1 model=$2 args=(-z 2 --dry-run --world $world -e "$2" -b 2 -t 64)
    "$trainer" "${args[@]}" -o "$tmp/none" > "$tmp/none.txt" 2>&1 || { cat "$tmp/none.txt"; fail "$trainer: dry run failed"; }
    grep -q "fit" "$tmp/none.txt" && fail "$trainer: a verdict without --gpu-mem"
    local total
    total=$(python3 -c 'import json,sys; r = json.load(open(sys.argv[1]))
print(int(r.get("process_peak_bytes") or max(int(e["device"]["total"]) for e in r["ranks"])))' \
        "$tmp/none/zero_report.json") || fail "$trainer: no device totals in the report"
    [ "$total" -gt 0 ] || fail "$trainer: device total $total"
    for budget in "$total" $((total - 1)); do
        "$trainer" "${args[@]}" --gpu-mem "$budget" -o "$tmp/b$budget" > "$tmp/b$budget.txt" 2>&1
        local rc=$?
        local want_rc=0 verdict="fits: all $world ranks fit" line="fits (0.00 GiB free)" fits=True headroom=$((budget - total))
        if [ "$budget" -lt "$total" ]; then
            want_rc=2 verdict="does not fit: $world of $world ranks" line="does not fit" fits=False
        fi
        [ $rc -eq $want_rc ] || { cat "$tmp/b$budget.txt"; fail "$trainer: --gpu-mem $budget (total $total): exit $rc, want $want_rc"; }
        grep -q "$verdict" "$tmp/b$budget.txt" || { cat "$tmp/b$budget.txt"; fail "$trainer: --gpu-mem $budget: no '$verdict'"; }
        grep -q "ranks 0-$((world - 1)) .*$line" "$tmp/b$budget.txt" || { cat "$tmp/b$budget.txt"; fail "$trainer: no per-rank '$line'"; }
        python3 - "$tmp/b$budget/zero_report.json" "$budget" "$fits" "$headroom" <<'EOF' || fail "$trainer: --gpu-mem $budget: report (above)"
import json, sys
r, budget, fits, headroom = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3] == "True", int(sys.argv[4])
ok = r["device_budget_bytes"] == budget and r["ranks_over_device_budget"] == (0 if fits else len(r["ranks"]))
for e in r["ranks"]:
    b = e["device_budget"]
    # the CPU trainer counts the process: both tiers and the runtime; a GPU its device
    counted = e["device"]["total"] + (e["host"]["total"] + r["runtime_bytes"] if "runtime_bytes" in r else 0)
    ok = ok and b["fits"] == fits and b["headroom_bytes"] == budget - counted and b["counted_bytes"] == counted
ok = ok and any(e["device_budget"]["headroom_bytes"] == headroom for e in r["ranks"])
if not ok: print(json.dumps({k: r[k] for k in r if "budget" in k}), json.dumps(r["ranks"][0]["device_budget"]))
sys.exit(0 if ok else 1)
EOF
    done
    echo "$trainer -e $model: largest rank $total bytes: fits in $total, not in $((total - 1))"
}
check ./train_gpt2 d2c64h2t64
[ -x ./train_gpt2_zero ] && check ./train_gpt2_zero d2c64h2t64

# sizes: documented units
dry=(./train_gpt2 -z 1 --dry-run --world 2 -e d2c64h2t64 -b 1 -t 64)
for spec in 80G=85899345920 80GiB=85899345920 80g=85899345920 80GB=80000000000 1.5GiB=1610612736 2K=2048 \
            3MB=3000000 1T=1099511627776 4096=4096 7B=7; do
    size=${spec%%=*} want=${spec#*=}
    "${dry[@]}" --gpu-mem "$size" -o "$tmp/s" > "$tmp/s.txt" 2>&1
    rc=$?
    [ $rc -eq 0 ] || [ $rc -eq 2 ] || { cat "$tmp/s.txt"; fail "--gpu-mem $size: exit $rc"; }
    got=$(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["device_budget_bytes"]))' "$tmp/s/zero_report.json")
    [ "$got" = "$want" ] || fail "--gpu-mem $size read as $got bytes, want $want"
done
# malformed sizes are refused, naming the flag and the value
for bad in 80X abc -1G 0 0.0001 1e9 "" G "80 G" inf nan 0x10 80GG 2000000T; do
    if "${dry[@]}" --gpu-mem "$bad" -o "$tmp/bad" > "$tmp/bad.txt" 2>&1; then fail "--gpu-mem '$bad' accepted"; fi
    grep -q -- "--gpu-mem expects .*got '$bad'" "$tmp/bad.txt" || { cat "$tmp/bad.txt"; fail "--gpu-mem '$bad': no message naming it"; }
done
if ./train_gpt2 -z 1 --gpu-mem 80G -o "$tmp/nodry" -x 1 > "$tmp/nodry.txt" 2>&1; then fail "--gpu-mem without --dry-run accepted"; fi
grep -q -- "--gpu-mem checks a prediction: give --dry-run" "$tmp/nodry.txt" || { cat "$tmp/nodry.txt"; fail "--gpu-mem without --dry-run: no message"; }
# --host-mem (train_gpt2_zero): each rank's host side (offload's host tier, pinned buffers,
# host activations) against it, at the same boundary; with --gpu-mem too and the optimizer in
# host memory, the largest --offload-optimizer-ratio that fits both, which then fits
if [ -x ./train_gpt2_zero ]; then
    z=(./train_gpt2_zero -z 2 --dry-run --world 2 -e d4c256h4t64 -b 2 -t 64 --offload-optimizer cpu)
    "${z[@]}" -o "$tmp/h" > "$tmp/h.txt" 2>&1 || { cat "$tmp/h.txt"; fail "train_gpt2_zero --offload-optimizer cpu: dry run failed"; }
    read -r dev host < <(python3 -c 'import json,sys; r = json.load(open(sys.argv[1]))["ranks"]
print(max(e["device"]["total"] for e in r), max(e["host"]["total"] for e in r))' "$tmp/h/zero_report.json")
    for budget in "$host" $((host - 1)); do
        "${z[@]}" --host-mem "$budget" -o "$tmp/h$budget" > "$tmp/h$budget.txt" 2>&1
        rc=$? want=0; [ "$budget" -lt "$host" ] && want=2
        [ $rc -eq $want ] || { cat "$tmp/h$budget.txt"; fail "--host-mem $budget (host total $host): exit $rc, want $want"; }
        python3 - "$tmp/h$budget/zero_report.json" "$budget" $((want == 0)) <<'EOF' || fail "--host-mem $budget: report (above)"
import json, sys
r, budget, fits = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3] == "1"
ok = r["host_budget_bytes"] == budget and r["ranks_over_host_budget"] == (0 if fits else len(r["ranks"]))
ok = ok and all(e["host_budget"]["counted_bytes"] == e["host"]["total"] and
                e["host_budget"]["headroom_bytes"] == budget - e["host"]["total"] for e in r["ranks"])
if not ok: print(json.dumps({k: r[k] for k in r if "budget" in k}), json.dumps(r["ranks"][0]["host_budget"]))
sys.exit(0 if ok else 1)
EOF
    done
    grep -q "^host budget .* per rank" "$tmp/h$host.txt" || fail "--host-mem: no host budget table"
    # about two thirds of the host side: a ratio below 1 fits, the device taking the rest
    half=$((host * 2 / 3)) gpu=$((dev * 4))
    "${z[@]}" --host-mem "$half" --gpu-mem "$gpu" -o "$tmp/r" > "$tmp/r.txt" 2>&1
    ratio=$(sed -n 's/^a partial optimizer offload fits both: --offload-optimizer-ratio \([0-9.]*\) .*/\1/p' "$tmp/r.txt")
    [ -n "$ratio" ] || { cat "$tmp/r.txt"; fail "--host-mem over, --gpu-mem ample: no ratio suggested"; }
    "${z[@]}" --host-mem "$half" --gpu-mem "$gpu" --offload-optimizer-ratio "$ratio" -o "$tmp/r2" > "$tmp/r2.txt" 2>&1 \
        || { cat "$tmp/r2.txt"; fail "the suggested --offload-optimizer-ratio $ratio does not fit"; }
    up=$(python3 -c "print(round($ratio + 0.05, 2))")
    if "${z[@]}" --host-mem "$half" --gpu-mem "$gpu" --offload-optimizer-ratio "$up" -o "$tmp/r3" > "$tmp/r3.txt" 2>&1 \
       && [ "$up" != 1.0 ]; then fail "ratio $up fits too: $ratio is not the largest"; fi
    # a device too small for any ratio
    "${z[@]}" --host-mem "$half" --gpu-mem $((dev / 2)) -o "$tmp/r4" > "$tmp/r4.txt" 2>&1
    grep -q "^no optimizer ratio fits both" "$tmp/r4.txt" || { cat "$tmp/r4.txt"; fail "no 'no optimizer ratio fits both'"; }
    if ./train_gpt2 -z 1 --dry-run --host-mem 80G -o "$tmp/cpuhost" > "$tmp/cpuhost.txt" 2>&1; then
        fail "the CPU trainer accepted --host-mem (its --gpu-mem counts the host)"; fi
    grep -q -- "--host-mem is for train_gpt2_zero" "$tmp/cpuhost.txt" || { cat "$tmp/cpuhost.txt"; fail "--host-mem on the CPU trainer: no message"; }
    echo "train_gpt2_zero --host-mem: host total $host bytes fits in $host, not in $((host - 1)); with a third less, ratio $ratio fits both"
fi
echo "PASS test_zero_dry_run_budget"
