#!/usr/bin/env python3
"""PyTorch on the shapes of bench_core and bench_blocks, 2 threads, printing the same JSON lines.

Installs nothing: without torch it prints a 'skipped' line and exits 0."""
import json
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("skipped: PyTorch not installed")
    sys.exit(0)


def median_seconds(fn, warmup, reps):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def report(bench, shape, unit, value):
    print(json.dumps({"impl": "torch", "bench": bench, "shape": shape, "unit": unit, "value": round(value, 6)}),
          flush=True)


def dispatch():
    a = torch.arange(1, 9, dtype=torch.float32).reshape(1, 8)
    b = torch.full((1, 8), 1e-3)
    ops = 100000

    def chain():
        x = a
        for _ in range(ops):
            x = torch.add(x, b)

    report("dispatch_add_strict", "1x8 f32 chain", "ns_per_op", median_seconds(chain, 1, 5) * 1e9 / ops)


def matmul():
    for m, k, n in [(256, 256, 256), (512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048),
                    (256, 768, 3072), (256, 3072, 768)]:
        a, b = torch.randn(m, k), torch.randn(k, n)
        flops = 2.0 * m * n * k
        reps = 21 if flops < 1e9 else 9 if flops < 1e10 else 5
        t = median_seconds(lambda: torch.matmul(a, b), 2, reps)
        report("matmul", f"{m}x{k} @ {k}x{n}", "gflops", flops / t * 1e-9)


def blocks():
    logits = torch.randn(256, 50257)
    report("softmax", "256x50257", "ms", 1e3 * median_seconds(lambda: torch.softmax(logits, -1), 2, 9))
    x, w, b = torch.randn(1024, 768), torch.randn(768), torch.randn(768)
    report("layer_norm", "1024x768", "ms", 1e3 * median_seconds(lambda: F.layer_norm(x, (768,), w, b, 1e-5), 2, 21))
    for T in (64, 1024):
        q, k, v = (torch.randn(4, 12, T, 64) for _ in range(3))
        t = median_seconds(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), 2, 5 if T > 256 else 21)
        report("attention", f"B4 H12 T{T} D64 causal", "ms", 1e3 * t)
    img, filt, bias = torch.randn(32, 64, 32, 32), torch.randn(64, 64, 3, 3), torch.randn(64)
    report("conv2d", "32x64x32x32 k64x3x3 pad1", "ms",
           1e3 * median_seconds(lambda: F.conv2d(img, filt, bias, padding=1), 2, 9))


def main():
    torch.set_num_threads(2)
    print(f"# torch_compare: torch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)
    with torch.inference_mode():
        dispatch()
        matmul()
        blocks()


if __name__ == "__main__":
    main()
