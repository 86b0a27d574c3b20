"""transformers / torch glue for make_arch_goldens.py: hf_glue.py generalised beyond the Llama family.

Builds a config from an arch_specs entry, re-initialises every parameter (LayerNorm/RMSNorm, biases,
embeddings, learned positions, Linear and Conv1D weights, fused expert tensors), saves bf16, reloads the
reference way (hf_glue.load_model: float32, eager, CPU), runs the forwards and measures what the
loaded modules really hold (norm eps, attention scale, rotary inv_freq, activations, sliding window).
"""

import inspect
import math
import os
import re
import sys

import numpy as np
import torch
import transformers

import hf_glue
from arch_specs import COMMON_CFG
from golden_util import GoldenError, expected_inv_freq, is_degenerate, prepare_model_dir, read_safetensors_header, warn

EMBED_NAMES = ("wte.weight", "embed_tokens.weight", "embed_in.weight", "word_embeddings.weight")
POS_NAMES = ("wpe.weight",)
HEAD_NAMES = ("lm_head.weight", "embed_out.weight")


def build_config(spec):
    cls = transformers.CONFIG_MAPPING[spec["model_type"]]
    kwargs = dict(COMMON_CFG)
    kwargs.update(spec["config"])
    cfg = cls(**kwargs)
    for key, want in spec["expect"].items():
        got = getattr(cfg, key, None)
        if got != want:
            raise GoldenError("constructed %s: %s is %r, expected %r" % (cls.__name__, key, got, want))
    return cfg


def conv1d_weight_names(model):
    names = set()
    for mname, mod in model.named_modules():
        if type(mod).__name__ == "Conv1D":
            names.add(mname + ".weight")
    return names


def _offset_for(spec, name):
    for key, off in (spec.get("norm_offsets") or {}).items():
        if key in name:
            return off
    return spec.get("norm_offset", 1.0)


