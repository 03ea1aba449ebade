#!/bin/sh
# Fused eager mode against strict and PyTorch eager: runs bench_fused (every mode in MODES) and
# bench/fused_torch.py with the same threads, then prints one table row per block.
# Usage: sh bench/fused_compare.sh [build-dir]
#   THREADS=2  MODES=strict,fused  ITERS= (each program's default)  BLOCKS= (all)
#   TORCH_ARGS= (extra fused_torch.py flags, e.g. --compile)  KEEP=dir (keep the JSON lines there)
# Exit status: 1 when bench_fused is missing or fails (a fused result that differs from strict
# fails it); a mode the build refuses is a "skipped" cell, not a failure; no torch: "-" cells.
set -u
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
THREADS=${THREADS:-2}
MODES=${MODES:-strict,fused}
ITERS=${ITERS:-}
BLOCKS=${BLOCKS:-}
OUT=${KEEP:-$(mktemp -d)}
mkdir -p "$OUT"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$OUT"' EXIT

set -- --modes "$MODES" --threads "$THREADS"
[ -n "$ITERS" ] && set -- "$@" --iters "$ITERS"
[ -n "$BLOCKS" ] && set -- "$@" --blocks "$BLOCKS"

status=0
: > "$OUT/kiln.jsonl"
: > "$OUT/torch.jsonl"
if [ -x "$BUILD/bench_fused" ]; then
    { "$BUILD/bench_fused" "$@" --json "$OUT/kiln.jsonl"; echo $? > "$OUT/kiln.rc"; } | grep -v '^{'
    [ "$(cat "$OUT/kiln.rc")" = 0 ] || status=1
else
    echo "bench_fused not built in $BUILD (cmake --build $BUILD --target bench_fused)"
    exit 1
fi
if command -v python3 >/dev/null 2>&1; then
    shift 2 # fused_torch.py has no --modes
    # shellcheck disable=SC2086
    { python3 "$HERE/fused_torch.py" "$@" --json "$OUT/torch.jsonl" ${TORCH_ARGS:-}; echo $? > "$OUT/torch.rc"; } |
        grep -v '^{'
    [ "$(cat "$OUT/torch.rc")" = 0 ] || status=1
else
    echo "skipped: python3 not found, no PyTorch column"
fi
command -v python3 >/dev/null 2>&1 || exit $status

# The table. speedup: strict ms / fused ms (> 1: fusion helps); torch/fused: torch eager ms /
# kiln fused ms (> 1: kiln's fused mode is faster); torch/strict the same for strict.
python3 - "$OUT/kiln.jsonl" "$OUT/torch.jsonl" "$THREADS" <<'EOF'
import json, sys

def rows(path):
    try:
        return [json.loads(l) for l in open(path) if l.startswith("{")]
    except OSError:
        return []

kiln, torch, threads = rows(sys.argv[1]), rows(sys.argv[2]), sys.argv[3]
cell = {}
for r in kiln:
    cell[(r["bench"], r["mode"])] = r
torch_ms = {(r["bench"], r["mode"]): r for r in torch}
order = []
for r in kiln + torch:
    if r["bench"] not in order:
        order.append(r["bench"])

def value(r):
    return r.get("value") if r else None

def fmt(r):
    if r is None:
        return "-"
    if r.get("value") is None:
        return "skipped" if "skipped" in r else "failed"
    return "%.3f" % r["value"]

def ratio(a, b):
    return "%.2f" % (a / b) if a and b else "-"

print()
print("Fused eager (issue 4), f32, %s threads, ms (median); speedup = strict/fused; vs torch = torch/kiln (> 1: kiln faster)"
      % threads)
def kernels(s, f):
    k = [("%g" % r["kernels_per_iter"]) if r and r.get("value") is not None else "-" for r in (s, f)]
    return "%s -> %s" % tuple(k)

print("%-20s %10s %10s %10s %9s %15s %15s  %s" % ("block", "strict", "fused", "torch", "speedup", "fused vs torch",
                                                  "strict vs torch", "kernels/iter strict -> fused"))
for b in order:
    s, f, t = cell.get((b, "strict")), cell.get((b, "fused")), torch_ms.get((b, "eager"))
    print("%-20s %10s %10s %10s %9s %15s %15s  %s" % (b, fmt(s), fmt(f), fmt(t), ratio(value(s), value(f)),
                                                      ratio(value(t), value(f)), ratio(value(t), value(s)),
                                                      kernels(s, f)))
notes = []
for r in kiln:
    if r["mode"] not in ("strict", "fused") and r.get("value") is not None:
        notes.append("kiln %s %s: %.3f ms" % (r["mode"], r["bench"], r["value"]))
    if r.get("check") == "mismatch":
        notes.append("kiln %s %s: result differs from the first mode's (check_rel %s)"
                     % (r["mode"], r["bench"], r.get("check_rel")))
    if r["mode"] == "fused" and r.get("value") is not None and r.get("compiles_timed"):
        notes.append("kiln fused %s: %d compiles during the timed iterations (recompiling every step?)"
                     % (r["bench"], r["compiles_timed"]))
for r in torch:
    if r["mode"] != "eager" and r.get("value") is not None:
        notes.append("torch %s %s: %.3f ms (first call %.1f ms)" % (r["mode"], r["bench"], r["value"], r["first_ms"]))
skipped = sorted({r["skipped"] for r in kiln if r.get("skipped")})
for why in skipped:
    notes.append("kiln skipped: " + why)
for r in kiln:
    if r.get("failed"):
        notes.append("kiln %s %s failed: %s" % (r["mode"], r["bench"], r["failed"]))
if notes:
    print()
    for n in notes:
        print("  " + n)
print(json.dumps({"bench": "fused_compare", "threads": int(threads),
                  "rows": [{"bench": b, "strict_ms": value(cell.get((b, "strict"))),
                            "fused_ms": value(cell.get((b, "fused"))),
                            "torch_ms": value(torch_ms.get((b, "eager")))} for b in order]}))
EOF
exit $status
