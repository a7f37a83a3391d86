#!/usr/bin/env bash
# cluster.sh: a cluster on one machine. K "nodes", each a network namespace of its own
# with one link (a veth) to a switch (a bridge in a namespace of its own), each link
# shaped with tc where --rate is given, and the job's ranks started inside them: ranks of
# one node talk through shared memory or loopback, ranks of different nodes through their
# nodes' links, as on a real cluster. The report's inter-node bytes can then be held to
# what crossed the links (--counters), and a job's time to the link's rate.
#
#   scripts/cluster.sh [-n NODES] [-r RANKS] [--rate RATE] [--delay D] [--loss P] [--mtu N]
#                      [--counters FILE] [--no-mpi] [-x VAR]... -- COMMAND [ARGS...]
#   -n NODES         nodes (default 2)
#   -r RANKS         ranks per node (default 2); rank r runs on node r / RANKS
#   --rate RATE      each node's link rate, both ways (tc tbf: 200mbit, 1gbit, 10gbit ...);
#                    default: unshaped
#   --delay D        one-way delay from node to node (tc netem on what each node sends: 1ms
#                    ...) and --loss P packet loss on that way (0.1% ...): refused with a
#                    message where the kernel has no netem
#   --mtu N          the links' MTU (default 1500, Ethernet's)
#   --counters FILE  write the bytes each node's link sent and received during the job, as
#                    key=value lines (node0_tx_bytes=..., node0_rx_bytes=..., link_rate=...)
#   --no-mpi         start the ranks as plain processes (RANK, WORLD_SIZE, LOCAL_RANK,
#                    LOCAL_WORLD_SIZE, ZERO_BOOTSTRAP_TCP on node 0's address, a fresh
#                    ZERO_BOOTSTRAP_SECRET): the CUDA trainer without MPI. Default: Open MPI's
#                    mpirun, started in node 0 with an rsh agent that enters the target node
#   -x VAR           pass VAR to every rank (mpirun -x); OMP_NUM_THREADS and ZERO_HOST_JITTER
#                    always go when set
#
# Isolation: nothing is added to the machine's own network namespace. The switch's namespace
# holds a bridge and the nodes' veth ends and no address; each node's namespace holds
# loopback and its veth with an address in 10.213.0.0/24 and no other route. This is checked
# before any rank starts (and the run refused otherwise), so no packet of the job can leave
# the namespaces it made. Needs root, iproute2 and tc; refuses with a message where network
# namespaces or tc are missing. Everything it made (namespaces, links, the rsh agent, every
# process in the namespaces) is removed when the job ends, fails, or on Ctrl-C, SIGTERM or
# SIGHUP, at once (the script then dies by that signal, so a caller's loop stops too); what a
# run killed by SIGKILL left, the next run removes. Exits with the job's status.
set -u
nodes=2 ranks=2 rate="" delay="" loss="" mtu=1500 counters="" nompi=0 pass=()
while [ $# -gt 0 ]; do
    case "$1" in
        -n) nodes=$2; shift 2 ;;
        -r) ranks=$2; shift 2 ;;
        --rate) rate=$2; shift 2 ;;
        --delay) delay=$2; shift 2 ;;
        --loss) loss=$2; shift 2 ;;
        --mtu) mtu=$2; shift 2 ;;
        --counters) counters=$2; shift 2 ;;
        --no-mpi) nompi=1; shift ;;
        -x) pass+=(-x "$2"); shift 2 ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
        --) shift; break ;;
        *) echo "cluster.sh: unknown argument '$1' (see -h)" >&2; exit 2 ;;
    esac
