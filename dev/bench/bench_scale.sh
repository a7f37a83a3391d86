#!/usr/bin/env bash
# bench_scale.sh: ZeRO-Infinity's scale claim under a real memory limit. For each memory cap
# it finds the largest GPT-2-shaped model that the CPU trainer trains for a few steps and
# writes its model file without being killed, in each configuration:
#   unsharded  ./train_gpt2 (fp32 params, grads, AdamW m and v in memory)
#   z3         ZeRO stage 3 at one rank, everything in memory
#   z3cpu      stage 3 with parameters and optimizer states in host memory (ZeRO-Offload's
#              tier: on the CPU trainer that is the same RAM, so the cap counts it too)
#   z3nvme     stage 3 with parameters and optimizer states in an NVMe swap file (ZeRO-Infinity)
# Every run: one rank, B=1, T=64, activation checkpointing; stage 3 also tiles the linears
# and the vocabulary so that no unit holds more than 2^20 elements (--tile-linear,
# --tile-vocab), and z3nvme keeps the checkpointed block inputs on NVMe too (--act-offload
# nvme: they grow with depth). Models step through GPT-2's family (d12c768, d24c1024,
# d36c1280, d48c1600) and on the same pattern (12 more layers and 5 more heads of 64 a
# step: d60c1920, d72c2240, ...), with two smaller ones below (d3c192, d6c384) so that the
# in-memory configurations have a largest model too, each with a context of 64 positions,
# the length trained (t64: wpe holds 64 rows, not 1024); once the next family model needs
# more disk than --nvme-path has free, models between the two (4 layers a step, the width
# in proportion) find the largest the disk allows.
#
# Per run: the parameters, the cgroup's peak charge (dev/tools/memcap.sh: the kernel's own
# counter, page cache and kernel memory included) and the process's peak resident set, the
# dry run's prediction of that peak and its answer to "does it fit" (--gpu-mem CAP, with
# the NVMe bytes against the free disk), ms per step, where the step's time went (the
# model, the plugin's waits, the optimizer step; zero_report.json), the NVMe bytes read and
# written per step against the formula's minimum and the dry run's prediction, and the step
# time against the disk (the bytes over the bandwidths dd measures in --nvme-path) and
# against the compute.
#
#   dev/bench/bench_scale.sh [--caps 512M[,1G...]] [--configs unsharded,z3,z3nvme] [--nvme-path DIR]
#                            [-o OUT] [--steps N] [--models d12c768,...] [--dd-mib N] [--render]
#   --caps       memory caps, comma-separated (default 512M). Across caps a configuration's
#                answer is monotonic: a model that trained under a cap trains under a larger
#                one, and one killed under a cap is killed under a smaller one; the runs that
#                settle are skipped and the table says so ("inferred from").
#   --configs    which of unsharded, z3, z3cpu, z3nvme (default unsharded,z3,z3nvme)
#   --nvme-path  where the swap files go (default OUT/swap); its free space bounds z3nvme
#   -o OUT       results: OUT/runs.jsonl (a record per run), OUT/scale.md (the table),
#                OUT/scale.png (parameters trained against the cap), each run's log (default
#                out/bench_scale)
#   --steps N    optimizer steps per run (default 2)
#   --models L   these descriptors (dLcCt64) instead of the family (each run in order until one fails)
#   --dd-mib N   size of dd's file for the disk's bandwidth (default 2048)
#   --render     only redraw the table and plot from OUT/runs.jsonl
# Needs root (cgroups): refuses with a message otherwise, and removes every cgroup it made.
set -u
cd "$(dirname "$0")/../.."
caps=512M configs=unsharded,z3,z3nvme out=out/bench_scale nvme="" steps=2 models="" dd_mib=2048 render=0
while [ $# -gt 0 ]; do
    case "$1" in
        --caps) caps=$2; shift 2 ;;
        --configs) configs=$2; shift 2 ;;
        --nvme-path) nvme=$2; shift 2 ;;
        -o) out=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --models) models=$2; shift 2 ;;
        --dd-mib) dd_mib=$2; shift 2 ;;
        --render) render=1; shift ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench_scale: unknown argument '$1' (see -h)" >&2; exit 2 ;;
    esac
