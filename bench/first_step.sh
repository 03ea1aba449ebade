#!/bin/sh
# Time to first step: one `kiln train gpt2` process (GPT-2 124M, seeded random init, B=4, T=64,
# AdamW, grad clip 1.0, f32), timed from exec to exit, in (a) strict mode, (b) MODE (fused or
# compiled) with a cold compilation cache (a fresh, empty KILN_CACHE_DIR), (c) MODE again on that
# warm cache. Prints the wall seconds, each step's ms and loss (from --log), the ratios to strict,
# the runs' kiln-stats lines (KILN_STATS=1: compiles, compile seconds, cache hits), and one
# JSON line.
# Usage: sh bench/first_step.sh [build-dir]     (MODE=fused THREADS=2 STEPS=1 BATCH=4 SEQ=64 by default)
# Exit status: 1 when a run fails; a mode the build refuses is reported as skipped (0).
set -u
BUILD=${1:-build}
MODE=${MODE:-fused}
THREADS=${THREADS:-2}
STEPS=${STEPS:-1}
BATCH=${BATCH:-4}
SEQ=${SEQ:-64}
KILN="$BUILD/kiln"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

if [ ! -x "$KILN" ]; then
    echo "first_step: kiln not built in $BUILD (cmake --build $BUILD --target kiln)"
    exit 1
fi
if ! command -v python3 >/dev/null 2>&1; then
    echo "skipped: first_step needs python3 (token file, report)"
    exit 0
fi

# Random GPT-2 tokens in nanoGPT's format (uint16, no header), as bench/train_compare.sh makes them.
python3 "$(dirname "$0")/random_tokens.py" "$OUT/tokens.bin"

# Seconds since the epoch with sub-second digits (GNU date; python3 elsewhere).
now() {
    t=$(date +%s.%N 2>/dev/null)
    case "$t" in
    *N* | "" | *.) python3 -c 'import time; print("%.6f" % time.time())' ;;
    *) echo "$t" ;;
    esac
}

# run LABEL MODE: one process; leaves LABEL.{wall,rc,err,jsonl} in $OUT.
run() {
    label=$1 mode=$2
    printf '%-20s ' "$label"
    t0=$(now)
    KILN_STATS=1 KILN_CACHE_DIR="$OUT/cache" KILN_THREADS="$THREADS" "$KILN" train gpt2 --data "$OUT/tokens.bin" \
        --batch "$BATCH" --seq "$SEQ" --steps "$STEPS" --warmup 0 --mode "$mode" --threads "$THREADS" \
        --log "$OUT/$label.jsonl" --quiet 2> "$OUT/$label.err"
    echo $? > "$OUT/$label.rc"
    t1=$(now)
    echo "$t0 $t1" | awk '{ printf "%.3f\n", $2 - $1 }' > "$OUT/$label.wall"
    echo "$(cat "$OUT/$label.wall") s, exit status $(cat "$OUT/$label.rc")"
}

echo "# first_step: kiln train gpt2, GPT-2 124M, B=$BATCH T=$SEQ, $STEPS step(s), $THREADS threads, whole process"
mkdir -p "$OUT/cache"
run strict strict
if [ -n "$(ls -A "$OUT/cache")" ]; then
    echo "first_step: strict mode wrote to the compilation cache; emptying it for the cold run"
    rm -rf "$OUT/cache" && mkdir -p "$OUT/cache"
fi
run cold "$MODE"
# A refused mode needs no second try.
if grep -q -- "--mode $MODE" "$OUT/cold.err" && [ "$(cat "$OUT/cold.rc")" != 0 ]; then
    cp "$OUT/cold.err" "$OUT/warm.err"
    cp "$OUT/cold.rc" "$OUT/warm.rc"
    echo 0 > "$OUT/warm.wall"
else
    run warm "$MODE"
fi
du -sk "$OUT/cache" 2>/dev/null | awk '{ print $1 }' > "$OUT/cache.kb"

python3 - "$OUT" "$THREADS" "$STEPS" "$BATCH" "$SEQ" "$MODE" <<'EOF'
import json, os, sys

out, threads, steps, batch, seq = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
mode = sys.argv[6]

def read(name, default=""):
    try:
        return open(os.path.join(out, name)).read()
    except OSError:
        return default

runs, status = {}, 0
for label in ("strict", "cold", "warm"):
    rc = int(read(label + ".rc", "1").strip() or 1)
    err = read(label + ".err")
    stats = None
    for line in err.splitlines():
        if line.startswith("kiln-stats: "):
            try:
                stats = json.loads(line[len("kiln-stats: "):])
            except ValueError:
                pass
    log = [json.loads(l) for l in read(label + ".jsonl").splitlines() if l.startswith("{")]
    r = {"wall_s": float(read(label + ".wall", "0") or 0), "rc": rc, "stats": stats,
         "step_ms": [round(s["ms"], 1) for s in log], "loss": [s["loss"] for s in log]}
    if rc != 0:
        msg = [l for l in err.splitlines() if l.strip() and not l.startswith("kiln-stats: ")]
        why = msg[-1].strip() if msg else "exit status %d" % rc
        refused = label != "strict" and "--mode " + mode in err
        r["skipped" if refused else "failed"] = why
        if not refused:
            status = 1
    runs[label] = r

print()
names = {"strict": "strict", "cold": mode + ", cold cache", "warm": mode + ", warm cache"}
for label, r in runs.items():
    if r["rc"] != 0:
        print("%-18s %s: %s" % (names[label], "skipped" if "skipped" in r else "failed", r.get("skipped") or r.get("failed")))
        continue
    print("%-18s %8.2f s wall   step ms %s   loss %s" % (names[label], r["wall_s"], r["step_ms"],
                                                        ["%.4f" % l for l in r["loss"]]))

def ok(label):
    return runs[label]["rc"] == 0

def ratio(a, b):
    return round(runs[a]["wall_s"] / runs[b]["wall_s"], 3) if ok(a) and ok(b) and runs[b]["wall_s"] > 0 else None

warm, cold = ratio("warm", "strict"), ratio("cold", "strict")
print()
print("warm %s / strict: %s" % (mode, ("%.2f" % warm) if warm else "- (%s did not run)" % mode))
print("cold %s / strict: %s" % (mode, ("%.2f" % cold) if cold else "- (%s did not run)" % mode))
for label in ("strict", "cold", "warm"):
    s = runs[label]["stats"]
    if s and ok(label):
        print("kiln-stats %-10s compiles %s (%.2f s), cache hits %s memory / %s disk, misses %s, fused kernels %s, "
              "kernels %s" % (label, s.get("compiles"), s.get("compile_seconds", 0), s.get("cache_memory_hits"),
                              s.get("cache_disk_hits"), s.get("cache_misses"), s.get("fused_kernels"),
                              s.get("kernels_launched")))
kb = read("cache.kb").strip()
if kb and ok("cold"):
    print("cache directory after the %s runs: %s KiB" % (mode, kb))
# The same seed and data give the same losses in every mode (up to fusion's rounding).
if ok("strict"):
    for label in ("cold", "warm"):
        a, b = runs["strict"]["loss"], runs[label]["loss"]
        if ok(label) and a and b and any(abs(x - y) > 1e-3 * max(1.0, abs(x)) for x, y in zip(a, b)):
            print("first_step: %s losses %s differ from strict's %s" % (label, b, a))
            status = 1
print(json.dumps({"bench": "first_step", "mode": mode, "threads": threads, "steps": steps, "batch": batch, "seq": seq,
                  "warm_over_strict": warm, "cold_over_strict": cold, "runs": runs}))
sys.exit(status)
EOF
