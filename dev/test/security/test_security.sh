#!/usr/bin/env bash
# test_security.sh: what SECURITY.md says about files and secrets, shown by running the CPU
# trainer (./train_gpt2) and the launcher. The bootstrap's attacks are
# test_bootstrap_security.sh's, planted temp-file and lock links test_run_files.sh's, pruning
# test_ckpt_prune.sh's; this covers the rest:
#  1. a run's files and folders take the process's umask: 0644/0755 under umask 022, and
#     0600/0700 under umask 077 (unsharded and -z 1: checkpoints, model files, logs, reports)
#  2. an NVMe swap file (--offload-optimizer nvme) is unnamed (O_TMPFILE) or
#     DIR/zero_swap_rank0_PID.bin unlinked at once, mode 0600, while the run holds it open
#     (the folder shows no file), and gone at the end; a symbolic link planted at that name
#     stops the start of a run whose file is named, is never opened by one whose file is
#     unnamed, and its target stays untouched
#  3. scripts/launch_ranks.sh without MPI: every rank of a job gets the same secret of 32
#     random bytes, two jobs get different ones, and the bootstrap file's folder is private
#     (mode 0700, this user's) and removed when the job ends
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
run_pid=
cleanup() { [ -n "$run_pid" ] && kill "$run_pid" 2> /dev/null; wait 2> /dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL test_security: $*"; exit 1; }
[ -x ./train_gpt2 ] || fail "./train_gpt2 is not built (make train_gpt2)"
tiny=(-e d2c64h2t64 -b 1 -t 64 -v 0 -s 0)

# 1. modes follow the umask
# modes DIR: "MODE NAME" for everything under DIR, DIR itself included
modes() { find "$1" -printf '%m %P\n' | sort -k2; }
for mask in 022 077; do
    for how in unsharded z1; do
        out=$tmp/umask$mask.$how
        zflag=(); [ "$how" = z1 ] && zflag=(-z 1)
        (umask "$mask"; exec ./train_gpt2 "${zflag[@]}" "${tiny[@]}" -x 2 -n 2 -o "$out") > "$out.log" 2>&1 \
            || { tail "$out.log"; fail "the $how run under umask $mask failed"; }
        [ -f "$out/model_final.bin" ] || fail "the $how run wrote no model_final.bin"
        if [ "$mask" = 022 ]; then want_f=644; want_d=755; else want_f=600; want_d=700; fi
        bad=$(find "$out" \( -type f ! -perm "$want_f" \) -o \( -type d ! -perm "$want_d" \))
        [ -z "$bad" ] || { modes "$out"; fail "under umask $mask ($how) not $want_f/$want_d: $bad"; }
    done
    echo "umask $mask: every file $want_f, every folder $want_d (unsharded and -z 1)"
done

# 2. the NVMe swap file
nv=$tmp/nvme
mkdir "$nv"
./train_gpt2 -z 1 "${tiny[@]}" -x 100000 --offload-optimizer nvme --nvme-path "$nv" -o "$tmp/swap" \
    > "$tmp/swap.log" 2>&1 &
run_pid=$!
swap=
for _ in $(seq 600); do   # up to 60 s for the swap file to be open
    kill -0 "$run_pid" 2> /dev/null || { tail "$tmp/swap.log"; fail "the NVMe run ended early"; }
    for fd in /proc/"$run_pid"/fd/*; do
        t=$(readlink "$fd" 2> /dev/null) || continue
        # unlinked at once, or made unnamed (O_TMPFILE: the kernel shows "DIR/#INODE (deleted)")
        case $t in "$nv/zero_swap_rank0_$run_pid.bin (deleted)"|"$nv/#"*" (deleted)") swap=$fd; seen=$t; break ;; esac
    done
    [ -n "$swap" ] && break
    sleep 0.1
done
[ -n "$swap" ] || { ls -l /proc/"$run_pid"/fd; fail "no unlinked or unnamed swap file in $nv held open"; }
mode=$(stat -L -c %a "$swap")
[ "$mode" = 600 ] || fail "the swap file's mode is $mode, not 600"
[ -z "$(ls -A "$nv")" ] || fail "the swap folder shows files while the run holds its swap file: $(ls -A "$nv")"
kill "$run_pid"; wait "$run_pid" 2> /dev/null; run_pid=
[ -z "$(ls -A "$nv")" ] || fail "files left in the swap folder after the run: $(ls -A "$nv")"
echo "swap file: open as ${seen/$run_pid/PID}, mode 600; the folder stays empty"

# a link planted at the swap file's name (the PID is known: the shell execs the trainer): the
# start refused where the file is named; where it is unnamed the name is never opened, and
# the run goes on without writing through the link
echo "not the trainer's" > "$tmp/target"
bash -c 'ln -s "$1" "$2/zero_swap_rank0_$$.bin" && shift 2 && exec "$@"' plant "$tmp/target" "$nv" \
    ./train_gpt2 -z 1 "${tiny[@]}" -x 2 --offload-optimizer nvme --nvme-path "$nv" -o "$tmp/plant" > "$tmp/plant.log" 2>&1
rc=$?
case $seen in
    "$nv/#"*) [ $rc -eq 0 ] || { tail "$tmp/plant.log"; fail "an unnamed swap file's run failed beside a planted link (exit $rc)"; } ;;
    *) [ $rc -ne 0 ] || fail "the run started through a link planted at its swap file's name" ;;
esac
[ "$(cat "$tmp/target")" = "not the trainer's" ] || fail "the planted link's target was written"
echo "a link planted at the swap file's name: $([ $rc -eq 0 ] && echo "never opened (the file is unnamed)" ||
    echo "refused ($(grep -m1 -i 'swap\|nvme' "$tmp/plant.log"))")"

# 3. the launcher's secret and bootstrap folder, without MPI
show='d=$(dirname "$ZERO_BOOTSTRAP_FILE"); echo "$RANK $ZERO_BOOTSTRAP_SECRET $d $(stat -c "%a %u" "$d")"'
for job in 1 2; do
    NO_MPI=1 scripts/launch_ranks.sh 3 bash -c "$show" > "$tmp/job$job.txt" 2>&1 \
        || { cat "$tmp/job$job.txt"; fail "launch_ranks.sh job $job failed"; }
    [ "$(wc -l < "$tmp/job$job.txt")" -eq 3 ] || { cat "$tmp/job$job.txt"; fail "job $job: not 3 ranks"; }
    [ "$(cut -d' ' -f2- "$tmp/job$job.txt" | sort -u | wc -l)" -eq 1 ] \
        || { cat "$tmp/job$job.txt"; fail "job $job: the ranks got different secrets or folders"; }
    read -r _ secret dir mode uid < "$tmp/job$job.txt"
    [[ "$secret" =~ ^[0-9a-f]{64}$ ]] || fail "job $job: the secret is not 32 bytes in hex: $secret"
    [ "$mode $uid" = "700 $(id -u)" ] || fail "job $job: the bootstrap folder $dir has mode $mode, owner $uid"
    [ ! -e "$dir" ] || fail "job $job: the bootstrap folder $dir is left after the job"
    eval "secret$job=\$secret"
done
[ "$secret1" != "$secret2" ] || fail "two jobs got the same secret"
echo "launch_ranks.sh: one 32-byte secret per job, a private bootstrap folder removed at the end"
echo "PASS test_security"