done
die() { echo "bench_scale: $*" >&2; exit 1; }
mkdir -p "$out" || die "cannot create $out"
[ -n "$nvme" ] || nvme="$out/swap"
# Debian's python3 has numpy and matplotlib (scripts/install_deps.sh)
py=/usr/bin/python3
[ -x "$py" ] || py=python3
render() { $py dev/bench/bench_scale.py report "$out"; }
if [ "$render" = 1 ]; then render; exit $?; fi
for m in ${models//,/ }; do $py dev/bench/bench_scale.py tiles "$m" > /dev/null || exit 2; done   # it says why
for c in ${configs//,/ }; do
    case "$c" in unsharded|z3|z3cpu|z3nvme) ;; *) die "unknown configuration '$c' (unsharded, z3, z3cpu, z3nvme)" ;; esac
done
source dev/tools/memcap.sh
memcap_check || die "$MEMCAP_WHY"
trap 'memcap_cleanup' EXIT
trap 'memcap_cleanup; exit 130' INT
trap 'memcap_cleanup; exit 143' TERM
[ -x ./train_gpt2 ] || make -s train_gpt2 > /dev/null || die "building train_gpt2 failed"
mkdir -p "$nvme" || die "cannot create $nvme"

# The disk's own sequential bandwidth in the swap folder: O_DIRECT, 4 MiB requests, one at a time.
ddf="$nvme/dd_bandwidth.bin"
rate() { grep -oE '[0-9]+ bytes .* copied, [0-9.]+ s' | awk '{ print $1 / $(NF-1) }'; }
disk_wr=$(dd if=/dev/zero of="$ddf" bs=4M count=$((dd_mib / 4)) oflag=direct conv=fsync 2>&1 | rate)
disk_rd=$(dd if="$ddf" of=/dev/null bs=4M iflag=direct 2>&1 | rate)
rm -f "$ddf"
[ -n "$disk_wr" ] && [ -n "$disk_rd" ] || die "dd could not measure $nvme (O_DIRECT refused?)"
printf 'bench_scale: the disk under %s: %.2f GB/s read, %.2f GB/s write (dd, O_DIRECT, 4 MiB)\n' "$nvme" \
    "$(awk -v r="$disk_rd" 'BEGIN { print r / 1e9 }')" "$(awk -v w="$disk_wr" 'BEGIN { print w / 1e9 }')"
mem_bw=$($py dev/bench/bench_scale.py membw)   # host memory copy bandwidth (bytes/s): z3cpu's limit

# flags MODEL CONFIG -> the trainer's flags (stage 3: tiles from the shape)
flags() {
    local model=$1 config=$2
    local f=(-e "$model" -b 1 -t 64 -x "$steps" -v 0 -s 0 -n 0 --act-checkpoint 1)
    if [ "$config" != unsharded ]; then
        f+=(-z 3 $($py dev/bench/bench_scale.py tiles "$model"))
        case "$config" in
            z3cpu) f+=(--offload-param cpu --offload-optimizer cpu) ;;
            z3nvme) f+=(--offload-param nvme --offload-optimizer nvme --act-offload nvme --nvme-path "$nvme") ;;
        esac
    fi
    printf '%s\n' "${f[@]}"
}

# settled CONFIG MODEL CAP: "recorded STATUS" when OUT/runs.jsonl has this run already (a
# sweep that was stopped goes on where it was), else "trained CAP0" or "killed CAP0" when an
# earlier run under another cap decides it
settled() {
    $py - "$runs" "$1" "$2" "$3" << 'EOF'
import json, sys
path, config, model, cap = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
runs = [json.loads(line) for line in open(path)]
mine = [r for r in runs if r["config"] == config and r["model"] == model]
done = [r for r in mine if r["cap_bytes"] == cap]
if done:
    print("recorded", done[-1]["status"])
    sys.exit(0)
for r in mine:
    if r.get("inferred_from"): continue
    if r["status"] == "trained" and r["cap_bytes"] <= cap: print("trained", r["cap_bytes"]); break
    if r["status"] == "killed" and r["cap_bytes"] >= cap: print("killed", r["cap_bytes"]); break
EOF
}

