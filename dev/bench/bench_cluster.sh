#!/usr/bin/env bash
# bench_cluster.sh: ZeRO and ZeRO++ where they matter, on slow links between nodes. The CPU
# trainer on a cluster of 2 nodes x 2 ranks made on this machine (scripts/cluster.sh: network
# namespaces, each node's link shaped with tc), every configuration at every link rate:
#   z0 z1 z2 z3            stages 0-3
#   z3_hpz z3_qwz z3_qgz   stage 3 with one ZeRO++ switch (--hpz 2, --qwz, --qgz)
#   z3_pp                  stage 3 with all three
#   z3_hier                stage 3 with the two-hop gradients unquantized (--hier-reduce)
# Per run: tokens/s (the median of the steps after the first), the inter-node bytes per step
# the report counts, the bytes the links carried (their counters over the whole job, divided
# by its steps: the start-up's wiring, first gathers and the final export included, so they
# read high on runs of few steps) and the links' use (those bytes a step over the median
# step's time x rate). Writes OUT/cluster.md (the table, ZeRO++ against
# stage 3 per rate) and OUT/cluster.png (throughput against link rate per configuration);
# at the lowest rate every run also writes its timeline (--trace, OUT/RUN/trace.rank*.json)
# and OUT/RUN_timeline.png draws a step of it (scripts/trace_merge.py).
#
#   dev/bench/bench_cluster.sh [-o OUT] [--rates 10gbit,1gbit,200mbit,50mbit] [--configs z3,z3_pp,...]
#                              [-e MODEL] [-x STEPS] [--extra "FLAGS"] [--render]
# Needs what scripts/cluster.sh needs (root, network namespaces, tc, mpirun).
set -u
cd "$(dirname "$0")/../.."
out=out/bench_cluster rates=10gbit,1gbit,200mbit,50mbit configs=z0,z1,z2,z3,z3_hpz,z3_qwz,z3_qgz,z3_pp,z3_hier
model=d2c128h2t64 steps=4 extra="" render=0
while [ $# -gt 0 ]; do
    case "$1" in
        -o) out=$2; shift 2 ;;
        --rates) rates=$2; shift 2 ;;
        --configs) configs=$2; shift 2 ;;
        -e) model=$2; shift 2 ;;
        -x) steps=$2; shift 2 ;;
        --extra) extra=$2; shift 2 ;;
        --render) render=1; shift ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench_cluster: unknown argument '$1' (see -h)" >&2; exit 2 ;;
    esac
done
IFS=, read -ra rate_list <<< "$rates,"   # (the trailing comma keeps an empty last entry)
for r in "${rate_list[@]}"; do   # tc's units, as scripts/cluster.sh takes them (bps: bytes/s)
    [[ "$r" =~ ^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit|tbit|bps)$ ]] ||
        { echo "bench_cluster: --rates: '$r' is not a number with one of bit, kbit, mbit, gbit, tbit, bps" >&2; exit 2; }