def reinit_weights(model, spec, seed, gain_mult):
    """Fixed-seed values of meaningful size for every parameter; returns a description for golden.json."""
    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed)
    gain = spec.get("gain", 1.2) * gain_mult
    lm_gain = spec.get("lm_gain", 3.0) * gain_mult
    router_gain = spec.get("router_gain", 1.2) * gain_mult
    overrides = spec.get("gain_overrides") or {}
    conv = conv1d_weight_names(model)
    kinds = {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(tuple(p.shape), generator=gen, dtype=torch.float32)
            if name.endswith(EMBED_NAMES):
                v, kind = r * spec.get("embed_std", 0.7), "embedding std %g" % spec.get("embed_std", 0.7)
            elif name.endswith(POS_NAMES):
                v, kind = r * spec.get("pos_std", 0.5), "position embedding std %g" % spec.get("pos_std", 0.5)
            elif name.endswith("lm_head.bias"):
                v, kind = r * spec.get("lm_bias_std", 0.1), "lm_head bias std %g" % spec.get("lm_bias_std", 0.1)
            elif name.endswith(".bias"):
                v, kind = r * 0.1, "bias 0.1*randn"
            elif p.dim() == 1:
                off = _offset_for(spec, name)
                v, kind = off + 0.1 * r, "norm weight %g + 0.1*randn" % off
            elif p.dim() == 2:
                fan_in = p.shape[0] if name in conv else p.shape[1]
                if name.endswith(HEAD_NAMES):
                    g = lm_gain
                elif name.endswith(".gate.weight") or name.endswith("router.weight"):
                    g = router_gain
                else:
                    g = next((gv * gain_mult for key, gv in overrides.items() if key in name), gain)
                v = r * (g / math.sqrt(fan_in))
                kind = "%s %.3g/sqrt(fan_in=%d)" % ("conv1d [in,out]" if name in conv else "linear", g, fan_in)
            elif p.dim() == 3:  # fused experts [E, out, in] used as F.linear(x, W[e])
                v = r * (gain / math.sqrt(p.shape[-1]))
                kind = "fused experts %.3g/sqrt(shape[-1]=%d)" % (gain, p.shape[-1])
            else:
                raise GoldenError("unexpected parameter %s with shape %s" % (name, tuple(p.shape)))
            p.copy_(v.to(p.dtype))
            kinds[name] = kind
    return kinds


def build_and_save(spec, seed, gain_mult, model_dir):
    cfg = build_config(spec)
    torch.manual_seed(seed)
    model = getattr(transformers, spec["arch"])(cfg)
    model.eval()
    kinds = reinit_weights(model, spec, seed, gain_mult)
    if spec["tied"]:
        if not hf_glue.outputs_tied(model):
            model.tie_weights()
        if not hf_glue.outputs_tied(model):
            raise GoldenError("tie_word_embeddings is true but the output head is not tied to the input embedding")
    model = model.to(torch.bfloat16)
    saved = {k: v.detach().clone() for k, v in model.state_dict().items()}
    prepare_model_dir(model_dir)
    model.save_pretrained(model_dir)
    del model
    return saved, kinds


def check_saved_files(spec, model_dir):
    import json
    cfg_path = os.path.join(model_dir, "config.json")
    st_path = os.path.join(model_dir, "model.safetensors")
    for p in (cfg_path, st_path):
        if not os.path.isfile(p):
            raise GoldenError("save_pretrained did not write %s (files: %s)" % (p, sorted(os.listdir(model_dir))))
    with open(cfg_path, encoding="utf-8") as f:
        cfg_json = json.load(f)
    dtype_keys = [k for k in ("torch_dtype", "dtype") if k in cfg_json]
    if not dtype_keys or any(cfg_json[k] != "bfloat16" for k in dtype_keys):
        raise GoldenError("config.json dtype is %r, expected bfloat16" % ({k: cfg_json.get(k) for k in dtype_keys},))
    if cfg_json.get("architectures") != [spec["arch"]]:
        raise GoldenError("config.json architectures is %r, expected [%r]" % (cfg_json.get("architectures"),
                                                                            spec["arch"]))
    header = read_safetensors_header(st_path)
    bad = sorted(k for k, v in header.items() if v.get("dtype") != "BF16")
    if bad:
        raise GoldenError("model.safetensors has non-BF16 tensors: %s" % bad[:8])
    heads = [n for n in header if n.endswith(HEAD_NAMES)]
    if spec["tied"] and heads:
        raise GoldenError("tied model but model.safetensors has %s" % heads)
    if not spec["tied"] and not heads:
        raise GoldenError("untied model but model.safetensors has no lm_head/embed_out weight")
    extra = sorted(set(os.listdir(model_dir)) - {"config.json", "generation_config.json", "model.safetensors"})
    if extra:
        warn("%s: save_pretrained also wrote %s (kept)" % (spec["name"], extra))
    return {"tensors": len(header), "bytes": os.path.getsize(st_path),
            "shapes": {k: header[k]["shape"] for k in sorted(header)}}


def load_model(model_dir, config=None, attn="eager"):
    """hf_glue.load_model with a choice of attention implementation (falcon_alibi needs 'sdpa')."""
    kwargs = {"attn_implementation": attn, "local_files_only": True}
    kwargs["dtype" if hf_glue.tf_major() >= 5 else "torch_dtype"] = torch.float32
    if config is not None:
        kwargs["config"] = config
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, **kwargs).to("cpu")
    model.eval()
    for name, p in model.named_parameters():
        if p.dtype != torch.float32:
            raise GoldenError("reloaded parameter %s has dtype %s, expected float32" % (name, p.dtype))
    impl = getattr(model.config, "_attn_implementation", None)
    if impl is not None and impl != attn:
        raise GoldenError("attention implementation is %r, expected %r" % (impl, attn))
    return model


# ---- forwards ---------------------------------------------------------------------------------------

def greedy_only(runner, prompts, n_new):
    out = []
    for prompt in prompts:
        ids, gaps, _ = runner.greedy(prompt, n_new)
        out.append({"greedy_new_ids": ids, "gaps": gaps})
    return out


def assess(cases):
    degenerate = sum(1 for c in cases if is_degenerate(c["greedy_new_ids"]))
    return degenerate, min(g for c in cases for g in c["gaps"])


