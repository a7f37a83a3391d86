#!/usr/bin/env bash
# bench_infinity.sh: ZeRO-Infinity's headline on this machine. One rank of the CPU trainer
# trains a GPT-2-shaped model whose model states (fp32 parameters, gradients, master
# weights and AdamW m and v: 20 bytes per parameter) are larger than the machine's memory,
# with parameters and optimizer states in an NVMe swap file (stage 3, --offload-param nvme
# --offload-optimizer nvme). Prints parameters, model-state bytes, the process's peak
# resident memory, seconds per step, the swap file's GB/s against a plain sequential
# O_DIRECT dd of the same disk, and the losses.
#
#   dev/bench/bench_infinity.sh [-e MODEL] [-x STEPS] [-p SWAP_DIR] [-o OUT]
#                               [--mem BYTES] [--min-ratio R] [--rss-cap BYTES] [--dd-mib N]
#   -e MODEL       descriptor (default d32c2560h20t64: 2.65e9 parameters, 53 GB of states)
#   -x STEPS       optimizer steps (default 3)
#   -p DIR         where the swap file goes (default /tmp/zero_infinity; needs the states'
#                  size free, plus the model file written at the end)
#   -o DIR         the run's output folder (default /tmp/zero_infinity_out)
#   --mem B        the memory to beat (default the machine's, from /proc/meminfo; a test
#                  sets a smaller cap)
#   --min-ratio R  fail unless model states >= R x that memory (default 2)
#   --rss-cap B    fail unless the peak resident memory < B bytes (default half that memory)
#   --dd-mib N     size of the dd baseline's file (default 4096)
# Exit status 0 when the run trained and both conditions hold.
set -u
cd "$(dirname "$0")/../.."
model=d32c2560h20t64 steps=3 swap=/tmp/zero_infinity out=/tmp/zero_infinity_out
ratio=2 cap= dd_mib=4096 mem=
while [ $# -gt 0 ]; do
    case "$1" in
        -e) model=$2; shift 2 ;;
        -x) steps=$2; shift 2 ;;
        -p) swap=$2; shift 2 ;;
        -o) out=$2; shift 2 ;;
        --mem) mem=$2; shift 2 ;;
        --min-ratio) ratio=$2; shift 2 ;;
        --rss-cap) cap=$2; shift 2 ;;
        --dd-mib) dd_mib=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench_infinity: unknown argument '$1' (see -h)" >&2; exit 2 ;;
    esac
done
die() { echo "bench_infinity: $*" >&2; exit 1; }
[ -n "$mem" ] || mem=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) * 1024 ))   # shell arithmetic: 64-bit
[ -n "$cap" ] || cap=$((mem / 2))
[ -x ./train_gpt2 ] || make -s train_gpt2 > /dev/null || die "building train_gpt2 failed"
mkdir -p "$swap" "$out" || die "cannot create $swap or $out"

# the model's size, from the trainer's own dry run (nothing allocated)
params=$(./train_gpt2 -e "$model" -z 3 --dry-run --world 1 -o "$out/dry" 2>&1 \
         | grep -m1 -oE '[0-9,]+ parameters' | tr -dc '0-9')
[ -n "$params" ] || die "the dry run of $model printed no parameter count"
states=$((params * 20))
free=$(df -B1 --output=avail "$swap" | tail -1)
need=$((states + params * 4 + dd_mib * 1048576))
[ "$free" -gt "$need" ] || die "$swap has $free bytes free; the swap file, the model file and dd's file need $need"

# the disk's plain sequential figures: O_DIRECT, 1 MiB requests, one at a time
ddf="$swap/dd_baseline.bin"
rate() { grep -oE '[0-9]+ bytes .* copied, [0-9.]+ s' | awk '{print $1 / $(NF-1)}'; }
wr=$(dd if=/dev/zero of="$ddf" bs=1M count="$dd_mib" oflag=direct conv=fsync 2>&1 | rate)
rd=$(dd if="$ddf" of=/dev/null bs=1M iflag=direct 2>&1 | rate)
rm -f "$ddf"
[ -n "$wr" ] && [ -n "$rd" ] || die "dd baseline failed on $swap (O_DIRECT not supported?)"

