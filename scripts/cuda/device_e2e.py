#!/usr/bin/env python3
"""End-to-end check of the CUDA backend on a GPU machine (run by device_check.sh).

For every golden model in tests/data/golden (HF float32 reference logits and
greedy ids) and the stories260K model, runs `llmrt generate` on the CPU
backend, the CUDA backend in float32 mode and in bfloat16 mode, and compares
greedy ids (with the reference and with each other) and prompt logits.
Prints one line per run and a summary; exits 1 when a float32 run differs.
"""
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import (Criterion, bf16_rounded_checkpoint, bf16_weight_reference, hf_bf16_logits,  # noqa: E402
                        run_generate, same_as_with_tuning)

LLMRT = sys.argv[1]
GOLDEN = sys.argv[2]
STORIES = sys.argv[3]
OUT = sys.argv[4]
MODES = [("cpu", "auto"), ("cuda", "float32"), ("cuda", "bfloat16")]
failures = []
bf16_criterion = Criterion()  # llmrt in bf16 (default mode)
hf_criterion = Criterion()  # the peer: HF transformers in bf16


def run(model, ids, backend, dtype, max_tokens, extra=(), logits=None, tuning=None):
    return run_generate(LLMRT, model, ids, backend, dtype, max_tokens, extra, logits, tuning)


def ids_of(out):
    """The first completion's token ids of a result object (tools/llmrt/result_json.h)."""
    return out["outputs"][0]["token_ids"]


def check(tag, ok, detail):
    print(f"{'ok  ' if ok else 'FAIL'} {tag}: {detail}", flush=True)
    if not ok:
        failures.append(tag)


# 1. Golden models: greedy ids vs HF, prompt logits vs HF.
for name in sorted(os.listdir(GOLDEN)):
    gdir = os.path.join(GOLDEN, name)
    g = json.load(open(os.path.join(gdir, "golden.json")))
    for ci, case in enumerate(g["cases"]):
        # Dynamic NTK: with a KV cache, cached keys keep the rotation they were written with, so the
        # KV-cache loop is the reference (as tests/model/hf_golden_test.cpp uses); prompts may run past
        # max_position_embeddings, hence --max-seq-len.
        dynamic = "dynamic" in name
        ref_ids = case["greedy_new_ids_kv_cache" if dynamic else "greedy_new_ids"]
        ref_logits = np.load(os.path.join(gdir, case["logits_file"]))
        gap = case["min_top1_top2_gap"]
        for backend, dtype in MODES:
            # Chunked prefill of a dynamic-NTK prompt rotates each chunk with the table of its own
            # length, which no HF reference reproduces: those run unchunked only.
            for chunk in [[]] + ([] if dynamic else [ ["--max-num-tokens", "7", "--tokens-per-block", "4"]]):
                chunk = chunk + (["--max-seq-len", "128"] if dynamic else [])
                tag = f"{name}/case{ci}/{backend}-{dtype}{'/chunked' if '--max-num-tokens' in chunk else ''}"
                lp = os.path.join("/tmp", f"{name}_{ci}_{backend}_{dtype}_{len(chunk)}.npy")
                out, err = run(gdir, case["prompt_ids"], backend, dtype, len(ref_ids), chunk, lp)
                if out is None:
                    check(tag, False, "run failed: " + err)
                    continue
                got = ids_of(out)
                lg = np.load(lp)
                diff = float(np.max(np.abs(lg - ref_logits)))
                rel = float(np.linalg.norm(lg - ref_logits) / np.linalg.norm(ref_logits))
                same = got == ref_ids
                first_diff = next((i for i, (a, b) in enumerate(zip(got, ref_ids)) if a != b), None)
                detail = (f"greedy {'==' if same else '!='} HF ({len(ref_ids)} tokens, min gap {gap:.3g}"
                          f"{'' if same else f', first diff at {first_diff}'}); prompt logits max|d| {diff:.2e} rel {rel:.2e}")
                if dtype == "bfloat16":
                    # The bf16 criterion, over every prompt position of every case (below):
                    # same top-1 token at >= 99% of positions, |d logprob| of HF's top token <= 0.05.
                    ref_b = bf16_weight_reference(gdir, case["prompt_ids"])
                    if ref_b is not None and ref_b.shape == lg.shape:
                        ref_logits = ref_b
                        detail += "; vs HF with bf16-rounded matrices:"
                    detail += "; " + bf16_criterion.add(ref_logits, lg)
                    if not chunk:  # the peer once per case: HF in bf16 against the same reference
                        hb = hf_bf16_logits(gdir, case["prompt_ids"])
                        if hb is not None and hb.shape == lg.shape:
                            detail += "; HF bf16: " + hf_criterion.add(ref_logits, hb)
                    check(tag, rel < 5e-2, detail + f" rel {np.linalg.norm(lg - ref_logits) / np.linalg.norm(ref_logits):.2e}")
                else:
                    check(tag, same and rel < 1e-4, detail)