def run_cases(runner, prompts, n_new):
    cases = []
    for i, prompt in enumerate(prompts):
        logits = runner.logits(prompt)
        new_ids, gaps, first_last = runner.greedy(prompt, n_new)
        if not torch.equal(first_last, logits[-1]):
            warn("case %d: greedy step 0 logits are not bitwise equal to the prompt forward (max diff %.3g)"
                 % (i, float((first_last - logits[-1]).abs().max())))
        case = {"prompt_ids": list(prompt), "logits": logits.numpy().astype("<f4"), "greedy_new_ids": new_ids,
                "gaps": gaps}
        try:
            case["kv_ids"], case["kv_gaps"] = runner.greedy_kv_cache(prompt, n_new)
        except Exception as e:  # noqa: BLE001 - optional extra, recorded as absent
            warn("case %d: KV-cache greedy failed (%s: %s); recorded as null" % (i, type(e).__name__, e))
            case["kv_ids"], case["kv_gaps"] = None, None
        cases.append(case)
    return cases


# ---- what the loaded modules hold --------------------------------------------------------------------

def _num(v):
    if isinstance(v, torch.Tensor) and v.numel() == 1:
        return float(v.item())
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return None


def measure(model):
    facts = {"norms": {}, "attention": {}, "activations": {}}
    for name, mod in model.named_modules():
        cls = type(mod).__name__
        eps = getattr(mod, "eps", None)
        if eps is None:
            eps = getattr(mod, "variance_epsilon", None)
        if _num(eps) is not None and ("Norm" in cls or "norm" in name):
            facts["norms"].setdefault(cls, {})[re.sub(r"\.\d+\.", ".N.", name)] = _num(eps)
        if "Attention" in cls or name.endswith(("attn", "attention", "self_attention")):
            got = {}
            for attr in ("scaling", "scale_attn", "inv_norm_factor", "norm_factor", "head_dim", "head_size",
                         "rotary_dim", "rotary_ndims", "num_key_value_groups", "num_heads", "num_kv_heads",
                         "is_sliding", "sliding_window", "attn_logit_softcapping", "multi_query", "kv_heads"):
                if hasattr(mod, attr):
                    val = getattr(mod, attr)
                    if _num(val) is not None:
                        got[attr] = _num(val)
                    elif isinstance(val, (bool, str)) or val is None:
                        got[attr] = val
            if got:
                facts["attention"].setdefault(cls, got)
        if type(mod).__module__.startswith(("transformers.activations", "torch.nn.modules.activation")):
            facts["activations"][re.sub(r"\.\d+\.", ".N.", name)] = cls
    rot = [m for m in model.modules() if isinstance(getattr(m, "inv_freq", None), torch.Tensor)]
    if rot:
        inv = rot[0].inv_freq.detach().to(torch.float64).cpu().numpy()
        facts["rotary_module"] = {"class": type(rot[0]).__name__, "inv_freq_len": int(inv.shape[0]),
                                  "rotary_dim": int(2 * inv.shape[0]), "inv_freq": [float(x) for x in inv],
                                  "attention_scaling": _num(getattr(rot[0], "attention_scaling", None))}
    table = sincos_table(model)
    if table is not None:
        facts["sincos_table"] = {"name": table[0], "shape": list(table[1].shape)}
    return facts


def sincos_table(model):
    """GPT-J's embed_positions (a buffer or a plain tensor attribute): (name, tensor) or None."""
    for mname, mod in model.named_modules():
        t = getattr(mod, "embed_positions", None)
        if isinstance(t, torch.Tensor):
            return re.sub(r"\.\d+\.", ".N.", mname) + ".embed_positions", t
    return None


