#!/usr/bin/env bash
# Rebuilds the bundled default corpus, data/kjv/, from the King James Version of the
# Bible (1611, public domain) as shipped by Debian's bible-kjv-text package.
# Each of the 66 books is one document (EOT between documents); seven books
# spread through the text (Ruth, Esther, Ecclesiastes, Jonah, Mark,
# Galatians, Jude; about 5% of the tokens) are held out as validation.
#   bash dev/data/kjv.sh            (needs ./tokenize built, and apt access)
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v bible >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bible-kjv >/dev/null; }
[ -x ./tokenize ] || make tokenize
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/books"
bible -f "Gen1:1-Rev22:21" > "$work/kjv.txt"
# "Ge1:1 In the beginning ..." -> one file per book; chapters separated by a blank line.
awk -v dir="$work/books" '
  match($0, /^[0-9]?[A-Za-z]+[0-9]+:[0-9]+ /) {
    ref = substr($0, 1, RLENGTH - 1); text = substr($0, RLENGTH + 1)
    book = ref; sub(/[0-9]+:[0-9]+$/, "", book)
    chap = ref; sub(/^[0-9]?[A-Za-z]+/, "", chap); sub(/:.*/, "", chap)
    if (book != cur) { n++; cur = book; file = sprintf("%s/%02d_%s.txt", dir, n, book); lastchap = "" }
    if (chap != lastchap && lastchap != "") print "" >> file
    lastchap = chap
    print text >> file
  }' "$work/kjv.txt"
mkdir -p data/kjv
val=()
train=()
for f in "$work"/books/*.txt; do
  case "$(basename "$f")" in
    *_Ruth.txt|*_Est.txt|*_Eccl.txt|*_Jonah.txt|*_Mark.txt|*_Gal.txt|*_Jude.txt) val+=("$f") ;;
    *) train+=("$f") ;;
  esac
done
rm -f data/kjv/kjv_*.bin
./tokenize -o data/kjv/kjv_val "${val[@]}"
./tokenize -o data/kjv/kjv_train "${train[@]}"
ls -l data/kjv
