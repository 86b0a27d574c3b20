#!/usr/bin/env python3
"""Prints llmrt-bench results next to their floors as Markdown (for docs/perf.md).

usage: summarize.py bench.jsonl [results.json]
  bench.jsonl   llmrt-bench JSON lines (device_bench.sh adds "name"; error lines are listed)
  results.json  gpu_reference.py's output: copy bandwidth, GEMM rate, checkpoint size, HF figures

Floors (lower bounds on time, from figures measured in the same call):
  batch-1 decode   (weight bytes + KV bytes at the mean decode context) / copy bandwidth;
                   weight bytes = sum of the *.safetensors sizes, KV bytes per token =
                   layers * 2 * kv_heads * head_dim * 2 (bf16), mean context = input + output/2
  prefill / TTFT   max(model FLOPs / best measured GEMM rate, weight bytes / copy bandwidth)
  throughput       max(compute: all model FLOPs / GEMM rate,
                       memory: (decode steps * weight bytes + KV bytes read) / copy bandwidth),
                   decode steps = ceil(R / min(R, max batch)) * (M - 1)
"""
import json
import math
import sys


def fmt(v, digits=3):
    if v is None:
        return "–"
    if isinstance(v, float) and not math.isfinite(v):
        return "–"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.1f}"
    if a >= 10:
        return f"{v:.2f}"
    return f"{v:.{digits}f}"


def ratio(measured, floor):
    if not measured or not floor:
        return "–"
    return f"{measured / floor:.2f}×"


