#!/bin/sh
# A GPT-2 124M-shaped training step (B=4, T=64, AdamW, f32, 2 threads) in kiln and, in the
# same run on the same machine, in PyTorch eager (bench/gpt2_step_torch.py; skipped when
# PyTorch is absent) and llm.c's CPU trainer (bench/llmc_step.sh; skipped without LLMC_DIR).
# Usage: sh bench/train_compare.sh [build-dir]     (STEPS=10 WARMUP=2 MODES="strict fused" by default)
set -u
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
STEPS=${STEPS:-10}
WARMUP=${WARMUP:-2}
MODES=${MODES:-strict fused}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# Random GPT-2 tokens in nanoGPT's format (uint16, no header).
python3 "$(dirname "$0")/random_tokens.py" "$OUT/tokens.bin"

for mode in $MODES; do
    KILN_THREADS=2 "$BUILD/kiln" train gpt2 --data "$OUT/tokens.bin" --batch 4 --seq 64 \
        --steps $((STEPS + WARMUP)) --warmup 0 --mode $mode --log "$OUT/kiln-$mode.jsonl" --quiet || exit 1
    python3 -c "
import json, statistics, sys
rows = [json.loads(l) for l in open('$OUT/kiln-$mode.jsonl')][$WARMUP:]
ms = [r['ms'] for r in rows]
print(json.dumps({'runtime': 'kiln', 'mode': '$mode', 'ms_median': round(statistics.median(ms), 1),
                  'tokens_per_s': round(256 / statistics.median(ms) * 1e3, 1),
                  'peak_mib': round(max(r['peak_mib'] for r in rows), 1)}))" | tee "$OUT/kiln-$mode.json"
done
python3 "$HERE/gpt2_step_torch.py" --warmup "$WARMUP" --steps "$STEPS" | tee "$OUT/torch.json"
if [ -n "${LLMC_DIR:-}" ]; then
    LLMC_WARMUP=$WARMUP LLMC_STEPS=$STEPS bash "$HERE/llmc_step.sh" | tail -1 | tee "$OUT/llmc.json"
fi
python3 -c "
import json
def ms(path):
    try:
        return json.loads(open(path).read().strip().splitlines()[-1])['ms_median']
    except Exception:
        return None
for mode in '$MODES'.split():
    k = ms('$OUT/kiln-' + mode + '.json')
    for name in ('torch', 'llmc'):
        other = ms('$OUT/' + name + '.json')
        if k and other:
            print('kiln %s vs %s: %.2fx (%s ms / %s ms per step; > 1 means kiln is faster)' % (mode, name, other / k, other, k))
"
