#!/bin/sh
# A GPT-2 124M-shaped training step (B=4, T=64, AdamW, 2 threads) in kiln and, in the same run
# on the same machine, in PyTorch eager with its default threading (bench/gpt2_step_torch.py;
# skipped when PyTorch is absent; TORCH_MODES="eager compile" adds torch.compile's Inductor) and llm.c's CPU trainer (bench/llmc_step.sh; only with
# LLMC_DIR), in f32 and with bf16 autocast (kiln --amp bf16, torch.autocast). The runtimes
# alternate, ROUNDS rounds; the summary takes each configuration's best round (median step of
# a round) and prints the ratios. The load average is printed at the start and the end.
# Usage: sh bench/train_compare.sh [build-dir]
#        (STEPS=10 WARMUP=2 ROUNDS=2 MODES="strict fused" AMP="none bf16" TORCH_MODES=eager by default)
set -u
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
STEPS=${STEPS:-10}
WARMUP=${WARMUP:-2}
ROUNDS=${ROUNDS:-2}
MODES=${MODES:-strict fused}
AMP=${AMP:-none bf16}
TORCH_MODES=${TORCH_MODES:-eager}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
echo "train_compare: $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"

# Random GPT-2 tokens in nanoGPT's format (uint16, no header).
python3 "$HERE/random_tokens.py" "$OUT/tokens.bin"

r=1
while [ "$r" -le "$ROUNDS" ]; do
    for amp in $AMP; do
        for mode in $MODES; do
            KILN_THREADS=2 "$BUILD/kiln" train gpt2 --data "$OUT/tokens.bin" --batch 4 --seq 64 --amp "$amp" \
                --steps $((STEPS + WARMUP)) --warmup 0 --mode "$mode" --log "$OUT/kiln.jsonl" --quiet || exit 1
            python3 -c "
import json, statistics
rows = [json.loads(l) for l in open('$OUT/kiln.jsonl')][$WARMUP:]
print(json.dumps({'runtime': 'kiln', 'mode': '$mode', 'amp': '$amp', 'round': $r,
                  'ms': statistics.median(r['ms'] for r in rows), 'peak_mib': max(r['peak_mib'] for r in rows)}))" \
                | tee -a "$OUT/rows.jsonl"
        done
        for tmode in $TORCH_MODES; do
            flag=""
            [ "$tmode" = compile ] && flag=--compile
            python3 "$HERE/gpt2_step_torch.py" --warmup "$WARMUP" --steps "$STEPS" --amp "$amp" $flag 2>/dev/null | tail -1 |
                python3 -c "
import json, sys
line = sys.stdin.read().strip()
try:
    r = json.loads(line)
except ValueError:  # 'skipped: PyTorch not installed', or its error: said, not a row
    sys.exit(print('torch $tmode: ' + line, file=sys.stderr))
print(json.dumps({'runtime': 'torch', 'mode': '$tmode', 'amp': '$amp', 'round': $r, 'ms': r['ms_median']}))" \
                | tee -a "$OUT/rows.jsonl"
        done
    done
    if [ -n "${LLMC_DIR:-}" ]; then
        LLMC_WARMUP=$WARMUP LLMC_STEPS=$STEPS bash "$HERE/llmc_step.sh" | tail -1 | python3 -c "
import json, sys
r = json.loads(sys.stdin.read())
print(json.dumps({'runtime': 'llm.c', 'mode': '', 'amp': 'none', 'round': $r, 'ms': r['ms_median']}))" \
            | tee -a "$OUT/rows.jsonl"
    fi
    r=$((r + 1))
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$OUT/rows.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
best = {}
for r in rows:
    k = (r['runtime'], r['mode'], r['amp'])
    best[k] = min(best.get(k, r['ms']), r['ms'])
print(f"\n{'runtime':8} {'mode':7} {'amp':5} {'best ms/step':>12} {'vs torch':>9} {'vs kiln f32':>12}")
for (rt, mode, amp), ms in sorted(best.items(), key=lambda kv: (kv[0][2], kv[0][0] != 'kiln', kv[0][1])):
    torch = best.get(('torch', 'eager', amp))
    f32 = best.get(('kiln', mode, 'none')) if rt == 'kiln' else None
    print(f"{rt:8} {mode:7} {amp:5} {ms:12.1f} {ms / torch if torch else float('nan'):9.2f} "
          f"{ms / f32 if f32 else float('nan'):12.2f}")
print("ratios are step times: < 1 means faster than the other")
PY
