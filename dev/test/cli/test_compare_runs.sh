#!/usr/bin/env bash
# scripts/compare_runs.py on real runs of the CPU trainer: an unsharded run and a 2-rank
# ZeRO stage-3 run with the same seed, data and global batch, and one with another seed.
#  - every trainer run writes OUT/run.json with what it was given (checked against the flags)
#  - the tool exits 0; every number of its table equals what the test reads itself from
#    main.log, run.json and zero_report.json (and tokens/s agrees with the step lines' ms)
#  - the ZeRO run is reported bit-identical (the test compares main.log and model_final.bin
#    itself); a copy with one parameter changed is reported as differing in that tensor,
#    layer and element; the run with another seed as differing at its first step
#  - the side-by-side memory rows equal memory_report.json / zero_report.json's largest rank
#  - compare.png is a PNG (signature, IHDR with a valid CRC) of 1200 x 900 pixels
#  - a run with another seed is refused naming the field and both values, and compared
#    with --force; a missing folder or main.log gets a clear error, and so do a run.json
#    that is not a JSON object; a dry run's memory_report.json is not shown as the run's
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_compare_runs: $*"; exit 1; }
args=(-e d2c64h2t64 -b 2 -t 32 -d 128 -x 6 -v 3 -m 2 -s 0 --threads 1)

./train_gpt2 "${args[@]}" -o "$tmp/u" > "$tmp/u.txt" 2>&1 || { tail "$tmp/u.txt"; fail "unsharded run failed"; }
mpirun -np 2 ./train_gpt2 "${args[@]}" -z 3 -o "$tmp/z3" > "$tmp/z3.txt" 2>&1 || { tail "$tmp/z3.txt"; fail "stage-3 run failed"; }
./train_gpt2 "${args[@]}" --seed 7 -o "$tmp/s7" > "$tmp/s7.txt" 2>&1 || { tail "$tmp/s7.txt"; fail "seed-7 run failed"; }

# run.json says what each run was given
python3 - "$tmp" <<'EOF' || fail "run.json does not match the runs' flags"
import json, sys
tmp = sys.argv[1]
want = {"u": dict(zero_stage="unsharded", world_size=1, grad_accum=2, seed=1337),
        "z3": dict(zero_stage=3, world_size=2, grad_accum=1, seed=1337),
        "s7": dict(zero_stage="unsharded", world_size=1, grad_accum=2, seed=7)}
for run, w in want.items():
    info = json.load(open(f"{tmp}/{run}/run.json"))
    w.update(trainer="train_gpt2", train_data="data/kjv/kjv_train_*.bin", val_data="data/kjv/kjv_val_*.bin",
             model="d2c64h2t64", micro_batch=2, seq_len=32, total_batch_tokens=128, steps=6, val_batches=2)
    for k, v in w.items():
        if info.get(k) != v:
            sys.exit(f"{run}/run.json: {k} is {info.get(k)!r}, the run had {v!r}")
    if len(info["timing"]["step_seconds"]) != 6:
        sys.exit(f"{run}/run.json: {len(info['timing']['step_seconds'])} step times for 6 steps")
print("run.json of each run matches its flags")
EOF

