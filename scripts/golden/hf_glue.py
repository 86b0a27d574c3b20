"""transformers / torch glue for make_llama_family_goldens.py.

Builds tiny HF configs and checkpoints, reloads them the reference way (float32, eager attention, CPU),
runs the reference forward passes and checks that HF really applied what the fixture is meant to test
(rope scaling, sliding window, tied embeddings, biases). Works with transformers 4.45+ and 5.x.
"""

import inspect
import json
import math
import os

import numpy as np
import torch
import transformers

from golden_util import GoldenError, expected_inv_freq, is_degenerate, prepare_model_dir, read_safetensors_header, warn

DIFF_THRESHOLD = 1e-3      # "logits differ" means max |a-b| above this
SAME_THRESHOLD = 1e-5      # "logits are the same" means max |a-b| at most this


def tf_major():
    try:
        return int(transformers.__version__.split(".")[0])
    except ValueError:
        return 0


def tf_version_tuple():
    parts = []
    for p in transformers.__version__.split(".")[:2]:
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def accepts_kwarg(cls, name):
    try:
        if name in inspect.signature(cls.__init__).parameters:
            return True
    except (TypeError, ValueError):
        pass
    if name in (getattr(cls, "__dataclass_fields__", None) or {}):
        return True
    for klass in cls.__mro__:
        if name in (getattr(klass, "__annotations__", None) or {}):
            return True
    return False


def rope_kwargs(config_cls, theta, scaling):
    """5.x: rope_parameters (theta inside); 4.x: rope_theta + rope_scaling."""
    if accepts_kwarg(config_cls, "rope_parameters"):
        params = dict(scaling) if scaling else {"rope_type": "default"}
        params["rope_theta"] = float(theta)
        return {"rope_parameters": params}
    kw = {"rope_theta": float(theta)}
    if scaling:
        kw["rope_scaling"] = dict(scaling)
    return kw


def read_rope(cfg):
    """(theta, rope_type, params dict) from a config object, 4.x or 5.x."""
    params = getattr(cfg, "rope_parameters", None)
    if isinstance(params, dict) and params:
        d = dict(params)
        theta = d.get("rope_theta", getattr(cfg, "rope_theta", None))
    else:
        scaling = getattr(cfg, "rope_scaling", None)
        d = dict(scaling) if isinstance(scaling, dict) else {}
        theta = getattr(cfg, "rope_theta", None)
    rope_type = d.get("rope_type", d.get("type", None)) or "default"
    if theta is None:
        raise GoldenError("config has no rope_theta (rope params: %r)" % (d,))
    return float(theta), rope_type, d


def check_rope_config(cfg, spec, where):
    theta, rope_type, d = read_rope(cfg)
    if not math.isclose(theta, spec["rope_theta"], rel_tol=1e-9):
        raise GoldenError("%s: rope_theta is %r, expected %r" % (where, theta, spec["rope_theta"]))
    scaling = spec.get("rope_scaling") or {}
    want_type = scaling.get("rope_type", "default")
    if rope_type != want_type:
        raise GoldenError("%s: rope_type is %r, expected %r (rope params %r)" % (where, rope_type, want_type, d))
    for key, value in scaling.items():
        if key == "rope_type":
            continue
        got = d.get(key)
        if got is None or not math.isclose(float(got), float(value), rel_tol=1e-9):
            raise GoldenError("%s: rope param %s is %r, expected %r (rope params %r)" % (where, key, got, value, d))
    return {"rope_theta": theta, "rope_type": rope_type, "params": {k: v for k, v in d.items()}}


def head_dim_of(cfg):
    hd = getattr(cfg, "head_dim", None)
    return int(hd) if hd else cfg.hidden_size // cfg.num_attention_heads


def build_config(spec):
    cls = getattr(transformers, spec["config_class"])
    kwargs = dict(spec["config"])
    kwargs.update(rope_kwargs(cls, spec["rope_theta"], spec.get("rope_scaling")))
    cfg = cls(**kwargs)
    for key, value in spec["config"].items():
        got = getattr(cfg, key, None)
        if got != value:
            raise GoldenError("constructed %s: %s is %r, expected %r" % (spec["config_class"], key, got, value))
    check_rope_config(cfg, spec, "constructed config")
    return cfg


