#!/bin/sh
# ResNet training images per second, side by side in one run: `kiln train resnet18` in each
# of MODES against PyTorch eager (bench/resnet_torch.py: torchvision's resnet18, AdamW),
# batch BATCH of SIZExSIZE RGB images, 10 classes, f32, THREADS threads each. kiln's rate is
# the mean over its logged steps after the first WARMUP (fused mode compiles in those), on
# its own synthetic images (the data cost is a few ms a step); PyTorch's is timed the same
# way on random tensors. Prints one JSON line per framework and a summary line.
# Usage: sh bench/resnet_compare.sh [build-dir]
#        (MODEL=resnet18 BATCH=32 SIZE=32 THREADS=2 STEPS=10 WARMUP=2 MODES="strict fused" by default;
#         e.g. SIZE=224 BATCH=8 for ImageNet-sized images)
set -u
BUILD=${1:-build}
MODEL=${MODEL:-resnet18}
BATCH=${BATCH:-32}
SIZE=${SIZE:-32}
THREADS=${THREADS:-2}
STEPS=${STEPS:-10}
WARMUP=${WARMUP:-2}
MODES=${MODES:-strict fused}
KILN="$BUILD/kiln"
HERE=$(dirname "$0")
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

if [ ! -x "$KILN" ]; then
    echo "resnet_compare: kiln not built in $BUILD (cmake --build $BUILD --target kiln)"
    exit 1
fi
echo "# $MODEL, batch $BATCH, ${SIZE}x${SIZE}, $THREADS threads, $STEPS timed steps after $WARMUP;" \
     "OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}; load average: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"

# kiln: the mean ms of the logged steps after the warmup.
run_kiln() {
    mode=$1
    if ! "$KILN" train "$MODEL" --mode "$mode" --threads "$THREADS" --batch "$BATCH" --image-size "$SIZE" \
        --steps $((STEPS + WARMUP)) --eval-count 1 --quiet --log "$OUT/$mode.log" >/dev/null 2>"$OUT/$mode.err"; then
        echo "{\"framework\": \"kiln\", \"mode\": \"$mode\", \"error\": \"$(head -c 200 "$OUT/$mode.err" | tr '\n"' '  ')\"}"
        return
    fi
    python3 - "$OUT/$mode.log" "$mode" "$WARMUP" "$BATCH" "$MODEL" "$SIZE" "$THREADS" <<'EOF'
import json, sys
path, mode, warmup, batch, model, size, threads = sys.argv[1:]
steps = [json.loads(l) for l in open(path)][int(warmup):]
ms = sum(s["ms"] for s in steps) / len(steps)
print(json.dumps({"framework": "kiln", "mode": mode, "model": model, "batch": int(batch), "size": int(size),
                  "threads": int(threads), "steps": len(steps), "images_per_s": round(int(batch) * 1e3 / ms, 2),
                  "ms_per_step": round(ms, 1)}))
EOF
}

for mode in $MODES; do
    KILN_CACHE_DIR=${KILN_CACHE_DIR:-$OUT/cache} run_kiln "$mode" | tee "$OUT/$mode.json"
done
if python3 -c "import torch, torchvision" 2>/dev/null; then
    python3 "$HERE/resnet_torch.py" --model "$MODEL" --batch "$BATCH" --size "$SIZE" --threads "$THREADS" \
        --steps "$STEPS" --warmup "$WARMUP" | tee "$OUT/torch.json"
else
    echo '{"framework": "pytorch", "skipped": "torch or torchvision not installed"}' | tee "$OUT/torch.json"
fi
python3 - "$OUT" $MODES <<'EOF'
import json, os, sys
rate = {}
for name in sys.argv[2:] + ["torch"]:
    r = json.load(open(os.path.join(sys.argv[1], name + ".json")))
    rate[name] = r.get("images_per_s")
line = "images/s: " + ", ".join("kiln %s %s" % (m, rate[m]) for m in sys.argv[2:]) + ", pytorch %s" % rate["torch"]
for m in sys.argv[2:]:
    if rate["torch"] and rate[m]:
        line += "; kiln %s / pytorch = %.2f" % (m, rate[m] / rate["torch"])
    if m != "strict" and rate.get("strict") and rate[m]:
        line += "; kiln %s / strict = %.2f" % (m, rate[m] / rate["strict"])
print(line)
EOF