if bf16_criterion.positions:
    check("golden/bf16-criterion", bf16_criterion.met(), bf16_criterion.summary())

# The same criterion in the other configurations with the golden models' bf16 weights, one llmrt
# run per case each: (tag, model directory for a golden dir, dtype, flags).
#  - the accurate mode: a float32 KV cache (float32 activations, products on bf16 hi + lo inputs);
#  - --dtype float16: fp16 product inputs and KV cache (8x finer rounding than bf16, at the bf16
#    mode's speed) on a copy whose matrices hold the bf16 values (fp16 represents them exactly);
#  - for information, bf16 weights and products with an fp16 cache only.
CONFIGS = [
    ("cuda-bfloat16-kvf32", lambda d: d, "bfloat16", ["--kv-cache-dtype", "float32"]),
    ("cuda-float16-bf16w", bf16_rounded_checkpoint, "float16", []),
    ("cuda-bfloat16-kvf16", lambda d: d, "bfloat16", ["--kv-cache-dtype", "float16"]),
]
crits = {tag: Criterion() for tag, *_ in CONFIGS}
for name in sorted(os.listdir(GOLDEN)):
    gdir = os.path.join(GOLDEN, name)
    g = json.load(open(os.path.join(gdir, "golden.json")))
    for ci, case in enumerate(g["cases"]):
        ref_b = bf16_weight_reference(gdir, case["prompt_ids"])
        if ref_b is None:
            continue
        dyn = ["--max-seq-len", "128"] if "dynamic" in name else []
        for tag, model_of, dtype, flags in CONFIGS:
            lp = os.path.join("/tmp", f"{name}_{ci}_{tag}.npy")
            out, err = run(model_of(gdir), case["prompt_ids"], "cuda", dtype, 1, flags + dyn, lp)
            if out is None:
                check(f"{name}/case{ci}/{tag}", False, "run failed: " + err)
                continue
            crits[tag].add(ref_b, np.load(lp))
if crits["cuda-bfloat16-kvf32"].positions:
    check("golden/bf16-criterion-kv-float32", crits["cuda-bfloat16-kvf32"].met(),
          "bf16 weights with --kv-cache-dtype float32: " + crits["cuda-bfloat16-kvf32"].summary())
if crits["cuda-float16-bf16w"].positions:
    check("golden/bf16-weights-criterion-fp16", crits["cuda-float16-bf16w"].met(),
          "bf16 weights computed with --dtype float16: " + crits["cuda-float16-bf16w"].summary())
if crits["cuda-bfloat16-kvf16"].positions:
    print("info golden/bf16-weights-kv-float16: bf16 weights and products with --kv-cache-dtype float16: "
          + crits["cuda-bfloat16-kvf16"].summary(), flush=True)

if hf_criterion.positions:
    print("info golden/bf16-peer: HF transformers in bf16 (SDPA, GPU) against the same reference: "
          + hf_criterion.summary())

