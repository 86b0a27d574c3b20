#!/usr/bin/env python3
"""Prints device_arch_bench.sh's results next to their bandwidth floors as Markdown.

usage: summarize_arch.py OUT_DIR   (reads ckpt.jsonl, bench.jsonl, results.json there)

Floor of one decode step = bytes the step must read / device-to-device copy bandwidth
(results.json, gpu_reference.py, same call), as docs/perf.md's batch-1 table:
  weights   all tensor bytes of the checkpoint (embedding tables included, of which a step reads
            one row per token), except routed experts: a step reads the experts its tokens chose,
            so batch 1 reads k = experts_per_token of E = num_experts in every MoE layer; at batch B
            the expected share of experts read is 1 - (C(E-1, k) / C(E, k))^B (uniform routing)
  KV        layers * 2 * kv_heads * head_dim * 2 bytes per token at the mean decode context
            (input + output / 2) of every sequence in the batch
The batch-1 row compares llmrt-bench latency's decode_ms_per_token; a batched row compares the
throughput run's ITL p50 (one decode step of the full batch)."""
import json
import math
import os
import sys


def expected_expert_share(E, k, B):
    """Expected fraction of E experts chosen by at least one of B tokens, each picking k distinct
    experts uniformly (random weights route about uniformly)."""
    if E == 0:
        return 0.0
    p_unused_one = math.comb(E - 1, k) / math.comb(E, k)
    return 1.0 - p_unused_one ** B


def load_lines(path):
    if not os.path.exists(path):
        return []
    return [json.loads(l) for l in open(path) if l.strip()]


def main():
    d = sys.argv[1]
    ckpts = {c["preset"]: c for c in load_lines(os.path.join(d, "ckpt.jsonl"))}
    runs = load_lines(os.path.join(d, "bench.jsonl"))
    ref = json.load(open(os.path.join(d, "results.json"))) if os.path.exists(os.path.join(d, "results.json")) else {}
    bw = ref.get("copy", {}).get("tb_per_s")
    dev = ref.get("device", {}).get("name", "?")
    print(f"GPU: {dev}; copy bandwidth {bw} TB/s (gpu_reference.py, same call)\n")
    print("| model | step | batch | weight GB read / step | KV MB read / step | floor ms | llmrt ms | llmrt / floor |")
    print("|---|---|---|---|---|---|---|---|")
    for r in runs:
        p, name = r.get("preset"), r.get("name")
        if "error" in r:
            print(f"| {p} | {name} | – | – | – | – | {r['error']}: {(r.get('log_tail') or [''])[-1]} | – |")
            continue
        c, cfg, res = ckpts.get(p, {}), r["config"], r["results"]
        mc = cfg["model_config"]
        if r["mode"] == "latency":
            batch, ms = 1, res["decode_ms_per_token"]
        else:
            batch, ms = min(int(cfg["num_requests"]), int(cfg["max_batch_size"])), res["itl_ms_p50"]
        E, k = c.get("num_experts", 0), c.get("experts_per_token", 0)
        dense = c["weight_bytes"] - c["expert_bytes"]
        weights = dense + c["expert_bytes"] * expected_expert_share(E, k, batch)
        ctx = cfg["input_len"] + cfg["output_len"] / 2
        kv = batch * ctx * mc["num_hidden_layers"] * 2 * mc["num_key_value_heads"] * mc["head_dim"] * 2
        floor = (weights + kv) / (bw * 1e12) * 1e3 if bw else None
        ratio = f"**{ms / floor:.2f}×**" if floor else "–"
        print(f"| {p} | {name} | {batch} | {weights / 1e9:.2f} | {kv / 1e6:.0f} | "
              f"{floor:.3f} | {ms:.3f} | {ratio} |" if floor else f"| {p} | {name} | {batch} | – | – | – | {ms:.3f} | – |")
    tput = [r for r in runs if r.get("mode") == "throughput" and "error" not in r]
    if tput:
        print("\n| model | requests | output tok/s | ITL p50 ms | TTFT p50 ms |")
        print("|---|---|---|---|---|")
        for r in tput:
            res = r["results"]
            print(f"| {r['preset']} | {r['config']['num_requests']} x {r['config']['input_len']}/"
                  f"{r['config']['output_len']} | {res['output_tokens_per_s']:,.0f} | {res['itl_ms_p50']:.2f} | "
                  f"{res['ttft_ms_p50']:.1f} |")


if __name__ == "__main__":
    main()
