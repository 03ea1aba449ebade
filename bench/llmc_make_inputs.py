#!/usr/bin/env python3
"""Inputs for llm.c's CPU trainer (train_gpt2.c): a random-init GPT-2 checkpoint, a tokenizer file and
train/val token files, laid out under DIR the way train_gpt2's main() opens them (relative to its cwd):

  DIR/gpt2_124M.bin                                        model, llm.c format v3
  DIR/gpt2_tokenizer.bin                                   tokenizer, llm.c format v2 (dummy strings)
  DIR/dev/data/tinyshakespeare/tiny_shakespeare_train.bin  random tokens, llm.c data format v1
  DIR/dev/data/tinyshakespeare/tiny_shakespeare_val.bin

Model file (train_gpt2.c, gpt2_build_from_checkpoint): 256 int32 header
  [20240326, 3, maxT, V, L, NH, C, Vp, 0...], then float32 parameters, each tensor whole, in order
  wte (Vp,C), wpe (maxT,C), ln1w (L,C), ln1b (L,C), qkvw (L,3C,C), qkvb (L,3C), attprojw (L,C,C),
  attprojb (L,C), ln2w (L,C), ln2b (L,C), fcw (L,4C,C), fcb (L,4C), fcprojw (L,C,4C), fcprojb (L,C),
  lnfw (C), lnfb (C). Matrices are nn.Linear [out, in] (the transpose of HF's Conv1D).
Init as GPT-2: N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)), biases 0, LayerNorm 1/0,
padded vocabulary rows (V..Vp) of wte zero.
Tokenizer (llmc/tokenizer.h): 256 uint32 header [20240328, 2, V, eot, 0...], then per token
  a uint8 length and that many bytes. train_gpt2 only needs it for its sample printout at step 20;
  without the file it prints a warning and leaves the EOT id unset, so we write one.
Data (llmc/dataloader.h): 256 int32 header [20240520, 1, ntok, 0...], then ntok uint16 tokens.

Needs numpy only.  python3 bench/llmc_make_inputs.py DIR [--seed 1337] [--tokens 65536]
"""
import argparse
import math
import os

import numpy as np


def header(vals, dtype):
    h = np.zeros(256, dtype=dtype)
    h[:len(vals)] = vals
    return h.tobytes()


def write_model(path, rng, maxT=1024, V=50257, L=12, NH=12, C=768, Vp=50304):
    std, pstd = 0.02, 0.02 / math.sqrt(2 * L)

    def normal(shape, s):
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(s))

    n = 0
    with open(path, "wb") as f:
        f.write(header([20240326, 3, maxT, V, L, NH, C, Vp], np.int32))

        def put(a):
            nonlocal n
            a = np.ascontiguousarray(a, dtype="<f4")
            f.write(a.tobytes())
            n += a.size

        wte = np.zeros((Vp, C), np.float32)
        wte[:V] = normal((V, C), std)
        put(wte)
        del wte
        put(normal((maxT, C), std))                                   # wpe
        put(np.ones((L, C))), put(np.zeros((L, C)))                   # ln1w, ln1b
        put(normal((L, 3 * C, C), std)), put(np.zeros((L, 3 * C)))    # qkvw, qkvb
        put(normal((L, C, C), pstd)), put(np.zeros((L, C)))           # attprojw, attprojb
        put(np.ones((L, C))), put(np.zeros((L, C)))                   # ln2w, ln2b
        put(normal((L, 4 * C, C), std)), put(np.zeros((L, 4 * C)))    # fcw, fcb
        put(normal((L, C, 4 * C), pstd)), put(np.zeros((L, C)))       # fcprojw, fcprojb
        put(np.ones(C)), put(np.zeros(C))                             # lnfw, lnfb
    expect = Vp * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C
    assert n == expect, (n, expect)
    assert os.path.getsize(path) == 1024 + 4 * n
    return n


def write_tokenizer(path, V=50257, eot=50256):
    with open(path, "wb") as f:
        f.write(header([20240328, 2, V, eot], np.uint32))
        for i in range(V):
            s = bytes([i]) if i < 256 else f"<{i}>".encode()
            f.write(bytes([len(s)]) + s)


def write_tokens(path, rng, n, V=50257):
    with open(path, "wb") as f:
        f.write(header([20240520, 1, n], np.int32))
        f.write(rng.integers(0, V, size=n, dtype=np.uint16).astype("<u2").tobytes())


def main():
    ap = argparse.ArgumentParser(description="random GPT-2 124M inputs for llm.c's train_gpt2 (CPU)")
    ap.add_argument("dir")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--tokens", type=int, default=65536, help="tokens per train/val file")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    data = os.path.join(args.dir, "dev", "data", "tinyshakespeare")
    os.makedirs(data, exist_ok=True)
    n = write_model(os.path.join(args.dir, "gpt2_124M.bin"), rng)
    write_tokenizer(os.path.join(args.dir, "gpt2_tokenizer.bin"))
    write_tokens(os.path.join(data, "tiny_shakespeare_train.bin"), rng, args.tokens)
    write_tokens(os.path.join(data, "tiny_shakespeare_val.bin"), rng, args.tokens)
    print(f"wrote {args.dir}: {n} parameters (padded vocab), 2 x {args.tokens} tokens")


if __name__ == "__main__":
    main()