# The table against the test's own reading of the logs. Columns are separated by two or
# more spaces; the first run is the reference; ties for the largest difference go to the
# first step.
check_table() {   # check_table OUTPUT_FILE RUN_DIR...
    python3 - "$@" <<'EOF'
import json, re, sys
from decimal import Decimal
out, dirs = open(sys.argv[1]).read(), sys.argv[2:]
def log(d):
    train, val = {}, {}
    for line in open(f"{d}/main.log"):
        m = re.match(r"s:(\d+) (trl|tel):(\S+)", line)
        if m: (train if m[2] == "trl" else val)[int(m[1])] = m[3]
    return train, val
lines = out.splitlines()
head = next(i for i, l in enumerate(lines) if l.startswith("run "))
rows = [re.split(r"\s{2,}", l.strip()) for l in lines[head + 2: head + 2 + len(dirs)]]
ref_train, _ = log(dirs[0])
for d, row in zip(dirs, rows):
    name = d.rstrip("/").split("/")[-1]
    train, val = log(d)
    info = json.load(open(f"{d}/run.json"))
    if not row[0].startswith(name + " "): sys.exit(f"row {row} is not run {name}")
    if row[1] != str(len(train)): sys.exit(f"{name}: steps {row[1]}, main.log has {len(train)}")
    if row[2] != train[max(train)]: sys.exit(f"{name}: final train loss {row[2]}, main.log {train[max(train)]}")
    if row[3] != f"{val[max(val)]} (s:{max(val)})": sys.exit(f"{name}: final val {row[3]}, main.log {val[max(val)]}")
    if d == dirs[0]:
        if row[4] != "(reference)": sys.exit(f"{name}: the first run is not the reference: {row}")
    else:
        diffs = [(abs(Decimal(train[s]) - Decimal(ref_train[s])), s) for s in sorted(train) if s in ref_train]
        big = max(x for x, _ in diffs)
        at = next(s for x, s in diffs if x == big)
        if Decimal(row[4]) != big or row[5] != str(at):
            sys.exit(f"{name}: max |diff| {row[4]} at s:{row[5]}, main.log gives {big} at s:{at}")
    tps = info["timing"]["tokens_per_second"]
    if row[6] != f"{tps:.1f}": sys.exit(f"{name}: tokens/s {row[6]}, run.json {tps}")
    # the step lines' ms, steps after the first (0.1 ms rounding: well within 1%)
    ms = [float(m) for m in re.findall(r"^step +\d+/\d+ .*?\| ([\d.]+) ms", open(f"{d}.txt").read(), re.M)]
    if len(ms) != len(train): sys.exit(f"{name}: {len(ms)} step lines with ms in its output, {len(train)} steps")
    mine = info["total_batch_tokens"] * (len(ms) - 1) / (sum(ms[1:]) / 1000)
    if abs(float(row[6]) - mine) > 0.01 * mine: sys.exit(f"{name}: tokens/s {row[6]}, the step lines give {mine:.1f}")
    print(f"{name}: steps {row[1]}, train {row[2]}, val {row[3]}, diff {row[4]} at s:{row[5]}, {row[6]} tok/s: as logged")
# per-rank memory of the ZeRO run, MiB with 2 decimals
for d in dirs:
    name = d.rstrip("/").split("/")[-1]
    try: rep = json.load(open(f"{d}/zero_report.json"))
    except FileNotFoundError: continue
    at = out.index(f"\n{name}: per-rank memory")
    section = out[at:].splitlines()
    header = next(i for i, l in enumerate(section) if l.startswith("rank "))
    got = [l.split() for l in section[header + 2:]]
    kinds = ["parameters", "gradients", "optimizer_states", "activations", "buffers", "total"]
    for e in rep["ranks"]:
        want = [str(e["rank"]), "device"] + [f"{e['device'][k] / 2**20:.2f}" for k in kinds]
        if got[e["rank"]] != want: sys.exit(f"{name} rank {e['rank']}: table {got[e['rank']]}, report {want}")
    print(f"{name}: per-rank bytes by kind as in zero_report.json ({len(rep['ranks'])} ranks)")
EOF
}

scripts/compare_runs.py "$tmp/u" "$tmp/z3" > "$tmp/cmp.txt" 2>&1 || { cat "$tmp/cmp.txt"; fail "the tool failed on two matching runs"; }
cat "$tmp/cmp.txt"
check_table "$tmp/cmp.txt" "$tmp/u" "$tmp/z3" || fail "the table does not match the logs"

