#!/usr/bin/env python3
"""Encoding a text file with a tokenizer.json: kiln (bench_tokenizer) beside the Hugging Face
`tokenizers` library, single thread, same text as one string (or with --lines, one encode call
per line); checks that the ids are identical.

    cmake --build build --target bench_tokenizer
    python3 bench/tokenizer_compare.py build tests/fixtures/tokenizers/gpt2 ../shared/data/tinyshakespeare.txt [RUNS] [--lines]
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"
from tokenizers import Tokenizer  # noqa: E402 (the environment must be set first)


def main():
    lines = "--lines" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--lines"]
    build, tok_dir, text_path = args[:3]
    runs = int(args[3]) if len(args) > 3 else 5
    tok_file = os.path.join(tok_dir, "tokenizer.json") if os.path.isdir(tok_dir) else tok_dir
    text = open(text_path, encoding="utf-8").read()
    hf = Tokenizer.from_file(tok_file)
    secs = []
    for _ in range(runs):
        t0 = time.perf_counter()
        if lines:
            ids = [i for line in text.splitlines(keepends=True) for i in hf.encode(line, add_special_tokens=False).ids]
        else:
            ids = hf.encode(text, add_special_tokens=False).ids
        secs.append(time.perf_counter() - t0)
    hf_s = statistics.median(secs)
    with tempfile.NamedTemporaryFile("r", suffix=".ids") as out:
        res = subprocess.run([os.path.join(build, "bench_tokenizer"), tok_file, text_path, str(runs), out.name],
                             check=True, capture_output=True, text=True, env=dict(os.environ, LINES=str(int(lines))))
        kiln = json.loads(res.stdout)
        kiln_ids = [int(x) for x in out.read().split()]
    same = kiln_ids == ids
    print(f"text: {len(text.encode())} bytes{' (one call per line)' if lines else ''}, {len(ids)} ids; "
          f"identical ids: {same}")
    print(f"tokenizers {hf_s * 1e3:.1f} ms ({len(text.encode()) / hf_s / 1e6:.2f} MB/s)")
    print(f"kiln       {kiln['encode_s'] * 1e3:.1f} ms ({kiln['mb_per_s']:.2f} MB/s), load {kiln['load_s'] * 1e3:.1f} ms")
    print(f"kiln / tokenizers speed: {hf_s / kiln['encode_s']:.2f}x")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
