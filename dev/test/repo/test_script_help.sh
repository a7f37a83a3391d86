#!/usr/bin/env bash
# test_script_help.sh: every script a user runs (scripts/, dev/bench/, dev/gpu/) answers -h
# and --help with its usage on stdout and exit 0, within seconds, starting nothing: no file
# of the checkout changes (a script that took --help for a part, a model or a folder went on
# to build, train or write logs).
set -u
cd "$(dirname "$0")/../../.."
fail() { echo "FAIL test_script_help: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
state() { git status --porcelain --ignored 2> /dev/null; }
n=0 before=$(state)
for s in scripts/*.sh scripts/*.py dev/bench/*.sh dev/gpu/*.sh; do
    case $s in *.py) run=(python3 "$s") ;; *) run=(bash "$s") ;; esac
    for h in -h --help; do
        timeout 20 "${run[@]}" $h > "$tmp/out" 2> "$tmp/err" < /dev/null
        rc=$?
        [ $rc -eq 0 ] || { head -5 "$tmp/out" "$tmp/err"; fail "$s $h exited $rc"; }
        [ "$(wc -l < "$tmp/out")" -ge 2 ] || { cat "$tmp/out" "$tmp/err"; fail "$s $h printed no usage on stdout"; }
        n=$((n + 1))
    done
done
[ "$(state)" = "$before" ] || { diff <(echo "$before") <(state); fail "a help call changed the checkout (above)"; }
echo "test_script_help: $n help calls, each usage and exit 0, the checkout unchanged"