# 2. stories260K: the CLI test's reference ids, a long generation across many KV blocks, sampling.
ref8 = [432, 383, 286, 261, 376, 298, 315, 421]
prompt = "Once upon a time"
results = {}
for backend, dtype in MODES:
    tag = f"stories260K/{backend}-{dtype}"
    out, err = run(STORIES, prompt, backend, dtype, 8)
    if out is None:
        check(tag + "/8", False, err)
        continue
    check(tag + "/8", ids_of(out) == ref8 or dtype == "bfloat16",
          f"{ids_of(out)} vs reference {ref8}")
    long_out, err = run(STORIES, prompt, backend, dtype, 400, ["--tokens-per-block", "16"])
    results[(backend, dtype)] = ids_of(long_out) if long_out else None
    samp, err = run(STORIES, prompt, backend, dtype, 40, ["--n", "4", "--temperature", "0.8", "--seed", "7"])
    results[(backend, dtype, "n4")] = [o["token_ids"] for o in samp["outputs"]] if samp else None
cpu_long = results.get(("cpu", "auto"))
for dtype in ("float32", "bfloat16"):
    got = results.get(("cuda", dtype))
    if cpu_long is None or got is None:
        check(f"stories260K/long-400/{dtype}", False, "missing run")
        continue
    n_same = next((i for i, (a, b) in enumerate(zip(got, cpu_long)) if a != b), min(len(got), len(cpu_long)))
    check(f"stories260K/long-400/{dtype}", got == cpu_long or dtype == "bfloat16",
          f"first {n_same} of {len(cpu_long)} greedy tokens equal to the CPU backend's")
    s_cpu, s_gpu = results.get(("cpu", "auto", "n4")), results.get(("cuda", dtype, "n4"))
    # Reported, not gated: an inverse-CDF draw that lands within float32 rounding of a token
    # boundary flips on any change of summation order (seen once on an H200: margin 3e-8).
    print(f"info stories260K/sample-n4/{dtype}: 4 sampled sequences (T=0.8, seed 7) "
          f"{'equal' if s_cpu == s_gpu else 'differ'} to the CPU backend's: cpu {s_cpu} cuda {s_gpu}", flush=True)

# 3. In-flight batches of varying size (decode steps padded to recorded-graph buckets): every
# request's greedy output equals the CPU backend's (float32) and, in bf16, equals the same run with
# graphs off (padding to a bucket changes nothing).
prompts = ["Once upon a time", "The cat sat", "Lily wanted to play with her friend", "One day", "Tom had a big red ball",
           "The sun was", "A little bird", "Mom said"]
batch_file = os.path.join(OUT, "batch.jsonl")
with open(batch_file, "w") as f:
    for i, p_ in enumerate(prompts):
        f.write(json.dumps({"prompt": p_, "max_tokens": 20 + 7 * i, "temperature": 0}) + "\n")


def run_batch(backend, dtype, tuning=None):
    p = subprocess.run([LLMRT, "generate", "--model", STORIES, "--input-file", batch_file, "--backend", backend,
                        "--dtype", dtype, "--kv-cache-max-tokens", "8192", "--tokens-per-block", "16",
                        "--log-level", "error"] + (["--cuda-tuning", tuning] if tuning else []),
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr[-2000:]
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]  # one result row per request
    return {l["index"]: ids_of(l) for l in lines}, None


cpu_b, err = run_batch("cpu", "auto")
for dtype, tuning, ref_name in [("float32", None, "cpu"), ("bfloat16", None, None),
                                ("bfloat16", "graphs=off", "graphs on"),
                                ("bfloat16", "gemv=off,graphs=off,flash=off", "info")]:
    got, err2 = run_batch("cuda", dtype, tuning)
    tag = f"batch8/{dtype}" + (f"/{tuning}" if tuning else "")
    if got is None or cpu_b is None:
        check(tag, False, f"run failed: {err or err2}")
        continue
    if ref_name is None:
        results["batch_bf16"] = got
        n_eq = sum(got[i] == cpu_b[i] for i in got)
        print(f"info {tag}: {n_eq}/{len(got)} requests equal to the CPU backend's", flush=True)
        continue
    ref = cpu_b if ref_name == "cpu" else results.get("batch_bf16")
    same = ref is not None and all(got[i] == ref[i] for i in ref)
    if ref_name == "info":  # other kernels round differently (cuBLAS rounds x to bf16): report only
        print(f"info {tag}: {sum(got[i] == ref[i] for i in ref)}/{len(ref)} requests equal to the default kernels'")
        continue
    check(tag, same, f"{len(got)} requests {'equal' if same else 'DIFFER'} to {ref_name}")

