#!/usr/bin/env bash
# bench_qgz_loss.sh: what ZeRO++'s int4 gradients (qgZ) cost in loss against what they save
# on the wire, per quantization block size. The CPU trainer, 4 ranks as 2 logical nodes of
# 2, stage 3, on the bundled data: stage 3 plain, then --qgz at each block size (and the
# ZeRO++ switches together at the default), each for STEPS steps. Per run: the mean train
# loss of the last 20 steps and its distance from stage 3's, and the gradient bytes a rank
# sends to other nodes per gradient value it reduces (the report's second-hop bytes over the
# values: int4 payload plus one fp32 scale per block). Writes OUT/qgz_loss.md and
# OUT/qgz_loss.png (loss against bytes per value).
#
#   dev/bench/bench_qgz_loss.sh [-o OUT] [-x STEPS] [-e MODEL] [--blocks 2048,512,...] [--extra "FLAGS"]
set -u
cd "$(dirname "$0")/../.."
out=out/bench_qgz_loss steps=200 model=d2c64 blocks=2048,1024,512,256,128,64,32 extra=""
while [ $# -gt 0 ]; do
    case "$1" in
        -o) out=$2; shift 2 ;;
        -x) steps=$2; shift 2 ;;
        -e) model=$2; shift 2 ;;
        --blocks) blocks=$2; shift 2 ;;
        --extra) extra=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench_qgz_loss: unknown argument '$1' (see -h)" >&2; exit 2 ;;
    esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1
mkdir -p "$out"
py=/usr/bin/python3
[ -x "$py" ] || py=python3
args=(-e "$model" -b 2 -t 64 -x "$steps" -v 0 -s 0 --threads 1 -z 3 --node-size 2 $extra)
run() {   # run NAME FLAGS...: reuses an earlier run of the same command that finished
    local name=$1
    shift
    local cmd="${args[*]} $*"
    [ -f "$out/$name/main.log" ] && grep -q "s:$((steps - 1)) trl" "$out/$name/main.log" &&
        [ "$(cat "$out/$name.cmd" 2> /dev/null)" = "$cmd" ] && return 0
    echo "bench_qgz_loss: $name: $*"
    rm -rf "${out:?}/$name" "$out/$name.cmd"
    mpirun -np 4 ./train_gpt2 "${args[@]}" "$@" -o "$out/$name" > "$out/$name.txt" 2>&1 \
        || { tail -5 "$out/$name.txt"; echo "bench_qgz_loss: $name failed" >&2; exit 1; }
    echo "$cmd" > "$out/$name.cmd"
}
run stage3
for b in ${blocks//,/ }; do run "qgz_b$b" --qgz --qgz-block "$b"; done
run zeropp --qwz --hpz 2 --qgz
$py - "$out" "$blocks" << 'EOF'
import json, os, re, sys
out, blocks = sys.argv[1], [int(b) for b in sys.argv[2].split(",")]
def loss(name):
    v = [float(x) for x in re.findall(r"trl:([0-9.]+)", open(f"{out}/{name}/main.log").read())]
    return sum(v[-20:]) / len(v[-20:])
def bytes_per_value(name):
    # a rank's gradient bytes to other nodes per gradient value it sends there: two hops (qgZ)
    # send 1 slice of each tensor per other node (Y - 1 slices of psi / N), the flat
    # all-to-all one per rank of another node (N - X slices)
    r = json.load(open(f"{out}/{name}/zero_report.json"))
    flows, N, X = r["ranks"][0]["sent_per_step_by_flow"], r["world_size"], r["ranks_per_node"]
    Y = N // X
    hop2 = flows["grad_inter_node_hop"]["inter_node_bytes"]
    sent = hop2 if hop2 else flows["grad_flat"]["inter_node_bytes"]
    slices = (Y - 1) if hop2 else (N - X)
    return sent / (slices * r["psi_padded"] / N * r["grad_accum"])
base = loss("stage3")
rows = [("stage 3", "stage3")] + [(f"--qgz --qgz-block {b}", f"qgz_b{b}") for b in blocks] + \
       [("--qwz --hpz 2 --qgz (defaults)", "zeropp")]
lines = ["| run | train loss (last 20 steps) | vs stage 3 | gradient bytes to other nodes per value |",
         "| --- | --- | --- | --- |"]
pts = []
for label, name in rows:
    l, bpv = loss(name), bytes_per_value(name)
    lines.append(f"| {label} | {l:.4f} | {100 * (l / base - 1):+.2f}% | {bpv:.3f} |")
    pts.append((label, bpv, 100 * (l / base - 1)))
open(f"{out}/qgz_loss.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, x, y in pts:
        ax.plot([x], [y], "o")
        ax.annotate(label.replace("--qgz --qgz-block ", "block "), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.axhline(0.5, ls="--", c="gray", lw=0.8)
    ax.set_xlabel("gradient bytes sent to other nodes per gradient value")
    ax.set_ylabel("train loss vs stage 3 (%)")
    ax.set_title("qgZ: loss against bytes on the wire (4 ranks, 2 nodes)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(f"{out}/qgz_loss.png", dpi=120)
except ImportError:
    pass
EOF
