#!/usr/bin/env python3
"""PyTorch eager on bench_fused's blocks: the same names, shapes, op sequences and iteration
scheme (a check-free first call, warm-up, then the median of timed calls), f32, CPU.

    python3 bench/fused_torch.py [--iters N] [--warmup N] [--threads 2] [--blocks a,b] [--json FILE]
                                 [--compile] [--list]

Prints a table, then one JSON line per block ({"impl": "torch", "mode": "eager", "bench",
"shape", "unit": "ms", "value", ...}). Extra references, in lines of their own mode: AdamW
with fused=True ("fused-adamw") for the AdamW blocks, and with --compile, torch.compile of
the activation blocks and the hand-written AdamW ("compile"; the first call's time includes
the compile). Installs nothing: without torch it prints 'skipped: PyTorch not installed'
and exits 0."""
import argparse
import json
import math
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("skipped: PyTorch not installed")
    sys.exit(0)

SEED = 20261204
LR, BETA1, BETA2, EPS, WEIGHT_DECAY = 6e-4, 0.9, 0.95, 1e-8, 0.1


def gpt2_124m_shapes():
    """GPT-2 small's 148 parameters in the model's order: 124,439,808 values."""
    C, L, V, P = 768, 12, 50257, 1024
    shapes = [(V, C), (P, C)]
    for _ in range(L):
        shapes += [(C,), (C,), (C, 3 * C), (3 * C,), (C, C), (C,), (C,), (C,), (C, 4 * C), (4 * C,), (4 * C, C), (C,)]
    return shapes + [(C,), (C,)]


def uniform(shape, r):
    return torch.empty(shape).uniform_(-r, r)


# ---- blocks: each has setup() -> state and a function of it; the result is not checked here ----

def setup_mlp():
    return {"x": torch.randn(512, 768), "w": torch.randn(768, 3072) * 0.02, "b": torch.randn(3072)}


def gelu_mlp(s):
    return F.gelu(s["x"] @ s["w"] + s["b"], approximate="tanh")


def setup_bias():
    return {"x": torch.randn(512, 3072), "h": torch.randn(512, 3072), "b": torch.randn(3072)}


def gelu_bias(s):
    return F.gelu(s["h"] + s["b"], approximate="tanh")


def residual_gelu(s):
    return s["x"] + F.gelu(s["h"] + s["b"], approximate="tanh") * 0.5


def setup_norm():
    return {"x": torch.randn(2048, 768), "w": torch.randn(768), "b": torch.randn(768)}


def layernorm_prims(s):
    x = s["x"]
    xc = x - x.mean(-1, keepdim=True)
    var = (xc * xc).mean(-1, keepdim=True)
    y = xc * torch.rsqrt(var + 1e-5)
    return y * s["w"] + s["b"]


def layer_norm(s):
    return F.layer_norm(s["x"], (768,), s["w"], s["b"], 1e-5)


def setup_scores():
    return {"x": torch.randn(768, 64, 64)}


def softmax_prims(s):
    x = s["x"]
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def softmax(s):
    return torch.softmax(s["x"], -1)


def setup_one_param():
    shape = (50257, 768)
    return {"p": uniform(shape, 0.05), "g": uniform(shape, 1e-2), "m": torch.zeros(shape), "v": torch.zeros(shape),
            "step": 0}


def adamw_prims(s):
    """The same primitives as bench_fused's hand-written AdamW, out of place, then copied back."""
    s["step"] += 1
    bc1, bc2 = 1 - BETA1 ** s["step"], 1 - BETA2 ** s["step"]
    p, g = s["p"], s["g"]
    m = s["m"] * BETA1 + g * (1 - BETA1)
    v = s["v"] * BETA2 + (g * g) * (1 - BETA2)
    denom = torch.sqrt(v / bc2) + EPS
    update = (m / bc1) / denom
    p_new = p * (1 - LR * WEIGHT_DECAY) - update * LR
    s["m"].copy_(m)
    s["v"].copy_(v)
    p.copy_(p_new)
    return p


