#!/usr/bin/env bash
# test_bootstrap_security.sh: the bootstrap without MPI (zero/comm/bootstrap_tcp.c:
# ZERO_BOOTSTRAP_TCP and ZERO_BOOTSTRAP_FILE) treated as the network service it is. Builds
# dev/test/security/bootstrap_peer.c with zero/comm/ (mpicc, or the MPI stub) and runs its parties
# as separate processes with RANK / WORLD_SIZE and no launcher:
#   - real jobs: 3 ranks over TCP, 3 through a file (the secret in a mode-0600 file), 2
#     started by scripts/launch_ranks.sh without MPI: every rank gets rank 0's bytes;
#   - no secret, a secret file others may read, a short secret: refused, saying how to set one;
#   - rank 0 listens on the address given only: 127.0.0.2, ::1 and this machine's other
#     addresses are refused; a host of loopback addresses only, with ranks on other machines
#     (LOCAL_WORLD_SIZE below WORLD_SIZE), is refused at once; an address of the host this
#     machine lacks is passed over when another listens (a getaddrinfo shim names both);
#   - stray clients (silent, half a line of text, junk) get nothing and do not hold rank 0:
#     a rank joins while they are connected, and they are dropped at their deadline;
#   - an impersonator (a rank 1 with another secret): refused, gets nothing; the real rank 1 joins;
#   - a rogue listener on the port (rank 0's code with another secret; a forger that speaks
#     the protocol without one): rank 1 refuses its id;
#   - an on-path relay: the job starts through it, and the id never crosses it in the clear;
#   - a stale bootstrap file of an earlier job: refused while waiting, the job's own taken;
#   - a FIFO at the bootstrap file's name or as the secret file: refused, never waited on;
#   - a symbolic link planted at rank 0's old temporary name: its target stays untouched.
# Run from anywhere. Prints PASS/FAIL per case; exit 0 only if all pass.
# run alone: its ranks' bootstrap timeouts are 2 to 5 seconds
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
bg=()
cleanup() {
    local p
    for p in "${bg[@]}"; do kill "$p" 2> /dev/null; done
    wait 2> /dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
pass() { echo "PASS: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

peer=$tmp/bootstrap_peer
if command -v mpicc > /dev/null; then cc=(mpicc); extra=()
else cc=("${CC:-cc}" -Izero/comm/mpi_stub); extra=(zero/comm/mpi_stub/*.c); fi
if ! "${cc[@]}" -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -I. dev/test/security/bootstrap_peer.c zero/comm/*.c zero/trace.c \
        "${extra[@]}" -lcrypto -lpthread -lm -o "$peer" > "$tmp/build.log" 2>&1; then
    cat "$tmp/build.log"
    echo "FAIL: building bootstrap_peer (needs libcrypto: scripts/install_deps.sh)"
    exit 1
fi
# the name zero-shim-host resolves to $SHIM_ADDRS under it (getaddrinfo_shim.c)
shim=$tmp/getaddrinfo_shim.so
if ! "${CC:-cc}" -std=c11 -O2 -Wall -Wextra -Werror -shared -fPIC dev/test/security/getaddrinfo_shim.c -ldl -o "$shim" \
        > "$tmp/build.log" 2>&1; then
    cat "$tmp/build.log"
    echo "FAIL: building getaddrinfo_shim"
    exit 1
fi
pass "build (warning-free)"

# no launcher in sight, and no bootstrap setting but those each case gives
clean=(env -u OMPI_COMM_WORLD_SIZE -u PMI_SIZE -u PMIX_RANK -u SLURM_STEP_NUM_TASKS -u LOCAL_WORLD_SIZE -u ZERO_BOOTSTRAP_TCP -u ZERO_BOOTSTRAP_FILE
       -u ZERO_BOOTSTRAP_SECRET -u ZERO_BOOTSTRAP_SECRET_FILE -u ZERO_BOOTSTRAP_TIMEOUT)
secret() { od -An -tx1 -N32 /dev/urandom | tr -d ' \n'; }
S=$(secret)   # this job's secret
W=$(secret)   # a stranger's (or another job's)

have_ss=0; command -v ss > /dev/null && have_ss=1
new_port() {
    local p
    while :; do
        p=$((20000 + RANDOM % 30000))
        [ $have_ss = 0 ] || ! ss -ltnH "sport = :$p" | grep -q . && { echo $p; return; }
    done
}
# listening PORT: waits until something listens on PORT (up to 10 s)
listening() {
    [ $have_ss = 1 ] || { sleep 1; return 0; }
    for _ in $(seq 200); do ss -ltnH "sport = :$1" | grep -q . && return 0; sleep 0.05; done
    return 1
}
# rank NAME R WORLD SEED VAR=VALUE...: bootstrap_peer share SEED as rank R in the background
# (log $tmp/NAME.log, pid in $!); ZERO_BOOTSTRAP_TIMEOUT is 20 unless a VAR sets it
rank() {
    local name=$1 r=$2 w=$3 seed=$4
    shift 4
    "${clean[@]}" RANK=$r WORLD_SIZE=$w LOCAL_RANK=$r ZERO_BOOTSTRAP_TIMEOUT=20 "$@" \
        timeout 60 "$peer" share "$seed" > "$tmp/$name.log" 2>&1 &
}
# expect NAME PID CODE REGEX: PID (logging to $tmp/NAME.log) exits with CODE and its log
# matches REGEX; else shows the log
expect() {
    local rc
    wait "$2"; rc=$?
    [ "$rc" = "$3" ] && grep -Eq -- "$4" "$tmp/$1.log" && return 0
    echo "--- $1: exit $rc (wanted $3), log (wanted /$4/):"
    sed 's/^/    /' "$tmp/$1.log"
    return 1
}

# ---- real jobs
port=$(new_port)
for r in 0 1 2; do rank tcp$r $r 3 7 ZERO_BOOTSTRAP_TCP=127.0.0.1:$port ZERO_BOOTSTRAP_SECRET="$S"; p[$r]=$!; done
ok=1
for r in 0 1 2; do expect tcp$r "${p[$r]}" 0 "rank $r: blob ok" || ok=0; done
[ $ok = 1 ] && pass "3 ranks over TCP with the job's secret" || bad "3 ranks over TCP with the job's secret"

printf '%s\n' "$S" > "$tmp/secret"
chmod 600 "$tmp/secret"
boot=$tmp/job.boot
for r in 2 1 0; do rank file$r $r 3 7 ZERO_BOOTSTRAP_FILE="$boot" ZERO_BOOTSTRAP_SECRET_FILE="$tmp/secret"; p[$r]=$!; done
ok=1
for r in 0 1 2; do expect file$r "${p[$r]}" 0 "rank $r: blob ok" || ok=0; done
mode=$(stat -c %a "$boot" 2> /dev/null)
[ "$mode" = 600 ] && [ ! -L "$boot" ] || { echo "--- $boot: mode ${mode:-missing}, wanted a regular file of mode 600"; ok=0; }
[ $ok = 1 ] && pass "3 ranks through a file (secret from a mode-0600 file; the file is mode 0600)" ||
    bad "3 ranks through a file"

NO_MPI=1 "${clean[@]}" timeout 60 bash scripts/launch_ranks.sh 2 "$peer" share 5 > "$tmp/launch.log" 2>&1 &
if expect launch $! 0 "rank 1: blob ok" && grep -q "rank 0: blob ok" "$tmp/launch.log"; then
    pass "2 ranks by scripts/launch_ranks.sh without MPI (it draws the job's secret)"
else
    bad "2 ranks by scripts/launch_ranks.sh without MPI"
fi

# ---- no secret, a weak one, one others may read
port=$(new_port)
ok=1
rank nos0 0 2 7 ZERO_BOOTSTRAP_TCP=127.0.0.1:$port ZERO_BOOTSTRAP_TIMEOUT=5; p0=$!
rank nos1 1 2 7 ZERO_BOOTSTRAP_TCP=127.0.0.1:$port ZERO_BOOTSTRAP_TIMEOUT=5; p1=$!
expect nos0 $p0 1 "rank 0: .*needs a per-job secret.*ZERO_BOOTSTRAP_SECRET" || ok=0
expect nos1 $p1 1 "rank 1: .*needs a per-job secret.*ZERO_BOOTSTRAP_SECRET" || ok=0
rank nosf0 0 2 7 ZERO_BOOTSTRAP_FILE="$tmp/nos.boot" ZERO_BOOTSTRAP_TIMEOUT=5; p0=$!
rank nosf1 1 2 7 ZERO_BOOTSTRAP_FILE="$tmp/nos.boot" ZERO_BOOTSTRAP_TIMEOUT=5; p1=$!
expect nosf0 $p0 1 "rank 0: .*needs a per-job secret.*ZERO_BOOTSTRAP_SECRET" || ok=0
expect nosf1 $p1 1 "rank 1: .*needs a per-job secret.*ZERO_BOOTSTRAP_SECRET" || ok=0
[ $ok = 1 ] && pass "no secret: TCP and file refuse to start, saying how to set one" || bad "no secret"
ok=1
cp "$tmp/secret" "$tmp/secret.open"
chmod 644 "$tmp/secret.open"
rank open0 0 2 7 ZERO_BOOTSTRAP_TCP=127.0.0.1:$port ZERO_BOOTSTRAP_SECRET_FILE="$tmp/secret.open" ZERO_BOOTSTRAP_TIMEOUT=3
expect open0 $! 1 "rank 0: .*ZERO_BOOTSTRAP_SECRET_FILE=.*mode is 0644.*chmod 600" || ok=0
rank short0 0 2 7 ZERO_BOOTSTRAP_TCP=127.0.0.1:$port ZERO_BOOTSTRAP_SECRET=hunter2 ZERO_BOOTSTRAP_TIMEOUT=3
expect short0 $! 1 "rank 0: the bootstrap secret .* is 7 bytes" || ok=0
[ $ok = 1 ] && pass "a secret file others may read, and a 7-byte secret: refused" || bad "weak secrets"

# ---- where rank 0 listens, and strays that connect but never prove anything
port=$(new_port)
tcp=ZERO_BOOTSTRAP_TCP=127.0.0.1:$port
rank st0 0 3 7 "$tcp" ZERO_BOOTSTRAP_SECRET="$S" ZERO_BOOTSTRAP_TIMEOUT=25; p0=$!
listening "$port"
ok=1
others=(127.0.0.2 ::1 $(hostname -I 2> /dev/null))
for a in "${others[@]}"; do
    if "$peer" probe "$a" "$port" > "$tmp/probe.log" 2>&1; then echo "--- $(cat "$tmp/probe.log")"; ok=0; fi
done
[ $have_ss = 1 ] && where=$(ss -ltnH "sport = :$port" | awk '{print $4}' | paste -sd ' ')
[ $ok = 1 ] && pass "rank 0 of ZERO_BOOTSTRAP_TCP=127.0.0.1:$port listens on ${where:-that address} only (refused at ${others[*]})" ||
    bad "rank 0 listens beyond the address given"

strays=(silent1 silent2 silent3 garbage1 garbage2 garbage3 junk)
for s in "${strays[@]}"; do
    case $s in
        junk) "$peer" junk 127.0.0.1 "$port" > "$tmp/$s.log" 2>&1 & ;;
        *) "$peer" "${s%[0-9]}" 127.0.0.1 "$port" 30 > "$tmp/$s.log" 2>&1 & ;;
    esac
    bg+=($!)
done
for _ in $(seq 200); do
    n=0
    for s in "${strays[@]}"; do grep -q connected "$tmp/$s.log" 2> /dev/null && n=$((n + 1)); done
    [ $n = ${#strays[@]} ] && break
    sleep 0.05
done
t0=$(date +%s%N)
rank st1 1 3 7 "$tcp" ZERO_BOOTSTRAP_SECRET="$S"
expect st1 $! 0 "rank 1: blob ok" || ok=0
ms=$((($(date +%s%N) - t0) / 1000000))
[ $ok = 1 ] && [ $ms -lt 5000 ] && pass "rank 1 joins in $ms ms while 7 stray connections are open (silent, half a line, junk)" ||
    bad "rank 1 could not join while 7 stray connections were open ($ms ms)"
# the strays' deadline passes while rank 0 still waits for rank 2
for _ in $(seq 300); do
    n=0
    for s in "${strays[@]}"; do grep -q "closed by the other side" "$tmp/$s.log" && n=$((n + 1)); done
    [ $n = ${#strays[@]} ] && break
    sleep 0.05
done
rank st2 2 3 7 "$tcp" ZERO_BOOTSTRAP_SECRET="$S"
ok=1
expect st2 $! 0 "rank 2: blob ok" || ok=0
expect st0 $p0 0 "rank 0: blob ok" || ok=0
for s in "${strays[@]}"; do
    want="closed by the other side after 1[0-4]\.[0-9] s, 0 bytes received"   # silent: at its deadline
    [ "${s%[0-9]}" = silent ] || want="closed by the other side after [0-2]\.[0-9] s, 0 bytes received"   # at once
    grep -Eq "$want" "$tmp/$s.log" || { echo "--- $s (wanted /$want/): $(cat "$tmp/$s.log")"; ok=0; }
done
[ "$(grep -c 'dropped a connection from 127.0.0.1:[0-9]* that sent 0 bytes and no complete greeting within 10 s' \
      "$tmp/st0.log")" = 3 ] || { echo "--- rank 0 did not report 3 dropped connections:"; cat "$tmp/st0.log"; ok=0; }
[ "$(grep -c 'a connection from 127.0.0.1:[0-9]* is not a rank of this job' "$tmp/st0.log")" = 4 ] ||
    { echo "--- rank 0 did not refuse 4 connections that sent text or junk:"; cat "$tmp/st0.log"; ok=0; }
[ $ok = 1 ] && pass "the strays got 0 bytes; rank 0 refused text and junk at once and dropped the silent ones after 10 s" ||
    bad "stray connections"

# ---- a host that only loopback addresses have, with ranks on other machines: refused at once
# (they could never connect, and would wait the whole bootstrap timeout)
ok=1
for h in localhost 127.0.1.1; do
    port=$(new_port)
    start=$SECONDS
    rank lb0 0 2 7 ZERO_BOOTSTRAP_TCP=$h:$port ZERO_BOOTSTRAP_SECRET="$S" LOCAL_WORLD_SIZE=1
    expect lb0 $! 1 "rank 0: cannot share .*: $h resolves only to loopback addresses \((127\.0\.[01]\.1|\[::1\]):$port.*cannot reach \(LOCAL_WORLD_SIZE=1 of WORLD_SIZE=2\); give an address of this machine" &&
        [ $((SECONDS - start)) -lt 10 ] || { echo "--- $h: refused after $((SECONDS - start)) s"; ok=0; }
done
[ $ok = 1 ] && pass "a loopback host with ranks on other machines (LOCAL_WORLD_SIZE=1 of 2) is refused at once" ||
    bad "a loopback host with ranks on other machines"
# a host with an address this machine lacks beside one it has: rank 0 listens on the one it has
port=$(new_port)
rank sk0 0 2 7 ZERO_BOOTSTRAP_TCP=zero-shim-host:$port ZERO_BOOTSTRAP_SECRET="$S" LD_PRELOAD="$shim" SHIM_ADDRS=192.0.2.1,127.0.0.1
p0=$!
rank sk1 1 2 7 ZERO_BOOTSTRAP_TCP=zero-shim-host:$port ZERO_BOOTSTRAP_SECRET="$S" LD_PRELOAD="$shim" SHIM_ADDRS=127.0.0.1
ok=1
expect sk1 $! 0 "rank 1: blob ok" || ok=0
expect sk0 $p0 0 "rank 0: blob ok" || ok=0
grep -q "zero: rank 0: bootstrap host zero-shim-host: not listening on 192.0.2.1:$port (Cannot assign requested address)" \
    "$tmp/sk0.log" || { echo "--- rank 0 did not say it passed over 192.0.2.1:"; cat "$tmp/sk0.log"; ok=0; }
[ $ok = 1 ] && pass "a host resolving to 192.0.2.1 and 127.0.0.1: rank 0 passes over the first, saying so, and listens on the second" ||
    bad "a host with an address this machine lacks"

# ---- an impersonator: rank 1 without the job's secret
port=$(new_port)
tcp=ZERO_BOOTSTRAP_TCP=127.0.0.1:$port
rank imp0 0 2 7 "$tcp" ZERO_BOOTSTRAP_SECRET="$S"; p0=$!
listening "$port"
ok=1
rank imp 1 2 7 "$tcp" ZERO_BOOTSTRAP_SECRET="$W"
expect imp $! 1 "rank 1: refused" || ok=0
grep -q "blob ok\|WRONG" "$tmp/imp.log" && ok=0
rank imp1 1 2 7 "$tcp" ZERO_BOOTSTRAP_SECRET="$S"
expect imp1 $! 0 "rank 1: blob ok" || ok=0
expect imp0 $p0 0 "refused a connection from 127.0.0.1:[0-9]+ claiming rank 1 of WORLD_SIZE=2: its proof does not match" ||
    ok=0
[ $ok = 1 ] && pass "an impersonator of rank 1 (another secret) is refused and gets nothing; the real rank 1 joins" ||
    bad "impersonator"

# ---- rogue listeners: the port taken before rank 0
port=$(new_port)
tcp=ZERO_BOOTSTRAP_TCP=127.0.0.1:$port
rank rogue 0 2 99 "$tcp" ZERO_BOOTSTRAP_SECRET="$W" ZERO_BOOTSTRAP_TIMEOUT=8; pr=$!
bg+=($pr)
listening "$port"
ok=1
rank rog1 1 2 7 "$tcp" ZERO_BOOTSTRAP_SECRET="$S"
expect rog1 $! 1 "rank 1: the process at ZERO_BOOTSTRAP_TCP=127.0.0.1:$port .*(not rank 0 of this job|does not accept this job's bootstrap secret)" ||
    ok=0
rank rog0 0 2 7 "$tcp" ZERO_BOOTSTRAP_SECRET="$S"
expect rog0 $! 1 "rank 0: cannot share .*cannot listen on 127.0.0.1:$port: Address already in use" || ok=0
[ $ok = 1 ] && pass "a rogue rank 0 with another secret on the port: rank 1 refuses its id, the real rank 0 says the port is taken" ||
    bad "rogue listener (another secret)"
kill $pr 2> /dev/null

port=$(new_port)
"$peer" forger "$port" 99 10 > "$tmp/forger.log" 2>&1 &
bg+=($!)
listening "$port"
rank forg1 1 2 7 ZERO_BOOTSTRAP_TCP=127.0.0.1:$port ZERO_BOOTSTRAP_SECRET="$S" ZERO_BOOTSTRAP_TIMEOUT=5
if expect forg1 $! 1 "rank 1: the process at ZERO_BOOTSTRAP_TCP=127.0.0.1:$port is not rank 0 of this job: its proof does not match"; then
    pass "a forger speaking the protocol without the secret: rank 1 refuses its id"
else
    bad "forger"
fi

# ---- an on-path relay sees no id
port=$(new_port)
rport=$(new_port)
"$peer" relay "$rport" 127.0.0.1 "$port" 7 15 > "$tmp/relay.log" 2>&1 &
prelay=$!
bg+=($prelay)
rank rel0 0 2 7 ZERO_BOOTSTRAP_TCP=127.0.0.1:$port ZERO_BOOTSTRAP_SECRET="$S"; p0=$!
listening "$port"
listening "$rport"
rank rel1 1 2 7 ZERO_BOOTSTRAP_TCP=127.0.0.1:$rport ZERO_BOOTSTRAP_SECRET="$S"; p1=$!
ok=1
expect rel0 $p0 0 "rank 0: blob ok" || ok=0
expect rel1 $p1 0 "rank 1: blob ok" || ok=0
expect relay $prelay 0 "rank 0's blob was not among them" || ok=0
[ $ok = 1 ] && pass "through an on-path relay: the job starts, the id never crosses in the clear ($(grep -o '[0-9]* bytes crossed' "$tmp/relay.log"))" ||
    bad "relay"

# ---- a stale bootstrap file of an earlier job
stale=$tmp/stale.boot
rank olda0 0 2 3 ZERO_BOOTSTRAP_FILE="$stale" ZERO_BOOTSTRAP_SECRET="$W"; p0=$!
rank olda1 1 2 3 ZERO_BOOTSTRAP_FILE="$stale" ZERO_BOOTSTRAP_SECRET="$W"; p1=$!
ok=1
expect olda0 $p0 0 "rank 0: blob ok" && expect olda1 $p1 0 "rank 1: blob ok" || ok=0
rank new1 1 2 4 ZERO_BOOTSTRAP_FILE="$stale" ZERO_BOOTSTRAP_SECRET="$S"; p1=$!
# rank 0 comes once rank 1 has met the stale file (up to 15 s on a busy machine)
for _ in $(seq 300); do grep -q "rank 1: ignoring" "$tmp/new1.log" 2> /dev/null && break; sleep 0.05; done
rank new0 0 2 4 ZERO_BOOTSTRAP_FILE="$stale" ZERO_BOOTSTRAP_SECRET="$S"; p0=$!
expect new0 $p0 0 "rank 0: blob ok" || ok=0
expect new1 $p1 0 "rank 1: blob ok" || ok=0
grep -q "rank 1: ignoring ZERO_BOOTSTRAP_FILE=$stale: it does not verify against this job's bootstrap secret" "$tmp/new1.log" ||
    { echo "--- rank 1 did not say it ignored the stale file"; ok=0; }
# a stale file and no rank 0: refused at the deadline
rank lone1 1 2 4 ZERO_BOOTSTRAP_FILE="$stale" ZERO_BOOTSTRAP_SECRET="$(secret)" ZERO_BOOTSTRAP_TIMEOUT=2
expect lone1 $! 1 "rank 1: refusing ZERO_BOOTSTRAP_FILE=$stale: after 2 s it still holds a file this job's rank 0 did not write" ||
    ok=0
[ $ok = 1 ] && pass "a stale bootstrap file of an earlier job is refused; the job takes its own" || bad "stale bootstrap file"

# ---- a FIFO planted at the bootstrap file's name, or given as the secret file: refused, not
# waited on for a writer that never comes
ok=1
mkfifo "$tmp/fifo.boot" "$tmp/fifo.secret"
rank fifo1 1 2 4 ZERO_BOOTSTRAP_FILE="$tmp/fifo.boot" ZERO_BOOTSTRAP_SECRET="$(secret)" ZERO_BOOTSTRAP_TIMEOUT=2
expect fifo1 $! 1 "rank 1: refusing ZERO_BOOTSTRAP_FILE=$tmp/fifo.boot" || ok=0
rank fifosec0 0 2 7 ZERO_BOOTSTRAP_TCP=127.0.0.1:$port ZERO_BOOTSTRAP_SECRET_FILE="$tmp/fifo.secret" ZERO_BOOTSTRAP_TIMEOUT=2
expect fifosec0 $! 1 "rank 0: .*ZERO_BOOTSTRAP_SECRET_FILE=.*not a regular file" || ok=0
[ $ok = 1 ] && pass "a FIFO at the bootstrap file's name or as the secret file: refused within the timeout" || bad "FIFO"

# ---- a link planted where rank 0 used to put its temporary file (PATH.tmp.PID)
plant=$tmp/plant.boot
echo precious > "$tmp/victim"
"${clean[@]}" RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 ZERO_BOOTSTRAP_FILE="$plant" ZERO_BOOTSTRAP_SECRET="$S" \
    ZERO_BOOTSTRAP_TIMEOUT=20 timeout 60 bash -c 'ln -s "$1" "$2.tmp.$$" && exec "$3" share 5' _ "$tmp/victim" "$plant" \
    "$peer" > "$tmp/plant0.log" 2>&1 &
p0=$!
rank plant1 1 2 5 ZERO_BOOTSTRAP_FILE="$plant" ZERO_BOOTSTRAP_SECRET="$S"; p1=$!
ok=1
expect plant0 $p0 0 "rank 0: blob ok" || ok=0
expect plant1 $p1 0 "rank 1: blob ok" || ok=0
[ "$(cat "$tmp/victim")" = precious ] || { echo "--- the link's target was overwritten"; ok=0; }
[ -f "$plant" ] && [ ! -L "$plant" ] && [ "$(stat -c %a "$plant")" = 600 ] ||
    { echo "--- $plant is not a regular file of mode 600"; ls -l "$tmp"; ok=0; }
[ $ok = 1 ] && pass "a symbolic link planted at PATH.tmp.PID: its target untouched, the bootstrap file a regular one of mode 0600" ||
    bad "planted link"

# a path no file of rank 0's can appear at (a folder in it is a file): said at once, not
# waited on for the whole ZERO_BOOTSTRAP_TIMEOUT
start=$SECONDS
rank notdir 1 2 5 ZERO_BOOTSTRAP_FILE="$tmp/secret/boot" ZERO_BOOTSTRAP_SECRET="$S"
if expect notdir $! 1 "rank 1: cannot open ZERO_BOOTSTRAP_FILE=$tmp/secret/boot: Not a directory" &&
   [ $((SECONDS - start)) -lt 10 ]; then pass "a path through a file: refused at once ($((SECONDS - start)) s)"
else bad "a path through a file ($((SECONDS - start)) s)"; fi

if [ $fail = 0 ]; then echo "test_bootstrap_security: all passed"; else echo "test_bootstrap_security: FAILED"; fi
exit $fail
