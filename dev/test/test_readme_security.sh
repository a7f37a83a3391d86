#!/usr/bin/env bash
# test_readme_security.sh: README.md has a Security section (issue 17.10), and what it says
# is what the code does. The behaviour itself is tested elsewhere (test_bootstrap_security.sh,
# test_run_files.sh, test_ckpt_prune.sh); this checks that the section exists, names the
# settings the code reads, and that each mechanism it states is in the file it names:
#  - the bootstrap secret settings, read by zero/comm/bootstrap_tcp.c, and its 10 s deadline
#  - the exclusive, link-refusing creation of the bootstrap file, of temp files
#    (llmc/atomic_file.c, zero/io/zfile.c) and of NVMe swap files (mode 0600, unlinked)
#  - scripts/launch_ranks.sh drawing a secret per job in a private folder it removes
#  - the tests it points to exist
set -u
cd "$(dirname "$0")/../.."
fail() { echo "FAIL test_readme_security: $*"; exit 1; }
sec=$(sed -n '/^## Security$/,/^## /p' README.md | sed '$d')
[ -n "$sec" ] || fail "README.md has no '## Security' section"
says() { grep -qF -- "$1" <<< "$sec" || fail "the Security section does not say: $1"; }
has() { grep -qF -- "$2" "$1" || fail "$1 lacks '$2', which the Security section states"; }

for v in ZERO_BOOTSTRAP_SECRET ZERO_BOOTSTRAP_SECRET_FILE ZERO_BOOTSTRAP_TCP ZERO_BOOTSTRAP_FILE; do
    says "$v"
    grep -q "getenv(\"$v\")" zero/comm/*.c zero/cuda/*.cu || fail "the Security section names $v, which no code reads"
done
says "mode 0600"
has zero/comm/bootstrap_tcp.c 'st.st_mode & 077'                       # a secret file others may read: refused
says "each with a 10 s deadline"
has zero/comm/bootstrap_tcp.c '#define HANDSHAKE_S 10.0'
says 'O_CREAT|O_EXCL|O_NOFOLLOW'
has zero/comm/bootstrap_tcp.c 'O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600'
has llmc/atomic_file.c 'O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC'
has zero/io/zfile.c 'O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC'
has llmc/run/run_lock.c 'O_NOFOLLOW'                                   # OUT/.lock
says 'zero_swap_rankR_PID.bin'
has zero/io/nvme.c '"%s/zero_swap_rank%d_%ld.bin"'
has zero/io/nvme.c 'O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0600'
grep -A 20 'O_CREAT | O_EXCL | O_DIRECT' zero/io/nvme.c | grep -q 'unlink(n->path)' || fail "nvme.c does not unlink the swap file after creating it"
says "scripts/launch_ranks.sh"
has scripts/launch_ranks.sh 'ZERO_BOOTSTRAP_SECRET'
has scripts/launch_ranks.sh 'mktemp -d'                                 # mode 0700
has scripts/launch_ranks.sh "trap 'rm -rf \"\$bootdir\"' EXIT"
for t in $(grep -o 'dev/test/test_[a-z_]*\.sh' <<< "$sec" | sort -u); do
    [ -f "$t" ] || fail "the Security section points to $t, which does not exist"
done
echo "PASS test_readme_security"
