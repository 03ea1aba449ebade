#!/bin/sh
# Runs kiln's benchmarks from a build folder (default: build), then PyTorch's on the same
# shapes when python3 and torch are there, and prints kiln against PyTorch side by side; then
# the fused-mode benchmarks (bench/fused_compare.sh, bench/first_step.sh; README-fused.md).
# Usage: sh bench/run.sh [build-dir]     (KILN_BENCH_FUSED=0: without the fused-mode part)
set -u
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

status=0
if [ -x "$BUILD/bench_core" ]; then
    "$BUILD/bench_core" | tee "$OUT/core.txt" || status=1
else
    echo "bench_core not built in $BUILD (cmake --build $BUILD --target benchmarks)"; status=1
fi
if [ -x "$BUILD/bench_blocks" ]; then
    "$BUILD/bench_blocks" | tee "$OUT/blocks.txt" || status=1
else
    echo "bench_blocks not built in $BUILD: kiln's block timings skipped"
fi
if command -v python3 >/dev/null 2>&1; then
    python3 "$HERE/torch_compare.py" | tee "$OUT/torch.txt" || status=1
else
    echo "skipped: python3 not found, no PyTorch comparison"
fi

# kiln against PyTorch, joined on (bench, shape). speedup > 1: kiln is faster (for times,
# torch/kiln; for rates, kiln/torch).
if command -v python3 >/dev/null 2>&1 && grep -q '^{' "$OUT/torch.txt" 2>/dev/null; then
    cat "$OUT"/*.txt | grep '^{' | python3 -c '
import json, sys
rows = [json.loads(line) for line in sys.stdin]
torch = {(r["bench"], r["shape"]): r for r in rows if r["impl"] == "torch"}
print()
print("%-22s %-28s %-10s %12s %12s %8s" % ("bench", "shape", "unit", "kiln", "torch", "speedup"))
for r in rows:
    t = torch.get((r["bench"], r["shape"]))
    if r["impl"] != "kiln" or not t:
        continue
    higher_better = r["unit"] in ("gflops", "gbps")
    speedup = r["value"] / t["value"] if higher_better else t["value"] / r["value"]
    print("%-22s %-28s %-10s %12.3f %12.3f %8.2f" % (r["bench"], r["shape"], r["unit"], r["value"], t["value"], speedup))
'
fi

# Fused eager mode (issue 4): the blocks in strict and fused mode against PyTorch eager, then
# the time to a GPT-2 124M model's first training step. KILN_BENCH_FUSED=0 leaves both out.
if [ "${KILN_BENCH_FUSED:-1}" != 0 ]; then
    echo
    if [ -x "$BUILD/bench_fused" ]; then
        sh "$HERE/fused_compare.sh" "$BUILD" || status=1
    else
        echo "bench_fused not built in $BUILD: fused-mode blocks skipped"
    fi
    echo
    sh "$HERE/first_step.sh" "$BUILD" || status=1
fi
exit $status
