#!/usr/bin/env bash
# test_zckpt_crafted.sh: zero/'s checkpoint reader against crafted sharded checkpoints, under
# AddressSanitizer and UndefinedBehaviorSanitizer (memory safety):
#  1. a crafted checkpoint: a manifest whose 513 element counts (each at most
#     2^53, the largest a manifest allows) sum to 2^62 + 16, so that the total times 4 wraps
#     to a 64-byte buffer, and a 12,580-byte rank file with valid CRCs whose header-implied
#     size wraps to its real size. zero_consolidate must refuse it, naming the manifest and
#     the total, with no sanitizer report and no output file; the same with --state m.
#  2. the structure-aware fuzz target dev/fuzz/fuzz_zckpt_crafted.c (valid CRCs, counts that
#     wrap, edited headers and manifests) over 3000 generated inputs, and 1000 of another seed
#     whose last saved rank may own nothing, its rules all held and
#     no sanitizer report; and, where clang has libFuzzer, its libFuzzer build for a few
#     seconds from about 100 of those inputs.
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_zckpt_crafted: $*"; exit 1; }
san=(-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all)
flags=(-std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I.)
reader=(zero/io/consolidate.c zero/io/zckpt.c zero/io/zfile.c zero/partition.c)
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1
sanitizer_report() { grep -q "runtime error\|ERROR: AddressSanitizer\|ERROR: LeakSanitizer" "$1"; }

${CC:-cc} "${flags[@]}" "${san[@]}" zero/tools/zero_consolidate_main.c "${reader[@]}" -lcjson -lz -lm \
    -o "$tmp/zero_consolidate" 2> "$tmp/build.log" || { cat "$tmp/build.log"; fail "zero_consolidate does not build with sanitizers"; }

# 1. the crafted checkpoint, built independently of the reader (zlib's CRC-32, as zckpt writes it)
python3 - "$tmp/crafted" <<'EOF' || fail "cannot build the crafted checkpoint"
import json, os, struct, sys, zlib
out, step, world, run_id = sys.argv[1], 7, 1, bytes(range(16))
# read first: 2^40 elements (its read size passes the kernel's address check); then 511 of
# 2^53 and a remainder: 2^62 + 16 in all
numels = [1 << 40] + [1 << 53] * 511 + [(1 << 53) - (1 << 40) + 16]
assert sum(numels) == (1 << 62) + 16 and max(numels) <= 1 << 53 and (sum(numels) * 4) % (1 << 64) == 64
folder = os.path.join(out, f"zero_{step}")
os.makedirs(folder)
hs = 72 + 24 * len(numels)
h = b"ZEROSHRD" + struct.pack("<IIIIIIQQII", 2, hs, 0, world, 1, 0, step, 1234, len(numels), 0) + run_id
h += b"".join(struct.pack("<QQQ", n, 0, n) for n in numels)   # world 1: rank 0 owns everything
implied = (hs + 12 * sum(numels)) % (1 << 64)                   # wraps to hs + 192
body = h + bytes(implied - hs)
data = body + struct.pack("<I", zlib.crc32(body))
assert len(data) == 12580
open(os.path.join(folder, "rank_00000.bin"), "wb").write(data)
manifest = {"format": "zero-sharded-checkpoint", "version": 2, "run_id": run_id.hex(), "step": step, "last_t": 0,
            "world_size": world, "stage": 1, "param_dtype": "fp32", "seed": "1234", "numel_total": float(sum(numels)),
            "tensors": [{"name": f"t{i}", "numel": n} for i, n in enumerate(numels)],
            "ranks": [{"rank": 0, "file": "rank_00000.bin", "bytes": len(data), "crc32": zlib.crc32(body)}],
            "extra": None}
open(os.path.join(folder, "manifest.json"), "w").write(json.dumps(manifest, indent=1))
open(os.path.join(out, "latest_zero"), "w").write(f"{step}\n")
EOF
for state in master m; do
    "$tmp/zero_consolidate" --state $state "$tmp/crafted" latest "$tmp/out.$state" > "$tmp/crafted.$state.log" 2>&1
    rc=$?
    sanitizer_report "$tmp/crafted.$state.log" && { head -n 30 "$tmp/crafted.$state.log"; fail "--state $state: the crafted checkpoint drew a sanitizer report"; }
    [ "$rc" -eq 1 ] || { cat "$tmp/crafted.$state.log"; fail "--state $state: zero_consolidate exited $rc on the crafted checkpoint, not 1"; }
    grep -q "$tmp/crafted/zero_7/manifest.json lists 513 tensors of 4611686018427387920 elements in all, more than a checkpoint can hold" "$tmp/crafted.$state.log" \
        || { cat "$tmp/crafted.$state.log"; fail "--state $state: the refusal does not name the manifest and its total"; }
    [ -e "$tmp/out.$state" ] && fail "--state $state: an output file was written for the crafted checkpoint"
