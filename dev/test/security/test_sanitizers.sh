#!/usr/bin/env bash
# The unit tests again under AddressSanitizer and UndefinedBehaviorSanitizer: any
# out-of-bounds access, leak, use after free or undefined operation fails the run.
# (The CPU model's test is left out: its numerics are covered above and it is slow
# without optimization.)
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_sanitizers: $*"; exit 1; }
san=(-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all)
flags=(-std=c11 -D_GNU_SOURCE -fopenmp -ffp-contract=off -Wall -Wextra -I.)
llmc=(llmc/atomic_file.c llmc/data/dataloader.c llmc/data/tokenizer.c llmc/model/gpt2_config.c llmc/model/gpt2_model_file.c
      llmc/run/train_config.c llmc/run/ds_config.c llmc/run/train_args.c llmc/run/train_common.c llmc/run/launch_env.c)
libs=(-lcmocka -lpcre2-8 -lcjson -lz -lm)
printf '#include <liburing.h>\n' | gcc -E -x c - > /dev/null 2>&1 && libs+=(-luring)   # zero/io/nvme.c
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1
for t in test_dataloader test_tokenizer test_zero_partition test_zero_arena test_ds_config test_zero_nvme; do
    gcc "${flags[@]}" "${san[@]}" dev/test/*/"$t.c" "${llmc[@]}" "${libs[@]}" -o "$tmp/$t" 2> "$tmp/$t.build" \
        || { cat "$tmp/$t.build"; fail "$t does not build with sanitizers"; }
    "$tmp/$t" > "$tmp/$t.log" 2>&1 || { tail -n 40 "$tmp/$t.log"; fail "$t under ASan/UBSan"; }
    grep -q "runtime error\|ERROR: AddressSanitizer\|ERROR: LeakSanitizer" "$tmp/$t.log" \
        && { grep -m5 "runtime error\|ERROR:" "$tmp/$t.log"; fail "$t: sanitizer report"; }
    echo "$t: clean under ASan/UBSan ($(grep -o '[0-9]* test(s) run' "$tmp/$t.log" | head -n 1))"
done
echo "PASS test_sanitizers"