done
die() { echo "cluster.sh: $*" >&2; exit 2; }
[ $# -ge 1 ] || die "no command: cluster.sh [options] -- COMMAND [ARGS...]"
[[ "$nodes" =~ ^[1-9][0-9]?$ ]] && [ "$nodes" -le 64 ] || die "-n $nodes: 1 to 64 nodes"
[[ "$ranks" =~ ^[1-9][0-9]*$ ]] || die "-r $ranks: a positive number of ranks per node"
[[ "$mtu" =~ ^[0-9]+$ ]] && [ "$mtu" -ge 576 ] && [ "$mtu" -le 65535 ] || die "--mtu $mtu: 576 to 65535"
[ "$(id -u)" -eq 0 ] || die "network namespaces and tc need root (this is uid $(id -u))"
command -v ip > /dev/null || die "no 'ip' (iproute2): install it"
command -v tc > /dev/null || die "no 'tc' (iproute2): install it"
command -v unshare > /dev/null || die "no 'unshare' (util-linux): install it"
command -v flock > /dev/null || die "no 'flock' (util-linux): install it"
[ "$nompi" = 1 ] || command -v mpirun > /dev/null || die "no mpirun: install Open MPI, or give --no-mpi"

P="zc$$"                     # the namespaces: ${P}sw (the switch), ${P}n0 .. (the nodes)
SUBNET=10.213.0
addr() { echo "$SUBNET.$(($1 + 1))"; }
# in /tmp whatever TMPDIR says: Open MPI splits the rsh agent's path at spaces
work=$(mktemp -d /tmp/cluster.XXXXXX) || die "cannot make a private folder"
chmod 700 "$work"
made=()
kill_and_delete() {   # kill_and_delete NS...: every process in them, then the namespaces
    local ns pid
    for ns in "$@"; do
        for pid in $(ip netns pids "$ns" 2> /dev/null); do kill -9 "$pid" 2> /dev/null; done
    done
    for ns in "$@"; do ip netns del "$ns" 2> /dev/null; done
}
cleanup() {
    trap '' INT TERM HUP   # a second Ctrl-C must not cut the cleanup short
    kill_and_delete "${made[@]}"
    rm -rf "$work"
    [ -z "${locked:-}" ] || rm -f "$locks/$P.lock"
}
on_signal() {   # on_signal SIG: the job and everything made go now, then die by SIG
    cleanup
    trap - EXIT "$1"
    kill -"$1" $$
    exit $((128 + $(kill -l "$1")))   # (were the signal ignored since the start)
}
trap cleanup EXIT
for sig in INT TERM HUP; do trap "on_signal $sig" $sig; done

# A run holds LOCKS/zcPID.lock while it lives (the job's processes do not inherit it), so
# the namespaces of a run killed by SIGKILL are told apart from a live run's by the lock,
# not by a PID that another PID namespace sharing /run/netns may not see. Those, and any
# named with this run's own PID (a leftover: it has made none yet), are removed with
# whatever still runs in them.
locks=/run/cluster_sh locked=
mkdir -p "$locks" && exec 9> "$locks/$P.lock" && flock -n 9 || die "cannot hold the lock $locks/$P.lock"
locked=1
stale=() stale_runs=()
for ns in $(ip netns list 2> /dev/null | awk '{ print $1 }' | grep -E '^zc[0-9]+(sw|n[0-9]+)$'); do
    run=${ns%sw}; run=${run%n[0-9]*}
    if [ "$run" = "$P" ] || flock -n "$locks/$run.lock" true 2> /dev/null; then stale+=("$ns") stale_runs+=("$run"); fi
done
if [ ${#stale[@]} -gt 0 ]; then
    kill_and_delete "${stale[@]}"
    for run in "${stale_runs[@]}"; do [ "$run" = "$P" ] || rm -f "$locks/$run.lock"; done
    echo "cluster.sh: removed what a killed run left: namespaces ${stale[*]}" >&2
fi

# IPv4 only (no IPv6 link-local addresses appear on the links), and no forwarding: a new
# namespace takes the machine's settings, and a container host forwards
isolate() { ip netns exec "$1" sh -c 'for f in /proc/sys/net/ipv6/conf/all/disable_ipv6 /proc/sys/net/ipv6/conf/default/disable_ipv6; do [ -e "$f" ] && echo 1 > "$f"; done; echo 0 > /proc/sys/net/ipv4/ip_forward; true'; }
made+=("${P}sw")   # named before it is made: a signal in between leaves nothing behind
ip netns add "${P}sw" 2> "$work/err" || die "cannot make a network namespace: $(cat "$work/err")"
isolate "${P}sw"
ip -n "${P}sw" link add br0 type bridge && ip -n "${P}sw" link set br0 up && ip -n "${P}sw" link set lo up \
    || die "cannot make the switch's bridge"
# tc's shaping: a token bucket per direction; the delay and loss (netem, only where the
# kernel has it) on what a node sends alone, so that they count once from node to node
shape() {   # shape NS DEV SIDE: SIDE node (what the node sends) or switch (what it receives)
    local q=()
    if [ "$3" = node ] && { [ -n "$delay" ] || [ -n "$loss" ]; }; then
        q=(netem ${delay:+delay "$delay"} ${loss:+loss "$loss"} ${rate:+rate "$rate"})
    elif [ -n "$rate" ]; then
        # a burst of 4 ms at the rate (at least 64 KiB), a queue of 100 ms
        local bps
        bps=$(tc_rate_bits "$rate") || return 1
        q=(tbf rate "$rate" burst $((bps / 8 / 250 > 65536 ? bps / 8 / 250 : 65536)) latency 100ms)
    else
        return 0
    fi
    tc -n "$1" qdisc add dev "$2" root "${q[@]}" 2> "$work/err" && return 0
    if [ "${q[0]}" = netem ]; then die "--delay/--loss need tc's netem, which this kernel does not have ($(cat "$work/err"))"; fi
    die "tc refused the shaping of $2 ($(cat "$work/err"))"
}
tc_rate_bits() {   # 200mbit -> 200000000 (tc's units: bit, kbit, mbit, gbit, tbit; bps = bytes/s;
                   # %.0f: mawk's %d stops at 2^31 - 1)
    local v=${1%%[a-zA-Z]*} u=${1##*[0-9.]}
    [[ "$v" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "cluster.sh: --rate $1: a number and a unit (200mbit, 10gbit)" >&2; return 1; }
    case "$u" in
        bit) awk -v v="$v" 'BEGIN { printf "%.0f", v }' ;;
        kbit) awk -v v="$v" 'BEGIN { printf "%.0f", v * 1e3 }' ;;
        mbit) awk -v v="$v" 'BEGIN { printf "%.0f", v * 1e6 }' ;;
        gbit) awk -v v="$v" 'BEGIN { printf "%.0f", v * 1e9 }' ;;
        tbit) awk -v v="$v" 'BEGIN { printf "%.0f", v * 1e12 }' ;;
        bps) awk -v v="$v" 'BEGIN { printf "%.0f", v * 8 }' ;;
        *) echo "cluster.sh: --rate $1: unit '$u' is not one of bit, kbit, mbit, gbit, tbit, bps" >&2; return 1 ;;
    esac
}
[ -z "$rate" ] || tc_rate_bits "$rate" > /dev/null || exit 2
for i in $(seq 0 $((nodes - 1))); do
    ns="${P}n$i"
    made+=("$ns")
    ip netns add "$ns" || die "cannot make namespace $ns"
    isolate "$ns"
    ip link add "v${i}a" netns "$ns" mtu "$mtu" type veth peer name "v${i}b" netns "${P}sw" mtu "$mtu" \
        || die "cannot make node $i's link"
    ip -n "${P}sw" link set "v${i}b" master br0 up
    ip -n "$ns" addr add "$(addr "$i")/24" dev "v${i}a"
    ip -n "$ns" link set "v${i}a" up
    ip -n "$ns" link set lo up
    shape "$ns" "v${i}a" node           # what the node sends
    shape "${P}sw" "v${i}b" switch      # what it receives