def check_rotary(spec, model, cfg, facts):
    r = spec.get("rotary")
    if not r:
        return None
    dim = r["dim"]
    if r.get("theta") is not None and spec["model_type"] == "gptj":
        theta, rope_type, params = r["theta"], "default", {}
    else:
        theta, rope_type, params = hf_glue.read_rope(cfg)
    want = expected_inv_freq(dim, theta, None)
    if "rotary_module" in facts:
        got = np.array(facts["rotary_module"]["inv_freq"])
        hf_glue.check_inv_freq(got, want, "%s rotary (R=%d)" % (spec["name"], dim))
    elif "sincos_table" in facts:  # GPT-J: rows are cat(sin(p*inv_freq), cos(p*inv_freq))
        table = sincos_table(model)[1].detach().to(torch.float64).cpu().numpy()
        if table.shape[1] != dim:
            raise GoldenError("GPT-J sincos table has %d columns, expected rotary_dim %d" % (table.shape[1], dim))
        got_sin = table[1, :dim // 2]
        if not np.allclose(got_sin, np.sin(want), rtol=0, atol=1e-6):
            raise GoldenError("GPT-J sincos table row 1 %s != sin(inv_freq) %s" % (got_sin, np.sin(want)))
    else:  # the reference re-implementation still checks the rotary numerically
        warn("%s: no rotary module (inv_freq) or sincos table found; inv_freq not checked against HF" % spec["name"])
    return {"rope_theta": float(theta), "rope_type": rope_type,
            "params_read_back": {k: v for k, v in params.items() if isinstance(v, (int, float, str, bool))},
            "rotary_dim": dim, "head_dim": hf_glue.head_dim_of(cfg), "style": r["style"],
            "inv_freq": [float(x) for x in want],
            "inv_freq_meaning": "inv_freq[i] = theta^(-2i/rotary_dim), checked against HF's buffer; style "
                                "'rotate_half' = NeoX halves, 'interleaved' = pairs (2i, 2i+1)"}


def alibi_facts(model, spec):
    nh = model.config.num_attention_heads
    mod = sys.modules[type(model).__module__]
    fn = getattr(mod, "build_alibi_tensor", None)
    facts = {"num_heads": nh}
    if fn is None:
        warn("%s: no build_alibi_tensor in %s" % (spec["name"], mod.__name__))
        return facts
    t = 5
    try:
        alibi = fn(torch.ones(1, t, dtype=torch.long), nh, torch.float32)
    except TypeError:
        alibi = fn(torch.ones(1, t, dtype=torch.long), nh, dtype=torch.float32)
    a = alibi.reshape(nh, -1).detach().to(torch.float64).cpu().numpy()
    slopes = a[:, 1]
    if not np.allclose(a, slopes[:, None] * np.arange(t)[None, :], rtol=1e-6, atol=0):
        raise GoldenError("HF alibi tensor is not slope_h * key_position: %s" % a)
    want = [2.0 ** (-8.0 * (h + 1) / nh) for h in range(nh)] if nh & (nh - 1) == 0 else None
    if want and not np.allclose(slopes, want, rtol=1e-6):
        raise GoldenError("alibi slopes %s != 2^(-8(h+1)/nh) %s" % (slopes, want))
    facts.update({"slopes": [float(s) for s in slopes], "bias": "slope_h * key_position (0-based)",
                  "build_alibi_tensor": "%s.build_alibi_tensor" % mod.__name__})
    return facts


# ---- Gemma-2 checks ----------------------------------------------------------------------------------

def _variant(model_dir, **changes):
    cfg = hf_glue.load_config(model_dir)
    for k, v in changes.items():
        setattr(cfg, k, v)
    return hf_glue.Runner(hf_glue.load_model(model_dir, cfg), dynamic=False)


NO_WINDOW = 1 << 20  # "no window": 5.17's Gemma-2 mask code refuses sliding_window None on sliding layers


def check_gemma2(spec, model_dir, runner, prompts, checks):
    longest = max(prompts, key=len)
    window = spec["config"]["sliding_window"]
    short = [p for p in prompts if len(p) <= window]
    variants = [("attention soft-cap", "logits_max_abs_diff_vs_no_attn_softcap_longest_prompt",
                 dict(attn_logit_softcapping=None), [longest], hf_glue.DIFF_THRESHOLD),
                ("final soft-cap", "logits_max_abs_diff_vs_no_final_softcap_longest_prompt",
                 dict(final_logit_softcapping=None), [longest], hf_glue.DIFF_THRESHOLD),
                ("sliding window", "logits_max_abs_diff_vs_no_window_longest_prompt",
                 dict(sliding_window=NO_WINDOW), [longest], hf_glue.DIFF_THRESHOLD),
                ("sliding window (short prompts)", "logits_max_abs_diff_vs_no_window_prompts_within_window",
                 dict(sliding_window=NO_WINDOW), short, None)]
    for what, key, changes, plist, must_exceed in variants:
        if not plist:
            continue
        try:
            other = _variant(model_dir, **changes)
            d = max(hf_glue.max_abs_diff(runner.logits(p), other.logits(p)) for p in plist)
        except Exception as e:  # noqa: BLE001 - a variant HF cannot build is recorded, not fatal
            warn("gemma2: could not evaluate the %s variant: %s: %s" % (what, type(e).__name__, e))
            checks[key] = "error: %s: %s" % (type(e).__name__, e)
            continue
        checks[key] = d
        if must_exceed is not None and d <= must_exceed:
            raise GoldenError("%s did not change the %d-token logits (max diff %.3g)" % (what, len(longest), d))
        if must_exceed is None and d > hf_glue.SAME_THRESHOLD:
            raise GoldenError("sliding window changed logits of prompts no longer than the window (%.3g)" % d)
    # keys per query from the eager attention probabilities
    _, attentions = runner.logits(longest, output_attentions=True)
    if not attentions or any(a is None for a in attentions):
        raise GoldenError("no attention probabilities returned")
    t = len(longest)
    widths = []
    for layer, a in enumerate(attentions):
        seen = (a[0].detach().to(torch.float32) > 0).any(dim=0)
        width = max(int(seen[q].sum().item()) for q in range(t))
        for q in range(t):
            keys = [k for k in range(t) if bool(seen[q, k])]
            if keys != list(range(max(0, q - width + 1), q + 1)):
                raise GoldenError("layer %d query %d attends to %s, not a contiguous causal window" % (layer, q, keys))
        widths.append(width if width < t else None)
    cfg = hf_glue.load_config(model_dir)
    types = list(getattr(cfg, "layer_types", None) or [])
    for layer, (w, typ) in enumerate(zip(widths, types)):
        if (typ == "sliding_attention") != (w is not None):
            raise GoldenError("layer %d is %s but its measured window is %s" % (layer, typ, w))
    if any(w is not None and w != window for w in widths):
        warn("gemma2: measured windows %s, config sliding_window %d" % (widths, window))
    return {"keys_per_query_including_self": widths, "layer_types": types,
            "meaning": "query at position q attends to keys max(0, q-w+1)..q on a layer with w listed; null = "
                       "full causal attention (keys 0..q). Measured from the eager attention probabilities of the "
                       "%d-token prompt." % t}


# ---- source excerpts ---------------------------------------------------------------------------------

SOURCE_PATTERNS = [
    r"eps", r"scal", r"softcap", r"rotate", r"rotary", r"partial", r"inv_freq", r"repeat_interleave",
    r"\.view\(", r"\.split\(", r"\.chunk\(", r"\[\.\.\., *:", r"topk", r"softmax", r"sigmoid", r"norm_topk",
    r"normalizer", r"alibi", r"parallel", r"residual", r"layernorm|layer_norm|_norm\(", r"\bact\b|act_fn|ACT2FN",
    r"sliding", r"lm_head|embed_out", r"class \w+", r"def \w+", r"tie", r"gate", r"num_kv|multi_query|kv_heads",
    r"sqrt|\*\*\s*-?0\.5", r"baddbmm", r"new_decoder", r"hidden_states \+|\+ residual|residual \+",
]


def source_excerpt(model):
    mod = sys.modules[type(model).__module__]
    try:
        src = inspect.getsource(mod)
    except (OSError, TypeError) as e:
        return "could not read the source of %s: %s" % (mod.__name__, e)
    rx = re.compile("|".join(SOURCE_PATTERNS))
    out = ["# %s (%s)" % (mod.__name__, getattr(mod, "__file__", "?"))]
    for i, line in enumerate(src.splitlines(), 1):
        s = line.strip()
        if s and not s.startswith("#") and rx.search(line) and not s.startswith(("\"\"\"", "Args", "r\"\"\"")):
            out.append("%5d: %s" % (i, line.rstrip()))
    return "\n".join(out)
