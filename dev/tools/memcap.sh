#!/usr/bin/env bash
# memcap.sh: runs a command in a memory cgroup of its own with a hard cap, and says what it
# used. The cgroup's own counters are the measure: its peak charge (anonymous memory, page
# cache the command's files left and kernel memory, as the kernel counts them against the
# cap), how often the cap was hit, and whether the kernel's OOM killer ended the command.
#
#   dev/tools/memcap.sh CAP [--report FILE] -- COMMAND [ARGS...]
#   CAP        bytes, or with a suffix: 512M = 512 MiB, 2G = 2 GiB (K, M, G, T: powers of 1024)
#   --report   also write the figures to FILE as key=value lines: status, exit_code,
#              peak_bytes, limit_hits, oom_kills, cap_bytes, cgroup (v1 or v2)
# MEMCAP_SAMPLE=FILE: the cgroup's charge every 0.1 s while the command runs, as lines
# "SECONDS BYTES" (seconds since its start), to see when the peak comes.
# Exits with the command's status (137 when the OOM killer ended it). Swap is capped too
# (memory.swap.max 0, or memory.memsw.limit_in_bytes = CAP), so a command over the cap is
# killed rather than swapped out.
#
# Needs root and a memory cgroup: cgroup v2 where its mount offers the memory controller,
# else v1's memory hierarchy. It refuses with a message (exit 2) where neither is
# writable, and removes the cgroup it made on every way out (the command's end, a failure,
# Ctrl-C, SIGTERM), killing whatever the command left running in it.
#
# Sourced (`source dev/tools/memcap.sh`), it defines memcap_check (0 when a cgroup can be
# made, else 1 with the reason in MEMCAP_WHY) and memcap_run CAP REPORT COMMAND... .
set -u

memcap_bytes() {   # SIZE -> bytes
    local s=$1 n u
    n=${s%[KkMmGgTt]}
    u=${s#"$n"}
    [[ "$n" =~ ^[0-9]+$ ]] || { echo "memcap: '$s' is not a size (a number, or one with K, M, G or T)" >&2; return 1; }
    case "$u" in
        "") echo "$n" ;; K|k) echo $((n << 10)) ;; M|m) echo $((n << 20)) ;; G|g) echo $((n << 30)) ;; T|t) echo $((n << 40)) ;;
    esac
}

# Where a cgroup can be made: sets MEMCAP_KIND (v2 or v1) and MEMCAP_PARENT, or MEMCAP_WHY.
memcap_check() {
    MEMCAP_WHY=""
    if [ "$(id -u)" -ne 0 ]; then MEMCAP_WHY="memory cgroups need root (this is uid $(id -u))"; return 1; fi
    local v2 v1
    v2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
    if [ -n "$v2" ] && [ -r "$v2/cgroup.controllers" ] && grep -qw memory "$v2/cgroup.controllers"; then
        if grep -qw memory "$v2/cgroup.subtree_control" 2> /dev/null || echo +memory > "$v2/cgroup.subtree_control" 2> /dev/null; then
            MEMCAP_KIND=v2 MEMCAP_PARENT=$v2
            return 0
        fi
    fi
    v1=$(awk '$3 == "cgroup" && $4 ~ /(^|,)memory(,|$)/ { print $2; exit }' /proc/mounts)
    if [ -n "$v1" ] && [ -w "$v1" ] && [ -e "$v1/memory.limit_in_bytes" ]; then
        MEMCAP_KIND=v1 MEMCAP_PARENT=$v1
        return 0
    fi
    MEMCAP_WHY="no writable memory cgroup: cgroup v2 ${v2:+at $v2 }without a memory controller this process can enable, and no cgroup v1 memory hierarchy${v1:+ writable at $v1}"
    return 1
}

MEMCAP_DIR=""
memcap_cleanup() {
    [ -n "$MEMCAP_DIR" ] && [ -d "$MEMCAP_DIR" ] || return 0
    local i pid
    for i in 1 2 3 4 5 6 7 8 9 10; do
        while read -r pid; do kill -9 "$pid" 2> /dev/null; done < "$MEMCAP_DIR/cgroup.procs"
        rmdir "$MEMCAP_DIR" 2> /dev/null && break
        sleep 0.2
    done
    [ -d "$MEMCAP_DIR" ] && echo "memcap: could not remove $MEMCAP_DIR (processes still in it?)" >&2
    MEMCAP_DIR=""
}

memcap_field() {   # FILE KEY: the value of "KEY N" in a cgroup file (0 when absent)
    awk -v k="$2" '$1 == k { print $2; found = 1 } END { if (!found) print 0 }' "$1" 2> /dev/null
}

