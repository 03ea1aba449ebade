#!/bin/sh
# The layering check's own test: it passes a correct tree (with a named exception), fails a
# tree with one include that points up, naming the file, the line and the forbidden arrow, and
# refuses a table whose arrows form a cycle.
#   tests/check_layers_test.sh scripts/check_layers.sh tests/fixtures/layers
set -u
check=$1
fixtures=$2
fail() {
    echo "FAIL: $1"
    [ -n "${2:-}" ] && printf '%s\n' "$2"
    exit 1
}

out=$(sh "$check" "$fixtures/good" 2>&1) || fail "the correct tree was refused" "$out"

# bad/ is good/'s low layer with one include changed, checked against good/'s table
out=$(sh "$check" "$fixtures/bad" "$fixtures/good/docs/architecture.md" 2>&1) &&
    fail "the tree with an upward include passed" "$out"
want='src/low/tensor.c:4: #include "high/op.h": arrow low -> high is not allowed'
printf '%s\n' "$out" | grep -qF "$want" || fail "the complaint does not name file, line and arrow: want '$want'" "$out"
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "expected exactly one complaint" "$out"

out=$(sh "$check" "$fixtures/good" "$fixtures/cycle.md" 2>&1) && fail "a table with a cycle passed" "$out"
printf '%s\n' "$out" | grep -q 'form a cycle' || fail "the cycle is not named" "$out"

echo "ok: the layering check passes a correct tree and names an upward include and a cycle"
