#!/bin/sh
# libkiln exports exactly what include/kiln/ declares (tests/check_exports.sh), and the check
# itself fails on a library that leaks a symbol or misses a declared one (a fixture library).
# Usage: test_exports.sh LIBKILN_SO SOURCE_DIR
set -eu
lib=$1
src=$(cd "$2" && pwd)
check="$src/tests/check_exports.sh"
fixture="$src/tests/fixtures/exports"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0

sh "$check" "$lib" "$src/include" || { echo "FAIL: libkiln's exports differ from include/kiln"; exit 1; }
passed=$((passed + 1))

gcc -std=c17 -shared -fPIC -fvisibility=hidden -I"$fixture/include" -I"$src/include" "$fixture/fixture.c" \
  -o "$tmp/libfixture.so"
if sh "$check" "$tmp/libfixture.so" "$fixture/include" "$src/include" > "$tmp/out"; then
  echo "FAIL: the check passed a library with a leaked and a missing symbol"; cat "$tmp/out"; exit 1
fi
expect() { grep -qx "$1" "$tmp/out" || { echo "FAIL: expected the line '$1' in:"; cat "$tmp/out"; exit 1; }; }
expect 'exported but not declared in include/kiln: kn_fixture_leak'
expect 'declared in include/kiln but not exported (KN_API missing?): kn_fixture_unmarked'
# Nothing else: the exported declarations (a function, a variable) and the hidden helper pass.
[ "$(grep -c '^exported\|^declared' "$tmp/out")" = 2 ] || { echo "FAIL: unexpected lines in:"; cat "$tmp/out"; exit 1; }
passed=$((passed + 1))
echo "test_exports: $passed passed, 0 failed"
