"""Writes 65536 random GPT-2 token ids (u16, seed 0) to the file named by the first argument:
the training data of the benchmark scripts, which time steps, not learning."""
import random
import struct
import sys

random.seed(0)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<%dH" % 65536, *(random.randrange(50257) for _ in range(65536))))
