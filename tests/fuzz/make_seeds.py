#!/usr/bin/env python3
"""Writes the fuzz targets' seed inputs (corpus/<target>/seed-*) from tests/fixtures and a few
hand-made files; run it again when the fixtures change. The inputs of past bugs in the same
directories (named after the bug, not seed-*) are kept as they are. Python's standard library only."""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "fixtures")
CORPUS = os.path.join(HERE, "corpus")


written = set()


def write(target, name, data):
    """corpus/<target>/seed-<name>, unless the target has a seed with the same bytes."""
    data = data if isinstance(data, bytes) else data.encode()
    if (target, data) in written:
        return
    written.add((target, data))
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def fixture(*parts):
    with open(os.path.join(FIX, *parts), "rb") as f:
        return f.read()


def safetensors(tensors, meta=None):
    """tensors: (name, dtype, shape, raw bytes); the reference layout, header padded to 8."""
    header, data = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if meta is not None:
        header["__metadata__"] = meta
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def seeds_safetensors():
    write("safetensors", "dlrm.safetensors", fixture("dlrm", "dlrm.safetensors"))
    write("safetensors", "logits.safetensors", fixture("lm", "llama3", "logits.safetensors"))
    write("safetensors", "shard.safetensors", fixture("lm", "llama3_sharded", "model-00003-of-00003.safetensors"))
    write("safetensors", "dtypes.safetensors", safetensors([
        ("f64", "F64", [2], struct.pack("<2d", 1.5, -2.0)),
        ("i64", "I64", [1, 2], struct.pack("<2q", -1, 1 << 40)),
        ("f32", "F32", [3], struct.pack("<3f", 0.5, float("inf"), -0.0)),
        ("i32", "I32", [2], struct.pack("<2i", 7, -7)),
        ("f16", "F16", [2], struct.pack("<2H", 0x3C00, 0x7E00)),
        ("bf16", "BF16", [2], struct.pack("<2H", 0x3F80, 0xFF80)),
        ("bool", "BOOL", [3], bytes([0, 1, 1])),
    ], {"format": "pt", "note": "seed"}))
    write("safetensors", "scalar-and-empty.safetensors", safetensors([
        ("scalar", "F32", [], struct.pack("<f", 3.0)),
        ("empty", "F32", [0, 4], b""),
    ]))


def seeds_tokenizer():
    for name in ("gpt2", "llama2", "llama2_metaspace", "llama3", "qwen2"):
        text = fixture("tokenizers", name, "tokenizer.json")
        write("tokenizer", name + ".json", text)
        case = json.loads(fixture("tokenizers", name, "expected.json"))["cases"][0]["text"]
        write("tokenizer", name + "-with-text", text + b"\0" + case.encode())
    for i, v in enumerate(json.loads(fixture("tokenizers", "variants.json"))):
        base = json.loads(fixture("tokenizers", v["base"], "tokenizer.json"))
        base[v["key"]] = v["component"]
        text = json.dumps(base, ensure_ascii=False, separators=(",", ":")).encode()
        write("tokenizer", "variant-%02d-%s-%s" % (i, v["base"], v["key"]), text + b"\0" + v["cases"][0]["text"].encode())


def seeds_config():
    for d in sorted(os.listdir(os.path.join(FIX, "lm"))):
        for name in ("config.json", "generation_config.json"):
            if os.path.exists(os.path.join(FIX, "lm", d, name)):
                write("config", "%s-%s" % (d, name), fixture("lm", d, name))
    write("config", "gpt2_train-config.json", fixture("gpt2_train", "config.json"))
    for case in json.loads(fixture("lm", "rope.json"))["cases"]:
        write("config", "rope-%s.json" % case["name"], json.dumps(case["config"], indent=2))
    write("config", "llama3_sharded-index.json", fixture("lm", "llama3_sharded", "model.safetensors.index.json"))
    # the two shards fuzz_config.c writes beside the index
    write("config", "index.json", json.dumps({"metadata": {"total_size": 16}, "weight_map": {
        "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}))


def seeds_token_file():
    write("token_file", "gpt2_train-tokens.bin", fixture("gpt2_train", "tokens.bin"))
    tokens = [50256, 15496, 995, 13, 0, 1, 2, 3, 4, 5, 6, 7]
    header = [20240520, 1, len(tokens)] + [0] * 253
    write("token_file", "llmc.bin", struct.pack("<256i", *header) + struct.pack("<%dH" % len(tokens), *tokens))
    write("token_file", "u32.bin", struct.pack("<8I", 70000, 1, 2, 3, 151643, 5, 6, 7))


def seeds_train_state():
    # as train_checkpoint.c writes it (cJSON_Print), for fuzz_train_state.c's job: task "fuzz", 2 params
    state = {"format": "kiln-train-state", "version": 1, "task": "fuzz", "step": 100,
             "rng_seed": "0", "rng_offset": "18446744073709551615", "param_steps": [100, 99]}
    write("train_state", "state.json", json.dumps(state, indent="\t").replace('": ', '":\t'))
    write("train_state", "state-compact.json", json.dumps(dict(state, step=0, param_steps=[0, 0])))
    write("train_state", "other-task.json", json.dumps(dict(state, task="adder", param_steps=[3] * 12)))


if __name__ == "__main__":
    seeds_safetensors()
    seeds_tokenizer()
    seeds_config()
    seeds_token_file()
    seeds_train_state()
    sys.exit(0)