def reinit_weights(model, spec, seed, gain_mult):
    """Overwrites every parameter with fixed-seed values of meaningful size."""
    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed)
    gain = spec.get("gain", 1.2) * gain_mult
    lm_head_gain = 3.0 * gain_mult
    embed_std = spec.get("embed_std", 1.0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(tuple(p.shape), generator=gen, dtype=torch.float32)
            if name.endswith("embed_tokens.weight"):
                v = r * embed_std
            elif name.endswith(".bias"):
                v = r * 0.1
            elif p.dim() == 1:
                v = 1.0 + 0.1 * r
            elif p.dim() == 2:
                g = lm_head_gain if name.endswith("lm_head.weight") else gain
                v = r * (g / math.sqrt(p.shape[1]))
            else:
                raise GoldenError("unexpected parameter %s with shape %s" % (name, tuple(p.shape)))
            p.copy_(v.to(p.dtype))


def outputs_tied(model):
    out_w = model.get_output_embeddings().weight
    in_w = model.get_input_embeddings().weight
    return out_w.data_ptr() == in_w.data_ptr() or torch.equal(out_w, in_w)


def build_and_save(spec, seed, gain_mult, model_dir):
    torch.manual_seed(seed)
    cfg = build_config(spec)
    model_cls = getattr(transformers, spec["arch"])
    model = model_cls(cfg)
    model.eval()
    reinit_weights(model, spec, seed, gain_mult)
    if spec["config"]["tie_word_embeddings"]:
        if not outputs_tied(model):
            model.tie_weights()
        if not outputs_tied(model):
            raise GoldenError("tie_word_embeddings is true but lm_head is not tied to embed_tokens")
    model = model.to(torch.bfloat16)
    saved = {k: v.detach().clone() for k, v in model.state_dict().items()}
    prepare_model_dir(model_dir)
    try:
        model.save_pretrained(model_dir, safe_serialization=True)
    except TypeError:  # a transformers that dropped the argument always writes safetensors
        model.save_pretrained(model_dir)
    del model
    return saved


def fix_and_check_saved_files(spec, model_dir):
    """Checks config.json / model.safetensors as written; returns facts for golden.json."""
    cfg_path = os.path.join(model_dir, "config.json")
    st_path = os.path.join(model_dir, "model.safetensors")
    for p in (cfg_path, st_path):
        if not os.path.isfile(p):
            raise GoldenError("save_pretrained did not write %s (files: %s)" % (p, sorted(os.listdir(model_dir))))
    with open(cfg_path, encoding="utf-8") as f:
        cfg_json = json.load(f)
    dtype_keys = [k for k in ("torch_dtype", "dtype") if k in cfg_json]
    if not dtype_keys:
        cfg_json["torch_dtype"] = "bfloat16"
        with open(cfg_path, "w", encoding="utf-8") as f:
            json.dump(cfg_json, f, indent=2, sort_keys=True)
            f.write("\n")
        warn("%s: config.json had no torch_dtype/dtype; wrote torch_dtype=bfloat16" % spec["name"])
    else:
        for k in dtype_keys:
            if cfg_json[k] != "bfloat16":
                raise GoldenError("config.json %s is %r, expected 'bfloat16'" % (k, cfg_json[k]))
    if cfg_json.get("architectures") != [spec["arch"]]:
        raise GoldenError("config.json architectures is %r, expected [%r]" % (cfg_json.get("architectures"),
                                                                            spec["arch"]))
    header = read_safetensors_header(st_path)
    bad = sorted(k for k, v in header.items() if v.get("dtype") != "BF16")
    if bad:
        raise GoldenError("model.safetensors has non-BF16 tensors: %s" % bad[:8])
    names = set(header)
    tied = spec["config"]["tie_word_embeddings"]
    if tied and "lm_head.weight" in names:
        raise GoldenError("tied model but model.safetensors has lm_head.weight")
    if not tied and "lm_head.weight" not in names:
        raise GoldenError("untied model but model.safetensors lacks lm_head.weight")
    biases = sorted(n for n in names if n.endswith(".bias"))
    if spec.get("expect_qkv_bias"):
        for layer in range(spec["config"]["num_hidden_layers"]):
            for proj in ("q_proj", "k_proj", "v_proj"):
                n = "model.layers.%d.self_attn.%s.bias" % (layer, proj)
                if n not in names:
                    raise GoldenError("model.safetensors lacks %s" % n)
        if any("o_proj" in n or "mlp" in n for n in biases):
            raise GoldenError("unexpected biases: %s" % biases)
    elif biases:
        raise GoldenError("unexpected biases in model.safetensors: %s" % biases)
    expected_files = {"config.json", "generation_config.json", "model.safetensors"}
    extra = sorted(set(os.listdir(model_dir)) - expected_files)
    if extra:
        warn("%s: save_pretrained also wrote %s (kept)" % (spec["name"], extra))
    return {"tensors": len(names), "bytes": os.path.getsize(st_path)}


def load_model(model_dir, config=None):
    kwargs = {"attn_implementation": "eager", "local_files_only": True}
    kwargs["dtype" if tf_major() >= 5 else "torch_dtype"] = torch.float32
    if config is not None:
        kwargs["config"] = config
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, **kwargs)
    model = model.to("cpu")
    model.eval()
    for name, p in model.named_parameters():
        if p.dtype != torch.float32:
            raise GoldenError("reloaded parameter %s has dtype %s, expected float32" % (name, p.dtype))
    impl = getattr(model.config, "_attn_implementation", None)
    if impl is not None and impl != "eager":
        raise GoldenError("attention implementation is %r, expected 'eager'" % (impl,))
    return model


