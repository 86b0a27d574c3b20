#!/usr/bin/env python3
"""Where the bf16 engine's logit error comes from (run on the GPU machine).

For every golden model in tests/data/golden, runs `llmrt generate --dtype bfloat16` on each
case's prompt in several configurations that each round one thing less than the default, and
measures the issue's bf16 criterion against HF transformers in float32 with the same
bf16-rounded matrices (e2e_common.bf16_weight_reference): top-1 agreement and max |d logprob| of
the reference's top token over every prompt position. HF transformers in bf16 is the peer.

usage: bf16_error_budget.py LLMRT GOLDEN_DIR   (prints a table; exit 0)
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import (Criterion, bf16_rounded_checkpoint, bf16_weight_reference, hf_bf16_logits,  # noqa: E402
                        run_generate)

LLMRT, GOLDEN = sys.argv[1], sys.argv[2]
# (name, dtype, extra flags, --cuda-tuning); dtype float16 runs the bf16-rounded checkpoint
# (its matrices convert to fp16 exactly), so every row computes the same bf16-valued model.
CONFIGS = [
    ("default (bf16 KV, bf16 GEMM inputs, tensor-core attention)", "bfloat16", [], None),
    ("bf16 KV, fp32 attention math", "bfloat16", [], "flash=off,mma_decode=off"),
    ("bf16 KV, fp32 GEMM inputs", "bfloat16", [], "half_activations=off"),
    ("fp16 KV, bf16 GEMM inputs (--kv-cache-dtype float16)", "bfloat16", ["--kv-cache-dtype", "float16"], None),
    ("fp16 KV, fp16 GEMM inputs (--dtype float16)", "float16", [], None),
    ("fp32 KV cache (--kv-cache-dtype float32)", "bfloat16", ["--kv-cache-dtype", "float32"], None),
    ("fp32 KV cache, fp32 GEMM inputs", "bfloat16", ["--kv-cache-dtype", "float32"], "half_activations=off"),
]


rows = {c[0]: {} for c in CONFIGS}
rows["HF transformers bf16 (peer)"] = {}
for name in sorted(os.listdir(GOLDEN)):
    gdir = os.path.join(GOLDEN, name)
    g = json.load(open(os.path.join(gdir, "golden.json")))
    dynamic = "dynamic" in name
    for ci, case in enumerate(g["cases"]):
        ref = bf16_weight_reference(gdir, case["prompt_ids"])
        if ref is None:
            sys.exit("torch/transformers missing: no reference")
        hb = hf_bf16_logits(gdir, case["prompt_ids"])
        results = []
        if hb is not None:
            results.append(("HF transformers bf16 (peer)", hb))
        for cname, dtype, extra, off in CONFIGS:
            lp = f"/tmp/budget_{name}_{ci}.npy"
            flags = list(extra) + (["--max-seq-len", "128"] if dynamic else [])
            model = bf16_rounded_checkpoint(gdir) if dtype == "float16" else gdir
            out, err = run_generate(LLMRT, model, case["prompt_ids"], "cuda", dtype, 1, flags, lp,
                                    off)
            if out is None:
                print(f"{name}/case{ci} {cname}: run failed: {err}", flush=True)
                continue
            results.append((cname, np.load(lp)))
        for cname, lg in results:
            rows[cname].setdefault(name, Criterion()).add(ref, lg)

models = sorted({m for r in rows.values() for m in r})
print("| configuration | all: top-1 | all: max abs d logprob | " + " | ".join(models) + " |")
print("|---|---|---|" + "---|" * len(models))
for cname, per in rows.items():
    if not per:
        continue
    agree = sum(c.agree for c in per.values())
    n = sum(c.positions for c in per.values())
    dmax = max(c.max_dlogprob for c in per.values())
    cells = [f"{per[m].max_dlogprob:.4f}" if m in per else "-" for m in models]
    print(f"| {cname} | {agree}/{n} ({100 * agree / n:.2f}%) | {dmax:.4f} | " + " | ".join(cells) + " |")
