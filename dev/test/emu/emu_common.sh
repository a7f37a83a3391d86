# emu_common.sh (sourced by the emulated tests, from the repository root): EMU, the emulated
# programs' folder (EMU_DIR, default build/emu); $tmp, a scratch folder removed at exit;
# ok/bad, which print PASS/FAIL lines and count them in pass/failn; need_emu PROG..., which
# stops the test with a FAIL line when one of the emulated programs is not built.
EMU=${EMU_DIR:-build/emu}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0; failn=0
ok() { echo "PASS $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; failn=$((failn + 1)); }
# OpenMP's idle threads wait passively: by default each spins for a while at the end of
# every parallel region (the emulated cuBLASLt's, the host references'), which on the
# 2-core CI machine was a third of the emulated tests' CPU time (dev/cuda_emu/README.md, Cost).
export OMP_WAIT_POLICY=passive
need_emu() {
    for p in "$@"; do [ -x "$EMU/$p" ] || { echo "FAIL: $EMU/$p not built (make emu, or make test)"; exit 1; }; done
}