done
echo "crafted checkpoint (2^62 + 16 elements, valid CRCs): refused cleanly under ASan/UBSan:"
sed 's/^/    /' "$tmp/crafted.master.log"

# 2. the fuzz target's plain driver over a corpus it generates
${CC:-cc} "${flags[@]}" "${san[@]}" dev/fuzz/fuzz_zckpt_crafted.c "${reader[@]}" -lcjson -lz -lm -o "$tmp/fuzz" \
    2> "$tmp/fbuild.log" || { cat "$tmp/fbuild.log"; fail "the fuzz target's driver does not build with sanitizers"; }
mkdir -p "$tmp/corpus"
TMPDIR="$tmp" "$tmp/fuzz" --generate 3000 --write-corpus "$tmp/corpus" > "$tmp/fuzz.log" 2>&1
rc=$?
sanitizer_report "$tmp/fuzz.log" && { grep -m 30 -A 20 "ERROR\|runtime error" "$tmp/fuzz.log"; fail "the fuzz driver drew a sanitizer report"; }
[ "$rc" -eq 0 ] || { tail -n 20 "$tmp/fuzz.log"; fail "the fuzz driver exited $rc (a rule broken: see above)"; }
grep -q "3000 inputs, every rule held" "$tmp/fuzz.log" || { tail -n 5 "$tmp/fuzz.log"; fail "the fuzz driver did not run 3000 inputs"; }
echo "fuzz_zckpt_crafted: 3000 generated inputs under ASan/UBSan, every rule held"
# another seed: its tables leave the last saved rank owning nothing (a file no read needs,
# damaged or missing all the same must be refused)
TMPDIR="$tmp" "$tmp/fuzz" --generate 1000 --seed 1 > "$tmp/fuzz1.log" 2>&1 ||
    { tail -n 20 "$tmp/fuzz1.log"; fail "the fuzz driver, seed 1: a rule broken (see above)"; }
sanitizer_report "$tmp/fuzz1.log" && { grep -m 30 -A 20 "ERROR\|runtime error" "$tmp/fuzz1.log"; fail "seed 1: a sanitizer report"; }
echo "fuzz_zckpt_crafted --seed 1: 1000 more inputs, every rule held"

# the libFuzzer build, where clang has it (the target must stay buildable as one)
if command -v clang > /dev/null && echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' \
        | clang -x c -fsanitize=fuzzer - -o "$tmp/probe" > /dev/null 2>&1; then
    clang "${flags[@]}" -g -O1 -fsanitize=fuzzer,address,undefined -DZCK_FUZZ_LIBFUZZER dev/fuzz/fuzz_zckpt_crafted.c \
        "${reader[@]}" -lcjson -lz -o "$tmp/libfuzzer" 2> "$tmp/lbuild.log" || { cat "$tmp/lbuild.log"; fail "the libFuzzer build failed"; }
    # seeded with every 29th generated input (about 100): libFuzzer runs its whole seed corpus
    # before -max_total_time counts, and all 3000 take minutes under ASan
    mkdir -p "$tmp/seeds"
    find "$tmp/corpus" -type f | sort | awk 'NR % 29 == 1' | xargs cp -t "$tmp/seeds"
    TMPDIR="$tmp" "$tmp/libfuzzer" -max_total_time=3 -runs=1000 -artifact_prefix="$tmp/" "$tmp/seeds" > "$tmp/libfuzzer.log" 2>&1 \
        || { tail -n 30 "$tmp/libfuzzer.log"; fail "libFuzzer found a crash (see above: its input in Base64)"; }
    echo "libFuzzer build: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$tmp/libfuzzer.log" | tail -n 1), no crash"
else
    echo "note: clang with libFuzzer not found: the libFuzzer build is not checked"
fi
echo "PASS test_zckpt_crafted"
