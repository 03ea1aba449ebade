#!/bin/sh
# Where a training step spends its time, kiln beside PyTorch eager, per op family: kiln's
# kernel time per op (`kiln train TASK --profile N`, timed on the stream that runs each kernel)
# and PyTorch's self CPU time per operator (torch.profiler, scaled to its unprofiled step: the
# profiler slows PyTorch down), both per step over the same number of steady steps, folded into
# one set of names (bench/profile_families.py). The two runs are alternated ROUNDS times and the
# table shows the median per row. Measure on a quiet machine (the load is printed).
# WORKLOAD=gpt2: GPT-2 124M, B=4, T=64, AdamW, f32. WORKLOAD=resnet18: BATCH images of SIZE^2.
#
#   sh bench/profile_compare.sh [BUILD]
#   (WORKLOAD=gpt2 THREADS=2 STEPS=4 WARMUP=2 ROUNDS=1 MODE=strict; resnet18: BATCH=32 SIZE=32)
set -eu
BUILD=${1:-build}
THREADS=${THREADS:-2} STEPS=${STEPS:-4} WARMUP=${WARMUP:-2} ROUNDS=${ROUNDS:-1} MODE=${MODE:-strict}
WORKLOAD=${WORKLOAD:-gpt2} BATCH=${BATCH:-32} SIZE=${SIZE:-32}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
echo "uptime at start: $(uptime)"
[ "$WORKLOAD" = gpt2 ] && python3 "$(dirname "$0")/random_tokens.py" "$OUT/tokens.bin"
r=1
while [ "$r" -le "$ROUNDS" ]; do
    if [ "$WORKLOAD" = gpt2 ]; then
        KILN_THREADS=$THREADS "$BUILD/kiln" train gpt2 --data "$OUT/tokens.bin" --batch 4 --seq 64 \
            --steps $((STEPS + WARMUP)) --warmup 0 --mode "$MODE" --profile "$STEPS" --quiet 2> "$OUT/kiln.$r.txt" > /dev/null
        (cd "$HERE" && python3 gpt2_step_torch.py --steps "$STEPS" --warmup "$WARMUP" --threads "$THREADS" --profile) \
            2> /dev/null | tail -1 > "$OUT/torch.$r.json"
    else
        KILN_THREADS=$THREADS "$BUILD/kiln" train "$WORKLOAD" --batch "$BATCH" --image-size "$SIZE" --eval-count 1 \
            --steps $((STEPS + WARMUP)) --mode "$MODE" --profile "$STEPS" --quiet 2> "$OUT/kiln.$r.txt" > /dev/null
        (cd "$HERE" && python3 resnet_torch.py --model "$WORKLOAD" --batch "$BATCH" --size "$SIZE" --steps "$STEPS" \
            --warmup "$WARMUP" --threads "$THREADS" --profile) 2> /dev/null | tail -1 > "$OUT/torch.$r.json"
    fi
    echo "round $r done (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
    r=$((r + 1))
done
python3 - "$OUT" "$ROUNDS" "$STEPS" <<'PY'
import json, statistics, sys
sys.path.insert(0, "bench")
from profile_families import kiln_family
out, rounds, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
kiln, torch = [], []
for r in range(1, rounds + 1):
    fams = {}
    for line in open(f"{out}/kiln.{r}.txt"):
        parts = line.split()
        if len(parts) == 5 and parts[4].endswith("%"):
            fam = kiln_family(parts[0])
            fams[fam] = fams.get(fam, 0.0) + float(parts[2]) / steps
    kiln.append(fams)
    torch.append(json.load(open(f"{out}/torch.{r}.json")).get("profile", {}))
names = sorted(set().union(*kiln, *torch), key=lambda n: -max(statistics.median(d.get(n, 0.0) for d in kiln),
                                                             statistics.median(d.get(n, 0.0) for d in torch)))
print(f"{'family':44} {'kiln ms/step':>13} {'torch ms/step':>14} {'kiln/torch':>10}")
tk = tt = 0.0
for n in names:
    k = statistics.median(d.get(n, 0.0) for d in kiln)
    t = statistics.median(d.get(n, 0.0) for d in torch)
    tk, tt = tk + k, tt + t
    if max(k, t) < 0.5:
        continue
    print(f"{n:44} {k:13.1f} {t:14.1f} {(k / t if t else float('inf')):10.2f}")
print(f"{'all (rows under 0.5 ms included)':44} {tk:13.1f} {tt:14.1f} {tk / tt:10.2f}")
PY
echo "uptime at end: $(uptime)"
