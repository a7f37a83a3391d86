#!/usr/bin/env bash
# --gpu-mem SIZE with --dry-run: every rank's device total (model states, buffers,
# activations; on the CPU trainer, whose device is host memory, the process's predicted peak:
# the host tier and the runtime too) against the budget. A budget of exactly the largest total fits, one byte
# less does not (exit status 2); the verdicts are printed per group of ranks and written
# per rank to zero_report.json. Sizes parse as documented (80G = 80 x 2^30, 80GB =
# 80 x 10^9, fractions); malformed ones are refused naming the value. Both ZeRO trainers
# (train_gpt2_zero when it was built: its dry run needs no GPU).
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
echo "PASS test_zero_dry_run_budget"
