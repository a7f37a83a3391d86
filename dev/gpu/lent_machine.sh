#!/usr/bin/env bash
# lent_machine.sh [LANE...]: the GPU checks on a lent machine that has a GPU and NVIDIA's
# libraries but none of this project's build dependencies, from binaries that
# dev/gpu/bundle.sh built elsewhere (BUNDLE, default gpubundle/). Runs the lanes at once,
# each under DEADLINE seconds (default 300), and writes LOGDIR (default /tmp/gpu_logs) with
# summary.txt (every PASS/FAIL line and each lane's verdict) and, when OUT is set, copies
# the lanes' verdicts, their PASS/FAIL/SKIP lines (progress.txt, also printed) and tables
# there as each lane ends, then summary.txt and logs.tgz (the
# runs' files under 8 MiB; model files and checkpoints left out). A lane name it does not
# know is refused before anything runs.
# Lanes (default all but bench, vsllmc, profile, kernels, offload-max and sanitize): units
# bitwise matrix offload zeropp mainjob toy (gpu_zero.sh's 2- and 4-rank, launch, refusal,
# bootstrap and death cases with the bundle's programs) bench vsllmc profile (bench_vs_llmc.sh
# --profile: llm.c's and our trainers' kernels timed by Nsight Compute, by kind, in
# LOGDIR/profile.md and OUT) kernels (bench_gpt2cu -k -e both on d12: the step's phases, the
# LayerNorm kernels' bytes per second, the epilogues on and off) offload-max
# (dev/gpu/offload_max.sh: ZeRO-Offload's largest model on the GPU) sanitize
# (dev/gpu/sanitize.sh: compute-sanitizer's four tools); smaller ones: quant matrix4
# offload-param-nvme mainjob-short; A+B runs A then B in one lane. The benchmark lanes (bench,
# vsllmc: dev/bench/bench_vs_llmc.sh with the bundle's llm.c binary, its table in
# LOGDIR/bench_vs_llmc.md and OUT; kernels; offload-max) run first, alone on the GPU, one after
# the other, until BENCH_DEADLINE seconds (default DEADLINE/2 when other lanes follow, else
# DEADLINE); each ends in time to leave the solo lanes after it their seconds (PROFILE_S,
# default 120; KERNELS_S, default 40; OFFLOAD_MAX_S, default 150). Then the other lanes run at
# once, for correctness only. Every process of a lane carries LANE_TAG in its environment, and
# what a lane leaves running (a nested timeout's ranks, in process groups of their own) is
# killed when it ends, as every lane is when this script is stopped.
# LANE_CMD (for tests): a command run as `LANE_CMD PART` in place of each part's commands.
# It copies the bundle's programs over this checkout's (meant for the lent machine's copy of
# the tree) and puts stand-ins for make and apt-get first on the PATH.
set -u
case "${1:-}" in -h|--help) sed -n '2,/^set -/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
t0=$(date +%s)   # DEADLINE counts from here: the setup below is in it
cd "$(dirname "$0")/../.."
lanes=${*:-units bitwise matrix offload zeropp mainjob toy}
known="units bitwise matrix offload zeropp mainjob toy bench vsllmc profile kernels offload-max sanitize quant matrix4
       offload-param-nvme mainjob-short"
