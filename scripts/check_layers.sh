#!/bin/sh
# The layering check (docs/architecture.md): every `#include "..."` under ROOT/src and
# ROOT/include must point to its own layer, to a layer its row in the table allows, or be one
# of the table's named exceptions; and the allowed arrows must not form a cycle.
#
#   scripts/check_layers.sh [ROOT [TABLE]]     ROOT defaults to ., TABLE to ROOT/docs/architecture.md
#
# Prints one line per forbidden include, "file:line: #include "x": arrow a -> b is not allowed",
# and exits 1 when there is any. POSIX sh and awk only.
set -eu
root=${1:-.}
table=${2:-$root/docs/architecture.md}
[ -f "$table" ] || { echo "check_layers: no table at $table" >&2; exit 2; }
table=$(cd "$(dirname "$table")" && pwd)/$(basename "$table")
cd "$root"
files=$(find src include -type f \( -name '*.c' -o -name '*.h' -o -name '*.def' -o -name '*.in' \) 2>/dev/null | sort)
[ -n "$files" ] || { echo "check_layers: no sources under $root/src or $root/include" >&2; exit 2; }

# shellcheck disable=SC2086
awk -v table="$table" '
function trim(s) { gsub(/^[ \t`]+|[ \t`]+$/, "", s); return s }
# The layer a path belongs to: the row whose file prefix is the longest that matches.
function layer_of(path,    best, len, i) {
    best = ""; len = 0
    for (i = 1; i <= nprefix; i++)
        if (substr(path, 1, length(prefix[i])) == prefix[i] && length(prefix[i]) > len) {
            best = prefix_layer[i]; len = length(prefix[i])
        }
    return best
}
function dirname(p) { sub(/\/[^\/]*$/, "", p); return p }
# Where an include points: "kiln/x.h" is a public header, "a/b.h" is under src/, a bare
# name is beside the including file.
function resolve(inc, from) {
    if (inc ~ /^kiln\//) return "include/" inc
    if (inc ~ /\//) return "src/" inc
    return dirname(from) "/" inc
}
function visit(l,    i, n, parts, path) {
    if (state[l] == 2) return 0
    if (state[l] == 1) return 1
    state[l] = 1
    n = split(allowed_list[l], parts, " ")
    for (i = 1; i <= n; i++) if (visit(parts[i])) { cycle = l " -> " parts[i] (cycle == "" ? "" : ", " cycle); return 1 }
    state[l] = 2
    return 0
}
BEGIN {
    section = ""
    while ((getline line < table) > 0) {
        if (line ~ /<!-- layers -->/) { section = "layers"; continue }
        if (line ~ /<!-- exceptions -->/) { section = "exceptions"; continue }
        if (line ~ /<!-- end -->/) { section = ""; continue }
        if (section == "" || line !~ /^\|/ || line ~ /^\| *-/) continue
        n = split(line, col, "|")
        if (section == "layers") {
            name = trim(col[2])
            if (name == "layer") continue
            layers[name] = 1; order[++nlayers] = name
            m = split(col[3], ps, " ")
            for (i = 1; i <= m; i++) if ((p = trim(ps[i])) != "") { prefix[++nprefix] = p; prefix_layer[nprefix] = name }
            m = split(col[4], ds, /[ ,]+/); allowed_list[name] = ""
            for (i = 1; i <= m; i++) if ((d = trim(ds[i])) != "" && d != "-" && d != "nothing") {
                allow[name, d] = 1; allowed_list[name] = allowed_list[name] " " d
            }
        } else {
            f = trim(col[2]); inc = trim(col[3])
            if (f == "file") continue
            gsub(/"/, "", inc); except[f, inc] = 1
        }
    }
    if (!nlayers) { print "check_layers: " table " has no layer table" > "/dev/stderr"; bad = 2; exit }
    for (i = 1; i <= nlayers; i++) {
        n = split(allowed_list[order[i]], parts, " ")
        for (j = 1; j <= n; j++) if (!(parts[j] in layers)) {
            print table ": layer " order[i] " may include " parts[j] ", which is not a layer"; bad = 1
        }
    }
    for (i = 1; i <= nlayers; i++) if (visit(order[i])) {
        print table ": the allowed arrows form a cycle: " cycle; bad = 1; break
    }
}
FNR == 1 {
    from = layer_of(FILENAME)
    if (from == "") { print FILENAME ": belongs to no layer of " table; bad = 1 }
}
/^[ \t]*#[ \t]*include[ \t]*"/ {
    inc = $0; sub(/^[^"]*"/, "", inc); sub(/".*$/, "", inc)
    to = layer_of(resolve(inc, FILENAME))
    if (from == "" || from == to || allow[from, to] || except[FILENAME, inc]) next
    if (to == "") {
        printf "%s:%d: #include \"%s\" points to no layer of %s\n", FILENAME, FNR, inc, table
        bad = 1; next
    }
    printf "%s:%d: #include \"%s\": arrow %s -> %s is not allowed (%s)\n", FILENAME, FNR, inc, from, to, table
    bad = 1
}
END { exit bad }
' $files