def load_config(model_dir):
    return transformers.AutoConfig.from_pretrained(model_dir, local_files_only=True)


def check_reloaded_weights(model, saved):
    missing = []
    compared = 0
    for name, p in model.named_parameters():
        ref = saved.get(name)
        if ref is None:
            missing.append(name)
            continue
        if tuple(ref.shape) != tuple(p.shape) or not torch.equal(p.detach(), ref.to(torch.float32)):
            raise GoldenError("reloaded %s differs from the bf16 weights that were saved" % name)
        compared += 1
    if missing or compared == 0:
        raise GoldenError("reloaded parameters not found among the saved ones: %s" % missing[:8])
    return compared


def rotary_modules(model, used_only=False):
    """Modules holding an inv_freq buffer. used_only: the model-level one when there is one (some 4.x
    versions also keep unused per-layer copies that never see a dynamic update)."""
    if used_only:
        top = getattr(getattr(model, "model", None), "rotary_emb", None)
        if isinstance(getattr(top, "inv_freq", None), torch.Tensor):
            return [top]
    return [m for m in model.modules() if isinstance(getattr(m, "inv_freq", None), torch.Tensor)]


def reset_rotary_state(model):
    """Puts dynamic-rope modules back to their just-loaded state; returns how many were reset."""
    n = 0
    for m in rotary_modules(model):
        orig = getattr(m, "original_inv_freq", None)
        if isinstance(orig, torch.Tensor) and hasattr(m, "max_seq_len_cached") and hasattr(m, "original_max_seq_len"):
            m.inv_freq = orig.detach().clone()
            m.max_seq_len_cached = m.original_max_seq_len
            n += 1
    return n


def current_inv_freq(model):
    mods = rotary_modules(model, used_only=True)
    if not mods:
        raise GoldenError("no rotary embedding module (no inv_freq buffer) found")
    first = mods[0].inv_freq.detach().to(torch.float64).cpu().numpy()
    for m in mods[1:]:
        other = m.inv_freq.detach().to(torch.float64).cpu().numpy()
        if other.shape != first.shape or not np.array_equal(other, first):
            raise GoldenError("rotary modules disagree on inv_freq")
    return first


def check_inv_freq(got, want, what):
    if got.shape != want.shape or not np.allclose(got, want, rtol=2e-5, atol=0.0):
        raise GoldenError("%s: HF inv_freq %s != expected %s" % (what, np.array2string(got, precision=8),
                                                                np.array2string(want, precision=8)))


