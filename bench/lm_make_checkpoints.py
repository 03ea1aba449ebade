"""Random-weight Llama checkpoints for the language-model benchmarks (bench/lm_compare.sh).

Writes OUT/stories15m and OUT/llama110m, each a Hugging Face directory (config.json,
model.safetensors in f32, generation_config.json) made by transformers' LlamaForCausalLM with
seeded random weights, plus a small SentencePiece tokenizer.model so that llama.cpp's
convert_hf_to_gguf.py accepts it (ids past the tokenizer's own are padded as unused tokens;
the benchmarks feed token ids, never text).

Usage: python bench/lm_make_checkpoints.py OUT [--text FILE]
"""
import argparse
import io
import os

import torch
from transformers import LlamaConfig, LlamaForCausalLM

SHAPES = {
    # The llama2.c "stories15M" shape (tied embeddings, as there).
    "stories15m": dict(hidden_size=288, num_hidden_layers=6, num_attention_heads=6, num_key_value_heads=6,
                       intermediate_size=768, vocab_size=32000, max_position_embeddings=256),
    # The llama2.c "stories110M" shape.
    "llama110m": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, num_key_value_heads=12,
                      intermediate_size=2048, vocab_size=32000, max_position_embeddings=1024),
}


def make_tokenizer(path, text_file):
    import sentencepiece as spm

    with open(text_file, encoding="utf-8") as f:
        lines = [l for l in f.read().splitlines() if l.strip()]
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=buf, vocab_size=1000,
                                   model_type="bpe", byte_fallback=True, character_coverage=1.0,
                                   unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2)
    with open(path, "wb") as f:
        f.write(buf.getvalue())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--text", default=os.path.join(here, "..", "..", "shared", "data", "tinyshakespeare.txt"))
    args = ap.parse_args()
    for i, (name, shape) in enumerate(SHAPES.items()):
        d = os.path.join(args.out, name)
        if os.path.exists(os.path.join(d, "model.safetensors")):
            print(f"{d}: exists")
            continue
        os.makedirs(d, exist_ok=True)
        torch.manual_seed(1234 + i)
        cfg = LlamaConfig(**shape, rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True,
                          bos_token_id=1, eos_token_id=2, torch_dtype="float32")
        model = LlamaForCausalLM(cfg).eval()
        model.save_pretrained(d, safe_serialization=True)
        make_tokenizer(os.path.join(d, "tokenizer.model"), args.text)
        n = sum(p.numel() for p in model.parameters())
        print(f"{d}: {n / 1e6:.1f}M parameters")


if __name__ == "__main__":
    main()
