#!/bin/sh
# kiln's thread pool, 1 thread against 2: GEMM-bound work (bench_core matmul, kiln's rows) and
# the GPT-2 124M training step (B=4, T=64, f32, strict), on the machine as it is and again with
# one core taken by another busy process (a shell loop). Runs alternate thread counts, ROUNDS
# rounds; the summary shows each row's best round and the 2-thread / 1-thread speedup.
# Usage: sh bench/thread_scaling.sh [build-dir]      (ROUNDS=2 STEPS=4 WARMUP=2)
set -u
BUILD=${1:-build}
ROUNDS=${ROUNDS:-2}
STEPS=${STEPS:-4}
WARMUP=${WARMUP:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(mktemp -d)
BUSY=
trap '[ -n "$BUSY" ] && kill "$BUSY" 2>/dev/null; rm -rf "$OUT"' EXIT
python3 "$HERE/random_tokens.py" "$OUT/tokens.bin"
echo "thread_scaling: $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"

for load in quiet busy; do
    if [ "$load" = busy ]; then
        sh -c 'while :; do :; done' &
        BUSY=$!
    fi
    r=1
    while [ "$r" -le "$ROUNDS" ]; do
        for t in 1 2; do
            KILN_THREADS=$t "$BUILD/bench_core" matmul 2>/dev/null | awk -v l=$load -v t=$t \
                '$1 == "kiln" && $2 == "matmul" { print l, t, "matmul_" $3 "@" $5, $6 }' >> "$OUT/rows"
            KILN_THREADS=$t "$BUILD/kiln" train gpt2 --data "$OUT/tokens.bin" --batch 4 --seq 64 \
                --steps $((STEPS + WARMUP)) --warmup 0 --log "$OUT/gpt2.jsonl" --quiet > /dev/null 2>&1 || exit 1
            python3 -c "
import json, statistics
ms = [json.loads(l)['ms'] for l in open('$OUT/gpt2.jsonl')][$WARMUP:]
print('$load', $t, 'gpt2_step_ms', statistics.median(ms))" >> "$OUT/rows"
        done
        r=$((r + 1))
    done
    if [ -n "$BUSY" ]; then
        kill "$BUSY"
        BUSY=
    fi
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$OUT/rows" <<'PY'
import sys
best = {}
for line in open(sys.argv[1]):
    load, t, name, v = line.split()
    v = float(v)
    lower_is_better = name.endswith("_ms")
    k = (load, name, int(t))
    best[k] = min(best.get(k, v), v) if lower_is_better else max(best.get(k, v), v)
print(f"{'load':6} {'bench':44} {'1 thread':>10} {'2 threads':>10} {'speedup':>8}")
for load in ("quiet", "busy"):
    for name in dict.fromkeys(n for (l, n, _) in best if l == load):
        one, two = best.get((load, name, 1)), best.get((load, name, 2))
        if one is None or two is None:
            continue
        speedup = one / two if name.endswith("_ms") else two / one
        print(f"{load:6} {name:44} {one:10.1f} {two:10.1f} {speedup:8.2f}")
print("matmul rows in GFLOP/s, gpt2_step_ms in ms; speedup > 1: 2 threads faster")
PY