echo "bench_infinity: $model, $params parameters, $states bytes of model states; machine memory $mem bytes"
log="$out/bench.txt"
rm -rf "$out/run"
/usr/bin/time -f 'peak_rss_kib %M' -o "$out/time.txt" \
    ./train_gpt2 -e "$model" -b 1 -t 64 -x "$steps" -v 0 -s 0 -z 3 \
        --offload-param nvme --offload-optimizer nvme --nvme-path "$swap" -o "$out/run" > "$log" 2>&1 \
    || { tail -20 "$log"; die "the training run failed (log: $log)"; }
grep -E "^zero:|^step" "$log"
[ -z "$(ls -A "$swap")" ] || die "the swap file was left behind in $swap: $(ls "$swap")"
rss=$(( $(awk '/peak_rss_kib/ {print $2}' "$out/time.txt") * 1024 ))

python3 - "$out/run/zero_report.json" "$log" "$params" "$states" "$mem" "$rss" "$cap" "$ratio" "$rd" "$wr" << 'EOF'
import json, math, re, sys
rep, log = sys.argv[1], sys.argv[2]
params, states, mem, rss, cap = (int(x) for x in sys.argv[3:8])
ratio, rd, wr = (float(x) for x in sys.argv[8:11])
r = json.load(open(rep))["ranks"][0]
nv = r["nvme_per_step"]
steps = [(int(m.group(1)), float(m.group(2)), float(m.group(3)))
         for m in re.finditer(r"step\s+(\d+)/\d+ \| loss ([0-9.na-z]+) \|.*?\| ([0-9.]+) ms", open(log).read())]
tiers = {t: sum(r[t][k] for k in ("parameters", "gradients", "optimizer_states")) for t in ("device", "host", "nvme")}
R, W, busy = nv["read_bytes"], nv["written_bytes"], nv["busy_seconds"]
got = (R + W) / busy if busy > 0 else 0.0
plain = (R + W) / (R / rd + W / wr)   # dd's read and write rates, weighted by this mix
G = 1e9
print(f"parameters               {params:,}")
print(f"model states             {states:,} B ({states / G:.1f} GB = {states / mem:.2f} x the {mem / G:.1f} GB of memory to beat)")
print(f"  where they live        device (RAM on the CPU backend) {tiers['device'] / G:.2f} GB, host {tiers['host'] / G:.2f} GB, NVMe {tiers['nvme'] / G:.2f} GB")
print(f"peak resident memory     {rss / G:.2f} GB ({rss / mem:.0%} of that memory; cap {cap / G:.2f} GB)")
for s, loss, ms in steps:
    print(f"step {s}                   loss {loss:.6f}  {ms / 1000:.1f} s")
if steps:   # after the first, which also pays the start-up (the first reads, allocations)
    later = steps[1:] or steps
    print(f"seconds per step         {sum(ms for _, _, ms in later) / len(later) / 1000:.1f} (mean of the {len(later)} "
          f"after the first)" if len(steps) > 1 else f"seconds per step         {steps[0][2] / 1000:.1f} (one step)")
print(f"NVMe per step            read {R / G:.2f} GB, written {W / G:.2f} GB, requests in flight {busy:.1f} s")
print(f"NVMe achieved            {got / G:.3f} GB/s while busy")
print(f"dd sequential O_DIRECT   read {rd / G:.3f} GB/s, write {wr / G:.3f} GB/s; for this mix {plain / G:.3f} GB/s")
print(f"achieved / plain         {got / plain:.0%}")
ok = True
if states < ratio * mem:
    print(f"FAIL: model states are {states / mem:.2f} x memory, below the {ratio} asked"); ok = False
if rss >= cap:
    print(f"FAIL: peak resident memory {rss:,} B is not under the cap {cap:,} B"); ok = False
if not steps or not all(math.isfinite(l) for _, l, _ in steps):
    print("FAIL: not every loss is finite"); ok = False
sys.exit(0 if ok else 1)
EOF
