#!/usr/bin/env bash
# llm.c's CPU GPT-2 trainer (train_gpt2.c) side by side with bench/gpt2_step_torch.py and kiln:
# GPT-2 124M, B=4, T=64, f32, AdamW, OMP_NUM_THREADS threads (2 by default).
#
#   LLMC_DIR=/path/to/llm.c bench/llmc_step.sh
#
# Env: LLMC_DIR (llm.c checkout; default ~/llm.c), LLMC_STEPS (timed steps, 3), LLMC_WARMUP (untimed
# first steps, 1: step 0 allocates gradients and AdamW state), OMP_NUM_THREADS (2), LLMC_WORK (scratch dir,
# default a fresh mktemp dir, removed at the end unless LLMC_KEEP=1; it holds a 475 MiB checkpoint),
# LLMC_TIMEOUT (seconds, 900), CC (gcc).
# The checkout is only read: its Makefile, train_gpt2.c and llmc/ are copied to the scratch dir and
# built there with `make train_gpt2` (OpenMP). train_gpt2 has no options: it always runs B=4, T=64 for
# 41 steps with a validation pass (5 batches) before step 0 and every 10 steps and a sample at step 20,
# reading gpt2_124M.bin, gpt2_tokenizer.bin and dev/data/tinyshakespeare/*.bin from its cwd; we generate
# those (bench/llmc_make_inputs.py, random init and random tokens), read its "step N: train loss L
# (took X ms)" lines and stop it once LLMC_WARMUP + LLMC_STEPS steps are done.
# Prints one JSON line (or "skipped: ..." and exits 0 when the checkout, a compiler or numpy is missing).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LLMC_DIR="${LLMC_DIR:-$HOME/llm.c}"
STEPS="${LLMC_STEPS:-3}"
WARMUP="${LLMC_WARMUP:-1}"
THREADS="${OMP_NUM_THREADS:-2}"
TIMEOUT="${LLMC_TIMEOUT:-900}"
CC="${CC:-gcc}"
PY="${PYTHON:-python3}"

if [[ ! -f "$LLMC_DIR/train_gpt2.c" ]]; then
    echo "skipped: no llm.c checkout at LLMC_DIR=$LLMC_DIR (need train_gpt2.c)"; exit 0
fi
if ! command -v "$CC" >/dev/null || ! command -v make >/dev/null || ! command -v stdbuf >/dev/null; then
    echo "skipped: need make, stdbuf (coreutils) and $CC"; exit 0
fi
if ! "$PY" -c 'import numpy' 2>/dev/null; then
    echo "skipped: numpy not installed (needed by bench/llmc_make_inputs.py)"; exit 0
fi
if (( WARMUP + STEPS > 41 )); then
    echo "LLMC_WARMUP + LLMC_STEPS must be <= 41 (train_gpt2 runs steps 0..40)" >&2; exit 2
fi

if [[ -n "${LLMC_WORK:-}" ]]; then
    WORK="$LLMC_WORK"; mkdir -p "$WORK"
else
    WORK="$(mktemp -d "${TMPDIR:-/tmp}/llmc_step.XXXXXX")"
fi
PID=""
cleanup() {
    if [[ -n "$PID" ]] && kill -0 "$PID" 2>/dev/null; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
    if [[ -z "${LLMC_KEEP:-}" && -z "${LLMC_WORK:-}" ]]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT

# build from a copy, so the checkout stays untouched
mkdir -p "$WORK/src"
cp -r "$LLMC_DIR/Makefile" "$LLMC_DIR/train_gpt2.c" "$LLMC_DIR/llmc" "$WORK/src/"
if ! make -C "$WORK/src" CC="$CC" train_gpt2 >"$WORK/build.log" 2>&1; then
    cat "$WORK/build.log" >&2; echo "llm.c build failed" >&2; exit 1
fi
OMP=0
grep -q "✓ OpenMP found" "$WORK/build.log" && OMP=1
(( OMP )) || echo "warning: llm.c built without OpenMP (gcc needs libgomp; clang needs libomp-dev)" >&2

[[ -f "$WORK/run/gpt2_124M.bin" ]] || "$PY" "$HERE/llmc_make_inputs.py" "$WORK/run" >&2

LOG="$WORK/train.log"
# stdbuf: train_gpt2 printf()s to a file, which stdio would otherwise buffer in 4 KiB blocks
( cd "$WORK/run" && OMP_NUM_THREADS="$THREADS" exec stdbuf -oL "$WORK/src/train_gpt2" ) >"$LOG" 2>&1 &
PID=$!
NEED=$((WARMUP + STEPS))
START=$SECONDS
while :; do
    n=$(grep -c '^step [0-9]*: train loss' "$LOG" || true)
    (( n >= NEED )) && break
    if ! kill -0 "$PID" 2>/dev/null; then
        wait "$PID" || true; PID=""
        n=$(grep -c '^step [0-9]*: train loss' "$LOG" || true)
        (( n >= NEED )) && break
        cat "$LOG" >&2; echo "train_gpt2 exited after $n steps" >&2; exit 1
    fi
    if (( SECONDS - START > TIMEOUT )); then cat "$LOG" >&2; echo "timed out after ${TIMEOUT}s" >&2; exit 1; fi
    sleep 0.5
done
[[ -n "$PID" ]] && { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; PID=""; }

COMMIT="$(git -C "$LLMC_DIR" rev-parse --short HEAD 2>/dev/null || echo unknown)"
"$PY" - "$LOG" "$WARMUP" "$STEPS" "$THREADS" "$COMMIT" "$OMP" <<'PYEOF'
import json, re, statistics, sys
log, warmup, steps, threads, commit, omp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6] == "1"
rows = [(int(m[1]), float(m[2]), float(m[3])) for m in
        re.finditer(r"^step (\d+): train loss ([-\d.naif]+) \(took ([\d.]+) ms\)", open(log).read(), re.M)]
timed = [ms for s, _, ms in rows[warmup:warmup + steps]]
med = statistics.median(timed)
print(json.dumps({"impl": "llm.c", "bench": "gpt2_train_step", "model": "llm.c train_gpt2.c (CPU, random init)",
                  "shape": "L12 H12 C768 V50257(Vp50304) maxT1024 B4 T64 f32",
                  "ms_median": round(med, 3), "ms_mean": round(statistics.fmean(timed), 3),
                  "tokens_per_s": round(4 * 64 / med * 1e3, 1), "steps": len(timed), "warmup": warmup,
                  "threads": threads, "openmp": omp, "llmc_commit": commit,
                  "last_loss": rows[warmup + steps - 1][1]}), flush=True)
PYEOF