def adamw_prims_pure(p, g, m, v, bc1, bc2):
    """adamw_prims without Python state, for torch.compile (bias corrections as 0-d tensors)."""
    m_new = m * BETA1 + g * (1 - BETA1)
    v_new = v * BETA2 + (g * g) * (1 - BETA2)
    update = (m_new / bc1) / (torch.sqrt(v_new / bc2) + EPS)
    m.copy_(m_new)
    v.copy_(v_new)
    p.copy_(p * (1 - LR * WEIGHT_DECAY) - update * LR)
    return p


def setup_adamw_one(fused=False):
    s = setup_one_param()
    p = torch.nn.Parameter(s["p"])
    p.grad = s["g"]
    s["param"] = p
    s["opt"] = torch.optim.AdamW([p], lr=LR, betas=(BETA1, BETA2), eps=EPS, weight_decay=WEIGHT_DECAY,
                                 **({"fused": True} if fused else {}))
    return s


def optimizer_step(s):
    s["opt"].step()
    return s["param"]


def setup_gpt2(fused=False, optimizer=True):
    params = []
    for shape in gpt2_124m_shapes():
        p = torch.nn.Parameter(torch.zeros(shape))
        p.grad = uniform(shape, 1e-2)
        params.append(p)
    s = {"params": params}
    if optimizer:
        s["opt"] = torch.optim.AdamW(params, lr=LR, betas=(BETA1, BETA2), eps=EPS, weight_decay=WEIGHT_DECAY,
                                     **({"fused": True} if fused else {}))
    return s


def adamw_124m(s):
    s["opt"].step()
    return s["params"][0]


def clip_grad_norm_124m(s):
    # In place, as torch does: after the first call the norm is ~1 and every call still scales.
    return torch.nn.utils.clip_grad_norm_(s["params"], 1.0)


# name, shape, setup, function, big (fewer default iterations)
BLOCKS = [
    ("gelu_mlp", "512x768 @ 768x3072 + 3072", setup_mlp, gelu_mlp, False),
    ("gelu_bias", "512x3072 + 3072", setup_bias, gelu_bias, False),
    ("residual_gelu", "512x3072 + 3072", setup_bias, residual_gelu, False),
    ("layernorm_prims", "2048x768", setup_norm, layernorm_prims, False),
    ("layer_norm", "2048x768", setup_norm, layer_norm, False),
    ("softmax_prims", "768x64x64 dim -1", setup_scores, softmax_prims, False),
    ("softmax", "768x64x64 dim -1", setup_scores, softmax, False),
    ("adamw_prims", "50257x768", setup_one_param, adamw_prims, True),
    ("adamw_update", "50257x768", setup_adamw_one, optimizer_step, True),
    ("adamw_124m", "GPT-2 124M, 148 tensors", setup_gpt2, adamw_124m, True),
    ("clip_grad_norm_124m", "GPT-2 124M, 148 tensors", lambda: setup_gpt2(optimizer=False), clip_grad_norm_124m,
     True),
]
COMPILABLE = {"gelu_mlp", "gelu_bias", "residual_gelu", "layernorm_prims", "softmax_prims"}


def time_block(fn, state, warmup, iters):
    t0 = time.perf_counter()
    fn(state)
    first = time.perf_counter() - t0
    for _ in range(warmup):
        fn(state)
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn(state)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3, first * 1e3


def emit(rows, name, shape, mode, median_ms, first_ms, iters, threads):
    row = {"impl": "torch", "mode": mode, "bench": name, "shape": shape, "unit": "ms", "value": round(median_ms, 6),
           "first_ms": round(first_ms, 3), "iters": iters, "threads": threads, "torch": torch.__version__}
    rows.append(row)
    print("%-20s %-12s %10.3f %10.3f %5d" % (name, mode, median_ms, first_ms, iters), flush=True)


