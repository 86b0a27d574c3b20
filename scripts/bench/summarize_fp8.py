#!/usr/bin/env python3
"""Prints device_fp8_bench.sh's results next to their bandwidth floors as Markdown.

usage: summarize_fp8.py OUT_DIR   (reads config.json, bench.jsonl, results.json there)

Floor of one batch-1 decode step = bytes it must read / device-to-device copy bandwidth
(results.json, gpu_reference.py, same call): the layers' product matrices (q/k/v, o, gate/up,
down: 2 bytes per weight in bf16; 1 byte plus a float32 scale per row in FP8), the LM head
(bf16 in both), the norms, and the KV cache at the mean decode context (bf16)."""
import json
import os
import sys


def step_bytes(c, quantization, ctx):
    h, L = c["hidden_size"], c["num_hidden_layers"]
    heads, kv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
    hd = c.get("head_dim") or h // heads
    inter, vocab = c["intermediate_size"], c["vocab_size"]
    q, kvw = heads * hd, kv * hd
    mats = [(q + 2 * kvw, h), (h, q), (2 * inter, h), (h, inter)]  # (rows, cols)
    params = sum(r * k for r, k in mats) * L
    rows = sum(r for r, _ in mats) * L
    if quantization in ("fp8", "int8"):  # a byte per weight, a float32 scale per row
        products = params + 4 * rows
    elif quantization == "awq":  # half a byte per weight, a float32 scale and zero term per 128
        products = params // 2 + params // 128 * 8
    else:
        products = 2 * params
    lm_head = 2 * vocab * h
    norms = 2 * h * (2 * L + 1)
    kv_bytes = ctx * L * 2 * kvw * 2
    return products + lm_head + norms, kv_bytes


def label(r):
    return {"fp8": "fp8 (W8A8)", "int8": "int8 (W8A8)", "awq": "awq (W4A16)"}.get(r["quantization"], "bf16")


def main():
    d = sys.argv[1]
    cfg = json.load(open(os.path.join(d, "config.json")))
    runs = [json.loads(l) for l in open(os.path.join(d, "bench.jsonl")) if l.strip()]
    ref = json.load(open(os.path.join(d, "results.json"))) if os.path.exists(os.path.join(d, "results.json")) else {}
    bw = ref.get("copy", {}).get("tb_per_s")
    print(f"GPU: {ref.get('device', {}).get('name', '?')}; copy bandwidth {bw} TB/s (gpu_reference.py, same call)\n")
    print("| products | weight GB read / step | floor ms | llmrt decode ms / token | llmrt / floor |")
    print("|---|---|---|---|---|")
    for r in runs:
        if r.get("mode") != "latency" and "error" not in r:
            continue
        if "error" in r:
            print(f"| {r['quantization']} | – | – | {r['error']}: {(r.get('log_tail') or [''])[-1]} | – |")
            continue
        ctx = r["config"]["input_len"] + r["config"]["output_len"] / 2
        w, kv = step_bytes(cfg, r["quantization"], ctx)
        ms = r["results"]["decode_ms_per_token"]
        floor = (w + kv) / (bw * 1e12) * 1e3 if bw else None
        name = label(r)
        print(f"| {name} | {w / 1e9:.2f} | {floor:.3f} | {ms:.3f} | **{ms / floor:.2f}×** |" if floor else
              f"| {name} | {w / 1e9:.2f} | – | {ms:.3f} | – |")
    pre = [r for r in runs if r.get("mode") == "prefill"]
    if pre:
        print("\n| products | prefill tokens | ms | tokens/s |")
        print("|---|---|---|---|")
        for r in pre:
            res = r["results"]
            name = label(r)
            ms = next((res[k] for k in ("prefill_ms_mean", "ms_mean", "prefill_ms") if k in res), None)
            tps = next((res[k] for k in ("prefill_tokens_per_s", "tokens_per_s") if k in res), None)
            print(f"| {name} | {r['config']['input_len']} | {ms:.2f} | {tps:,.0f} |" if ms is not None else
                  f"| {name} | {r['config']['input_len']} | {json.dumps(res)[:200]} | |")
    tput = [r for r in runs if r.get("mode") == "throughput"]
    if tput:
        print("\n| products | requests | output tok/s | ITL p50 ms | TTFT p50 ms |")
        print("|---|---|---|---|---|")
        for r in tput:
            res, c = r["results"], r["config"]
            name = label(r)
            print(f"| {name} | {c['num_requests']} x {c['input_len']}/{c['output_len']} | "
                  f"{res['output_tokens_per_s']:,.0f} | {res['itl_ms_p50']:.2f} | {res['ttft_ms_p50']:.1f} |")


if __name__ == "__main__":
    main()
