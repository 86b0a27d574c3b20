#!/usr/bin/env python3
"""Writes the two JSON-lines batches of docs/perf.md's executor section:
batch256.jsonl (short prompts, max_tokens 64) and shared256.jsonl (a shared
33-token prefix, max_tokens 16). Usage: make_executor_batches.py OUT_DIR"""
import json
import random
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "."
random.seed(0)
starts = ["Once upon a time", "The dog", "Lily wanted", "Tom and Sue", "One day, a bird", "The sun was",
          "A little cat", "Mom said"]
with open(f"{out}/batch256.jsonl", "w") as f:
    for i in range(256):
        word = random.choice(["there", "was", "a", "big", "red", "ball"])
        f.write(json.dumps({"prompt": starts[i % 8] + " " + word, "max_tokens": 64, "ignore_eos": True}) + "\n")
prefix = ("Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
          "One day, she saw a big, red ball.")
with open(f"{out}/shared256.jsonl", "w") as f:
    for i in range(256):
        f.write(json.dumps({"prompt": prefix + " " + starts[i % 8], "max_tokens": 16, "ignore_eos": True}) + "\n")