if [ -z "${LANE_CMD:-}" ]; then   # a misspelt lane would run nothing and pass: refused before any GPU time goes
    for l in $lanes; do
        for p in ${l//+/ }; do
            [[ " $(echo $known) " == *" $p "* ]] || { echo "lent_machine: no lane '$p' (lanes: $(echo $known))"; exit 2; }
        done
    done
fi
B=${BUNDLE:-gpubundle}
log=${LOGDIR:-/tmp/gpu_logs}; mkdir -p "$log"
# a rerun on a warm machine: this run's summary, lanes and tables only
rm -f "$log"/*.txt "$log"/*.md "$log"/*.progress "$log"/runs.tgz
rm -rf /tmp/gm_models   # the initial models vsllmc makes and profile reuses
export GPU_BUNDLE=$PWD/$B GPU_LOGDIR=$log   # for the lanes (each runs in a bash of its own)
deadline=${DEADLINE:-300}
cp -p "$B"/bin/* . && mkdir -p build && cp -p "$B"/build/* build/ || { echo "no bundle in $B"; exit 1; }
# NVIDIA's libraries from wherever this image keeps them (the toolkit, Python wheels)
libdirs=$PWD/$B/lib
libs=(libnccl.so.2 libcudnn.so.9 libcublasLt.so.13 libcublas.so.13 libnvrtc.so.13)   # NVRTC: llm.c's cudnn-frontend
# the usual places first (the toolkit, the system's, the Python wheels' nvidia/*/lib): a walk of
# the whole image, in the deadline, only for what is not there
found=$(ls /usr/local/cuda*/lib64/lib* /usr/local/cuda*/targets/*/lib/lib* /usr/lib/*-linux-gnu/lib* \
           /opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib/lib* /usr/local/lib/python3*/dist-packages/nvidia/*/lib/lib* 2> /dev/null)
missing=()
for n in "${libs[@]}"; do grep -q "/$n\$" <<< "$found" || missing+=("$n"); done
[ ${#missing[@]} -eq 0 ] || found+=$'\n'$(find /usr/local /usr/lib /opt \( -name "${missing[0]}" $(printf -- '-o -name %s ' "${missing[@]:1}") \) 2> /dev/null)
for n in "${libs[@]}"; do
    d=$(grep -m 1 "/$n\$" <<< "$found")
    if [ -n "$d" ]; then libdirs=$libdirs:$(dirname "$d"); else echo "lent_machine: $n not found" | tee -a "$log/summary.txt"; fi
done
export LD_LIBRARY_PATH=$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# the bundle's binaries start ranks from RANK/WORLD_SIZE (launch_ranks.sh), never under mpirun
[ -f "$B/NO_MPI" ] && export NO_MPI=1
# the scripts call make and install_deps (apt-get): the binaries are here and nothing can be fetched
mkdir -p /tmp/fakebin && printf '#!/bin/sh\nexit 0\n' > /tmp/fakebin/make && cp /tmp/fakebin/make /tmp/fakebin/apt-get \
    && chmod +x /tmp/fakebin/* && export PATH=/tmp/fakebin:$PATH
{ nvidia-smi; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; for b in ./train_gpt2_zero ./test_gpt2_zero $(ls ./llmc_train_gpt2cu 2> /dev/null); do ldd "$b"; done; nproc; free -g; } > "$log/env.txt" 2>&1
grep "not found" "$log/env.txt" | sort -u | sed 's/^/lent_machine: missing /' | tee -a "$log/summary.txt"
lane() {   # lane NAME: one lane's commands, its output in LOGDIR/NAME.txt
    # gpu_train_matrix.sh: a tiny model's run takes seconds, under the other lanes' load too;
    # one that hangs fails after 90 s and the lane goes on to its next case
    export RUN_LIMIT=90
    case $1 in
        units) local c rc=0   # each program's failure named: a crash prints no FAIL line of its own
               for c in ./test_gpt2_zero ./build/gpu_attention_cudnn ./build/gpu_zero_quant ./build/gpu_backend_ops ./bench_wire_cuda; do
                   $c || { echo "FAIL units: $c exit $?"; rc=1; }
               done
               return $rc ;;
        bitwise|matrix|offload|zeropp) KEEP_DIR=/tmp/gm_$1 NCCL_DEBUG=VERSION bash dev/test/cuda/gpu_train_matrix.sh "$1" ;;
        matrix4) KEEP_DIR=/tmp/gm_$1 NPS=4 bash dev/test/cuda/gpu_train_matrix.sh matrix ;;
        offload-param-nvme) KEEP_DIR=/tmp/gm_$1 NPS=1 OFFLOAD_MATCH="param nvme" bash dev/test/cuda/gpu_train_matrix.sh offload ;;
        quant) ./build/gpu_zero_quant ;;
        mainjob) rm -rf /tmp/mainjob; ./scripts/train.sh -o /tmp/mainjob ;;
        mainjob-short) rm -rf /tmp/mainjob; ./scripts/train.sh -x 8 -o /tmp/mainjob ;;
        # the bundle's builds; 1 rank and the kernels passed on an H200 (dev/gpu/README.md)
        toy) PREBUILT=build LIMIT=90 KEEP=1 TMPDIR=/tmp/gm_toy bash dev/test/zero/gpu_zero.sh np2 np4 env errors bootstrap deaths ;;
        sanitize) LANE_LEFT=$((LANE_LEFT - 15)) LOGDIR=/tmp/gm_sanitize bash dev/gpu/sanitize.sh ;;
        offload-max) DEADLINE=$((LANE_LEFT - 5)) LOGDIR=/tmp/gm_offload-max OUT_MD=$GPU_LOGDIR/offload_max.md \
                         bash dev/gpu/offload_max.sh ;;
        bench) ./bench_gpt2cu -e both -k; bash dev/bench/bench_zero.sh ;;
        kernels) ./bench_gpt2cu -m d12 -e both -k -s 5 -w 2 ;;
        vsllmc|profile) [ -x "$GPU_BUNDLE/bin/llmc_train_gpt2cu" ] || { echo "FAIL $1: no llm.c binary in the bundle (bundle.sh with LLMC_DIR)"; return 1; }
                local flag= md=bench_vs_llmc margin=20
                [ "$1" = profile ] && flag=--profile md=profile margin=25
                LLMC_BIN=$GPU_BUNDLE/bin/llmc_train_gpt2cu BUILD_INFO=$GPU_BUNDLE/BUILD_INFO DEADLINE=$((LANE_LEFT - margin)) MIN_LEFT=30 \
                    LOGDIR=/tmp/gm_$1 MODEL_DIR=/tmp/gm_models OUT_MD=$GPU_LOGDIR/$md.md bash dev/bench/bench_vs_llmc.sh $flag ;;
    esac
}
# kill_tagged PATTERN: every process whose environment has a LANE_TAG that PATTERN (a grep
# pattern) matches. A lane's processes inherit its tag, and a nested timeout's ranks (process
# groups of their own, out of reach of the lane's timeout) are among them; unlike a session of
# its own, the tag keeps them within reach of whatever stops this script.
tag=lent.$$
kill_tagged() {   # one grep over every process's environment: quick on a busy machine too
    local pids
    pids=$(grep -lzs "^LANE_TAG=$1\$" /proc/[0-9]*/environ | sed 's|^/proc/\([0-9]*\)/environ$|\1|')
    [ -z "$pids" ] || kill -KILL $pids 2> /dev/null
}
trap 'kill_tagged "$tag\..*"' EXIT
trap 'exit 143' TERM INT HUP
run_lane() {   # run_lane LANE END AFTER: LANE's parts one after the other, each until AFTER s before
               # END s after t0; AFTER: seconds the solo lanes after it need (SOLO_AFTER to the lane)
    local p left
    for p in ${1//+/ }; do
        left=$(( $2 - $3 - ($(date +%s) - t0) ))
        [ "$left" -gt 5 ] || { echo "lane $p: not started (deadline)" >> "$log/lanes.txt"; continue; }
        rm -rf "/tmp/gm_$p"; mkdir -p "/tmp/gm_$p"   # a rerun's lane sees none of the last run's files
        # in the background: a signal to this script is handled at once, not after the lane
        if [ -n "${LANE_CMD:-}" ]; then LANE_TAG=$tag.$p SOLO_AFTER=$3 LANE_LEFT=$left timeout -k 10 "$left" $LANE_CMD "$p" > "$log/$p.txt" 2>&1 &
        else LANE_TAG=$tag.$p SOLO_AFTER=$3 LANE_LEFT=$left timeout -k 10 "$left" bash -c "$(declare -f lane); lane $p" > "$log/$p.txt" 2>&1 & fi
        wait $!
        echo "lane $p: exit $? after $(( $(date +%s) - t0 )) s" >> "$log/lanes.txt"
        kill_tagged "$tag\.$p"
        # what is done comes back even when the command is cut short later: the verdicts, the
        # tables and the lane's PASS/FAIL/SKIP lines (also in the command's output)
        grep -E "^(PASS|FAIL|SKIP)" "$log/$p.txt" | cut -c1-300 | sed "s|^|$p: |" > "$log/$p.progress"
        cat "$log/$p.progress" && cat "$log/$p.progress" >> "$log/progress.txt"   # one append: lanes end at once
        [ -n "${OUT:-}" ] && mkdir -p "$OUT" && cp "$log/lanes.txt" "$log/progress.txt" $(ls "$log"/*.md 2> /dev/null) "$OUT/"
    done
}
solo=(); shared=()
for l in $lanes; do case ${l%%+*} in bench|vsllmc|profile|kernels|offload-max) solo+=("$l") ;; *) shared+=("$l") ;; esac; done
bench_end=$deadline
[ ${#shared[@]} -gt 0 ] && bench_end=${BENCH_DEADLINE:-$((deadline / 2))}
# the benchmark lanes alone on the GPU, one after the other; then the rest at once
# offload-max needs OFFLOAD_MAX_S (default 150: the dry run, the 10 B model's init, 3 steps);
# kernels KERNELS_S (default 40: d12 built 4 times, 8 steps each, the kernel table); profile
# PROFILE_S (default 120: three trainers' init and 2 steps each under ncu)
for i in "${!solo[@]}"; do
    after=0
    for l in "${solo[@]:$((i + 1))}"; do
        [[ $l == *offload-max* ]] && after=$((after + ${OFFLOAD_MAX_S:-150}))
        [[ $l == *kernels* ]] && after=$((after + ${KERNELS_S:-40}))
        [[ $l == *profile* ]] && after=$((after + ${PROFILE_S:-120}))
    done
    run_lane "${solo[$i]}" "$bench_end" "$after"
done
# a solo lane killed at its deadline leaves its GPU memory to the driver to free (offload-max's
# can hold most of it): the shared lanes start once no process holds any, or after 30 s
if [ ${#shared[@]} -gt 0 ] && [ ${#solo[@]} -gt 0 ] && command -v nvidia-smi > /dev/null; then
    for _ in $(seq 30); do
        [ -z "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2> /dev/null)" ] && break
        sleep 1
    done
fi
for l in "${shared[@]}"; do run_lane "$l" "$deadline" 0 & done
wait
{ cat "$log/lanes.txt"; for t in bench_vs_llmc profile offload_max; do [ -f "$log/$t.md" ] && cat "$log/$t.md"; done; grep -H -E "^(PASS|FAIL|SKIP)|FAIL|passed|bit-identical|MiB|error|Error" "$log"/*.txt | grep -v -e "^$log/env.txt" -e "^$log/summary.txt" -e "^$log/progress.txt" | cut -c1-300; } >> "$log/summary.txt"
# exit 0 only when every lane exited 0 and no log line but a PASS line says FAIL
nfail=$(grep "^$log/[^/]*\.txt:" "$log/summary.txt" | grep -v "^$log/[^/]*\.txt:PASS" | grep -c FAIL)
nlane=$(grep -c -e '^lane .*: exit [1-9]' -e '^lane .*: not started' "$log/lanes.txt")
verdict="lent_machine: $(grep -c "^$log/[^/]*\.txt:PASS" "$log/summary.txt") PASS lines, $nfail FAIL lines, $nlane lanes not exit 0"
echo "$verdict" >> "$log/summary.txt"
# the summary and tables first: they come back even when the archives below do not
if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT" && cp "$log/summary.txt" "$OUT/"
    for t in bench_vs_llmc profile offload_max; do [ -f "$log/$t.md" ] && cp "$log/$t.md" "$OUT/"; done
fi
# the runs' own logs (main.log, run.json, reports, ncu's CSVs): files under 8 MiB, without
# model files, checkpoints and a killed export's temporary file
find /tmp/gm_* /tmp/mainjob -type f -size -8388608c ! -name '*.bin' ! -name '*.zck*' ! -name '*.tmp.*' \
        ! -path '*/zero_[0-9]*/*' -print0 2> /dev/null | tar -czf "$log/runs.tgz" --null -T - 2> /dev/null
[ -n "${OUT:-}" ] && tar -czf "$OUT/logs.tgz" -C "$log" .
# the tables in the command's own output too: it comes back whatever happens to OUT
for t in bench_vs_llmc profile offload_max; do [ -f "$log/$t.md" ] && cat "$log/$t.md"; done
echo "$verdict; $log/summary.txt"
[ "$nfail" -eq 0 ] && [ "$nlane" -eq 0 ]