done

# Isolation, checked before anything runs: the switch has no address and no port but the
# nodes' links; a node has loopback, its link, and the subnet's route alone.
ip -n "${P}sw" -o addr show | grep -v ": lo " | grep -q "inet" && die "isolation check: the switch namespace has an address"
sw_links=$(ip -n "${P}sw" -o link show | awk -F': ' '{ print $2 }' | sed 's/@.*//' | sort | tr '\n' ' ')
want_links=$( (echo br0; echo lo; for i in $(seq 0 $((nodes - 1))); do echo "v${i}b"; done) | sort | tr '\n' ' ')
[ "$sw_links" = "$want_links" ] || die "isolation check: the switch holds '$sw_links', expected '$want_links'"
for i in $(seq 0 $((nodes - 1))); do
    ns="${P}n$i"
    routes=$(ip -n "$ns" route show | sed 's/ *$//' | tr '\n' ';')
    ip -n "$ns" -6 route show 2> /dev/null | grep -q . && die "isolation check: node $i has IPv6 routes"
    [ "$routes" = "$SUBNET.0/24 dev v${i}a proto kernel scope link src $(addr "$i");" ] \
        || die "isolation check: node $i's routes are '$routes', expected the subnet's alone"
    [ "$(ip netns exec "$ns" cat /proc/sys/net/ipv4/ip_forward)" = 0 ] || die "isolation check: node $i forwards packets"
