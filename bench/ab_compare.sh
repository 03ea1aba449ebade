#!/bin/sh
# Before/after: kiln's own benchmarks (bench_core, bench_blocks) and the GPT-2 124M training
# step (B=4, T=64, AdamW, f32, 2 threads, strict and fused) from two build folders, alternated
# over ROUNDS rounds in one run, so that both see the same machine. Prints each result's best
# round per build (the least time, the highest rate: this host's noise only ever slows a run)
# and after/before of those, then the medians. For times, after/before > 1 means the after
# build is slower; for rates (gflops, gbps) it means faster.
#
#   sh bench/ab_compare.sh BEFORE_BUILD AFTER_BUILD      # ROUNDS=2 STEPS=6 WARMUP=2 by default
set -u
BEFORE=$1 AFTER=$2
ROUNDS=${ROUNDS:-2}
STEPS=${STEPS:-6}
WARMUP=${WARMUP:-2}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
echo "uptime at start: $(uptime)"
python3 "$(dirname "$0")/random_tokens.py" "$OUT/tokens.bin"

gpt2_step() { # build mode label
    KILN_THREADS=2 "$1/kiln" train gpt2 --data "$OUT/tokens.bin" --batch 4 --seq 64 \
        --steps $((STEPS + WARMUP)) --warmup 0 --mode "$2" --log "$OUT/step.jsonl" --quiet > /dev/null 2>&1 || return
    python3 -c "
import json, statistics
rows = [json.loads(l) for l in open('$OUT/step.jsonl')][$WARMUP:]
print(json.dumps({'impl': 'kiln', 'bench': 'gpt2_step', 'shape': '$2', 'unit': 'ms',
                  'value': statistics.median(r['ms'] for r in rows)}))
if 'peak_mib' in rows[0]:
    print(json.dumps({'impl': 'kiln', 'bench': 'gpt2_step_peak', 'shape': '$2', 'unit': 'MiB',
                      'value': max(r['peak_mib'] for r in rows)}))"
}

r=1
while [ "$r" -le "$ROUNDS" ]; do
    for side in before after; do
        if [ "$side" = before ]; then b=$BEFORE; else b=$AFTER; fi
        {
            "$b/bench_core"
            "$b/bench_blocks"
            gpt2_step "$b" strict
            gpt2_step "$b" fused
        } 2>/dev/null | grep '^{' | sed "s/^{/{\"side\": \"$side\", /" >> "$OUT/all.jsonl"
        echo "round $r $side done ($(uptime | sed 's/.*load/load/'))"
    done
    r=$((r + 1))
done

python3 - "$OUT/all.jsonl" <<'EOF'
import json, statistics, sys
vals = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("impl") != "kiln": continue
    vals.setdefault((r["bench"], r["shape"], r["unit"]), {}).setdefault(r["side"], []).append(r["value"])
RATES = ("gflops", "gbps")
print("%-24s %-34s %-10s %12s %12s %8s %12s %12s" % ("bench", "shape", "unit", "best before", "best after",
                                                     "after/before", "median bef.", "median aft."))
for (bench, shape, unit), v in vals.items():
    if "before" not in v or "after" not in v: continue
    best = max if unit in RATES else min
    b, a = best(v["before"]), best(v["after"])
    print("%-24s %-34s %-10s %12.4g %12.4g %8.3f %12.4g %12.4g" % (bench, shape[:34], unit, b, a,
          a / b if b else float("nan"), statistics.median(v["before"]), statistics.median(v["after"])))
EOF
echo "uptime at end: $(uptime)"
