#!/usr/bin/env python3
"""Prints device_kv_fp8_bench.sh's results as Markdown: batch-1 decode against its bandwidth floor
(summarize_fp8.step_bytes' weights plus the KV cache at the mean context: 2 bytes per element in
bf16, 1 in FP8; copy bandwidth of the same call), and the throughput runs.

usage: summarize_kv_fp8.py OUT_DIR   (reads config.json, bench.jsonl, results.json there)"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summarize_fp8 import step_bytes  # noqa: E402


def main():
    d = sys.argv[1]
    cfg = json.load(open(os.path.join(d, "config.json")))
    runs = [json.loads(l) for l in open(os.path.join(d, "bench.jsonl")) if l.strip()]
    ref_path = os.path.join(d, "results.json")
    ref = json.load(open(ref_path)) if os.path.exists(ref_path) else {}
    bw = ref.get("copy", {}).get("tb_per_s")
    print(f"GPU: {ref.get('device', {}).get('name', '?')}; copy bandwidth {bw} TB/s (gpu_reference.py, same call)\n")
    print("| run | products | KV cache | result | floor | llmrt / floor |")
    print("|---|---|---|---|---|---|")
    for r in runs:
        res = r.get("results", {})
        floor = ratio = "–"
        if "error" in r:
            text = r["error"] + ": " + " / ".join(r.get("log_tail", [])[-2:])
        elif r.get("mode") == "latency":
            ms = res["decode_ms_per_token"]
            text = f"decode {ms:.3f} ms/token"
            ctx = r["config"]["input_len"] + r["config"]["output_len"] / 2
            w, kv = step_bytes(cfg, r["quantization"], ctx)
            if r["kv"] == "fp8":
                kv /= 2
            if bw:
                f = (w + kv) / (bw * 1e12) * 1e3
                floor, ratio = f"{f:.3f} ms ({kv / 1e9:.2f} GB KV)", f"{ms / f:.2f}×"
        else:
            text = (f"{res['output_tokens_per_s']:,.0f} output tok/s, ITL p50 {res['itl_ms_p50']:.2f} ms, "
                    f"TTFT p50 {res['ttft_ms_p50']:.1f} ms")
        print(f"| {r['name'].split('_')[0]} | {r['quantization']} | {r['kv']} | {text} | {floor} | {ratio} |")


if __name__ == "__main__":
    main()