# run_one CONFIG MODEL CAP: 0 trained, 1 killed or failed, 3 more disk than there is
run_one() {
    local config=$1 m=$2 cap=$3 capb tag args dry_rc need free s
    capb=$(memcap_bytes "$cap")
    tag="${config}_${m}_${cap}"
    mapfile -t args < <(flags "$m" "$config")
    # the dry run first: its prediction, its answer for the cap, the bytes of its swap file
    ./train_gpt2 "${args[@]}" --dry-run --world 1 --gpu-mem "${capb}B" -o "$out/dry_$tag" > "$out/dry_$tag.txt" 2>&1
    dry_rc=$?
    s=$(settled "$config" "$m" "$capb")
    if [ "${s% *}" = recorded ]; then
        echo "bench_scale: $tag: ${s#* } (recorded earlier in $runs)"
        [ "${s#* }" = trained ]; return $?
    fi
    if [ "$config" = z3nvme ] && [ -z "$s" ]; then   # a run decided elsewhere needs no disk
        need=$($py dev/bench/bench_scale.py disk "$out/dry_$tag" "$m")
        free=$(df -B1 --output=avail "$nvme" | tail -1)
        if [ "$need" -gt "$free" ]; then
            echo "bench_scale: $tag: needs $need bytes of disk, $nvme has $free free: past the disk's limit"
            return 3
        fi
    fi
    if [ -n "$s" ]; then
        $py dev/bench/bench_scale.py record "$runs" "$config" "$m" "$capb" "$out/dry_$tag" "$dry_rc" "" "" "" \
            "$disk_rd" "$disk_wr" "$mem_bw" "$s"
        echo "bench_scale: $tag: ${s% *} (inferred from the run under a cap of ${s#* } bytes)"
        [ "${s% *}" = trained ]; return $?
    fi
    rm -rf "$out/run_$tag"
    echo "bench_scale: $tag: $($py dev/bench/bench_scale.py params "$m") parameters, training under $cap..."
    memcap_run "$cap" "$out/mem_$tag.txt" /usr/bin/time -f 'rss_peak_kib %M' -o "$out/time_$tag.txt" \
        ./train_gpt2 "${args[@]}" -o "$out/run_$tag" > "$out/log_$tag.txt" 2>&1
    $py dev/bench/bench_scale.py record "$runs" "$config" "$m" "$capb" "$out/dry_$tag" "$dry_rc" "$out/mem_$tag.txt" \
        "$out/run_$tag" "$out/log_$tag.txt" "$disk_rd" "$disk_wr" "$mem_bw" "" "$out/time_$tag.txt"
    rm -f "$out/run_$tag/model_final.bin"   # its disk space goes to the next model
    tail -n 1 "$runs" | $py -c 'import json, sys; r = json.loads(sys.stdin.read()); print("bench_scale:", r["status"])'
    grep -q '"status": "trained"' <(tail -n 1 "$runs")
}

runs="$out/runs.jsonl"
touch "$runs"
for cap in ${caps//,/ }; do
    memcap_bytes "$cap" > /dev/null || exit 2
    for config in ${configs//,/ }; do
        if [ -n "$models" ]; then list=${models//,/ }; else list=$($py dev/bench/bench_scale.py family); fi
        last="" over=""
        for m in $list; do
            run_one "$config" "$m" "$cap"
            case $? in 0) last=$m ;; 3) over=$m; break ;; *) break ;; esac
        done
        # past the disk's limit: the models between the last that fit and the first that did not
        if [ -n "$over" ] && [ -n "$last" ]; then
            for m in $($py dev/bench/bench_scale.py between "$last" "$over"); do
                run_one "$config" "$m" "$cap" || break
            done
        fi
    done
done
[ -z "$(ls -A "$nvme" 2> /dev/null)" ] || echo "bench_scale: warning: files left in $nvme: $(ls "$nvme")"
render