# the equality verdicts and the side-by-side memory against the test's own reading
check_verdicts() {   # check_verdicts OUTPUT_FILE RUN_DIR...
    python3 - "$@" <<'EOF'
import json, os, re, sys
out, dirs = open(sys.argv[1]).read(), sys.argv[2:]
name = lambda d: d.rstrip("/").split("/")[-1]
def losses(d):
    return [l.split()[:2] for l in open(f"{d}/main.log") if re.match(r"s:\d+ t[re]l:", l)]
ref = dirs[0]
for d in dirs[1:]:
    line = next((l for l in out.splitlines() if l.startswith(f"  {name(d)}: ")), None)
    if line is None: sys.exit(f"no verdict line for {name(d)}")
    same_log = losses(d) == losses(ref)
    same_model = open(f"{d}/model_final.bin", "rb").read() == open(f"{ref}/model_final.bin", "rb").read()
    if same_log and same_model:
        if "bit-identical" not in line: sys.exit(f"{name(d)} equals the reference, but: {line}")
    elif "bit-identical" in line or "differs" not in line:
        sys.exit(f"{name(d)} differs from the reference (log {same_log}, model {same_model}), but: {line}")
    print(f"verdict as the files say: {line.strip()}")
for d in dirs:
    f = "zero_report.json" if os.path.exists(f"{d}/zero_report.json") else "memory_report.json"
    rep = json.load(open(f"{d}/{f}"))
    e = max(rep["ranks"], key=lambda e: (e["device"]["total"], -e["rank"]))
    row = next(l.split() for l in out.splitlines() if l.startswith(name(d) + " ") and "%" in l)
    kinds = ["parameters", "gradients", "optimizer_states", "activations", "buffers", "total"]
    want = [f"{e['device'][k] / 2**20:.2f}" for k in kinds]
    if row[3:9] != want: sys.exit(f"{name(d)}: memory row {row[3:9]}, {f} rank {e['rank']} has {want}")
    print(f"{name(d)}: memory row as in {f} ({row[-2]} of the first run)")
EOF
}
check_verdicts "$tmp/cmp.txt" "$tmp/u" "$tmp/z3" || fail "the verdicts or the memory rows do not match the files"
grep -q "^  z3: bit-identical" "$tmp/cmp.txt" || fail "the stage-3 run is not reported bit-identical"

# one parameter changed in a copy of the ZeRO run: reported in its tensor, layer and element
# (d2c64: Vp 50304, maxT 64, C 64, L 2; qkvw of layer 1, element 5, is parameter
# 50304*64 + 64*64 + 2*2*64 + 3*64*64 + 5: wte, wpe, ln1w and ln1b before it)
cp -r "$tmp/z3" "$tmp/z3x"
python3 - "$tmp/z3x/model_final.bin" <<'EOF'
import struct, sys
f = open(sys.argv[1], "r+b")
f.seek(1024 + 4 * (50304 * 64 + 64 * 64 + 2 * 2 * 64 + 3 * 64 * 64 + 5))
x = struct.unpack("<f", f.read(4))[0]
f.seek(-4, 1)
f.write(struct.pack("<f", x + 0.25))
EOF
scripts/compare_runs.py "$tmp/u" "$tmp/z3x" -o "$tmp/x.png" > "$tmp/x.txt" 2>&1 || { cat "$tmp/x.txt"; fail "the tool failed on a changed model"; }
grep -q "z3x: differs: .*model_final.bin differs first in qkvw (layer 1, element 5: .*); 1 of 3,323,648 parameters differ" "$tmp/x.txt" \
    || { cat "$tmp/x.txt"; fail "a changed parameter is not named by tensor, layer and element"; }
echo "changed parameter: $(grep z3x: "$tmp/x.txt")"

# compare.png: PNG signature, then the IHDR chunk (width, height, CRC) first
python3 - "$tmp/u/compare.png" <<'EOF' || fail "compare.png is not a 1200x900 PNG"
import struct, sys, zlib
b = open(sys.argv[1], "rb").read()
if b[:8] != b"\x89PNG\r\n\x1a\n": sys.exit("no PNG signature")
n, kind = struct.unpack(">I4s", b[8:16])
if kind != b"IHDR" or n != 13: sys.exit(f"first chunk {kind} of {n} bytes, not IHDR")
w, h = struct.unpack(">II", b[16:24])
if struct.unpack(">I", b[16 + n:20 + n])[0] != zlib.crc32(b[12:16 + n]): sys.exit("IHDR CRC mismatch")
if (w, h) != (1200, 900): sys.exit(f"{w}x{h} pixels, expected 1200x900")
if not b.endswith(b"IEND\xaeB`\x82"): sys.exit("no IEND chunk at the end")
print(f"compare.png: valid PNG, {w}x{h}, {len(b)} bytes")
EOF

