#!/usr/bin/env bash
# ZeRO-Infinity under a real memory limit (dev/tools/memcap.sh: a memory cgroup of its own):
# a model whose states (fp32 parameters, gradients, AdamW m and v: 16 bytes a parameter)
# are more than 3x the cap trains 2 steps with parameters and optimizer on NVMe, and gives
# the bits of the same model trained without the cap and without offload; the same model
# without offload under the cap is killed by the kernel's OOM killer. The dry run answers
# both before anything runs (--gpu-mem CAP: fits, does not fit). The cgroups are gone after.
# Where no memory cgroup can be made (not root, no controller) the test is skipped, saying why.
set -u
cd "$(dirname "$0")/../../.."
fail() { echo "FAIL test_scale_cap: $*"; exit 1; }
source dev/tools/memcap.sh
if ! memcap_check; then echo "SKIP test_scale_cap: $MEMCAP_WHY"; exit 77; fi
tmp=$(mktemp -d)
trap 'memcap_cleanup; rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
cap=320M model=d10c640
capb=$(memcap_bytes $cap)
args=(-e $model -b 1 -t 64 -x 2 -v 0 -s 0 -n 0 --threads 1 --act-checkpoint 1 --tile-linear 2 --tile-vocab 32)
nvme=(-z 3 --offload-param nvme --offload-optimizer nvme --nvme-path "$tmp/swap")
mkdir -p "$tmp/swap"

# the dry run's answers first
./train_gpt2 "${args[@]}" "${nvme[@]}" --dry-run --gpu-mem "${capb}B" -o "$tmp/dry_nvme" > "$tmp/dry_nvme.txt" 2>&1 \
    || { tail "$tmp/dry_nvme.txt"; fail "the dry run says $model with NVMe offload does not fit $cap"; }
./train_gpt2 "${args[@]}" --dry-run --gpu-mem "${capb}B" -o "$tmp/dry_mem" > "$tmp/dry_mem.txt" 2>&1
rc=$?
[ $rc -eq 2 ] || { tail "$tmp/dry_mem.txt"; fail "the dry run of $model unsharded under $cap: exit $rc, want 2 (does not fit)"; }
read -r params predicted <<< "$(python3 -c 'import json, sys
r = json.load(open(sys.argv[1])); d = r["ranks"][0]["device"]
print(d["parameters"] // 4, r["process_peak_bytes"])' "$tmp/dry_mem/memory_report.json")"
[ $((params * 16)) -ge $((3 * capb)) ] || fail "$model's states ($((params * 16)) bytes) are not 3x the cap ($capb)"
echo "$model: $params parameters, states $((params * 16)) bytes = $(awk -v s=$((params * 16)) -v c=$capb 'BEGIN { printf "%.1f", s / c }')x the $cap cap; dry run: NVMe fits, unsharded ($predicted bytes) does not"

# the reference: unsharded, in memory, no cap
./train_gpt2 "${args[@]}" -o "$tmp/ref" > "$tmp/ref.txt" 2>&1 || { tail "$tmp/ref.txt"; fail "the reference run failed"; }

# stage 3, parameters and optimizer on NVMe, under the cap
memcap_run $cap "$tmp/nvme_mem.txt" ./train_gpt2 "${args[@]}" "${nvme[@]}" -o "$tmp/nvme" > "$tmp/nvme.txt" 2>&1 \
    || { tail "$tmp/nvme.txt"; cat "$tmp/nvme_mem.txt"; fail "NVMe offload under $cap failed"; }
grep -q '^status=ok' "$tmp/nvme_mem.txt" || fail "NVMe offload under $cap: $(cat "$tmp/nvme_mem.txt")"
cmp -s "$tmp/ref/model_final.bin" "$tmp/nvme/model_final.bin" \
    || fail "the capped NVMe run's model differs from the uncapped run without offload"
diff <(grep trl "$tmp/ref/main.log") <(grep trl "$tmp/nvme/main.log") > /dev/null || fail "the losses differ"
peak=$(sed -n 's/^peak_bytes=//p' "$tmp/nvme_mem.txt")
echo "NVMe offload under $cap: 2 steps and the model file, peak $peak bytes (the cgroup's counter), the same bits as without cap and offload"

# the same model without offload, under the same cap: the OOM killer ends it
memcap_run $cap "$tmp/mem_mem.txt" ./train_gpt2 "${args[@]}" -o "$tmp/mem" > "$tmp/mem.txt" 2>&1
rc=$?
grep -q '^status=killed' "$tmp/mem_mem.txt" || { tail -3 "$tmp/mem.txt"; cat "$tmp/mem_mem.txt"; fail "unsharded under $cap: exit $rc, not killed"; }
[ -f "$tmp/mem/model_final.bin" ] && fail "unsharded under $cap: killed, yet it wrote a model file"
echo "unsharded under $cap: killed by the OOM killer (exit $rc), as the dry run said"

# nothing left behind: no cgroup of this test, no swap file
[ -z "$(ls -d "$MEMCAP_PARENT"/memcap_$$_* 2> /dev/null)" ] || fail "cgroups left: $(ls -d "$MEMCAP_PARENT"/memcap_$$_*)"
[ -z "$(ls -A "$tmp/swap")" ] || fail "swap files left: $(ls "$tmp/swap")"
echo "PASS test_scale_cap"
