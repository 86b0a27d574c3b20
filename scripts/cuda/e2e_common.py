"""Helpers shared by the GPU-machine scripts that compare llmrt with HF transformers
(device_e2e.py, bf16_error_budget.py): the references for the bf16 criterion and a
`llmrt generate --json` runner."""
import json
import os
import subprocess

import numpy as np

_bf16_ref_cache = {}


def bf16_weight_reference(gdir, prompt_ids):
    """HF transformers logits of the model whose matrices are rounded to bf16 (what the CUDA bf16
    mode stores; norms and biases stay float32, as there), computed in float32: the exact answer
    for a bf16-weight model, so the comparison measures the engine's arithmetic, not the rounding
    of the checkpoint. None when torch/transformers are missing."""
    try:
        import torch
        from transformers import AutoModelForCausalLM
    except ImportError:
        return None
    if gdir not in _bf16_ref_cache:
        # Falcon with ALiBi: transformers' eager path adds the bias twice (its SDPA path once, as
        # Falcon-RW's code does; scripts/golden/make_arch_goldens.py).
        cfg = json.load(open(os.path.join(gdir, "config.json")))
        attn = "sdpa" if cfg.get("alibi") else "eager"
        try:
            m = AutoModelForCausalLM.from_pretrained(gdir, torch_dtype=torch.float32, attn_implementation=attn)
        except (OSError, ValueError, KeyError):  # a family transformers has no class for (equivalence fixtures)
            return None
        with torch.no_grad():
            for p in m.parameters():
                if p.dim() == 2:
                    p.copy_(p.bfloat16().float())
        _bf16_ref_cache[gdir] = m.eval()
    with torch.no_grad():
        return _bf16_ref_cache[gdir](torch.tensor([prompt_ids])).logits[0].numpy()


def bf16_rounded_checkpoint(gdir, out_root="/tmp/llmrt_bf16w"):
    """A copy of the golden checkpoint whose matrices hold bf16 values (stored as float32; norms
    and biases untouched): the model bf16_weight_reference() computes. Loading it with
    `--dtype float16` converts every matrix to fp16 exactly (bf16's 8 significant bits fit in
    fp16's 11 down to 2^-14), so fp16 arithmetic can be judged against the same reference as the
    bf16 mode. Returns the directory (made once)."""
    import shutil
    import torch
    from safetensors.torch import load_file, save_file
    out = os.path.join(out_root, os.path.basename(os.path.normpath(gdir)))
    if not os.path.exists(os.path.join(out, "model.safetensors")):
        os.makedirs(out, exist_ok=True)
        for f in os.listdir(gdir):
            if f.endswith(".json") and f != "golden.json":
                shutil.copy(os.path.join(gdir, f), out)
        t = load_file(os.path.join(gdir, "model.safetensors"))
        save_file({k: (v.to(torch.bfloat16).float() if v.dim() == 2 else v).contiguous() for k, v in t.items()},
                  os.path.join(out, "model.safetensors"))
    return out


_hf_bf16_cache = {}


def hf_bf16_logits(gdir, prompt_ids):
    """HF transformers itself running the checkpoint in bf16 (torch_dtype=bfloat16, SDPA) on the GPU:
    the peer for the bf16 criterion (its own distance to the float32 answer). None without torch/CUDA."""
    try:
        import torch
        from transformers import AutoModelForCausalLM
        if not torch.cuda.is_available():
            return None
    except ImportError:
        return None
    if gdir not in _hf_bf16_cache:
        try:
            _hf_bf16_cache[gdir] = AutoModelForCausalLM.from_pretrained(gdir, torch_dtype=torch.bfloat16).cuda().eval()
        except (OSError, ValueError, KeyError):  # no transformers class (equivalence fixtures)
            return None
    with torch.no_grad():
        ids = torch.tensor([prompt_ids]).cuda()
        return _hf_bf16_cache[gdir](ids).logits[0].float().cpu().numpy()


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def run_generate(llmrt, model, ids, backend, dtype, max_tokens, extra=(), logits=None, tuning=None):
    """`llmrt generate --json` on `ids`; `tuning`: a --cuda-tuning value (e.g. "rope_fusion=off").
    Returns (the result object: outputs[i].token_ids, prompt_token_ids, ..., None) or (None, stderr)."""
    prompt_args = ["--prompt", ids] if isinstance(ids, str) else ["--input-ids", ",".join(map(str, ids))]
    cmd = [llmrt, "generate", "--model", model, *prompt_args, "--max-tokens",
           str(max_tokens), "--ignore-eos", "--json", "--backend", backend, "--dtype", dtype,
           "--kv-cache-max-tokens", "8192", *extra]
    if logits:
        cmd += ["--output-logits-npy", logits]
    if tuning:
        cmd += ["--cuda-tuning", tuning]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr[-2000:]
    return json.loads(p.stdout), None


class Criterion:
    """The issue's bf16 criterion accumulated over prompt positions: the top-1 token equal to the
    reference's, and |d logprob| of the reference's top token (need >= 99% and <= 0.05)."""

    def __init__(self):
        self.agree = 0
        self.positions = 0
        self.max_dlogprob = 0.0

    def add(self, ref, got):
        """Adds one case's [positions, vocab] logits; returns its own figures as text."""
        top = ref.argmax(axis=-1)
        idx = np.arange(len(top))
        dlp = np.abs(log_softmax(got)[idx, top] - log_softmax(ref)[idx, top])
        agree = int((got.argmax(axis=-1) == top).sum())
        self.agree += agree
        self.positions += len(top)
        self.max_dlogprob = max(self.max_dlogprob, float(dlp.max()))
        return f"top-1 agree {agree}/{len(top)}, max |d logprob| {dlp.max():.4f}"

    def met(self):
        return self.positions > 0 and self.agree >= 0.99 * self.positions and self.max_dlogprob <= 0.05

    def summary(self):
        frac = self.agree / self.positions if self.positions else 0.0
        return (f"top-1 equal to HF at {self.agree}/{self.positions} prompt positions ({100 * frac:.2f}%, need >= 99%), "
                f"max |d logprob| of HF's top token {self.max_dlogprob:.4f} (need <= 0.05)")


def same_as_with_tuning(llmrt, model, ids, dtype, max_tokens, flags, tuning):
    """Runs `llmrt generate` on the GPU twice, the second time with `--cuda-tuning tuning` (e.g. a
    kernel switched off): (True / False: the outputs, ids and logprobs, are equal, None) or (None, the error)."""
    a, err = run_generate(llmrt, model, ids, "cuda", dtype, max_tokens, flags)
    b, err2 = run_generate(llmrt, model, ids, "cuda", dtype, max_tokens, flags, tuning=tuning)
    if a is None or b is None:
        return None, err or err2
    strip = lambda o: {k: v for k, v in o.items() if k not in ("stats", "timing", "elapsed_s")}  # noqa: E731
    return strip(a) == strip(b), None