# another seed: refused by name with both values, compared with --force
if scripts/compare_runs.py "$tmp/u" "$tmp/s7" -o "$tmp/refused.png" > "$tmp/e.txt" 2>&1; then fail "a run with another seed was compared"; fi
grep -qF "differ in seed (--seed): $tmp/u has 1337, $tmp/s7 has 7" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "the refusal does not name the seed and both values"; }
[ ! -e "$tmp/refused.png" ] || fail "a refused comparison wrote a plot"
echo "another seed: refused ($(cat "$tmp/e.txt"))"
# a run that trained on one batch over and over (-a 1): refused by name
cp -r "$tmp/u" "$tmp/a1"
python3 -c 'import json, sys; p = sys.argv[1]; d = json.load(open(p)); d["overfit_batch"] = 1; json.dump(d, open(p, "w"))' "$tmp/a1/run.json"
if scripts/compare_runs.py "$tmp/u" "$tmp/a1" -o "$tmp/a1.png" > "$tmp/e.txt" 2>&1; then fail "a run of -a 1 was compared with one of -a 0"; fi
grep -qF "differ in overfit_batch (-a, one batch over and over): $tmp/u has 0, $tmp/a1 has 1" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "-a 1 against -a 0: not refused by name"; }
echo "-a 1 against -a 0: refused"
scripts/compare_runs.py "$tmp/u" "$tmp/z3" "$tmp/s7" --force -o "$tmp/forced.png" > "$tmp/f.txt" 2>&1 \
    || { cat "$tmp/f.txt"; fail "--force did not compare"; }
[ -s "$tmp/forced.png" ] || fail "--force wrote no plot"
check_table "$tmp/f.txt" "$tmp/u" "$tmp/z3" "$tmp/s7" || fail "the --force table does not match the logs"
check_verdicts "$tmp/f.txt" "$tmp/u" "$tmp/z3" "$tmp/s7" || fail "the --force verdicts do not match the files"
grep -q "^  s7: differs: train loss first at s:0 " "$tmp/f.txt" || fail "the seed-7 run is not reported differing at its first step"

# a run resumed onto another stage and world: labelled, its memory report taken and its
# tokens/s counted as run.json's resumes say (each part's steps after its first)
mpirun -np 2 ./train_gpt2 "${args[@]}" -x 3 -n 3 -z 3 -o "$tmp/r" > "$tmp/r1.txt" 2>&1 || { tail "$tmp/r1.txt"; fail "resume: first part failed"; }
./train_gpt2 "${args[@]}" -z 2 -y 1 -o "$tmp/r" > "$tmp/r2.txt" 2>&1 || { tail "$tmp/r2.txt"; fail "resume: second part failed"; }
scripts/compare_runs.py "$tmp/u" "$tmp/r" -o "$tmp/r.png" > "$tmp/rc.txt" 2>&1 || { cat "$tmp/rc.txt"; fail "the tool failed on a resumed run"; }
python3 - "$tmp/rc.txt" "$tmp/r/run.json" <<'EOF' || { cat "$tmp/rc.txt"; fail "a resumed run is not reported as its last part ran"; }
import json, re, sys
out, r = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
if r["zero_stage"] != 3 or r["resumes"][0]["changed"]["zero_stage"]["to"] != 2: sys.exit("run.json does not hold the stage change")
row = next(re.split(r"\s{2,}", l.strip()) for l in out.splitlines() if l.startswith("r ("))
if "ZeRO-2, 1 rank)" not in row[0]: sys.exit(f"label {row[0]!r}: not the last part's stage and world")
if "r: per-rank memory from zero_report.json (MiB; stage 2, 1 ranks)" not in out: sys.exit("the live report was not taken")
parts = [r["timing"]] + [p["timing"] for p in r["resumes"]]
tokens = sum(p["tokens_per_step"] * (len(p["step_seconds"]) - 1) for p in parts)
seconds = sum(sum(p["step_seconds"][1:]) for p in parts)
if row[6] != f"{tokens / seconds:.1f}": sys.exit(f"tokens/s {row[6]}, both parts give {tokens / seconds:.1f}")
print(f"resumed run: {row[0]}, {row[6]} tok/s over both parts, its live memory report shown")
EOF

# a NaN train loss (a --nan-skip run logs its skipped step's): no bound where one run is not
# finite, and steps that are not finite in both are left out of the difference
for run in z3n z3m; do cp -r "$tmp/z3" "$tmp/$run"; done
sed -i 's/^s:2 trl:[^ ]*/s:2 trl:nan/' "$tmp/z3n/main.log" "$tmp/z3m/main.log"
sed -i 's/^s:3 trl:[^ ]*/s:3 trl:-nan/' "$tmp/z3m/main.log"
scripts/compare_runs.py "$tmp/z3" "$tmp/z3n" "$tmp/z3m" -o "$tmp/n.png" > "$tmp/n.txt" 2>&1 || { cat "$tmp/n.txt"; fail "the tool failed on a NaN loss"; }
python3 - "$tmp/n.txt" <<'EOF' || { cat "$tmp/n.txt"; fail "a NaN loss is not reported as such"; }
import re, sys
rows = [re.split(r"\s{2,}", l.strip()) for l in open(sys.argv[1]).read().splitlines()]
rows = {r[0].split()[0]: r for r in rows if len(r) == 7}
for name in ("z3n", "z3m"):
    if rows[name][4:6] != ["non-finite", "2"]: sys.exit(f"{name}: {rows[name][4:6]}, want non-finite at s:2")
