"""An independent float32 re-implementation of the architectures in arch_specs.py, written from their `math`
descriptions and reading only what llmrt reads: config.json and model.safetensors of the saved directory.

make_arch_goldens.py compares its logits with HF's (checks.reference_reimpl in golden.json): a match proves
that the words in `math` (tensor layouts, residual wiring, norms, rotary, scaling, caps, routing) are what
HF computes. numpy only (no torch, no transformers, no safetensors package), so it also runs on machines
without torch:  python3 scripts/golden/arch_reference.py tests/data/golden/<model>  compares a fixture.
"""

import json
import math
import os
import struct
import sys

import numpy as np

_MISSING = object()
F32 = np.float32


def load_safetensors(path):
    """{name: float32 array}; BF16/F16/F32 tensors."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n).decode("utf-8"))
        data = f.read()
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        a, b = meta["data_offsets"]
        raw = data[a:b]
        if meta["dtype"] == "BF16":
            arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(F32)
        elif meta["dtype"] == "F16":
            arr = np.frombuffer(raw, dtype="<f2").astype(F32)
        elif meta["dtype"] == "F32":
            arr = np.frombuffer(raw, dtype="<f4").astype(F32)
        else:
            raise ValueError("%s: dtype %s not handled" % (name, meta["dtype"]))
        out[name] = arr.reshape(meta["shape"])
    return out


def lin(x, w, b=None):
    y = x @ w.T
    return y if b is None else y + b


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + F32(eps)) * w + b


def rms_norm(x, w, eps, offset=0.0):
    x = x / np.sqrt((x * x).mean(-1, keepdims=True) + F32(eps))
    return x * (w + F32(offset)) if offset else x * w


_erf = np.vectorize(math.erf, otypes=[np.float64])


def act(name, x):
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_python_tanh"):
        return F32(0.5) * x * (F32(1.0) + np.tanh(F32(math.sqrt(2.0 / math.pi)) * (x + F32(0.044715) * x ** 3)))
    if name == "bloom_gelu":
        return x * F32(0.5) * (F32(1.0) + np.tanh(F32(0.79788456) * x * (F32(1) + F32(0.044715) * x * x)))
    if name == "gelu":
        return (0.5 * x.astype(np.float64) * (1.0 + _erf(x.astype(np.float64) / math.sqrt(2.0)))).astype(F32)
    if name == "silu":
        return x / (F32(1.0) + np.exp(-x))
    if name == "relu":
        return np.maximum(x, F32(0))
    raise ValueError("activation %r not implemented" % name)


def softmax(s):
    s = s - s.max(-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(-1, keepdims=True)


def sigmoid(x):
    return F32(1.0) / (F32(1.0) + np.exp(-x))


def inv_freq(rot_dim, theta):
    return (F32(1.0) / (F32(theta) ** (np.arange(0, rot_dim, 2).astype(F32) / F32(rot_dim)))).astype(F32)


def rope(x, rot_dim, theta, style):
    """x [n, T, hd]; rotates the first rot_dim dims of each head at positions 0..T-1."""
    t = x.shape[-2]
    freqs = np.arange(t, dtype=F32)[:, None] * inv_freq(rot_dim, theta)[None, :]  # [T, R/2]
    xr, xp = x[..., :rot_dim], x[..., rot_dim:]
    if style == "rotate_half":
        emb = np.concatenate((freqs, freqs), axis=-1)
        cos, sin = np.cos(emb), np.sin(emb)
        half = rot_dim // 2
        rot = np.concatenate((-xr[..., half:], xr[..., :half]), axis=-1)
    elif style == "interleaved":
        cos = np.repeat(np.cos(freqs), 2, axis=-1)
        sin = np.repeat(np.sin(freqs), 2, axis=-1)
        rot = np.stack((-xr[..., 1::2], xr[..., 0::2]), axis=-1).reshape(xr.shape)
    else:
        raise ValueError(style)
    return np.concatenate((xr * cos + rot * sin, xp), axis=-1)


def alibi_slopes(n):
    c = 2 ** int(math.floor(math.log2(n)))
    base = F32(2 ** (-(2 ** -(math.log2(c) - 3))))
    slopes = [base ** F32(i) for i in range(1, 1 + c)]
    if c != n:
        extra = F32(2 ** (-(2 ** -(math.log2(2 * c) - 3))))
        slopes += [extra ** F32(i) for i in range(1, 1 + 2 * min(c, n - c), 2)]
    return np.array(slopes, dtype=F32)


def attention(q, k, v, scale, softcap=None, window=None, alibi_mode=None):
    """q [nh, T, hd], k/v [nkv, T, hd] -> [T, nh*hd]. Query head j uses kv head j // (nh/nkv)."""
    nh, t, hd = q.shape
    rep = nh // k.shape[0]
    k = np.repeat(k, rep, axis=0)
    v = np.repeat(v, rep, axis=0)
    s = q @ k.transpose(0, 2, 1)
    scale = F32(scale)
    if alibi_mode:
        bias = alibi_slopes(nh)[:, None, None] * np.arange(t, dtype=F32)[None, None, :]
        s = (s + bias) * scale if alibi_mode == "falcon" else s * scale + bias
    else:
        s = s * scale
    if softcap:
        s = np.tanh(s / F32(softcap)) * F32(softcap)
    i = np.arange(t)[:, None]
    j = np.arange(t)[None, :]
    allowed = j <= i
    if window:
        allowed = allowed & ((i - j) < window)
    s = np.where(allowed[None], s, F32(-np.inf))
    p = softmax(s)
    return (p @ v).transpose(1, 0, 2).reshape(t, nh * hd)


