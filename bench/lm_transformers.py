"""Prefill and decode tokens/s of transformers' LlamaForCausalLM (PyTorch eager, CPU), the
transformers column of bench/lm_compare.sh.

Prefill: one forward over a prompt of P random token ids (logits of the last position only,
as llama-bench and kiln's bench_lm compute). Decode: N greedy steps, one token each, through
the KV cache. Each figure is the median over --reps runs after one warm-up run.

Usage: python bench/lm_transformers.py MODEL_DIR [--dtype f32|bf16] [--prompt 128] [--gen 64]
       [--threads 2] [--reps 3]
Prints one line: transformers <model> <dtype> prefill_tok_s=<x> decode_tok_s=<y>
"""
import argparse
import os
import statistics
import time

import torch
from transformers import LlamaForCausalLM

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def run_once(model, prompt, gen):
    t0 = time.perf_counter()
    out = model(input_ids=prompt, use_cache=True, logits_to_keep=1)
    nxt = out.logits[:, -1].argmax(-1, keepdim=True)
    t1 = time.perf_counter()
    cache = out.cache
    for _ in range(gen):
        out = model(input_ids=nxt, cache=cache, use_cache=True)
        cache = out.cache
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--dtype", default="f32", choices=sorted(DTYPES))
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = LlamaForCausalLM.from_pretrained(args.model, dtype=DTYPES[args.dtype]).eval()
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(3, model.config.vocab_size, (1, args.prompt), generator=g)
    pre, dec = [], []
    with torch.inference_mode():
        for i in range(args.reps + 1):
            p, d = run_once(model, prompt, args.gen)
            if i > 0:
                pre.append(p)
                dec.append(d)
    name = os.path.basename(os.path.normpath(args.model))
    print(f"transformers {name} {args.dtype} prefill_tok_s={args.prompt / statistics.median(pre):.1f} "
          f"decode_tok_s={args.gen / statistics.median(dec):.1f}")


if __name__ == "__main__":
    main()
