#!/usr/bin/env python3
"""GPU reference figures for llmrt's benchmarks, measured on cuda:0 with PyTorch.

usage: gpu_reference.py --model DIR --out results.json [--skip-hf]

Measures
  copy   device-to-device copy of a 2 GiB bf16 buffer into another (CUDA events,
         20 iterations after warm-up); bandwidth counts bytes read + written (2 x size).
  gemm   bf16 torch.matmul rates: 8192x8192 @ 8192x8192 and [2048, 4096] @ [4096, 14336]
         (an 8B model's MLP up-projection of 2048 tokens), in TFLOP/s.
  hf     HF transformers on the same checkpoint (bf16, sdpa, cuda:0), unless --skip-hf:
         decode at batch 1 (prompt 128, and 2048, random ids; 128 new tokens, greedy,
         min_new_tokens = max_new_tokens): ms/token = (t(128 new) - t(1 new)) / 127;
         batched generation (64 prompts x 128 ids, 128 new tokens each): output tokens/s;
         prefill: one forward pass of a 2048-token prompt, mean of 5 after warm-up.
Also records the checkpoint's size (sum of *.safetensors) and config for the summariser.
Each part is wrapped: a failure is recorded under "errors" and the rest still runs.
"""
import argparse
import glob
import json
import os
import platform
import sys
import time
import traceback


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def cuda_time_ms(torch, fn, iters, warmup):
    """Mean ms of fn() over `iters` runs, timed with CUDA events after `warmup` runs."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def wall_time_s(torch, fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, out


def measure_copy(torch, dev):
    size = 2 << 30  # bytes
    n = size // 2
    src = torch.empty(n, dtype=torch.bfloat16, device=dev).normal_()
    dst = torch.empty_like(src)
    ms = cuda_time_ms(torch, lambda: dst.copy_(src), iters=20, warmup=3)
    del src, dst
    torch.cuda.empty_cache()
    return {"buffer_bytes": size, "iters": 20, "ms_per_copy": ms,
            "bytes_moved_per_copy": 2 * size,
            "tb_per_s": 2 * size / (ms * 1e-3) / 1e12,
            "convention": "read + write bytes (2 x buffer size) / time"}


def measure_gemm(torch, dev):
    out = {}
    for name, (m, k, n) in {"8192x8192x8192": (8192, 8192, 8192),
                            "2048x4096x14336": (2048, 4096, 14336)}.items():
        a = torch.randn(m, k, dtype=torch.bfloat16, device=dev)
        b = torch.randn(k, n, dtype=torch.bfloat16, device=dev)
        c = torch.empty(m, n, dtype=torch.bfloat16, device=dev)
        ms = cuda_time_ms(torch, lambda: torch.matmul(a, b, out=c), iters=20, warmup=5)
        flops = 2.0 * m * n * k
        out[name] = {"m": m, "k": k, "n": n, "ms": ms, "tflops_per_s": flops / (ms * 1e-3) / 1e12}
        del a, b, c
    torch.cuda.empty_cache()
    return out


def checkpoint_info(model_dir):
    files = sorted(glob.glob(os.path.join(model_dir, "*.safetensors")))
    info = {"dir": model_dir, "safetensors_files": [os.path.basename(f) for f in files],
            "weight_bytes": sum(os.path.getsize(f) for f in files)}
    try:
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)
        info["config"] = {k: cfg.get(k) for k in (
            "architectures", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "head_dim", "vocab_size", "tie_word_embeddings", "max_position_embeddings")}
        h, v = cfg["hidden_size"], cfg["vocab_size"]
        hd = cfg.get("head_dim") or h // cfg["num_attention_heads"]
        kvh = cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
        info["embed_bytes"] = 2 * v * h  # bf16 embed_tokens table (only one row is read per token)
        info["kv_bytes_per_token_bf16"] = cfg["num_hidden_layers"] * 2 * kvh * hd * 2
    except Exception as e:  # noqa: BLE001 - recorded, not fatal
        info["config_error"] = repr(e)
    return info


def load_hf(torch, model_dir, dev):
    import transformers
    from transformers import AutoModelForCausalLM
    major = int(transformers.__version__.split(".")[0])
    kw = {"attn_implementation": "sdpa", "device_map": dev}
    kw["dtype" if major >= 5 else "torch_dtype"] = torch.bfloat16
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(model_dir, **kw)
    model.eval()
    torch.cuda.synchronize()
    return model, time.perf_counter() - t0


def hf_generate(torch, model, ids, new_tokens):
    pad = getattr(model.config, "pad_token_id", None)
    if pad is None:
        pad = 0
    return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                          max_new_tokens=new_tokens, min_new_tokens=new_tokens, pad_token_id=pad,
                          use_cache=True, num_beams=1)


def random_ids(torch, gen, batch, length, vocab, dev):
    return torch.randint(10, vocab - 10, (batch, length), generator=gen).to(dev)


def hf_decode(torch, model, prompt_len, new_tokens, vocab, dev, gen, reps=3):
    ids = random_ids(torch, gen, 1, prompt_len, vocab, dev)
    with torch.inference_mode():
        hf_generate(torch, model, ids, 1)  # warm-up
        hf_generate(torch, model, ids, new_tokens)
        t1, t_full = [], []
        for _ in range(reps):
            t, _ = wall_time_s(torch, lambda: hf_generate(torch, model, ids, 1))
            t1.append(t)
            t, out = wall_time_s(torch, lambda: hf_generate(torch, model, ids, new_tokens))
            t_full.append(t)
            got = out.shape[1] - prompt_len
            if got != new_tokens:
                raise RuntimeError(f"generated {got} tokens, expected {new_tokens}")
    a, b = sorted(t1)[len(t1) // 2], sorted(t_full)[len(t_full) // 2]
    ms = (b - a) / (new_tokens - 1) * 1e3
    return {"prompt_len": prompt_len, "new_tokens": new_tokens, "reps": reps,
            "time_1_new_s": a, "time_all_new_s": b, "time_1_new_all_s": t1, "time_all_new_all_s": t_full,
            "decode_ms_per_token": ms, "decode_tokens_per_s": 1e3 / ms if ms > 0 else None,
            "method": "median over reps; (t(N new) - t(1 new)) / (N - 1)"}


def hf_batched(torch, model, batch, prompt_len, new_tokens, vocab, dev, gen):
    ids = random_ids(torch, gen, batch, prompt_len, vocab, dev)
    with torch.inference_mode():
        hf_generate(torch, model, ids, 4)  # warm-up at the same batch
        t, out = wall_time_s(torch, lambda: hf_generate(torch, model, ids, new_tokens))
    got = (out.shape[1] - prompt_len) * batch
    return {"batch": batch, "prompt_len": prompt_len, "new_tokens": new_tokens, "wall_s": t,
            "output_tokens": got, "output_tokens_per_s": got / t,
            "total_tokens_per_s": (got + batch * prompt_len) / t}


def hf_prefill(torch, model, prompt_len, vocab, dev, gen, iters=5):
    ids = random_ids(torch, gen, 1, prompt_len, vocab, dev)
    kw = {"use_cache": False}
    # Only the last position's logits, like a serving engine's prefill (not in old transformers).
    import inspect
    if "logits_to_keep" in inspect.signature(model.forward).parameters:
        kw["logits_to_keep"] = 1
    with torch.inference_mode():
        for _ in range(2):
            model(ids, **kw)
        times = []
        for _ in range(iters):
            t, _ = wall_time_s(torch, lambda: model(ids, **kw))
            times.append(t * 1e3)
    return {"prompt_len": prompt_len, "iters": iters, "ms_mean": sum(times) / len(times), "ms_min": min(times),
            "ms_all": times, "tokens_per_s": prompt_len / (sum(times) / len(times)) * 1e3,
            "logits_to_keep": kw.get("logits_to_keep")}


def num(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else "-"


def print_summary(res):
    log("")
    log(f"device: {res.get('device', {}).get('name')}  torch {res.get('device', {}).get('torch')}")
    if "copy" in res:
        c = res["copy"]
        log(f"  d2d copy            {num(c['tb_per_s'], '.3f')} TB/s (read+write; {num(c['ms_per_copy'], '.3f')} ms per 2 GiB copy)")
    for k, g in res.get("gemm", {}).items():
        log(f"  bf16 GEMM {k:<17} {num(g['tflops_per_s'], '.1f')} TFLOP/s ({num(g['ms'], '.3f')} ms)")
    for k in ("hf_decode_128", "hf_decode_2048"):
        if k in res:
            d = res[k]
            log(f"  HF decode ctx {d['prompt_len']:<5}   {num(d['decode_ms_per_token'], '.2f')} ms/token "
                f"({num(d['decode_tokens_per_s'], '.1f')} tok/s)")
    if "hf_prefill_2048" in res:
        d = res["hf_prefill_2048"]
        log(f"  HF prefill 2048     {num(d['ms_mean'], '.2f')} ms mean, {num(d['ms_min'], '.2f')} ms min ({num(d['tokens_per_s'], '.0f')} tok/s)")
    if "hf_batched_64x128" in res:
        d = res["hf_batched_64x128"]
        log(f"  HF batched 64x128   {num(d['output_tokens_per_s'], '.0f')} output tok/s ({num(d['wall_s'], '.2f')} s)")
    for k, e in res["errors"].items():
        log(f"  ERROR {k}: {e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="HF model directory (bf16 safetensors)")
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--skip-hf", action="store_true", help="only copy bandwidth and GEMM rates")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    res = {"host": platform.node(), "python": sys.version.split()[0], "errors": {},
           "model": checkpoint_info(a.model)}

    def save():
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(res, f, indent=2)
        os.replace(tmp, a.out)

    def part(name, fn):
        log(f"[gpu_reference] {name} ...")
        t0 = time.perf_counter()
        try:
            res[name] = fn()
        except Exception as e:  # noqa: BLE001 - recorded and reported
            res["errors"][name] = f"{type(e).__name__}: {e}"
            log(traceback.format_exc())
            # Free what the failed part left behind (an out-of-memory error keeps its frames alive).
            import gc
            gc.collect()
            if "torch" in sys.modules and sys.modules["torch"].cuda.is_available():
                sys.modules["torch"].cuda.empty_cache()
        log(f"[gpu_reference] {name} done in {time.perf_counter() - t0:.1f} s")
        save()

    try:
        import torch
    except Exception as e:  # noqa: BLE001
        res["errors"]["torch"] = repr(e)
        save()
        log(f"no torch: {e}")
        return 1
    if not torch.cuda.is_available():
        res["errors"]["cuda"] = "torch.cuda.is_available() is False"
        save()
        log("no CUDA device")
        return 1
    dev = "cuda:0"
    p = torch.cuda.get_device_properties(0)
    res["device"] = {"name": p.name, "total_memory_bytes": p.total_memory,
                     "multiprocessors": p.multi_processor_count, "torch": torch.__version__,
                     "cuda": torch.version.cuda}
    save()

    part("copy", lambda: measure_copy(torch, dev))
    part("gemm", lambda: measure_gemm(torch, dev))

    if not a.skip_hf:
        state = {}

        def load():
            import transformers
            model, load_s = load_hf(torch, a.model, dev)
            state["model"] = model
            return {"transformers": transformers.__version__, "load_s": load_s,
                    "attn_implementation": getattr(model.config, "_attn_implementation", None),
                    "memory_allocated_bytes": torch.cuda.memory_allocated()}

        part("hf_load", load)
        if "model" in state:
            model = state["model"]
            vocab = model.config.vocab_size
            gen = torch.Generator().manual_seed(a.seed)
            part("hf_decode_128", lambda: hf_decode(torch, model, 128, 128, vocab, dev, gen))
            part("hf_decode_2048", lambda: hf_decode(torch, model, 2048, 128, vocab, dev, gen))
            part("hf_prefill_2048", lambda: hf_prefill(torch, model, 2048, vocab, dev, gen))
            part("hf_batched_64x128", lambda: hf_batched(torch, model, 64, 128, 128, vocab, dev, gen))
            del state["model"], model
            torch.cuda.empty_cache()

    # Readable summary (never fatal: the JSON is already written).
    try:
        print_summary(res)
    except Exception:  # noqa: BLE001
        log(traceback.format_exc())
    save()
    print(json.dumps({k: res[k] for k in res if k in ("device", "copy", "gemm", "errors")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