# 3. Sampling on the GPU (Backend::sampleRows) against sampling on the host (--cuda-tuning sampling=off)
# from the same CUDA logits: every token and logprob must agree (the kernel reproduces the host sampler;
# only a draw within ~1e-12 of a token boundary could differ).
SAMPLING = [
    ["--n", "4", "--temperature", "0.8", "--seed", "7"],
    # (more than CudaBackend::kHostSamplingMaxTruncatingRows rows, so top-k / top-p run on the GPU)
    ["--n", "6", "--temperature", "1.0", "--top-k", "40", "--top-p", "0.9", "--seed", "3", "--logprobs", "5"],
    ["--temperature", "0.7", "--min-p", "0.05", "--repetition-penalty", "1.3", "--presence-penalty", "0.4",
     "--frequency-penalty", "0.3", "--seed", "11", "--logprobs", "2"],
    ["--n", "5", "--temperature", "1.2", "--top-p", "0.5", "--min-tokens", "30", "--seed", "5"],
]
for dtype in ("float32", "bfloat16"):
    for si, flags in enumerate(SAMPLING):
        tag = f"stories260K/gpu-sampling/{dtype}/{si}"
        dev, err1 = run(STORIES, prompt, "cuda", dtype, 48, flags)
        host, err2 = run(STORIES, prompt, "cuda", dtype, 48, flags, tuning="sampling=off")
        if dev is None or host is None:
            check(tag, False, "run failed: " + str(err1 or err2))
            continue
        d_ids = [o["token_ids"] for o in dev["outputs"]]
        h_ids = [o["token_ids"] for o in host["outputs"]]
        d_lp = json.dumps([o.get("logprobs") for o in dev["outputs"]])
        detail = f"{len(d_ids)} x {len(d_ids[0])} tokens {'equal' if d_ids == h_ids else 'DIFFER'}"
        if "--logprobs" in flags:
            a = [[t["logprob"] for t in (o.get("logprobs") or [])] for o in dev["outputs"]]
            b = [[t["logprob"] for t in (o.get("logprobs") or [])] for o in host["outputs"]]
            md = max((abs(x - y) for u, v in zip(a, b) for x, y in zip(u, v)), default=0.0)
            detail += f"; max |d logprob| {md:.2e}"
        check(tag, d_ids == h_ids, detail + (f": gpu {d_ids} host {h_ids}" if d_ids != h_ids else ""))

# 4. RoPE and the KV write inside the decode attention kernel (the default for decode steps on the
# tensor-core kernel: head_dim 64 / 128) against the two kernels (--cuda-tuning rope_fusion=off): the
# same bits, so the same tokens and logprobs, greedy and sampled (n = 4: decode steps of 4 rows).
HD128 = os.path.join(GOLDEN, "llama_hd128_linear")
hd128_prompt = json.load(open(os.path.join(HD128, "golden.json")))["cases"][0]["prompt_ids"]
for dtype in ("bfloat16", "float16"):
    for flags in (["--tokens-per-block", "16", "--logprobs", "3"],
                  ["--tokens-per-block", "16", "--n", "4", "--temperature", "0.9", "--seed", "5", "--logprobs", "2"]):
        tag = f"ropefuse/{dtype}/{'sampled-n4' if '--n' in flags else 'greedy'}"
        same, err = same_as_with_tuning(LLMRT, HD128, hd128_prompt, dtype, 60, flags, "rope_fusion=off")
        if same is None:
            check(tag, False, f"run failed: {err}")
            continue
        check(tag, same, f"60 tokens {'equal' if same else 'DIFFER'} (ids and logprobs) to the two kernels'")

print(f"\n{len(failures)} failures" + (": " + ", ".join(failures) if failures else ""))
sys.exit(1 if failures else 0)
