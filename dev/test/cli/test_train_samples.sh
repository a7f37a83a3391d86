#!/usr/bin/env bash
# Samples (-s N) against the model's vocabulary. A sample starts from the tokenizer file's
# <|endoftext|> (GPT-2's 50256 without a tokenizer of the model's size) and is decoded with it:
#  1. a GPT-2 model: samples decode to text (no token ids, no note)
#  2. a model file of 64 tokens, trained on a shard of ids below 64: there is no
#     <|endoftext|> to start from, so sampling is off with a note, and training runs on
#  3. a model file of 50300 tokens with GPT-2's tokenizer (50257): samples may draw ids the
#     tokenizer cannot decode, so they print token ids, saying why
#  4. the 64-token model with a tokenizer of its own 64 tokens (<|endoftext|> is 63): samples
#     start from it and decode to that tokenizer's text, with no note
# Both model files are written here in llm.c's format (version 3, fp32).
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_train_samples: $*"; exit 1; }

# model FILE V: an llm.c model file, L=1 NH=1 C=16 maxT=16, Vp = V rounded up to 64
model() {
    python3 - "$1" "$2" << 'PY'
import random, struct, sys
path, V = sys.argv[1], int(sys.argv[2])
L, NH, C, maxT = 1, 1, 16, 16
Vp = (V + 63) // 64 * 64
sizes = [Vp * C, maxT * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C,
         L * C, L * C, L * 4 * C * C, L * 4 * C, L * C * 4 * C, L * C, C, C]
rng = random.Random(5)
with open(path, "wb") as f:
    f.write(struct.pack("<8i", 20240326, 3, maxT, V, L, NH, C, Vp) + bytes(1024 - 32))
    f.write(struct.pack(f"<{sum(sizes)}f", *(rng.gauss(0, 0.02) for _ in range(sum(sizes)))))
PY
}
# shard FILE N V: an llm.c token shard of N ids below V
shard() {
    python3 - "$1" "$2" "$3" << 'PY'
import random, struct, sys
path, n, V = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(7)
with open(path, "wb") as f:
    f.write(struct.pack("<3i", 20240520, 1, n) + bytes(1024 - 12))
    f.write(struct.pack(f"<{n}H", *(rng.randrange(V) for _ in range(n))))
PY
}
args=(-b 1 -t 8 -x 2 -v 0 -s 1 -g 4 --threads 1)

# 1. GPT-2's vocabulary: text
./train_gpt2 -e d1c16h1t16 "${args[@]}" -o "$tmp/gpt2" > "$tmp/gpt2.txt" 2>&1 || { tail "$tmp/gpt2.txt"; fail "GPT-2 vocabulary: the run failed"; }
[ "$(grep -ac "^generating:" "$tmp/gpt2.txt")" -ge 1 ] && ! grep -aq "^note:.*tok" "$tmp/gpt2.txt" \
    || { cat "$tmp/gpt2.txt"; fail "GPT-2 vocabulary: no sample, or a note about the tokenizer"; }
# each sample: the text between the --- lines after "generating:", not token ids
python3 - "$tmp/gpt2.txt" << 'PY' || fail "GPT-2 vocabulary: a sample is not decoded text (above)"
import re, sys
text = open(sys.argv[1], "rb").read().decode("utf-8", "replace")
samples = re.findall(r"^generating:\n---\n(.*?)\n---$", text, re.M | re.S)
print(f"{len(samples)} samples: {samples!r}")
assert samples and all(s.strip() and not re.fullmatch(r"\s*\d+( \d+)*\s*", s) for s in samples)
PY

# 2. 64 tokens: no <|endoftext|>, sampling off
model "$tmp/v64.bin" 64 && shard "$tmp/v64_000000.bin" 4000 64 || fail "cannot write the 64-token model or shard"
./train_gpt2 -e "$tmp/v64.bin" -i "$tmp/v64_000000.bin" "${args[@]}" -o "$tmp/v64" > "$tmp/v64.txt" 2>&1 \
    || { tail "$tmp/v64.txt"; fail "64 tokens: the run failed"; }
grep -qF "note: sampling is off (-s): the model's 64 tokens hold no <|endoftext|> (50256) to start a sample from" "$tmp/v64.txt" \
    && ! grep -q "^generating:" "$tmp/v64.txt" && [ "$(grep -c trl "$tmp/v64/main.log")" -eq 2 ] \
    || { cat "$tmp/v64.txt"; fail "64 tokens: sampling not turned off with its note, or training did not run"; }
echo "64 tokens: sampling off, said; 2 steps trained"

# 3. 50300 tokens, GPT-2's tokenizer: ids
model "$tmp/v50300.bin" 50300 || fail "cannot write the 50300-token model"
./train_gpt2 -e "$tmp/v50300.bin" "${args[@]}" -o "$tmp/v50300" > "$tmp/v50300.txt" 2>&1 \
    || { tail "$tmp/v50300.txt"; fail "50300 tokens: the run failed"; }
grep -qF "note: tokenizer 'data/gpt2/gpt2_tokenizer.bin' has 50257 tokens and the model 50300: samples print token ids" \
    "$tmp/v50300.txt" && grep -qE "^[0-9]+( [0-9]+)+ ?$" "$tmp/v50300.txt" \
    || { cat "$tmp/v50300.txt"; fail "50300 tokens: no note, or the sample is not token ids"; }
echo "50300 tokens with a 50257-token tokenizer: samples print ids, said"
# 4. 64 tokens with their own tokenizer: tokens 0-62 the letters a-z, A-Z, digits and ".", 63 <|endoftext|>
python3 - "$tmp/v64_tokenizer.bin" << 'PY' || fail "cannot write the 64-token tokenizer"
import string, struct, sys
toks = [c.encode() for c in string.ascii_lowercase + string.ascii_uppercase + string.digits + "."] + [b"<|endoftext|>"]
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<4i", 20240328, 2, 64, 63) + bytes(1024 - 16))
    for t in toks:
        f.write(bytes([len(t)]) + t)
PY
./train_gpt2 -e "$tmp/v64.bin" -i "$tmp/v64_000000.bin" "${args[@]}" --tokenizer "$tmp/v64_tokenizer.bin" -o "$tmp/v64t" \
    > "$tmp/v64t.txt" 2>&1 || { tail "$tmp/v64t.txt"; fail "64 tokens with their tokenizer: the run failed"; }
grep -q "^note:" "$tmp/v64t.txt" && { cat "$tmp/v64t.txt"; fail "64 tokens with their tokenizer: a note"; }
python3 - "$tmp/v64t.txt" << 'PY' || fail "64 tokens with their tokenizer: no sample, or one not in its text (above)"
import re, sys
text = open(sys.argv[1]).read()
samples = re.findall(r"^generating:\n---\n(.*?)\n---$", text, re.M | re.S)
print(f"{len(samples)} samples: {samples!r}")
assert len(samples) == 2 and all(re.fullmatch(r"([a-zA-Z0-9.]|<\|endoftext\|>){4}", s) for s in samples)
PY
echo "64 tokens with a 64-token tokenizer: samples from its <|endoftext|>, decoded"
echo "PASS test_train_samples"