done
mkdir -p "$out"
py=/usr/bin/python3
[ -x "$py" ] || py=python3
flags() {
    case "$1" in
        z0) echo -z 0 ;; z1) echo -z 1 ;; z2) echo -z 2 ;; z3) echo -z 3 ;;
        z3_hpz) echo -z 3 --hpz 2 ;; z3_qwz) echo -z 3 --qwz ;; z3_qgz) echo -z 3 --qgz ;;
        z3_pp) echo -z 3 --qwz --hpz 2 --qgz ;; z3_hier) echo -z 3 --hier-reduce ;;
        *) echo "bench_cluster: unknown configuration '$1'" >&2; return 1 ;;
    esac
}
if [ "$render" = 0 ]; then
    export OMP_NUM_THREADS=1
    args=(-e "$model" -b 1 -t 64 -x "$steps" -v 0 -s 0 -n 0 --threads 1 $extra)
    lowest=$($py -c 'import re, sys
units = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12, "bps": 8}
print(min(sys.argv[1].split(","), key=lambda r: float(re.match(r"[0-9.]+", r).group()) * units[re.sub(r"[0-9.]", "", r)]))' "$rates")
    for rate in ${rates//,/ }; do
        for c in ${configs//,/ }; do
            tag="${c}_$rate"
            [ -f "$out/$tag/zero_report.json" ] && [ -f "$out/$tag.links" ] && continue   # done in an earlier call
            f=$(flags "$c") || exit 2
            echo "bench_cluster: $tag..."
            rm -rf "$out/$tag"
            trace=()
            [ "$rate" = "$lowest" ] && trace=(--trace "$out/$tag/trace")
            scripts/cluster.sh -n 2 -r 2 --rate "$rate" --counters "$out/$tag.links" -- \
                ./train_gpt2 "${args[@]}" $f "${trace[@]}" -o "$out/$tag" > "$out/$tag.txt" 2>&1 \
                || { tail -5 "$out/$tag.txt"; echo "bench_cluster: $tag failed" >&2; rm -f "$out/$tag.links"; }
            if [ ${#trace[@]} -gt 0 ] && [ -f "$out/$tag/trace.rank00000.json" ]; then
                $py scripts/trace_merge.py "$out/$tag"/trace.rank*.json -o "$out/$tag/trace_merged.json" \
                    --png "$out/${tag}_timeline.png" > /dev/null || echo "bench_cluster: $tag: trace_merge.py failed" >&2
            fi
        done
    done
fi
$py - "$out" "$rates" "$configs" << 'EOF'
import json, os, re, statistics, sys
out, rates, configs = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
def bits(rate):
    m = re.fullmatch(r"([0-9.]+)(bit|kbit|mbit|gbit|tbit|bps)", rate)
    return float(m.group(1)) * {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12, "bps": 8}[m.group(2)]
res = {}
for rate in rates:
    for c in configs:
        d = f"{out}/{c}_{rate}"
        if not os.path.exists(f"{d}/zero_report.json") or not os.path.exists(f"{d}.links"):
            continue
        log = open(f"{d}.txt").read()
        steps = [(float(a), float(b)) for a, b in re.findall(r"^step +\d+/\d+ \|.*?\| ([0-9.]+) ms \| ([0-9.]+) tok/s", log, re.M)]
        if len(steps) < 2:
            continue
        ms = statistics.median(s[0] for s in steps[1:])
        toks = statistics.median(s[1] for s in steps[1:])
        rep = json.load(open(f"{d}/zero_report.json"))
        inter = sum(r["sent_per_step"]["total"]["inter_node_bytes"] for r in rep["ranks"])   # all ranks, per step
        links = dict(l.strip().split("=", 1) for l in open(f"{d}.links") if "=" in l)
        carried = sum(int(links[f"node{i}_tx_bytes"]) for i in range(int(links["nodes"])))
        nsteps = len(steps)
        use = carried / nsteps / (ms / 1e3) / (bits(rate) / 8 * int(links["nodes"]))
        res[(c, rate)] = dict(ms=ms, toks=toks, inter=inter, carried=carried / nsteps, use=use)
lines = ["| link | configuration | tokens/s | ms/step | inter-node bytes/step (report) | link bytes/step (with start-up) | link use (with start-up) | vs stage 3 |",
         "| --- | --- | --- | --- | --- | --- | --- | --- |"]
for rate in rates:
    base = res.get(("z3", rate))
    for c in configs:
        r = res.get((c, rate))
        if not r:
            continue
        rel = f"{r['toks'] / base['toks']:.2f}x" if base else ""
        lines.append(f"| {rate} | {c} | {r['toks']:.0f} | {r['ms']:.0f} | {r['inter'] / 1e6:.1f} MB | "
                     f"{r['carried'] / 1e6:.1f} MB | {100 * r['use']:.0f}% | {rel} |")
open(f"{out}/cluster.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit(0)
fig, ax = plt.subplots(figsize=(7.5, 4.8))
for c in configs:
    pts = sorted((bits(rate) / 1e6, res[(c, rate)]["toks"]) for rate in rates if (c, rate) in res)
    if pts:
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-" if c.startswith("z3") else "s--", label=c)
ax.set_xscale("log")
ax.set_xlabel("inter-node link rate per node (Mbit/s, tc tbf)")
ax.set_ylabel("tokens/s (2 nodes x 2 ranks)")
ax.set_title("CPU trainer on 2 x 2 ranks in network namespaces")
ax.grid(True, which="both", alpha=0.3)
ax.legend(fontsize=8, ncol=2)
fig.tight_layout()
fig.savefig(f"{out}/cluster.png", dpi=120)
print(f"wrote {out}/cluster.png")
EOF
