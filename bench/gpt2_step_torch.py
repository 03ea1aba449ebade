#!/usr/bin/env python3
"""PyTorch side of `kiln train gpt2`: one GPT-2 124M training step (forward, backward, AdamW), f32, CPU.

Model: transformers' GPT2LMHeadModel (the Hugging Face layout kiln reads: Conv1D weights [in, out],
lm_head tied to wte, gelu_new), eager attention, dropout 0. When transformers is absent it falls
back to an equivalent plain nn.Module GPT-2 (same math and parameter count) and says so ("model").
Loss: cross-entropy of model(x).logits against y (no HF label shift), as kiln computes it.
Optimizer: AdamW, lr 3e-4, betas (0.9, 0.95), weight decay 0.1 on >= 2-dim params, grad clip 1.0.
Data: random tokens. Prints one JSON line. Installs nothing: without torch it prints
"skipped: PyTorch not installed" and exits 0.

    python3 bench/gpt2_step_torch.py [--steps 10] [--warmup 2] [--threads 2] [--batch 4] [--seq 64] [--compile]
                                     [--profile]

--profile runs as many steps again under torch.profiler and adds "profile": {family: ms per
step}, the operators' self CPU time summed into kiln's op names (bench/profile_families.py) and
scaled to the unprofiled step's time, for bench/profile_compare.sh to set beside
`kiln train gpt2 --profile`.
"""
import argparse
import json
import math
import statistics
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("skipped: PyTorch not installed")
    sys.exit(0)


class Block(nn.Module):
    def __init__(self, C, H, eps):
        super().__init__()
        self.H = H
        self.ln_1, self.ln_2 = nn.LayerNorm(C, eps=eps), nn.LayerNorm(C, eps=eps)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.c_fc_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.H))
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        x = x + self.c_proj((att @ v).transpose(1, 2).reshape(B, T, C))
        return x + self.c_fc_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class PlainGPT2(nn.Module):
    """Fallback with the same math as GPT2LMHeadModel (eager attention); returns logits."""

    def __init__(self, L, H, C, V, maxT, eps=1e-5):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(maxT, C)
        self.h = nn.ModuleList(Block(C, H, eps) for _ in range(L))
        self.ln_f = nn.LayerNorm(C, eps=eps)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in self.h:
            x = b(x)
        return self.ln_f(x) @ self.wte.weight.T


def build(args):
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        return PlainGPT2(args.n_layer, args.n_head, args.n_embd, args.vocab, args.block), "plain nn.Module GPT-2"
    cfg = GPT2Config(n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd, vocab_size=args.vocab,
                     n_positions=args.block, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     bos_token_id=0, eos_token_id=0)
    cfg._attn_implementation = "eager"
    model = GPT2LMHeadModel(cfg)
    model.config.use_cache = False

    class Wrap(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, idx):
            return self.m(idx, use_cache=False).logits

    import transformers
    return Wrap(model), f"transformers {transformers.__version__} GPT2LMHeadModel (eager attention)"


def main():
    ap = argparse.ArgumentParser(description="GPT-2 124M training step in PyTorch (CPU, f32)")
    ap.add_argument("--steps", type=int, default=10, help="timed steps")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--n-layer", type=int, default=12)
    ap.add_argument("--n-head", type=int, default=12)
    ap.add_argument("--n-embd", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--block", type=int, default=1024)
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (off by default)")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--profile", action="store_true", help="self CPU time per op family (torch.profiler)")
    ap.add_argument("--amp", choices=("none", "bf16"), default="none",
                    help="bf16: the forward and the loss under torch.autocast('cpu', bfloat16)")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model, kind = build(args)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    n_params = sum(p.numel() for p in params)
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    fwd = torch.compile(model) if args.compile else model
    B, T, V = args.batch, args.seq, args.vocab
    g = torch.Generator().manual_seed(args.seed)

    def step():
        xy = torch.randint(0, V, (B, T + 1), generator=g)
        x, y = xy[:, :-1], xy[:, 1:]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.amp == "bf16"):
            logits = fwd(x)
            loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return loss.item()

    for _ in range(args.warmup):
        step()
    times, losses = [], []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        losses.append(step())
        times.append((time.perf_counter() - t0) * 1e3)
    families = None
    if args.profile:
        # The profiler slows every operator down (a 1.4 s step took ~2.5 s under it), so the
        # profiled steps run after the timed ones and their per-family self times are scaled by
        # the timed step over the profiled step: the column then adds up to the real step, in
        # the profiler's proportions.
        from torch.profiler import ProfilerActivity, profile
        from profile_families import torch_families
        profiled = []
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(args.steps):
                t0 = time.perf_counter()
                step()
                profiled.append((time.perf_counter() - t0) * 1e3)
        scale = statistics.median(times) / statistics.median(profiled) if times and profiled else 1.0
        families = {k: round(v * scale, 3) for k, v in torch_families(prof.key_averages(), args.steps).items()}
    med = statistics.median(times) if times else float("nan")
    print(json.dumps({
        "impl": "torch", "bench": "gpt2_train_step", "model": kind, "params": n_params,
        "shape": f"L{args.n_layer} H{args.n_head} C{args.n_embd} V{V} maxT{args.block} B{B} T{T} "
                 + ("f32" if args.amp == "none" else "f32+autocast bf16"),
        "ms_median": round(med, 3), "ms_mean": round(statistics.fmean(times), 3) if times else None,
        "tokens_per_s": round(B * T / med * 1e3, 1) if times else None,
        "steps": args.steps, "warmup": args.warmup, "compile": args.compile,
        "threads": torch.get_num_threads(), "torch": torch.__version__,
        "last_loss": round(losses[-1], 4) if losses else None,
        **({"profile": families} if families is not None else {})}), flush=True)


if __name__ == "__main__":
    main()
