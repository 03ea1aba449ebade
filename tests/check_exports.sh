#!/bin/sh
# libkiln's public boundary: the shared library LIB must export exactly what the headers
# INCLUDE/kiln/*.h declare (functions, and variables declared extern). Usage:
#   check_exports.sh LIB INCLUDE [MORE_INCLUDE_DIRS...]
# Prints each symbol exported but not declared, and each declared but not exported; exits 1 if
# there is any. Names reserved to the C implementation (a leading underscore or dot: the
# linker's _end, OpenMP's .gomp_critical_user_*, sanitizer hooks) are the toolchain's, not kiln's.
set -eu
lib=$1
inc=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
iflags="-I$inc"
for d in "$@"; do iflags="$iflags -I$d"; done

# Declared functions: gcc's -aux-info lists every prototype a translation unit declares, with
# the file that declares it, as "/* FILE:LINE:NC */ extern TYPE NAME (ARGS);".
for h in "$inc"/kiln/*.h; do echo "#include \"kiln/${h##*/}\""; done > "$tmp/all.c"
# shellcheck disable=SC2086 # iflags is a list of words
gcc -std=c17 -fsyntax-only $iflags -aux-info "$tmp/aux" "$tmp/all.c"
grep -F "/* $inc/kiln/" "$tmp/aux" | grep ':NC \*/ extern ' |
  sed -E 's|^/\* [^ ]* \*/ extern ||; s/^([^(]*[ *])?([A-Za-z_][A-Za-z0-9_]*) \(.*/\2/' > "$tmp/declared"
# Declared variables: one-line "extern" declarations (KN_API extern TYPE NAME[...];).
grep -h -E '^[[:space:]]*(KN_API[[:space:]]+)?extern[[:space:]]' "$inc"/kiln/*.h | grep -v 'extern "C"' |
  sed -E 's/^.*[^A-Za-z0-9_]([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*(\[[^]]*\])?[[:space:]]*;.*$/\1/' >> "$tmp/declared"
sort -u "$tmp/declared" -o "$tmp/declared"

# Exported: the dynamic symbols the library defines.
nm -D --defined-only "$lib" | awk '{ sub(/@.*/, "", $3); print $3 }' | grep -v '^[_.]' | sort -u > "$tmp/exported"
[ -s "$tmp/exported" ] || { echo "check_exports: $lib exports nothing (is it a shared library?)"; exit 1; }

comm -13 "$tmp/declared" "$tmp/exported" | sed 's/^/exported but not declared in include\/kiln: /' > "$tmp/report"
comm -23 "$tmp/declared" "$tmp/exported" | sed 's/^/declared in include\/kiln but not exported (KN_API missing?): /' >> "$tmp/report"
if [ -s "$tmp/report" ]; then
  cat "$tmp/report"
  echo "check_exports: $(wc -l < "$tmp/report") problem(s) in $lib"
  exit 1
fi
echo "check_exports: $lib exports the $(wc -l < "$tmp/exported") symbols include/kiln declares"