class Runner:
    """Forward passes with the per-model conventions (dynamic-rope reset)."""

    def __init__(self, model, dynamic):
        self.model = model
        self.dynamic = dynamic

    def logits(self, ids, output_attentions=False):
        if self.dynamic and reset_rotary_state(self.model) == 0:
            raise GoldenError("dynamic rope: no rotary module with original_inv_freq/max_seq_len_cached to reset "
                              "(transformers %s too old?)" % transformers.__version__)
        x = torch.tensor([list(ids)], dtype=torch.long)
        if output_attentions:
            out = self.model(input_ids=x, use_cache=False, output_attentions=True)
            return out.logits[0].detach().to(torch.float32).cpu(), out.attentions
        out = self.model(input_ids=x, use_cache=False)
        return out.logits[0].detach().to(torch.float32).cpu()

    def greedy(self, prompt, n):
        seq = list(prompt)
        new_ids, gaps = [], []
        first_last = None
        for _ in range(n):
            last = self.logits(seq)[-1]
            if first_last is None:
                first_last = last
            nxt, gap = pick(last)
            new_ids.append(nxt)
            gaps.append(gap)
            seq.append(nxt)
        return new_ids, gaps, first_last

    def greedy_kv_cache(self, prompt, n):
        if self.dynamic:
            reset_rotary_state(self.model)
        out = self.model(input_ids=torch.tensor([list(prompt)], dtype=torch.long), use_cache=True)
        new_ids, gaps = [], []
        for step in range(n):
            nxt, gap = pick(out.logits[0, -1].detach().to(torch.float32).cpu())
            new_ids.append(nxt)
            gaps.append(gap)
            if step + 1 < n:
                out = self.model(input_ids=torch.tensor([[nxt]], dtype=torch.long),
                                 past_key_values=out.past_key_values, use_cache=True)
        return new_ids, gaps


def pick(last_logits):
    if not bool(torch.isfinite(last_logits).all()):
        raise GoldenError("non-finite logits")
    nxt = int(torch.argmax(last_logits).item())
    top2 = torch.topk(last_logits, 2).values
    return nxt, float(top2[0].item() - top2[1].item())


def run_cases(runner, prompts, n_new):
    cases = []
    for i, prompt in enumerate(prompts):
        logits = runner.logits(prompt)
        inv_freq = current_inv_freq(runner.model)
        new_ids, gaps, first_last = runner.greedy(prompt, n_new)
        if not torch.equal(first_last, logits[-1]):
            warn("case %d: greedy step 0 logits are not bitwise equal to the prompt forward (max diff %.3g)"
                 % (i, float((first_last - logits[-1]).abs().max())))
        case = {
            "prompt_ids": list(prompt),
            "logits": logits.numpy().astype("<f4"),
            "rope_inv_freq": inv_freq,
            "greedy_new_ids": new_ids,
            "gaps": gaps,
        }
        try:
            kv_ids, kv_gaps = runner.greedy_kv_cache(prompt, n_new)
            case["kv_ids"], case["kv_gaps"] = kv_ids, kv_gaps
        except Exception as e:  # noqa: BLE001 - optional extra, recorded as absent
            warn("case %d: KV-cache greedy failed (%s: %s); recorded as null" % (i, type(e).__name__, e))
            case["kv_ids"], case["kv_gaps"] = None, None
        cases.append(case)
    return cases


def assess(cases, dynamic):
    degenerate = sum(1 for c in cases if is_degenerate(c["greedy_new_ids"]))
    gaps = [g for c in cases for g in c["gaps"]]
    if dynamic:
        gaps += [g for c in cases if c["kv_gaps"] for g in c["kv_gaps"]]
    return degenerate, min(gaps)


def max_abs_diff(a, b):
    return float((a - b).abs().max().item())


def variant_config(model_dir, spec, kind):
    """The saved config with rope scaling removed ('no_scaling') or the window removed ('no_window')."""
    cfg = load_config(model_dir)
    if kind == "no_scaling":
        params = getattr(cfg, "rope_parameters", None)
        if isinstance(params, dict) and params:
            cfg.rope_parameters = {"rope_type": "default", "rope_theta": float(spec["rope_theta"])}
        else:
            cfg.rope_scaling = None
        _, rope_type, _ = read_rope(cfg)
        if rope_type != "default":
            raise GoldenError("could not remove rope scaling from the config (still %r)" % rope_type)
    elif kind == "no_window":
        cfg.sliding_window = None
        if getattr(cfg, "layer_types", None):
            cfg.layer_types = ["full_attention"] * len(cfg.layer_types)
    else:
        raise ValueError(kind)
    return cfg