def heads(x, n, hd):
    """[T, n*hd] -> [n, T, hd]"""
    return x.reshape(x.shape[0], n, hd).transpose(1, 0, 2)


class Reference:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
            self.cfg = json.load(f)
        self.w = load_safetensors(os.path.join(model_dir, "model.safetensors"))
        self.mt = self.cfg["model_type"]
        self.used = set()

    # ---- config and weights ----
    def c(self, *names, default=_MISSING):
        rp = self.cfg.get("rope_parameters") or {}
        for src in (self.cfg, rp):
            for n in names:
                if src.get(n) is not None:
                    return src[n]
        if default is _MISSING:
            raise KeyError("config.json has none of %s" % (names,))
        return default

    def theta(self):
        return float(self.c("rope_theta", "rotary_emb_base", default=10000.0))

    def W(self, name):
        self.used.add(name)
        return self.w[name]

    def B(self, name):
        if name in self.w:
            self.used.add(name)
            return self.w[name]
        return None

    def linear(self, x, prefix):
        return lin(x, self.W(prefix + ".weight"), self.B(prefix + ".bias"))

    def ln(self, x, prefix, eps):
        return layer_norm(x, self.W(prefix + ".weight"), self.W(prefix + ".bias"), eps)

    def head(self, h, *candidates):
        for name in candidates:
            if name in self.w:
                return lin(h, self.W(name), self.B(name.replace(".weight", ".bias")))
        raise KeyError("no output head among %s" % (candidates,))

    def unused(self):
        return sorted(set(self.w) - self.used)

    # ---- families ----
    def forward(self, ids):
        ids = np.array(list(ids), dtype=np.int64)
        fn = {"gpt2": self._gpt2, "gpt_bigcode": self._gpt2, "gptj": self._gptj, "gpt_neox": self._neox,
              "falcon": self._falcon, "bloom": self._bloom}.get(self.mt, self._llama_like)
        return fn(ids).astype(F32)

    def _gpt2(self, ids):
        hid = self.c("n_embd", "hidden_size")
        nh = self.c("n_head", "num_attention_heads")
        hd = hid // nh
        eps = self.c("layer_norm_epsilon")
        conv = self.mt == "gpt2"
        t = ids.shape[0]
        x = self.W("transformer.wte.weight")[ids] + self.W("transformer.wpe.weight")[np.arange(t)]
        proj = (lambda h, p: h @ self.W(p + ".weight") + self.W(p + ".bias")) if conv else self.linear
        for layer in range(self.c("n_layer", "num_hidden_layers")):
            p = "transformer.h.%d." % layer
            a = self.ln(x, p + "ln_1", eps)
            qkv = proj(a, p + "attn.c_attn")
            if conv:
                q, k, v = np.split(qkv, 3, axis=-1)
                k, v = heads(k, nh, hd), heads(v, nh, hd)
            elif self.c("multi_query"):
                q, k, v = qkv[:, :hid], qkv[:, hid:hid + hd], qkv[:, hid + hd:]
                k, v = heads(k, 1, hd), heads(v, 1, hd)
            else:
                raise NotImplementedError("gpt_bigcode without multi_query")
            scale = hd ** -0.5 if self.c("scale_attn_weights", default=True) else 1.0
            if self.c("scale_attn_by_inverse_layer_idx", default=False):
                scale /= float(layer + 1)
            o = attention(heads(q, nh, hd), k, v, scale)
            x = x + proj(o, p + "attn.c_proj")
            m = self.ln(x, p + "ln_2", eps)
            m = proj(act(self.c("activation_function"), proj(m, p + "mlp.c_fc")), p + "mlp.c_proj")
            x = x + m
        x = self.ln(x, "transformer.ln_f", eps)
        return self.head(x, "lm_head.weight", "transformer.wte.weight")

    def _gptj(self, ids):
        hid, nh = self.c("n_embd"), self.c("n_head")
        hd = hid // nh
        eps = self.c("layer_norm_epsilon")
        rot = self.c("rotary_dim")
        x = self.W("transformer.wte.weight")[ids]
        for layer in range(self.c("n_layer")):
            p = "transformer.h.%d." % layer
            r = self.ln(x, p + "ln_1", eps)
            q = rope(heads(self.linear(r, p + "attn.q_proj"), nh, hd), rot, 10000.0, "interleaved")
            k = rope(heads(self.linear(r, p + "attn.k_proj"), nh, hd), rot, 10000.0, "interleaved")
            v = heads(self.linear(r, p + "attn.v_proj"), nh, hd)
            o = self.linear(attention(q, k, v, 1.0 / math.sqrt(hd)), p + "attn.out_proj")
            m = self.linear(act(self.c("activation_function"), self.linear(r, p + "mlp.fc_in")), p + "mlp.fc_out")
            x = x + o + m
        x = self.ln(x, "transformer.ln_f", eps)
        return self.head(x, "lm_head.weight", "transformer.wte.weight")

    def _neox(self, ids):
        hid, nh = self.c("hidden_size"), self.c("num_attention_heads")
        hd = hid // nh
        eps = self.c("layer_norm_eps")
        rot = int(hd * float(self.c("partial_rotary_factor", "rotary_pct", default=1.0)))
        theta = self.theta()
        x = self.W("gpt_neox.embed_in.weight")[ids]
        t = ids.shape[0]
        for layer in range(self.c("num_hidden_layers")):
            p = "gpt_neox.layers.%d." % layer
            a = self.ln(x, p + "input_layernorm", eps)
            qkv = self.linear(a, p + "attention.query_key_value").reshape(t, nh, 3 * hd).transpose(1, 0, 2)
            q, k, v = qkv[..., :hd], qkv[..., hd:2 * hd], qkv[..., 2 * hd:]
            q, k = rope(q, rot, theta, "rotate_half"), rope(k, rot, theta, "rotate_half")
            o = self.linear(attention(q, k, v, hd ** -0.5), p + "attention.dense")
            mlp = lambda h: self.linear(act(self.c("hidden_act"), self.linear(h, p + "mlp.dense_h_to_4h")),  # noqa: E731
                                        p + "mlp.dense_4h_to_h")
            if self.c("use_parallel_residual"):
                x = x + o + mlp(self.ln(x, p + "post_attention_layernorm", eps))
            else:
                x = x + o
                x = x + mlp(self.ln(x, p + "post_attention_layernorm", eps))
        x = self.ln(x, "gpt_neox.final_layer_norm", eps)
        return self.head(x, "embed_out.weight", "gpt_neox.embed_in.weight")

    def _falcon(self, ids):
        hid, nh = self.c("hidden_size"), self.c("num_attention_heads")
        hd = hid // nh
        eps = self.c("layer_norm_epsilon")
        new_dec = bool(self.c("new_decoder_architecture", default=False))
        parallel = bool(self.c("parallel_attn", default=True))
        use_alibi = bool(self.c("alibi", default=False))
        n_ln = self.c("num_ln_in_parallel_attn", default=None) or 2
        theta = self.theta()
        t = ids.shape[0]
        x = self.W("transformer.word_embeddings.weight")[ids]
        for layer in range(self.c("num_hidden_layers")):
            p = "transformer.h.%d." % layer
            if new_dec and n_ln == 2:
                a_in = self.ln(x, p + "ln_attn", eps)
                m_in = self.ln(x, p + "ln_mlp", eps)
            else:
                a_in = self.ln(x, p + "input_layernorm", eps)
                m_in = None
            qkv = self.linear(a_in, p + "self_attention.query_key_value")
            if new_dec:
                nkv = self.c("num_kv_heads")
                g = qkv.reshape(t, nkv, nh // nkv + 2, hd)
                q = g[:, :, :-2].reshape(t, nh, hd).transpose(1, 0, 2)
                k = g[:, :, -2].transpose(1, 0, 2)
                v = g[:, :, -1].transpose(1, 0, 2)
            elif self.c("multi_query"):
                g = qkv.reshape(t, nh + 2, hd).transpose(1, 0, 2)
                q, k, v = g[:nh], g[nh:nh + 1], g[nh + 1:]
            else:
                g = qkv.reshape(t, nh, 3, hd)
                q, k, v = (g[:, :, i].transpose(1, 0, 2) for i in range(3))
            if use_alibi:
                o = attention(q, k, v, 1.0 / math.sqrt(hd), alibi_mode="falcon")
            else:
                q, k = rope(q, hd, theta, "rotate_half"), rope(k, hd, theta, "rotate_half")
                o = attention(q, k, v, 1.0 / math.sqrt(hd))
            o = self.linear(o, p + "self_attention.dense")
            residual = x
            if not new_dec:
                if parallel:
                    m_in = a_in
                else:
                    residual = x + o
                    m_in = self.ln(residual, p + "post_attention_layernorm", eps)
            if new_dec and parallel and n_ln == 1:
                m_in = a_in
            m = self.linear(act(self.c("activation", default="gelu"), self.linear(m_in, p + "mlp.dense_h_to_4h")),
                            p + "mlp.dense_4h_to_h")
            if new_dec or parallel:
                m = m + o
            x = residual + m
        x = self.ln(x, "transformer.ln_f", eps)
        return self.head(x, "lm_head.weight", "transformer.word_embeddings.weight")

    def _bloom(self, ids):
        hid, nh = self.c("hidden_size", "n_embed"), self.c("n_head", "num_attention_heads")
        hd = hid // nh
        eps = self.c("layer_norm_epsilon")
        post = bool(self.c("apply_residual_connection_post_layernorm", default=False))
        t = ids.shape[0]
        x = self.ln(self.W("transformer.word_embeddings.weight")[ids], "transformer.word_embeddings_layernorm", eps)
        for layer in range(self.c("n_layer", "num_hidden_layers")):
            p = "transformer.h.%d." % layer
            r = self.ln(x, p + "input_layernorm", eps)
            res = r if post else x
            g = self.linear(r, p + "self_attention.query_key_value").reshape(t, nh, 3, hd)
            q, k, v = (g[:, :, i].transpose(1, 0, 2) for i in range(3))
            o = self.linear(attention(q, k, v, 1.0 / math.sqrt(hd), alibi_mode="bloom"), p + "self_attention.dense")
            a = res + o
            r2 = self.ln(a, p + "post_attention_layernorm", eps)
            res = r2 if post else a
            m = self.linear(act("bloom_gelu", self.linear(r2, p + "mlp.dense_h_to_4h")), p + "mlp.dense_4h_to_h")
            x = res + m
        x = self.ln(x, "transformer.ln_f", eps)
        return self.head(x, "lm_head.weight", "transformer.word_embeddings.weight")

    # Llama-shaped: phi3, gemma2, glm, mixtral, qwen2_moe
    def _llama_like(self, ids):
        mt = self.mt
        hid, nh = self.c("hidden_size"), self.c("num_attention_heads")
        nkv = self.c("num_key_value_heads", default=nh)
        hd = self.c("head_dim", default=None) or hid // nh
        eps = self.c("rms_norm_eps")
        gemma = mt == "gemma2"
        off = 1.0 if gemma else 0.0
        rot = int(hd * float(self.c("partial_rotary_factor", default=1.0)))
        style = "interleaved" if mt == "glm" else "rotate_half"
        theta = self.theta()
        scale = float(self.c("query_pre_attn_scalar")) ** -0.5 if gemma else hd ** -0.5
        softcap = self.c("attn_logit_softcapping", default=None) if gemma else None
        layer_types = self.c("layer_types", default=None)
        x = self.W("model.embed_tokens.weight")[ids]
        if gemma:
            x = x * F32(hid ** 0.5)
        for layer in range(self.c("num_hidden_layers")):
            p = "model.layers.%d." % layer
            a = rms_norm(x, self.W(p + "input_layernorm.weight"), eps, off)
            if p + "self_attn.qkv_proj.weight" in self.w:
                qkv = self.linear(a, p + "self_attn.qkv_proj")
                q, k, v = np.split(qkv, [nh * hd, nh * hd + nkv * hd], axis=-1)
            else:
                q, k, v = (self.linear(a, p + "self_attn.%s_proj" % n) for n in "qkv")
            q, k, v = heads(q, nh, hd), heads(k, nkv, hd), heads(v, nkv, hd)
            q, k = rope(q, rot, theta, style), rope(k, rot, theta, style)
            window = None
            if gemma:
                sliding = (layer_types[layer] == "sliding_attention") if layer_types else (layer % 2 == 0)
                window = self.c("sliding_window") if sliding else None
            elif mt in ("mixtral", "phi3"):
                window = self.c("sliding_window", default=None)
            elif mt == "qwen2_moe" and self.c("use_sliding_window", default=False):
                raise NotImplementedError("qwen2_moe sliding window")
            o = self.linear(attention(q, k, v, scale, softcap=softcap, window=window), p + "self_attn.o_proj")
            if gemma:
                x = x + rms_norm(o, self.W(p + "post_attention_layernorm.weight"), eps, off)
                m = rms_norm(x, self.W(p + "pre_feedforward_layernorm.weight"), eps, off)
                x = x + rms_norm(self._mlp(m, p), self.W(p + "post_feedforward_layernorm.weight"), eps, off)
            else:
                x = x + o
                x = x + self._mlp(rms_norm(x, self.W(p + "post_attention_layernorm.weight"), eps), p, layer)
        x = rms_norm(x, self.W("model.norm.weight"), eps, off)
        logits = self.head(x, "lm_head.weight", "model.embed_tokens.weight")
        if gemma and self.c("final_logit_softcapping", default=None):
            cap = float(self.c("final_logit_softcapping"))
            logits = np.tanh(logits / F32(cap)) * F32(cap)
        return logits

    def _gated(self, x, p, act_name):
        if p + "gate_up_proj.weight" in self.w:
            gate, up = np.split(self.linear(x, p + "gate_up_proj"), 2, axis=-1)
        else:
            gate, up = self.linear(x, p + "gate_proj"), self.linear(x, p + "up_proj")
        return self.linear(act(act_name, gate) * up, p + "down_proj")

    def _mlp(self, x, p, layer=0):
        mt = self.mt
        if mt == "gemma2":
            return self._gated(x, p + "mlp.", self.c("hidden_activation", "hidden_act"))
        if mt == "mixtral":
            return self._moe(x, p + "block_sparse_moe.", "w1", "w3", "w2", renorm=True)
        if mt == "qwen2_moe":
            sparse = (layer not in (self.c("mlp_only_layers", default=[]) or [])
                      and self.c("num_experts") > 0 and (layer + 1) % self.c("decoder_sparse_step", default=1) == 0)
            if not sparse:
                return self._gated(x, p + "mlp.", self.c("hidden_act"))
            out = self._moe(x, p + "mlp.", "gate_proj", "up_proj", "down_proj",
                            renorm=bool(self.c("norm_topk_prob", default=False)))
            shared = self._gated(x, p + "mlp.shared_expert.", self.c("hidden_act"))
            return out + sigmoid(self.linear(x, p + "mlp.shared_expert_gate")) * shared
        return self._gated(x, p + "mlp.", self.c("hidden_act"))

    def _moe(self, x, p, g_name, u_name, d_name, renorm):
        n_exp = self.c("num_local_experts", "num_experts")
        k = self.c("num_experts_per_tok")
        probs = softmax(self.linear(x, p + "gate"))
        top_i = np.argsort(-probs, axis=-1, kind="stable")[:, :k]
        top_v = np.take_along_axis(probs, top_i, axis=-1)
        if renorm:
            top_v = top_v / top_v.sum(-1, keepdims=True)
        weight = np.zeros_like(probs)  # [T, E], zero where not selected
        np.put_along_axis(weight, top_i, top_v, axis=-1)
        out = np.zeros_like(x)
        for e in range(n_exp):
            q = p + "experts.%d." % e
            y = self.linear(act(self.c("hidden_act"), self.linear(x, q + g_name)) * self.linear(x, q + u_name),
                            q + d_name)
            out = out + weight[:, e:e + 1] * y
        return out


def main(argv):
    """Compares the reference with a fixture's logits: arch_reference.py FIXTURE_DIR [FIXTURE_DIR ...]"""
    worst = 0.0
    for d in argv:
        with open(os.path.join(d, "golden.json"), encoding="utf-8") as f:
            g = json.load(f)
        ref = Reference(d)
        diffs = []
        for c in g["cases"]:
            want = np.load(os.path.join(d, c["logits_file"]))
            diffs.append(float(np.max(np.abs(ref.forward(c["prompt_ids"]) - want))))
        worst = max(worst, max(diffs))
        print("%-28s max |ref - HF| per case %s  unused tensors %s" % (os.path.basename(d.rstrip("/")),
                                                                     ["%.2g" % x for x in diffs], ref.unused()))
    return 0 if worst <= 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