class Model:
    def __init__(self, mc, ref):
        self.L = mc["num_hidden_layers"]
        self.H = mc["hidden_size"]
        self.I = mc["intermediate_size"]
        self.V = mc["vocab_size"]
        self.nh = mc["num_attention_heads"]
        self.kvh = mc["num_key_value_heads"]
        self.hd = mc["head_dim"]
        self.tied = mc.get("tie_word_embeddings", False)
        q, kv = self.nh * self.hd, self.kvh * self.hd
        self.linear_params = self.L * (self.H * (q + 2 * kv) + q * self.H + 3 * self.H * self.I)
        self.kv_bytes_per_token = self.L * 2 * self.kvh * self.hd * 2
        wb = (ref or {}).get("model", {}).get("weight_bytes")
        if not wb:  # no reference: bf16 parameters
            wb = 2 * mc.get("approx_params", self.linear_params + self.V * self.H * (1 if self.tied else 2))
        self.weight_bytes = wb

    def attn_flops_per_pair(self):
        return 4 * self.L * self.nh * self.hd  # QK^T and PV, one query-key pair, all layers and heads

    def prefill_flops(self, n):
        return 2 * n * self.linear_params + 2 * self.V * self.H + self.attn_flops_per_pair() * n * (n + 1) / 2


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    ref = json.load(open(sys.argv[2])) if len(sys.argv) == 3 else {}
    bw = ref.get("copy", {}).get("tb_per_s")
    bw = bw * 1e12 if bw else None
    gemms = [g["tflops_per_s"] for g in ref.get("gemm", {}).values() if g.get("tflops_per_s")]
    gemm = max(gemms) * 1e12 if gemms else None

    def hf(key, field):
        return ref.get(key, {}).get(field)

    out = []
    dev = ref.get("device", {})
    out.append(f"Device: {dev.get('name', '?')} (torch {dev.get('torch', '?')}). "
               f"Copy bandwidth {fmt(bw / 1e12 if bw else None)} TB/s (read + write); "
               f"best bf16 GEMM {fmt(gemm / 1e12 if gemm else None)} TFLOP/s"
               + "".join(f"; {k}: {fmt(g['tflops_per_s'])}" for k, g in ref.get("gemm", {}).items()) + ".")
    out.append("")
    out.append("| measurement | llmrt | floor | llmrt / floor | HF transformers |")
    out.append("|---|---|---|---|---|")
    details = []
    errors = []
    model_line = None
    for r in runs:
        name = r.get("name", r.get("mode", "?"))
        if "error" in r:
            errors.append(f"- {name}: {r['error']}" + (f" ({r['log_tail'][-1]})" if r.get("log_tail") else ""))
            continue
        cfg, res = r["config"], r["results"]
        m = Model(cfg["model_config"], ref)
        if model_line is None:
            model_line = (f"Model: {cfg['model']} ({m.L} layers, hidden {m.H}, {m.nh} heads / {m.kvh} KV heads, "
                          f"vocab {m.V}); weights {m.weight_bytes / 1e9:.2f} GB, KV {m.kv_bytes_per_token} "
                          f"bytes/token.")
        mode = r["mode"]
        if mode == "latency":
            n, mo = cfg["input_len"], cfg["output_len"]
            ctx = n + mo / 2
            floor_ms = (m.weight_bytes + m.kv_bytes_per_token * ctx) / bw * 1e3 if bw else None
            ms = res["decode_ms_per_token"]
            hf_ms = None
            for key in ("hf_decode_128", "hf_decode_2048"):
                if hf(key, "prompt_len") == n:
                    hf_ms = hf(key, "decode_ms_per_token")
            out.append(f"| batch-1 decode, prompt {n}, {mo} new: ms/token | {fmt(ms)} ({fmt(res['decode_tokens_per_s'])} "
                       f"tok/s; ITL p50 {fmt(res['itl_ms_p50'])}, p99 {fmt(res['itl_ms_p99'])}) | {fmt(floor_ms)} | "
                       f"{ratio(ms, floor_ms)} | {fmt(hf_ms)} |")
            if cfg.get("cached_prefix"):
                # Every whole block reused: the first token costs about one step (the weights).
                step_floor = (m.weight_bytes + m.kv_bytes_per_token * n) / bw * 1e3 if bw else None
                out.append(f"| TTFT, prompt {n} fully cached: ms | {fmt(res['ttft_ms_mean'])} "
                           f"({fmt(res['ttft_over_itl'])}× the ITL; goal ≤ 1.5×) | {fmt(step_floor)} | "
                           f"{ratio(res['ttft_ms_mean'], step_floor)} | – |")
                continue
            flops = m.prefill_flops(n)
            ttft_floor = None
            if gemm and bw:
                ttft_floor = max(flops / gemm, m.weight_bytes / bw) * 1e3
            out.append(f"| TTFT, prompt {n}: ms | {fmt(res['ttft_ms_mean'])} (p50 {fmt(res['ttft_ms_p50'])}) | "
                       f"{fmt(ttft_floor)} | {ratio(res['ttft_ms_mean'], ttft_floor)} | – |")
        elif mode == "prefill":
            n = cfg["input_len"]
            flops = res.get("model_flops") or m.prefill_flops(n)
            floor_ms = max(flops / gemm, m.weight_bytes / bw) * 1e3 if gemm and bw else None
            hf_ms = hf("hf_prefill_2048", "ms_mean") if hf("hf_prefill_2048", "prompt_len") == n else None
            out.append(f"| prefill, prompt {n}: ms | {fmt(res['prefill_ms_mean'])} (min {fmt(res['prefill_ms_min'])}; "
                       f"{fmt(res['model_tflops_per_s'])} TFLOP/s, {fmt(res['prefill_tokens_per_s'])} tok/s) | "
                       f"{fmt(floor_ms)} | {ratio(res['prefill_ms_mean'], floor_ms)} | {fmt(hf_ms)} |")
        elif mode == "throughput":
            R, n, mo = cfg["num_requests"], cfg["input_len"], cfg["output_len"]
            batch = min(R, cfg["max_batch_size"])
            ctx_sum = (mo - 1) * n + mo * (mo - 1) / 2  # decode query-key pairs per request
            flops = R * (2 * (n + mo - 1) * m.linear_params + 2 * mo * m.V * m.H +
                         m.attn_flops_per_pair() * (n * (n + 1) / 2 + ctx_sum + (mo - 1)))
            steps = math.ceil(R / batch) * (mo - 1)
            mem_bytes = steps * m.weight_bytes + R * ctx_sum * m.kv_bytes_per_token
            floor_s = None
            if gemm and bw:
                floor_s = max(flops / gemm, mem_bytes / bw)
            out_tokens = res["output_tokens"]
            floor_tps = out_tokens / floor_s if floor_s else None
            hf_tps = hf("hf_batched_64x128", "output_tokens_per_s")
            hf_note = f"{fmt(hf_tps)} (batch 64 × 128/128)" if hf_tps else "–"
            out.append(f"| throughput {R} × {n}/{mo} (max batch {cfg['max_batch_size']}): output tok/s | "
                       f"{fmt(res['output_tokens_per_s'])} ({fmt(res['total_tokens_per_s'])} total tok/s) | "
                       f"{fmt(floor_tps)} | {ratio(floor_tps, res['output_tokens_per_s'])} | {hf_note} |")
            if floor_s:
                details.append(f"- {name}: floor {floor_s:.2f} s = max(compute {flops / gemm:.2f} s, "
                               f"memory {mem_bytes / bw:.2f} s over {steps} decode steps)")
            es = res.get("engine_stats", {})
            details.append(f"- {name}: wall {fmt(res['wall_s'])} s, {fmt(res['requests_per_s'])} req/s; "
                           f"TTFT mean {fmt(res['ttft_ms_mean'])} / p99 {fmt(res['ttft_ms_p99'])} ms; "
                           f"ITL mean {fmt(res['itl_ms_mean'])} / p50 {fmt(res['itl_ms_p50'])} / "
                           f"p99 {fmt(res['itl_ms_p99'])} ms; end-to-end mean {fmt(res['e2e_ms_mean'])} / "
                           f"p99 {fmt(res['e2e_ms_p99'])} ms; {es.get('steps', '?')} steps, "
                           f"{fmt(es.get('generated_tokens_per_step'))} generated tokens/step, "
                           f"{es.get('pauses', '?')} pauses")
    out.append("")
    if model_line:
        out.append(model_line)
    out.append("Floors: decode = (weights + KV at prompt + output/2) / copy bandwidth; prefill and TTFT = "
               "max(model FLOPs / best GEMM rate, weights / copy bandwidth); throughput = max(all FLOPs / GEMM "
               "rate, (decode steps × weights + KV reads) / copy bandwidth).")
    if model_line and ref.get("model", {}).get("embed_bytes") and not runs[0].get("config", {}).get(
            "model_config", {}).get("tie_word_embeddings", True):
        eb = ref["model"]["embed_bytes"]
        out.append(f"(The embedding table, {eb / 1e9:.2f} GB, is counted in the weights although decode reads "
                   f"one row of it; without it the decode floors are {eb / ref['model']['weight_bytes'] * 100:.1f}% "
                   f"lower.)")
    if details:
        out.append("")
        out.extend(details)
    ref_errors = ref.get("errors", {})
    if errors or ref_errors:
        out.append("")
        out.append("Not measured:")
        out.extend(errors)
        out.extend(f"- reference {k}: {v}" for k, v in ref_errors.items())
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
