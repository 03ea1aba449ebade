#!/bin/sh
# Prefill and decode tokens/s of Llama-shaped models with random weights (the "stories15M"
# shape and a ~110M shape), f32 and bf16, in kiln (bench_lm, strict and fused mode),
# llama.cpp (llama-bench; f32, f16, bf16 GGUF) and transformers (PyTorch eager), all on 2
# threads in the same run, then one table with the ratios. The runtimes alternate, ROUNDS
# rounds, and the table takes each one's best round (this host's noise comes in phases of
# minutes: one runtime measured only in a slow phase would lose for it).
#
# Usage: sh bench/lm_compare.sh DIR [build-dir]
#   DIR holds the checkpoints (made once by bench/lm_make_checkpoints.py; ~0.5 GB, keep it out
#   of the repo) and their GGUF conversions.
#   LLAMA_CPP: a llama.cpp source tree with convert_hf_to_gguf.py and build/bin/llama-bench;
#   when unset, bench/build_llama_cpp.sh builds one from the llama-cpp-python sdist (once, kept
#   in ~/.cache/kiln-bench); LLAMA_CPP=none skips llama.cpp.
#   MODELS="stories15m llama110m", ROUNDS=2, REPS=3 (runs per round), PROMPT=128, GEN=64 by
#   default.
#   Every runtime runs with its own threading defaults (no OMP_WAIT_POLICY or the like).
set -u
DIR=${1:?usage: sh bench/lm_compare.sh DIR [build-dir]}
BUILD=${2:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
MODELS=${MODELS:-stories15m llama110m}
REPS=${REPS:-3}
ROUNDS=${ROUNDS:-2}
PROMPT=${PROMPT:-128}
GEN=${GEN:-64}
THREADS=2
if [ -z "${LLAMA_CPP:-}" ]; then
    LLAMA_CPP=$(sh "$HERE/build_llama_cpp.sh") || { echo "lm_compare: building llama.cpp failed" >&2; exit 1; }
fi
[ "$LLAMA_CPP" = none ] && LLAMA_CPP=
# `make` does not build the benchmarks: bring bench_lm up to date with the library, so that a
# run never measures a binary left from an earlier library.
cmake --build "$BUILD" --target bench_lm > /dev/null || { echo "lm_compare: building bench_lm in $BUILD failed" >&2; exit 1; }
echo "lm_compare: $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
OUT="$DIR/results"
mkdir -p "$OUT"
rm -f "$OUT"/*.jsonl

# Text the checkpoints' tokenizer learns from: TEXT, else Tiny Shakespeare beside the checkout.
TEXT="${TEXT:-$HERE/../../shared/data/tinyshakespeare.txt}"
[ -f "$TEXT" ] || { echo "lm_compare: set TEXT to a text file (e.g. Tiny Shakespeare, char-rnn's input.txt)" >&2; exit 1; }
python3 "$HERE/lm_make_checkpoints.py" "$DIR" --text "$TEXT" || exit 1

round=1
while [ "$round" -le "$ROUNDS" ]; do # one round: every runtime on every model
for model in $MODELS; do
    # llama.cpp: llama-bench's pp (prompt of PROMPT tokens) and tg (GEN tokens decoded after
    # a context of PROMPT tokens, -d), median-free: its average over REPS runs.
    if [ -n "${LLAMA_CPP:-}" ]; then
        for t in f32 f16 bf16; do
            gguf="$DIR/$model-$t.gguf"
            [ -f "$gguf" ] || python3 "$LLAMA_CPP/convert_hf_to_gguf.py" "$DIR/$model" --outtype $t \
                --outfile "$gguf" > "$OUT/convert-$model-$t.log" 2>&1 || { echo "conversion of $model to $t failed"; exit 1; }
            "$LLAMA_CPP/build/bin/llama-bench" -m "$gguf" -t $THREADS -r "$REPS" -p "$PROMPT" -n 0 -o jsonl \
                > "$OUT/llamacpp-$model-$t-pp.jsonl" 2> "$OUT/llamacpp.log"
            "$LLAMA_CPP/build/bin/llama-bench" -m "$gguf" -t $THREADS -r "$REPS" -p 0 -n "$GEN" -d "$PROMPT" -o jsonl \
                > "$OUT/llamacpp-$model-$t-tg.jsonl" 2>> "$OUT/llamacpp.log"
            python3 -c "
import json, sys
rows = [json.loads(l) for f in sys.argv[1:] for l in open(f) if l.startswith('{')]
pp = [r['avg_ts'] for r in rows if r['n_prompt'] > 0]
tg = [r['avg_ts'] for r in rows if r['n_gen'] > 0]
print(json.dumps({'impl': 'llama.cpp', 'model': '$model', 'dtype': '$t', 'mode': '',
                  'prefill': pp[0] if pp else None, 'decode': tg[0] if tg else None,
                  'commit': rows[0].get('build_commit', '') if rows else ''}))
" "$OUT/llamacpp-$model-$t-pp.jsonl" "$OUT/llamacpp-$model-$t-tg.jsonl" | tee -a "$OUT/all.jsonl"
        done
    fi
    for t in f32 bf16; do
        python3 "$HERE/lm_transformers.py" "$DIR/$model" --dtype $t --prompt "$PROMPT" --gen "$GEN" \
            --threads $THREADS --reps "$REPS" 2>/dev/null | python3 -c "
import json, sys
line = sys.stdin.read().split()
kv = dict(w.split('=') for w in line if '=' in w)
print(json.dumps({'impl': 'transformers', 'model': '$model', 'dtype': '$t', 'mode': '',
                  'prefill': float(kv['prefill_tok_s']), 'decode': float(kv['decode_tok_s'])}))
" | tee -a "$OUT/all.jsonl"
    done
    KILN_THREADS=$THREADS "$BUILD/bench_lm" "$DIR/$model" --dtypes f32,bf16 --modes strict,fused \
        --prompt "$PROMPT" --gen "$GEN" --reps "$REPS" > "$OUT/kiln-$model.txt" || { cat "$OUT/kiln-$model.txt"; exit 1; }
    grep '^{' "$OUT/kiln-$model.txt" | python3 -c "
import json, sys
rows = {}
for l in sys.stdin:
    r = json.loads(l)
    model, dtype, mode = r['shape'].split()
    row = rows.setdefault((dtype, mode), {'impl': 'kiln', 'model': model, 'dtype': dtype, 'mode': mode})
    row['prefill' if r['bench'] == 'lm_prefill' else 'decode'] = r['value']
for row in rows.values():
    print(json.dumps(row))
" | tee -a "$OUT/all.jsonl"
done
round=$((round + 1))
done

# The table: kiln's best mode per (model, dtype) against llama.cpp and transformers at the
# same dtype (llama.cpp's f16 is shown, not compared: kiln's 16-bit runs are bf16).
python3 - "$OUT/all.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def get(impl, model, dtype, mode=None):
    """The best round of a runtime: its highest prefill and its highest decode rate."""
    c = [r for r in rows if r['impl'] == impl and r['model'] == model and r['dtype'] == dtype
         and (mode is None or r['mode'] == mode)]
    if not c:
        return None
    best = dict(c[0])
    for key in ('prefill', 'decode'):
        values = [r[key] for r in c if r.get(key)]
        best[key] = max(values) if values else None
    return best
def ratio(a, b, key):
    return f"{a[key] / b[key]:.2f}" if a and b and a.get(key) and b.get(key) else "-"
def num(r, key):
    return f"{r[key]:.1f}" if r and r.get(key) else "-"
print()
print(f"{'model':<11} {'dtype':<5} {'runtime':<19} {'prefill tok/s':>13} {'decode tok/s':>12}"
      f"  {'kiln/llama.cpp':>15}  {'kiln/transformers':>17}")
models = list(dict.fromkeys(r['model'] for r in rows))
for model in models:
    for dtype in ('f32', 'bf16', 'f16'):
        lc, tf = get('llama.cpp', model, dtype), get('transformers', model, dtype)
        for r in [get('kiln', model, dtype, m) for m in ('strict', 'fused')] + [lc, tf]:
            if not r:
                continue
            name = r['impl'] + (f" ({r['mode']})" if r['mode'] else '')
            cmp = ''
            if r['impl'] == 'kiln':
                cmp = (f"  {ratio(r, lc, 'prefill') + ' / ' + ratio(r, lc, 'decode'):>15}"
                       f"  {ratio(r, tf, 'prefill') + ' / ' + ratio(r, tf, 'decode'):>17}")
            print(f"{model:<11} {dtype:<5} {name:<19} {num(r, 'prefill'):>13} {num(r, 'decode'):>12}{cmp}")
print("load average at the end:", open("/proc/loadavg").read().split()[:3])
print("\nratios: prefill / decode, kiln over the other runtime at the same dtype (> 1: kiln is faster)")
commits = {r.get('commit') for r in rows if r['impl'] == 'llama.cpp' and r.get('commit')}
if commits:
    print("llama.cpp build commit:", ", ".join(sorted(commits)))
EOF
