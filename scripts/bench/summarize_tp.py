#!/usr/bin/env python3
"""docs/perf.md's tensor-parallel tables from device_multi_gpu_bench.sh output folders.

usage: summarize_tp.py OUT_DIR [OUT_DIR ...]

- All-reduce latency per message size and rank count: the custom kernels and NCCL, replayed from a
  CUDA graph (what a recorded decode step pays) and issued one by one.
- Batch-1 decode at each tensor-parallel size against its floor: the bytes one rank reads per token
  (its shard of every product matrix and of the LM head, its KV heads' cache at the mean context)
  over one GPU's copy bandwidth, plus 2 x layers all-reduces of one hidden-size row at the measured
  graph latency of the custom kernels.
- Offline throughput at each size: output tok/s, per GPU, and scaling against TP=1 of the same preset.
"""
import json
import os
import sys


def load_lines(path):
    if not os.path.exists(path):
        return []
    return [json.loads(l) for l in open(path) if l.strip().startswith("{")]


def rank_bytes(c, tp, ctx):
    """Bytes one of `tp` ranks reads per decode token of a bf16 Llama at context `ctx`."""
    H, I, L, V = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    nh, kvh = c["num_attention_heads"], c["num_key_value_heads"]
    hd = H // nh
    kv_rank = max(kvh // tp, 1)  # (KV heads replicated past tp = num_key_value_heads)
    per_layer = (nh // tp) * hd * H * 2 + 2 * kv_rank * hd * H + 3 * (I // tp) * H
    weights = 2 * (L * per_layer + (V // tp) * H)
    kv = 2 * L * 2 * kv_rank * hd * ctx
    return weights + kv


def fmt(x, digits=0):
    return "–" if x is None else f"{x:,.{digits}f}"


def main():
    dirs = sys.argv[1:]
    if not dirs:
        print(__doc__, file=sys.stderr)
        return 2
    coll, runs, copy, configs = [], [], None, {}
    for d in dirs:
        coll += load_lines(os.path.join(d, "collectives.jsonl"))
        runs += load_lines(os.path.join(d, "bench.jsonl"))
        if os.path.exists(os.path.join(d, "copy.json")):
            copy = json.load(open(os.path.join(d, "copy.json")))
        for name in os.listdir(d):
            if name.startswith("config_") and name.endswith(".json"):
                configs[name[len("config_"):-len(".json")]] = json.load(open(os.path.join(d, name)))
    bw = copy["copy_gbs"] * 1e9 if copy else None
    out = []
    if copy:
        out.append(f"GPUs: {copy['gpus']} × {copy['gpu']}; one GPU's copy bandwidth {copy['copy_gbs']:,.0f} GB/s "
                   "(bytes read + written).\n")

    # All-reduce latency.
    lat = {}  # (ranks, mode, floats) -> graph µs
    rows = {}
    for c in coll:
        if "error" in c:
            out.append(f"- all-reduce, {c['mode']} at {c['ranks']} ranks: {c['error']}")
            continue
        lat[(c["ranks"], c["mode"], c["floats"])] = c["graph_us"]
        rows.setdefault((c["ranks"], c["floats"]), {})[c["mode"]] = c
    if rows:
        out.append("| ranks | float32 elements | bytes | custom, graph µs | NCCL, graph µs | custom, eager µs | "
                   "NCCL, eager µs |")
        out.append("|---|---|---|---|---|---|---|")
        for (ranks, floats), m in sorted(rows.items()):
            cu, nc = m.get("custom", {}), m.get("nccl", {})
            out.append(f"| {ranks} | {floats:,} | {floats * 4:,} | {fmt(cu.get('graph_us'), 1)} | "
                       f"{fmt(nc.get('graph_us'), 1)} | {fmt(cu.get('eager_us'), 1)} | {fmt(nc.get('eager_us'), 1)} |")
        out.append("")

    # Decode and throughput.
    dec, thr = [], []
    tp1 = {}
    for r in runs:
        if "error" in r:
            out.append(f"- {r.get('name')}: {r['error']} ({(r.get('log_tail') or [''])[-1]})")
            continue
        if r["mode"] == "throughput" and int(r["tp"]) == 1:
            tp1[(r["preset"], r["config"]["input_len"], r["config"]["output_len"])] = r["results"]["output_tokens_per_s"]
    for r in runs:
        if "error" in r:
            continue
        preset, tp, cfg, res = r["preset"], int(r["tp"]), r["config"], r["results"]
        c = configs.get(preset) or cfg.get("model_config")
        if r["mode"] == "latency":
            ctx = cfg["input_len"] + cfg["output_len"] / 2
            floor = None
            ar = lat.get((tp, "custom", c["hidden_size"])) if tp > 1 else 0.0
            if bw and ar is not None:
                floor = rank_bytes(c, tp, ctx) / bw * 1e3 + 2 * c["num_hidden_layers"] * ar * 1e-3
            ms = res["decode_ms_per_token"]
            dec.append(f"| {preset} | {tp} | {rank_bytes(c, tp, ctx) / 1e9:.2f} | {fmt(ar, 1)} | {fmt(ms, 3)} | "
                       f"{fmt(floor, 3)} | {'–' if not floor else f'{ms / floor:.2f}×'} | {fmt(res.get('ttft_ms_mean'), 1)} |")
        elif r["mode"] == "throughput":
            tps = res["output_tokens_per_s"]
            base = tp1.get((preset, cfg["input_len"], cfg["output_len"]))
            scale = f"{tps / base:.2f}× ({tps / base / tp * 100:.0f}%)" if base and tp > 1 else "–"
            thr.append(f"| {preset} | {tp} | {cfg['num_requests']} × {cfg['input_len']}/{cfg['output_len']} | "
                       f"{fmt(tps)} | {fmt(tps / tp)} | {scale} |")
    if dec:
        out.append("| model | TP | bytes/token per rank, GB | all-reduce µs (custom, graph) | decode ms/token | floor ms | "
                   "/ floor | TTFT ms |")
        out.append("|---|---|---|---|---|---|---|---|")
        out += dec
        out.append("")
    if thr:
        out.append("| model | TP | requests × in/out | output tok/s | per GPU | vs TP=1 (efficiency) |")
        out.append("|---|---|---|---|---|---|")
        out += thr
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
