#!/usr/bin/env bash
# The logic of dev/test/zero/gpu_zero.sh (zero/'s CUDA backend at 1, 2 and 4 ranks on one
# GPU, the launches without MPI, the refusals and the deaths) with PREBUILT, as the
# lent machine's lane toy runs it, on the emulated builds of gpu_zero_toy and
# gpu_backend_ops: every case passes and the script exits 0; a rank whose checks fail makes
# its case FAIL and the exit 1; a PREBUILT folder without the programs is refused by name.
set -u
cd "$(dirname "$0")/../../.."
source dev/test/emu/emu_common.sh
need_emu gpu_zero_toy gpu_backend_ops
export CUDA_EMU_QUIET=1
PREBUILT=$EMU LIMIT=200 bash dev/test/zero/gpu_zero.sh np1 np2 np4 env errors bootstrap deaths > "$tmp/all.txt" 2>&1
rc=$?
cases=("collectives, 1 rank" "all, 1 rank" "all, 2 ranks" "all, 4 ranks" "collectives, 2 ranks without MPI"
       "collectives, 3 ranks without MPI" "errors, 2 ranks" "bootstrap over file" "bootstrap over tcp" "timeout" "teardown" "queued" "ring" "misuse")
missing=()
for c in "${cases[@]}"; do grep -q "^PASS: $c" "$tmp/all.txt" || missing+=("$c"); done
if [ $rc -eq 0 ] && [ ${#missing[@]} -eq 0 ] && ! grep -q "^FAIL" "$tmp/all.txt"
then ok "PREBUILT=$EMU: all ${#cases[@]} cases pass, exit 0"
else bad "PREBUILT=$EMU: exit $rc, no PASS for: ${missing[*]}"; grep -e "^FAIL" -e "^PASS" "$tmp/all.txt"; fi

# rank 1 of the 2-rank run reports a failed check: the case fails, and so does the script
mkdir -p "$tmp/bad"
cp "$EMU/gpu_backend_ops" "$tmp/bad/"
cat > "$tmp/bad/gpu_zero_toy" <<EOF
#!/usr/bin/env bash
r=\${OMPI_COMM_WORLD_RANK:-\${RANK:-0}}
"$(cd "$EMU" && pwd)/gpu_zero_toy" "\$@" || exit
# its checks done with the others (a rank that left early would stall them in a collective)
if [ "\$1" = all ] && [ "\$r" = 1 ]; then echo "stage 2: FAIL: a stand-in's broken check"; echo "0 passed, 1 failed"; exit 1; fi
EOF
chmod +x "$tmp/bad/gpu_zero_toy"
PREBUILT=$tmp/bad LIMIT=200 bash dev/test/zero/gpu_zero.sh np2 > "$tmp/bad.txt" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "^FAIL: all, 2 ranks" "$tmp/bad.txt" && grep -q "^PASS: collectives, 1 rank" "$tmp/bad.txt" &&
    ok "a rank's failed check: 'FAIL: all, 2 ranks', exit 1" || { bad "a rank's failed check: exit $rc"; tail -n 5 "$tmp/bad.txt"; }

PREBUILT=$tmp/none bash dev/test/zero/gpu_zero.sh np1 > "$tmp/none.txt" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "^FAIL: PREBUILT=$tmp/none has no gpu_zero_toy and gpu_backend_ops" "$tmp/none.txt" &&
    ok "a PREBUILT folder without the programs: refused by name, exit 1" || { bad "PREBUILT=$tmp/none: exit $rc"; cat "$tmp/none.txt"; }
echo "$pass passed, $failn failed"
[ "$failn" -eq 0 ]