done
echo "cluster.sh: $nodes nodes x $ranks ranks, links ${rate:-unshaped}${delay:+, delay $delay}${loss:+, loss $loss}, MTU $mtu;" \
     "isolated: switch ${P}sw (no address, ports v0b..v$((nodes - 1))b), nodes $SUBNET.1..$nodes without other routes" >&2

link_bytes() {   # NODE -> "TX RX" of its link
    ip -n "${P}n$1" -s link show "v${1}a" | awk 'NR == 4 { rx = $1 } NR == 6 { tx = $1 } END { print tx, rx }'
}
declare -a tx0 rx0
for i in $(seq 0 $((nodes - 1))); do read -r tx0[$i] rx0[$i] <<< "$(link_bytes "$i")"; done

np=$((nodes * ranks))
[ -n "${OMP_NUM_THREADS:-}" ] && pass+=(-x OMP_NUM_THREADS)
[ -n "${ZERO_HOST_JITTER+set}" ] && pass+=(-x ZERO_HOST_JITTER)
rc=0
if [ "$nompi" = 0 ]; then
    # Open MPI's rsh agent: "HOST COMMAND..." runs COMMAND in HOST's node, under a host name
    # of its own (a UTS namespace), so that Open MPI sees K machines
    cat > "$work/agent" << EOF
#!/bin/sh
host=\$1; shift
case "\$host" in
$(for i in $(seq 0 $((nodes - 1))); do echo "    $(addr "$i")) ns=${P}n$i ;;"; done)
    *) echo "cluster.sh agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$ns && \$*"
EOF
    chmod 700 "$work/agent"
    hosts=$(for i in $(seq 0 $((nodes - 1))); do printf '%s:%d,' "$(addr "$i")" "$ranks"; done)
    ip netns exec "${P}n0" unshare --uts sh -c 'hostname "$0" && exec "$@"' "${P}n0" \
        mpirun --allow-run-as-root --oversubscribe --host "${hosts%,}" -np "$np" --map-by slot \
        --mca plm_rsh_agent "$work/agent" --mca btl_tcp_if_include "$SUBNET.0/24" --mca oob_tcp_if_include "$SUBNET.0/24" \
        "${pass[@]}" "$@" <&0 9>&- &   # stdin stays (mpirun hands it to rank 0); the lock does not go
    # waited for, not run in the foreground: a trapped signal runs its trap at once, not after the job
    wait $! || rc=$?
else
    secret=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
    pids=()
    for r in $(seq 0 $((np - 1))); do
        node=$((r / ranks))
        ip netns exec "${P}n$node" env RANK=$r WORLD_SIZE=$np LOCAL_RANK=$((r % ranks)) LOCAL_WORLD_SIZE=$ranks \
            ZERO_BOOTSTRAP_TCP="$(addr 0):29500" ZERO_BOOTSTRAP_SECRET="$secret" NCCL_HOSTID="${P}n$node" \
            NCCL_SOCKET_IFNAME="v${node}a" "$@" 9>&- &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || { s=$?; [ "$rc" -ne 0 ] || rc=$s; }; done   # the first failing rank's status
fi

if [ -n "$counters" ]; then
    {
        echo "nodes=$nodes"
        echo "ranks_per_node=$ranks"
        echo "link_rate=${rate:-unshaped}"
        echo "mtu=$mtu"
        for i in $(seq 0 $((nodes - 1))); do
            read -r tx rx <<< "$(link_bytes "$i")"
            echo "node${i}_tx_bytes=$((tx - tx0[i]))"
            echo "node${i}_rx_bytes=$((rx - rx0[i]))"
        done
    } > "$counters"
fi
exit $rc
