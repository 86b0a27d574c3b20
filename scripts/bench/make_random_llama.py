#!/usr/bin/env python3
"""Writes a random-weight Llama checkpoint (HF layout, bf16 safetensors) for benchmarks.

usage: make_random_llama.py OUT_DIR [--preset 100m|8b|70b] [--seed 0] [--awq]
Weights are N(0, 0.02) (norms 1), so the text is meaningless; only speed matters. With --awq the
q/k/v/o and MLP matrices are an AutoAWQ GEMM checkpoint's instead (random 4-bit codes and zero
points, fp16 scales near 0.004, group size 128).
Needs numpy only (no torch)."""
import argparse, json, os, struct
import numpy as np

PRESETS = {
    "100m": dict(hidden_size=768, intermediate_size=2048, num_hidden_layers=12, num_attention_heads=12,
                 num_key_value_heads=4, vocab_size=32000, tie_word_embeddings=True),
    "8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=False),
    "70b": dict(hidden_size=8192, intermediate_size=28672, num_hidden_layers=80, num_attention_heads=64,
                num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=False),
}

def bf16(a):
    u = a.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--preset", default="100m", choices=PRESETS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--numpy", action="store_true", help="draw with numpy even where torch and a GPU exist")
    ap.add_argument("--awq", action="store_true", help="AutoAWQ GEMM (4-bit, group 128) product matrices")
    a = ap.parse_args()
    c = dict(PRESETS[a.preset])
    c.update(architectures=["LlamaForCausalLM"], model_type="llama", max_position_embeddings=4096,
             rms_norm_eps=1e-5, rope_theta=500000.0, bos_token_id=1, eos_token_id=2, torch_dtype="bfloat16",
             hidden_act="silu")
    H, I, L = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    hd = H // c["num_attention_heads"]
    Q, KV, V = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd, c["vocab_size"]
    shapes = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,)}
    if not c["tie_word_embeddings"]:
        shapes["lm_head.weight"] = (V, H)
    for i in range(L):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": (H,), p + "post_attention_layernorm.weight": (H,),
                       p + "self_attn.q_proj.weight": (Q, H), p + "self_attn.k_proj.weight": (KV, H),
                       p + "self_attn.v_proj.weight": (KV, H), p + "self_attn.o_proj.weight": (H, Q),
                       p + "mlp.gate_proj.weight": (I, H), p + "mlp.up_proj.weight": (I, H),
                       p + "mlp.down_proj.weight": (H, I)})
    G = 128
    if a.awq:
        c["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": G, "version": "gemm",
                                    "zero_point": True}
        for n in [n for n in shapes if n.endswith("_proj.weight")]:
            out_f, in_f = shapes.pop(n)
            base = n[:-len("weight")]
            shapes[base + "qweight"] = ("I32", (in_f, out_f // 8))
            shapes[base + "qzeros"] = ("I32", (in_f // G, out_f // 8))
            shapes[base + "scales"] = ("F16", (in_f // G, out_f))
    os.makedirs(a.out, exist_ok=True)
    header, off = {}, 0
    for n, s in shapes.items():
        dt, s = s if isinstance(s[0], str) else ("BF16", s)
        nbytes = int(np.prod(s)) * (4 if dt == "I32" else 2)
        header[n] = {"dtype": dt, "shape": list(s), "data_offsets": [off, off + nbytes]}
        off += nbytes
    hj = json.dumps(header).encode()
    hj += b" " * ((8 - len(hj) % 8) % 8)
    rng = np.random.default_rng(a.seed)
    # With torch and a GPU (the device machine), draw on the GPU: minutes -> seconds for 8B.
    gen = None
    if not a.numpy:
        try:
            import torch
            if torch.cuda.is_available():
                gen = torch.Generator(device="cuda").manual_seed(a.seed)
        except ImportError:
            pass
    with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for n, s in shapes.items():
            if isinstance(s[0], str):  # AWQ: random codes / zero points, scales near 0.004
                dt, s = s
                if dt == "I32":
                    f.write(rng.integers(0, 2**32, size=s, dtype=np.uint32).tobytes())
                else:
                    f.write((rng.random(s, dtype=np.float32) * 0.002 + 0.003).astype(np.float16).tobytes())
            elif n.endswith("norm.weight"):
                f.write(bf16(np.ones(s, np.float32)).tobytes())
            elif gen is not None:
                t = (torch.randn(s, generator=gen, device="cuda", dtype=torch.float32) * 0.02).to(torch.bfloat16)
                f.write(t.view(torch.int16).cpu().numpy().data)  # (no copy: 70B writes 141 GB)
            else:
                f.write(bf16(rng.standard_normal(s, dtype=np.float32) * 0.02).tobytes())
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    params = sum(int(np.prod(s[1] if isinstance(s[0], str) else s)) for s in shapes.values())
    print(f"{a.out}: {params/1e6:.1f}M parameters, {off/2**20:.0f} MiB")

if __name__ == "__main__":
    main()