def skip(rows, name, shape, mode, why, threads):
    rows.append({"impl": "torch", "mode": mode, "bench": name, "shape": shape, "unit": "ms", "value": None,
                 "skipped": why, "threads": threads})
    print("%-20s %-12s skipped: %s" % (name, mode, why), flush=True)


def compiled_variant(name, setup):
    """(function, state) of the torch.compile reference of a block."""
    if name == "adamw_prims":
        s = setup()
        f = torch.compile(adamw_prims_pure)

        def step(st):
            st["step"] += 1
            bc1 = torch.tensor(1 - BETA1 ** st["step"])
            bc2 = torch.tensor(1 - BETA2 ** st["step"])
            return f(st["p"], st["g"], st["m"], st["v"], bc1, bc2)

        return step, s
    fn = dict((b[0], b[3]) for b in BLOCKS)[name]
    return torch.compile(fn), setup()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=0, help="timed iterations (0: 21, or 5 for the AdamW/clip blocks)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--blocks", default="", help="comma list (default: all)")
    ap.add_argument("--json", help="also write the JSON lines to this file")
    ap.add_argument("--compile", action="store_true", help="add torch.compile references (slow first calls)")
    ap.add_argument("--no-fused-adamw", action="store_true", help="leave out the AdamW(fused=True) references")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    if args.list:
        for name, shape, *_ in BLOCKS:
            print("%-20s %s" % (name, shape))
        return 0
    names = [b[0] for b in BLOCKS]
    wanted = [n for n in args.blocks.split(",") if n] or names
    for n in wanted:
        if n not in names:
            print("fused_torch.py: --blocks: no block '%s' (%s)" % (n, ", ".join(names)), file=sys.stderr)
            return 2

    torch.set_num_threads(args.threads)
    print("# fused_torch: torch %s, %d threads, eager" % (torch.__version__, torch.get_num_threads()), flush=True)
    print("%-20s %-12s %10s %10s %5s" % ("block", "mode", "median ms", "first ms", "iters"), flush=True)
    rows = []
    with torch.no_grad():
        for name, shape, setup, fn, big in BLOCKS:
            if name not in wanted:
                continue
            iters = args.iters or (5 if big else 21)
            torch.manual_seed(SEED)
            state = setup()
            median_ms, first_ms = time_block(fn, state, args.warmup, iters)
            emit(rows, name, shape, "eager", median_ms, first_ms, iters, args.threads)
            del state
            if name in ("adamw_update", "adamw_124m") and not args.no_fused_adamw:
                torch.manual_seed(SEED)
                try:
                    state = setup(fused=True)
                    median_ms, first_ms = time_block(fn, state, args.warmup, iters)
                    emit(rows, name, shape, "fused-adamw", median_ms, first_ms, iters, args.threads)
                except Exception as e:  # an older torch without the fused CPU AdamW
                    skip(rows, name, shape, "fused-adamw", "%s: %s" % (type(e).__name__, str(e).splitlines()[0]),
                         args.threads)
                state = None
            if args.compile and (name in COMPILABLE or name == "adamw_prims"):
                torch.manual_seed(SEED)
                try:
                    f, state = compiled_variant(name, setup)
                    median_ms, first_ms = time_block(f, state, args.warmup, iters)
                    emit(rows, name, shape, "compile", median_ms, first_ms, iters, args.threads)
                except Exception as e:  # no C++ compiler, an unsupported torch...
                    msg = str(e).strip().splitlines()
                    skip(rows, name, shape, "compile", "%s: %s" % (type(e).__name__, msg[0] if msg else ""),
                         args.threads)
                state = None
    out = open(args.json, "w") if args.json else None
    for row in rows:
        line = json.dumps(row)
        print(line)
        if out:
            out.write(line + "\n")
    if out:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
