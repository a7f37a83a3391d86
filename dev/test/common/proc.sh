# proc.sh (sourced by shell tests): whether processes live.
# running PID: in /proc and not a zombie (PID 1 of a container may never reap an orphan)
running() { local st; st=$(sed 's/.*) //' "/proc/$1/stat" 2> /dev/null | cut -d' ' -f1); [ -n "$st" ] && [ "$st" != Z ]; }
# alive FILE: how many of the PIDs listed in FILE are running
alive() { local p n=0; for p in $(cat "$1" 2> /dev/null); do running "$p" && n=$((n + 1)); done; echo $n; }