def check_scaling_effect(spec, model_dir, runner, prompts, facts):
    head_dim = spec["head_dim"]
    mpe = spec["config"]["max_position_embeddings"]
    plain = load_model(model_dir, variant_config(model_dir, spec, "no_scaling"))
    check_inv_freq(current_inv_freq(plain), expected_inv_freq(head_dim, spec["rope_theta"], None),
                   "unscaled variant")
    plain_runner = Runner(plain, dynamic=False)
    longest = max(prompts, key=len)
    diff_long = max_abs_diff(runner.logits(longest), plain_runner.logits(longest))
    facts["logits_max_abs_diff_vs_unscaled_rope_longest_prompt"] = diff_long
    if diff_long <= DIFF_THRESHOLD:
        raise GoldenError("rope scaling did not change the logits of the %d-token prompt (max diff %.3g)"
                          % (len(longest), diff_long))
    if spec.get("dynamic"):
        short = [p for p in prompts if len(p) <= mpe]
        diff_short = max(max_abs_diff(runner.logits(p), plain_runner.logits(p)) for p in short)
        facts["logits_max_abs_diff_vs_unscaled_rope_prompts_within_max_position_embeddings"] = diff_short
        if diff_short > SAME_THRESHOLD:
            raise GoldenError("dynamic rope changed logits of prompts <= max_position_embeddings (%.3g)"
                              % diff_short)
        # inv_freq that HF used for a long and a short forward
        for prompt in (longest, short[-1]):
            runner.logits(prompt)
            check_inv_freq(current_inv_freq(runner.model),
                           expected_inv_freq(head_dim, spec["rope_theta"], spec["rope_scaling"],
                                             seq_len=len(prompt), max_position_embeddings=mpe),
                           "dynamic rope after a %d-token forward" % len(prompt))
    del plain


def check_sliding_window(spec, model_dir, runner, prompts, facts):
    window = spec["config"]["sliding_window"]
    nowin = Runner(load_model(model_dir, variant_config(model_dir, spec, "no_window")), dynamic=False)
    longest = max(prompts, key=len)
    diff_long = max_abs_diff(runner.logits(longest), nowin.logits(longest))
    facts["logits_max_abs_diff_vs_no_window_longest_prompt"] = diff_long
    if diff_long <= DIFF_THRESHOLD:
        raise GoldenError("sliding window did not change the logits of the %d-token prompt (max diff %.3g); "
                          "HF did not apply it" % (len(longest), diff_long))
    short = [p for p in prompts if len(p) <= window]
    if short:
        diff_short = max(max_abs_diff(runner.logits(p), nowin.logits(p)) for p in short)
        facts["logits_max_abs_diff_vs_no_window_prompts_within_window"] = diff_short
        if diff_short > SAME_THRESHOLD:
            raise GoldenError("sliding window changed logits of prompts no longer than the window (%.3g)"
                              % diff_short)
    # How many keys a query may see, from the eager attention probabilities.
    try:
        _, attentions = runner.logits(longest, output_attentions=True)
    except Exception as e:  # noqa: BLE001
        attentions = None
        warn("output_attentions failed (%s: %s)" % (type(e).__name__, e))
    if not attentions or any(a is None for a in attentions):
        warn("could not read attention probabilities; sliding_window_effective left null")
        facts["sliding_window_effective"] = None
        return
    per_layer = []
    t = len(longest)
    for layer, a in enumerate(attentions):
        probs = a[0].detach().to(torch.float32)  # [heads, T, T]
        seen = (probs > 0).any(dim=0)            # [T, T]: key visible to some head
        counts = [int(seen[q].sum().item()) for q in range(t)]
        width = max(counts)
        for q in range(t):
            keys = [k for k in range(t) if bool(seen[q, k])]
            want = list(range(max(0, q - width + 1), q + 1))
            if keys != want:
                raise GoldenError("layer %d query %d attends to %s, not the contiguous window %s"
                                  % (layer, q, keys, want))
        per_layer.append(width)
    facts["sliding_window_effective"] = {
        "keys_per_query_including_self": per_layer,
        "meaning": "query at position q attends to keys max(0, q-w+1)..q, w as listed per layer",
    }
    if any(w >= t for w in per_layer):
        raise GoldenError("attention probabilities show no window (w=%s for T=%d)" % (per_layer, t))
    if any(w != window for w in per_layer):
        warn("%s: HF's effective window is %s keys, config sliding_window is %d"
             % (spec["name"], per_layer, window))
