#!/usr/bin/env python3
"""Writes a random-weight 7B-class checkpoint of another architecture for benchmarks (GPU machine).

usage: make_random_arch.py OUT_DIR --preset gpt2-7b|gptj-6b|neox-7b|falcon-7b|mixtral-8l [--seed 0]
       make_random_arch.py DIR --measure NAME   (only the JSON line, for an existing checkpoint)

The model is built by transformers' own class on the GPU in bf16 (its own initialization:
N(0, initializer_range) linears, LayerNorm 1 / 0) and written by save_pretrained, so tensor names,
packing and config keys are exactly what a published checkpoint of that family has. Only speed
matters: the text is meaningless. The shapes are the published models' (GPT-2 scaled to 4096 x 32
layers, as GPT-2 never shipped a 7B); mixtral-8l is Mixtral-8x7B with 8 of its 32 layers (every
layer keeps all 8 experts) so that it fits one card and the disk. Prints one JSON line:
{"preset", "dir", "weight_bytes", "expert_bytes", "num_experts", "experts_per_token"}, where
expert_bytes is the routed experts' share of weight_bytes (0 for dense models)."""
import argparse
import json
import os
import re
import struct

PRESETS = {
    "gpt2-7b": ("GPT2Config", "GPT2LMHeadModel",
                dict(n_embd=4096, n_layer=32, n_head=32, n_inner=16384, vocab_size=50257, n_positions=2048,
                     activation_function="gelu_new")),
    "gptj-6b": ("GPTJConfig", "GPTJForCausalLM",  # EleutherAI/gpt-j-6b
                dict(n_embd=4096, n_layer=28, n_head=16, rotary_dim=64, vocab_size=50400, n_positions=2048,
                     tie_word_embeddings=False)),
    "neox-7b": ("GPTNeoXConfig", "GPTNeoXForCausalLM",  # EleutherAI/pythia-6.9b
                dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, intermediate_size=16384,
                     rotary_pct=0.25, vocab_size=50432, max_position_embeddings=2048,
                     use_parallel_residual=True, tie_word_embeddings=False)),
    "falcon-7b": ("FalconConfig", "FalconForCausalLM",  # tiiuae/falcon-7b
                  dict(hidden_size=4544, num_hidden_layers=32, num_attention_heads=71, multi_query=True,
                       parallel_attn=True, new_decoder_architecture=False, bias=False, alibi=False,
                       vocab_size=65024, max_position_embeddings=2048)),
    "mixtral-8l": ("MixtralConfig", "MixtralForCausalLM",  # mistralai/Mixtral-8x7B, 8 of 32 layers
                   dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=8, num_attention_heads=32,
                        num_key_value_heads=8, num_local_experts=8, num_experts_per_tok=2, vocab_size=32000,
                        max_position_embeddings=4096, rope_theta=1e6, tie_word_embeddings=False)),
}


def safetensors_bytes(d):
    """(all tensor bytes, routed-expert tensor bytes) of the *.safetensors files in d."""
    total = experts = 0
    for f in sorted(os.listdir(d)):
        if not f.endswith(".safetensors"):
            continue
        with open(os.path.join(d, f), "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            header = json.loads(fh.read(n))
        for name, t in header.items():
            if name == "__metadata__":
                continue
            size = t["data_offsets"][1] - t["data_offsets"][0]
            total += size
            if re.search(r"\.experts\.\d+\.", name):
                experts += size
    return total, experts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--preset", choices=PRESETS)
    ap.add_argument("--measure", metavar="NAME", help="measure an existing checkpoint under this name")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.measure:
        total, experts = safetensors_bytes(a.out)
        cfg = json.load(open(os.path.join(a.out, "config.json")))
        print(json.dumps({"preset": a.measure, "dir": a.out, "weight_bytes": total, "expert_bytes": experts,
                          "num_experts": cfg.get("num_local_experts", 0),
                          "experts_per_token": cfg.get("num_experts_per_tok", 0)}))
        return
    if not a.preset:
        ap.error("--preset or --measure is required")
    import torch
    import transformers
    config_name, model_name, kwargs = PRESETS[a.preset]
    cfg = getattr(transformers, config_name)(**kwargs)
    torch.manual_seed(a.seed)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = getattr(transformers, model_name)(cfg)
    model.eval()
    model.save_pretrained(a.out, max_shard_size="100GB")
    del model
    torch.cuda.empty_cache()
    total, experts = safetensors_bytes(a.out)
    print(json.dumps({"preset": a.preset, "dir": a.out, "weight_bytes": total, "expert_bytes": experts,
                      "num_experts": kwargs.get("num_local_experts", 0),
                      "experts_per_token": kwargs.get("num_experts_per_tok", 0)}))


if __name__ == "__main__":
    main()