print("NaN train losses: reported non-finite at their first step")
EOF
scripts/compare_runs.py "$tmp/z3n" "$tmp/z3m" -o "$tmp/m.png" > "$tmp/m.txt" 2>&1 || { cat "$tmp/m.txt"; fail "the tool failed on two NaN runs"; }
grep -qE "^z3m .* non-finite +3 " "$tmp/m.txt" || { cat "$tmp/m.txt"; fail "a finite loss against -nan at s:3 is not named"; }

# clear errors
if scripts/compare_runs.py "$tmp/u" "$tmp/nowhere" > "$tmp/e.txt" 2>&1; then fail "a missing folder was accepted"; fi
grep -qF "no run folder '$tmp/nowhere'" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "no clear error for a missing folder"; }
mkdir "$tmp/empty"
if scripts/compare_runs.py "$tmp/u" "$tmp/empty" > "$tmp/e.txt" 2>&1; then fail "a folder without main.log was accepted"; fi
grep -qF "'$tmp/empty' has no main.log" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "no clear error for a missing main.log"; }
scripts/compare_runs.py --help | grep -q "compare.png" || fail "--help does not name compare.png"
# a dry run into a run's folder: its memory_report.json is a prediction, not the run's
cp -r "$tmp/u" "$tmp/ud"
./train_gpt2 --dry-run -e d2c64h2t64 -b 8 -t 64 -o "$tmp/ud" > /dev/null 2>&1 || fail "the dry run into a copy failed"
scripts/compare_runs.py "$tmp/u" "$tmp/ud" -o "$tmp/ud.png" > "$tmp/ud.txt" 2>&1 || { cat "$tmp/ud.txt"; fail "the tool failed"; }
grep -qF "ud: its memory_report.json is a dry_run prediction, not this run's measurement: not shown" "$tmp/ud.txt" \
    || { cat "$tmp/ud.txt"; fail "a dry run's memory_report.json was not told from the run's"; }
# files that are not what they should be: refused naming them, no traceback
echo '[]' > "$tmp/ud/run.json"
if scripts/compare_runs.py "$tmp/u" "$tmp/ud" > "$tmp/e.txt" 2>&1; then fail "a run.json holding a list was accepted"; fi
grep -qF "$tmp/ud/run.json holds a JSON list, not an object" "$tmp/e.txt" && ! grep -q Traceback "$tmp/e.txt" \
    || { cat "$tmp/e.txt"; fail "no clear error for a run.json holding a list"; }
printf '\xff\xfe' > "$tmp/ud/run.json"
if scripts/compare_runs.py "$tmp/u" "$tmp/ud" > "$tmp/e.txt" 2>&1; then fail "a run.json of bad bytes was accepted"; fi
grep -qF "$tmp/ud/run.json is not valid JSON" "$tmp/e.txt" && ! grep -q Traceback "$tmp/e.txt" \
    || { cat "$tmp/e.txt"; fail "no clear error for a run.json of bad bytes"; }
# a memory report whose device total is not a number: refused naming the file and the rank
cp -r "$tmp/u" "$tmp/un"
python3 -c 'import json, sys; p = sys.argv[1]; d = json.load(open(p)); d["ranks"][0]["device"]["total"] = None; json.dump(d, open(p, "w"))' \
    "$tmp/un/memory_report.json"
if scripts/compare_runs.py "$tmp/u" "$tmp/un" > "$tmp/e.txt" 2>&1; then fail "a memory report with a null total was accepted"; fi
grep -qF "$tmp/un/memory_report.json: rank 0's 'device' is not an object of numbers" "$tmp/e.txt" && ! grep -q Traceback "$tmp/e.txt" \
    || { cat "$tmp/e.txt"; fail "no clear error for a memory report with a null total"; }
echo "a dry run's memory report: not shown as the run's; a run.json that is a list, or not UTF-8, and a memory report of a null total: refused by name"
echo "PASS test_compare_runs"