# memcap_run CAP REPORT COMMAND...: runs COMMAND in a new cgroup capped at CAP (a size), writes
# the figures to REPORT (key=value; may be "" for none), prints them on stderr, returns its status.
memcap_run() {
    local cap report=$2 rc
    cap=$(memcap_bytes "$1") || return 2
    shift 2
    [ -n "${MEMCAP_KIND:-}" ] || memcap_check || { echo "memcap: $MEMCAP_WHY" >&2; return 2; }
    MEMCAP_DIR="$MEMCAP_PARENT/memcap_$$_$RANDOM"
    mkdir "$MEMCAP_DIR" || { echo "memcap: cannot create $MEMCAP_DIR" >&2; MEMCAP_DIR=""; return 2; }
    if [ "$MEMCAP_KIND" = v2 ]; then
        echo "$cap" > "$MEMCAP_DIR/memory.max" || { memcap_cleanup; return 2; }
        [ -e "$MEMCAP_DIR/memory.swap.max" ] && echo 0 > "$MEMCAP_DIR/memory.swap.max"
    else
        echo "$cap" > "$MEMCAP_DIR/memory.limit_in_bytes" || { memcap_cleanup; return 2; }
        [ -e "$MEMCAP_DIR/memory.memsw.limit_in_bytes" ] && echo "$cap" > "$MEMCAP_DIR/memory.memsw.limit_in_bytes"
    fi
    local sampler="" usage=memory.current
    [ "$MEMCAP_KIND" = v1 ] && usage=memory.usage_in_bytes
    if [ -n "${MEMCAP_SAMPLE:-}" ]; then
        ( t0=$(date +%s.%N); while u=$(cat "$MEMCAP_DIR/$usage" 2> /dev/null); do
              echo "$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.2f", a - b }') $u"; sleep 0.02; done ) \
            > "$MEMCAP_SAMPLE" &
        sampler=$!
    fi
    # the command joins the cgroup before it starts: everything it allocates is charged there
    ( echo "$BASHPID" > "$MEMCAP_DIR/cgroup.procs" && exec "$@" )
    rc=$?
    [ -n "$sampler" ] && { kill "$sampler" 2> /dev/null; wait "$sampler" 2> /dev/null; }
    local peak hits kills
    if [ "$MEMCAP_KIND" = v2 ]; then
        peak=$(cat "$MEMCAP_DIR/memory.peak" 2> /dev/null || echo 0)
        hits=$(memcap_field "$MEMCAP_DIR/memory.events" max)
        kills=$(memcap_field "$MEMCAP_DIR/memory.events" oom_kill)
    else
        peak=$(cat "$MEMCAP_DIR/memory.max_usage_in_bytes")
        hits=$(cat "$MEMCAP_DIR/memory.failcnt")
        kills=$(memcap_field "$MEMCAP_DIR/memory.oom_control" oom_kill)
    fi
    local status=ok
    [ "$rc" -ne 0 ] && status=failed
    [ "$kills" -gt 0 ] && status=killed
    memcap_cleanup
    printf 'memcap: %s: exit %d, peak %d bytes (%.1f MiB) of a %d-byte cap, the cap hit %d times, %d OOM kills\n' \
        "$status" "$rc" "$peak" "$(awk -v p="$peak" 'BEGIN { print p / 1048576 }')" "$cap" "$hits" "$kills" >&2
    if [ -n "$report" ]; then
        printf 'status=%s\nexit_code=%d\npeak_bytes=%d\nlimit_hits=%d\noom_kills=%d\ncap_bytes=%d\ncgroup=%s\n' \
            "$status" "$rc" "$peak" "$hits" "$kills" "$cap" "$MEMCAP_KIND" > "$report"
    fi
    return "$rc"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    if [ $# -lt 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
        sed -n '2,/^set -u/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'
        [ $# -ge 1 ]; exit $?
    fi
    cap=$1 report=""
    shift
    [ "${1:-}" = --report ] && { report=$2; shift 2; }
    [ "${1:-}" = -- ] && shift
    [ $# -ge 1 ] || { echo "memcap: no command (memcap.sh CAP [--report FILE] -- COMMAND...)" >&2; exit 2; }
    memcap_check || { echo "memcap: $MEMCAP_WHY" >&2; exit 2; }
    trap memcap_cleanup EXIT
    trap 'memcap_cleanup; exit 130' INT
    trap 'memcap_cleanup; exit 143' TERM
    memcap_run "$cap" "$report" "$@"
    exit $?
fi
