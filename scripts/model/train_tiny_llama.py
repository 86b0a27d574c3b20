#!/usr/bin/env python3
"""Trains llmrt-tiny, llmrt's own small default model, on the corpus made by build_corpus.sh.

Runs on a GPU machine (also on CPU, slowly) with torch, transformers (4.45+ or 5.x), tokenizers,
safetensors and numpy:

    python3 scripts/model/train_tiny_llama.py --corpus .carry/corpus --out OUT_DIR --minutes 6

Steps: (a) byte-level BPE tokenizer (vocab 8192 with <|begin_of_text|> / <|end_of_text|>) trained on
the train split; (b) train / validation / held-out tokenized, each document as BOS + text + EOS;
(c) a LlamaForCausalLM (hidden 384, 6 layers, 6 query / 2 kv heads of 64, tied embeddings, ~12.6M
parameters); (d) AdamW + warmup + cosine (over wall-clock time) in bf16 autocast, stopping when
--minutes since the start of the script have passed; the checkpoint with the best validation loss
is kept; (e) held-out perplexity measured exactly as `llmrt perplexity --context 512` does;
(f) saved in HF format with bf16 weights, generation_config.json and a model card; (g) reloaded
with AutoModelForCausalLM in float32 to write golden.json (greedy continuations, perplexity);
(h) everything packed into OUT_DIR/model.tar.gz (split into parts of < 16 MiB when larger) to be
unpacked into models/llmrt-tiny/.

The perplexity procedure (`llmrt perplexity`, tools/llmrt/cmd_perplexity.cpp): the file's text is
encoded WITHOUT special tokens in one piece, ids = tokenizer.encode(text, add_special_tokens=False);
with body = context - 1 it is cut into floor(len(ids) / body) chunks, chunk c = [BOS] +
ids[c*body : (c+1)*body]; positions [context/2, context) of each chunk are scored (the first half
is context only): NLL = -log softmax(logits[i-1])[chunk[i]]; PPL = exp(mean NLL over all scored
tokens). Logits in float32, sums in float64.

Exits non-zero on any failure (after still writing what it can when the model was trained).
"""
from __future__ import annotations

import argparse
import gzip
import io
import json
import math
import os
import random
import shutil
import sys
import tarfile
import time
import traceback

T0 = time.time()
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

BOS = "<|begin_of_text|>"
EOS = "<|end_of_text|>"
# Llama-3 / GPT-4 style pre-tokenization regex.
SPLIT_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
DOC_SEP = "\n\n\n"  # between documents in the corpus files (see build_corpus.py)
GOLDEN_PROMPTS = ["The", "In the beginning", "The command", "This package provides"]
MODEL_FILES = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
               "generation_config.json", "README.md", "loss_log.tsv", "golden.json", "heldout_eval.txt"]

ARCH = dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=6, num_key_value_heads=2, head_dim=64,
            intermediate_size=1024, max_position_embeddings=512, rms_norm_eps=1e-5, tie_word_embeddings=True,
            hidden_act="silu", attention_bias=False, mlp_bias=False, initializer_range=0.02)
ROPE_THETA = 10000.0


class TrainError(RuntimeError):
    pass


from tiny_llama_pack import model_card, read_safetensors_header, write_tar  # noqa: E402


def log(msg: str) -> None:
    print(f"[{time.time() - T0:7.1f}s] {msg}", flush=True)


# ---------------------------------------------------------------------------------------------
# Corpus


def read_docs(path: str) -> tuple[str, list[str]]:
    """(exact file text, documents)."""
    with gzip.open(path, "rb") as f:
        text = f.read().decode("utf-8")
    body = text[:-1] if text.endswith("\n") else text
    docs = [d for d in body.split(DOC_SEP) if d.strip()]
    if not docs:
        raise TrainError(f"{path}: no documents")
    return text, docs


def truncate_docs(docs: list[str], max_bytes: int) -> str:
    """The first documents that fit in max_bytes (at least one), joined as in the corpus files."""
    out, size = [], 0
    for d in docs:
        n = len(d.encode("utf-8")) + len(DOC_SEP)
        if out and size + n > max_bytes:
            break
        out.append(d)
        size += n
    return DOC_SEP.join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# Tokenizer


def train_tokenizer(docs: list[str], vocab_size: int, sample_bytes: int):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    sample, size = [], 0
    for d in docs:  # the corpus is already shuffled: a prefix is a fair sample
        sample.append(d)
        size += len(d)
        if size >= sample_bytes:
            break
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=[BOS, EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)

    def batches():
        for i in range(0, len(sample), 1000):
            yield sample[i:i + 1000]

    tok.train_from_iterator(batches(), trainer=trainer, length=len(sample))
    bos_id, eos_id = tok.token_to_id(BOS), tok.token_to_id(EOS)
    if bos_id is None or eos_id is None:
        raise TrainError("special tokens missing from the trained vocabulary")
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A:0", pair=f"{BOS} $A:0 {BOS}:1 $B:1", special_tokens=[(BOS, bos_id)])
    log(f"tokenizer: vocab {tok.get_vocab_size()} trained on {size / 1e6:.1f} MB; bos {bos_id}, eos {eos_id}")
    return tok, bos_id, eos_id


def tokenizer_config(max_len: int) -> dict:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "model_max_length": max_len,
        "clean_up_tokenization_spaces": False,
        "added_tokens_decoder": {
            "0": {"content": BOS, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                  "special": True},
            "1": {"content": EOS, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                  "special": True},
        },
    }


def encode_docs(tok, docs: list[str], eos_id: int, batch: int = 4096):
    """One int32 array: for each document BOS + ids + EOS."""
    import numpy as np

    enc = getattr(tok, "encode_batch_fast", None) or tok.encode_batch
    parts = []
    for i in range(0, len(docs), batch):
        for e in enc(docs[i:i + batch], add_special_tokens=True):
            ids = e.ids
            ids.append(eos_id)
            parts.append(np.asarray(ids, dtype=np.int32))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)


# ---------------------------------------------------------------------------------------------
# Perplexity exactly as `llmrt perplexity` computes it


def perplexity_chunks(ids: list[int], bos_id: int | None, context: int) -> list[list[int]]:
    body = context - (1 if bos_id is not None else 0)
    n = len(ids) // body
    if n < 1:
        raise TrainError(f"the text has {len(ids)} tokens; need at least {body} for one chunk of {context}")
    prefix = [bos_id] if bos_id is not None else []
    return [prefix + list(ids[c * body:(c + 1) * body]) for c in range(n)]


def chunked_perplexity(logits_fn, ids: list[int], bos_id: int | None, context: int, batch: int = 16) -> dict:
    """logits_fn(LongTensor [B, T]) -> float32 logits [B, T, V]. Returns ppl, mean_nll, counts."""
    import torch

    chunks = perplexity_chunks(ids, bos_id, context)
    first = context // 2
    nll, nll2, count = 0.0, 0.0, 0
    for i in range(0, len(chunks), batch):
        x = torch.tensor(chunks[i:i + batch], dtype=torch.long)
        logits = logits_fn(x).float()
        logp = torch.log_softmax(logits, dim=-1)  # float32, like llmrt's logprobs
        tgt = x[:, first:].to(logp.device)
        lp = logp[:, first - 1:context - 1, :].gather(-1, tgt.unsqueeze(-1)).squeeze(-1)
        v = (-lp).double()
        nll += float(v.sum())
        nll2 += float((v * v).sum())
        count += v.numel()
    mean = nll / count
    var = max(0.0, nll2 / count - mean * mean)
    ppl = math.exp(mean)
    return {"ppl": ppl, "ppl_err": ppl * math.sqrt(var / (count - 1)) if count > 1 else 0.0, "mean_nll": mean,
            "tokens": len(ids), "chunks": len(chunks), "scored_tokens": count, "context": context}


# ---------------------------------------------------------------------------------------------
# Model


def _accepts_kwarg(cls, name: str) -> bool:
    import inspect

    try:
        if name in inspect.signature(cls.__init__).parameters:
            return True
    except (TypeError, ValueError):
        pass
    if name in (getattr(cls, "__dataclass_fields__", None) or {}):
        return True
    return any(name in (getattr(k, "__annotations__", None) or {}) for k in cls.__mro__)


def build_config(vocab_size: int, bos_id: int, eos_id: int):
    """LlamaConfig with the ARCH sizes; rope as rope_parameters (transformers 5.x) or rope_theta (4.x)."""
    import transformers

    kw = dict(ARCH, vocab_size=vocab_size, bos_token_id=bos_id, eos_token_id=eos_id)
    cls = transformers.LlamaConfig
    if _accepts_kwarg(cls, "rope_parameters"):
        cfg = cls(**kw, rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA})
    else:
        cfg = cls(**kw, rope_theta=ROPE_THETA)
    for k, v in kw.items():
        if getattr(cfg, k, None) != v:
            msg = f"LlamaConfig: {k} is {getattr(cfg, k, None)!r}, expected {v!r}"
            if k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
                     "intermediate_size", "vocab_size", "tie_word_embeddings", "max_position_embeddings"):
                raise TrainError(msg)
            log(f"warning: {msg}")
    return cfg


def check_rope(model) -> None:
    import torch

    rot = getattr(getattr(model, "model", None), "rotary_emb", None)
    inv = getattr(rot, "inv_freq", None)
    if inv is None:
        raise TrainError("model has no model.rotary_emb.inv_freq")
    hd = ARCH["head_dim"]
    want = 1.0 / (ROPE_THETA ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    if inv.numel() != want.numel() or not torch.allclose(inv.detach().double().cpu(), want, rtol=1e-5):
        raise TrainError("rotary inv_freq is not the default rope with theta 10000")


def count_params(model) -> int:
    seen, n = set(), 0
    for p in model.parameters():
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            n += p.numel()
    return n


def lr_at(step: int, progress: float, peak: float, warmup: int, min_ratio: float) -> float:
    """Linear warmup over `warmup` steps, then cosine from peak to min_ratio*peak over wall-clock
    progress in [0, 1]."""
    if step < warmup:
        return peak * (step + 1) / warmup
    p = min(1.0, max(0.0, progress))
    return peak * (min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * p)))


def train_loop(model, stream, val_windows, args, deadline: float, device, loss_log_path: str) -> dict:
    """Trains `model` on random windows of `stream` (1-D LongTensor on device) until `deadline`.
    Returns a summary; restores the best-validation weights when they beat the last ones."""
    import torch
    import torch.nn.functional as F

    seq = args.context
    g = torch.Generator(device=device)
    g.manual_seed(args.seed)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    opt_kw = dict(lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    try:
        opt = torch.optim.AdamW(groups, fused=(device.type == "cuda"), **opt_kw)
    except (TypeError, RuntimeError):
        opt = torch.optim.AdamW(groups, **opt_kw)
    use_amp = device.type == "cuda" and not args.no_amp
    amp_dtype = torch.bfloat16

    def forward_logits(m, x):
        out = m(input_ids=x, use_cache=False)
        return out.logits if hasattr(out, "logits") else out

    def loss_of(m, w):
        with torch.autocast(device_type=device.type, dtype=amp_dtype, enabled=use_amp):
            logits = forward_logits(m, w[:, :-1])
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1))

    fwd_model = model
    compiled = False
    if args.compile and device.type == "cuda" and hasattr(torch, "compile"):
        try:
            fwd_model = torch.compile(model)
            compiled = True
        except Exception as e:  # noqa: BLE001
            log(f"torch.compile unavailable ({type(e).__name__}: {e}); eager")
            fwd_model = model

    n_windows = stream.numel() - (seq + 1)
    ar = torch.arange(seq + 1, device=device)

    def sample_batch():
        off = torch.randint(0, n_windows, (args.batch,), device=device, generator=g)
        return stream[off[:, None] + ar]

    @torch.no_grad()
    def val_loss():
        model.eval()
        tot, n = 0.0, 0
        for i in range(0, val_windows.shape[0], args.batch):
            w = val_windows[i:i + args.batch]
            tot += float(loss_of(model, w)) * w.shape[0]
            n += w.shape[0]
        model.train()
        return tot / max(1, n)

    logf = open(loss_log_path, "w", encoding="utf-8")
    logf.write("step\ttokens\telapsed_s\tlr\ttrain_loss\tval_loss\n")
    model.train()
    t_start = time.time()
    budget = max(1.0, deadline - t_start)
    step, tokens, run_loss, run_n = 0, 0, 0.0, 0
    best = {"val": float("inf"), "step": -1, "state": None}
    last_val_t = t_start
    val_every = args.val_every_s
    last_train_loss = float("nan")
    last_lr = 0.0
    first_step_s = None
    while True:
        now = time.time()
        if (now >= deadline and step >= args.min_steps) or (args.max_steps and step >= args.max_steps):
            break
        lr = lr_at(step, (now - t_start) / budget, args.lr, args.warmup, args.min_lr_ratio)
        last_lr = lr
        for grp in opt.param_groups:
            grp["lr"] = lr
        w = sample_batch()
        t_step = time.time()
        try:
            loss = loss_of(fwd_model, w)
            loss.backward()
        except Exception as e:  # noqa: BLE001
            if not compiled or step > 0:
                raise
            log(f"torch.compile failed on the first step ({type(e).__name__}: {str(e)[:300]}); eager from now on")
            opt.zero_grad(set_to_none=True)
            fwd_model, compiled = model, False
            loss = loss_of(fwd_model, w)
            loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        tokens += w.shape[0] * seq
        if step == 1:
            lv = float(loss)
            first_step_s = time.time() - t_step
            log(f"step 1: loss {lv:.4f}, first step took {first_step_s:.1f}s (compiled={compiled})")
            if not math.isfinite(lv):
                raise TrainError("non-finite loss on the first step")
        if step % args.log_every == 0 or step == 1:
            lv = float(loss)
            run_loss += lv
            run_n += 1
            last_train_loss = lv
            if not math.isfinite(lv):
                raise TrainError(f"non-finite loss at step {step}")
            vl = ""
            if time.time() - last_val_t >= val_every:
                v = val_loss()
                last_val_t = time.time()
                vl = f"{v:.5f}"
                if v < best["val"]:
                    best = {"val": v, "step": step,
                            "state": {k: t.detach().clone() for k, t in model.state_dict().items()}}
            el = time.time() - t_start
            logf.write(f"{step}\t{tokens}\t{el:.1f}\t{lr:.6g}\t{lv:.5f}\t{vl}\n")
            logf.flush()
            if step % (args.log_every * 10) == 0 or vl:
                log(f"step {step}: loss {lv:.4f}{' val ' + vl if vl else ''} lr {lr:.2e} gnorm {float(gn):.2f} "
                    f"{tokens / 1e6:.1f}M tok {tokens / max(el, 1e-9) / 1e6:.2f}M tok/s")
    train_s = time.time() - t_start
    final_val = val_loss()
    el = time.time() - t_start
    logf.write(f"{step}\t{tokens}\t{el:.1f}\t{last_lr:.6g}\t"
               f"{last_train_loss:.5f}\t{final_val:.5f}\n")
    logf.close()
    kept = "final"
    if best["state"] is not None and best["val"] < final_val - 1e-3:
        model.load_state_dict(best["state"])
        kept = f"step {best['step']} (val {best['val']:.4f} < final {final_val:.4f})"
    log(f"training done: {step} steps, {tokens / 1e6:.1f}M tokens in {train_s:.0f}s; final val loss "
        f"{final_val:.4f}; kept {kept}")
    return {"steps": step, "tokens": tokens, "train_seconds": round(train_s, 1), "final_train_loss": last_train_loss,
            "final_val_loss": final_val, "best_val_loss": min(best["val"], final_val), "kept": kept,
            "compiled": compiled, "first_step_seconds": first_step_s}


# ---------------------------------------------------------------------------------------------
# Saving, reloading, goldens


def load_float32(model_dir: str, attn: str | None = None):
    import torch
    import transformers

    major = int(transformers.__version__.split(".")[0])
    kw = {"local_files_only": True}
    if attn:
        kw["attn_implementation"] = attn
    kw["dtype" if major >= 5 else "torch_dtype"] = torch.float32
    try:
        m = transformers.AutoModelForCausalLM.from_pretrained(model_dir, **kw)
    except TypeError:
        m = transformers.AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True)
    m = m.float().eval()
    return m


def greedy_no_cache(model, prompt_ids: list[int], n_new: int):
    import torch

    ids = list(prompt_ids)
    new, gaps = [], []
    with torch.no_grad():
        for _ in range(n_new):
            logits = model(input_ids=torch.tensor([ids], dtype=torch.long), use_cache=False).logits[0, -1].float()
            if not bool(torch.isfinite(logits).all()):
                raise TrainError("non-finite logits in greedy decoding")
            top = torch.topk(logits, 2)
            nxt = int(torch.argmax(logits))
            gaps.append(float(top.values[0] - top.values[1]))
            new.append(nxt)
            ids.append(nxt)
    return new, gaps


def evaluate(model_dir, tok, held_ids, eval_ids, bos_id, eos_id, args, device, problems):
    """Reloads model_dir in float32; perplexities (GPU when there is one, TF32 off) and greedy
    goldens (CPU, no KV cache); writes golden.json. Returns (ppl_full, ppl_eval, cases)."""
    import torch
    import transformers

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        torch.set_float32_matmul_precision("highest")
    except AttributeError:
        pass
    ref = load_float32(model_dir).to(device)

    def logits_fn(x):
        with torch.no_grad():
            return ref(input_ids=x.to(device), use_cache=False).logits.float()

    ppl_full = chunked_perplexity(logits_fn, held_ids, bos_id, args.context)
    ppl_eval = chunked_perplexity(logits_fn, eval_ids, bos_id, args.context)
    log(f"held-out perplexity {ppl_full['ppl']:.4f} ({ppl_full['chunks']} chunks); heldout_eval.txt "
        f"{ppl_eval['ppl']:.4f} ({ppl_eval['chunks']} chunks)")

    del ref
    ref = load_float32(model_dir, attn="eager").to("cpu")
    hf_tok_ok, hf_tok_note = True, ""
    try:
        auto_tok = transformers.AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    except Exception as e:  # noqa: BLE001
        auto_tok = None
        hf_tok_ok, hf_tok_note = False, f"AutoTokenizer failed: {type(e).__name__}: {e}"
    cases = []
    for prompt in GOLDEN_PROMPTS:
        ids = tok.encode(prompt).ids
        if auto_tok is not None:
            a_ids = list(auto_tok(prompt)["input_ids"])
            if a_ids != ids:
                hf_tok_ok = False
                hf_tok_note += f" AutoTokenizer ids {a_ids} != tokenizers ids {ids} for {prompt!r};"
        new, gaps = greedy_no_cache(ref, ids, args.golden_tokens)
        cases.append({"prompt": prompt, "prompt_ids": ids, "new_ids": new,
                      "new_text": tok.decode(new, skip_special_tokens=False),
                      "text": tok.decode(ids + new, skip_special_tokens=True),
                      "min_logit_gap": min(gaps), "logit_gaps": [round(g, 6) for g in gaps]})
        log(f"golden {prompt!r} -> {cases[-1]['new_text']!r} (min gap {min(gaps):.4f})")
    if not hf_tok_ok:
        problems.append(hf_tok_note.strip())
    golden = {
        "model": "llmrt-tiny",
        "reference": f"HF transformers {transformers.__version__} AutoModelForCausalLM, float32 math on bf16 "
                     "weights, CPU, greedy argmax without KV cache",
        "max_new_tokens": args.golden_tokens,
        "ignore_eos": True,
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "cases": cases,
        "perplexity": dict(ppl_eval, file="heldout_eval.txt",
                           procedure="llmrt perplexity: encode(text, add_special_tokens=False); chunks of BOS + "
                                     "(context-1) tokens; second half of each chunk scored; exp(mean NLL)"),
        "perplexity_full_heldout": dict(ppl_full, file="heldout.txt (the corpus held-out split, decompressed)"),
        "hf_autotokenizer_matches": hf_tok_ok,
    }
    with open(os.path.join(model_dir, "golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    return ppl_full, ppl_eval, cases


# ---------------------------------------------------------------------------------------------


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True, help="directory with train.txt.gz and heldout.txt.gz")
    ap.add_argument("--out", required=True, help="output directory (model.tar.gz[.partNN], summary.json)")
    ap.add_argument("--work", default=None, help="scratch directory (default: OUT/../llmrt-tiny-work or /tmp)")
    ap.add_argument("--minutes", type=float, default=6.0, help="training stops this long after the script started")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--tok-sample-mb", type=float, default=24.0, help="text used to train the tokenizer")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--batch", type=int, default=128, help="windows of --context tokens per step")
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--min-lr-ratio", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--val-fraction", type=float, default=0.005, help="training documents kept for validation")
    ap.add_argument("--val-windows", type=int, default=128)
    ap.add_argument("--val-every-s", type=float, default=30.0)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: time only)")
    ap.add_argument("--min-steps", type=int, default=100, help="train at least this many steps, budget or not")
    ap.add_argument("--eval-kb", type=float, default=200.0, help="size of heldout_eval.txt")
    ap.add_argument("--golden-tokens", type=int, default=32)
    ap.add_argument("--no-compile", dest="compile", action="store_false")
    ap.add_argument("--no-amp", action="store_true")
    ap.add_argument("--device", default=None)
    return ap.parse_args(argv)


def main(argv=None) -> int:
    try:
        sys.stdout.reconfigure(line_buffering=True)
    except AttributeError:
        pass
    args = parse_args(argv)
    import numpy as np
    import torch
    import tokenizers
    import transformers

    log(f"python {sys.version.split()[0]}, torch {torch.__version__}, transformers {transformers.__version__}, "
        f"tokenizers {tokenizers.__version__}, numpy {np.__version__}")
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    hardware = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    log(f"device {device} ({hardware}); budget {args.minutes} min of training from the script start")
    deadline = T0 + args.minutes * 60.0
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    problems: list[str] = []

    out_dir = os.path.abspath(args.out)
    os.makedirs(out_dir, exist_ok=True)
    work = os.path.abspath(args.work or os.path.join("/tmp", f"llmrt-tiny-work-{os.getpid()}"))
    model_dir = os.path.join(work, "llmrt-tiny")
    shutil.rmtree(model_dir, ignore_errors=True)
    os.makedirs(model_dir)

    # (a) corpus and tokenizer
    _, train_docs = read_docs(os.path.join(args.corpus, "train.txt.gz"))
    held_text, held_docs = read_docs(os.path.join(args.corpus, "heldout.txt.gz"))
    corpus_bytes = sum(len(d.encode("utf-8")) for d in train_docs) + len(held_text.encode("utf-8"))
    log(f"corpus: {len(train_docs)} train documents, {len(held_docs)} held-out documents, "
        f"{corpus_bytes / 1e6:.1f} MB")
    tok, bos_id, eos_id = train_tokenizer(train_docs, args.vocab, int(args.tok_sample_mb * 1e6))
    vocab = tok.get_vocab_size()
    if vocab != args.vocab:
        log(f"warning: tokenizer vocabulary is {vocab}, not {args.vocab}")
    tok.save(os.path.join(model_dir, "tokenizer.json"))
    with open(os.path.join(model_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(ARCH["max_position_embeddings"]), f, indent=2)
        f.write("\n")
    sample = held_text[:20000]
    if tok.decode(tok.encode(sample, add_special_tokens=False).ids, skip_special_tokens=False) != sample:
        problems.append("tokenizer round trip (encode/decode) changed the held-out text")

    # (b) tokenized streams
    n_val = max(20, int(len(train_docs) * args.val_fraction))
    val_docs, fit_docs = train_docs[-n_val:], train_docs[:-n_val]
    fit = encode_docs(tok, fit_docs, eos_id)
    val = encode_docs(tok, val_docs, eos_id)
    log(f"tokenized: train {len(fit) / 1e6:.2f}M tokens ({sum(map(len, fit_docs)) / max(1, len(fit)):.2f} chars/token), "
        f"validation {len(val) / 1e3:.0f}K tokens")
    eval_text = truncate_docs(held_docs, int(args.eval_kb * 1000))
    with open(os.path.join(model_dir, "heldout_eval.txt"), "w", encoding="utf-8", newline="") as f:
        f.write(eval_text)
    held_ids = tok.encode(held_text, add_special_tokens=False).ids
    eval_ids = tok.encode(eval_text, add_special_tokens=False).ids
    log(f"held-out: {len(held_ids)} tokens; heldout_eval.txt {len(eval_text.encode('utf-8'))} bytes, "
        f"{len(eval_ids)} tokens")

    # (c) model
    cfg = build_config(vocab, bos_id, eos_id)
    torch.manual_seed(args.seed)
    model = transformers.LlamaForCausalLM(cfg)
    if ARCH["tie_word_embeddings"] and model.get_output_embeddings().weight.data_ptr() != \
            model.get_input_embeddings().weight.data_ptr():
        model.tie_weights()
    try:
        check_rope(model)
    except TrainError as e:
        problems.append(str(e))
        log(f"PROBLEM: {e}")
    n_params = count_params(model)
    log(f"model: {n_params:,} parameters")
    if not 10_000_000 <= n_params <= 15_000_000:
        raise TrainError(f"{n_params} parameters, outside 10M..15M")
    model.to(device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    # (d) training
    stream = torch.from_numpy(fit.astype(np.int64)).to(device)
    vs = torch.from_numpy(val.astype(np.int64))
    n_vw = min(args.val_windows, (len(vs) - 1) // (args.context + 1))
    if n_vw < 1:
        raise TrainError("validation split too small")
    val_windows = vs[: n_vw * (args.context + 1)].view(n_vw, args.context + 1).to(device)
    loss_log = os.path.join(model_dir, "loss_log.tsv")
    summary = train_loop(model, stream, val_windows, args, deadline, device, loss_log)
    t_train_end = time.time()

    # (f) save
    model.eval()
    model.to(torch.bfloat16)
    try:
        model.save_pretrained(model_dir, safe_serialization=True)
    except TypeError:
        model.save_pretrained(model_dir)
    cfg_path = os.path.join(model_dir, "config.json")
    with open(cfg_path, encoding="utf-8") as f:
        cfg_json = json.load(f)
    if cfg_json.get("dtype", cfg_json.get("torch_dtype")) != "bfloat16":
        cfg_json["torch_dtype"] = "bfloat16"
        with open(cfg_path, "w", encoding="utf-8") as f:
            json.dump(cfg_json, f, indent=2, sort_keys=True)
            f.write("\n")
    gen = transformers.GenerationConfig(bos_token_id=bos_id, eos_token_id=eos_id, do_sample=False)
    gen.save_pretrained(model_dir)
    st_path = os.path.join(model_dir, "model.safetensors")
    if not os.path.isfile(st_path):
        raise TrainError(f"save_pretrained wrote no model.safetensors ({sorted(os.listdir(model_dir))})")
    header = read_safetensors_header(st_path)
    non_bf16 = sorted(k for k, v in header.items() if v.get("dtype") != "BF16")
    if non_bf16:
        problems.append(f"non-BF16 tensors in model.safetensors: {non_bf16[:5]}")
    weights_mb = os.path.getsize(st_path) / 1e6
    if weights_mb > 30:
        problems.append(f"model.safetensors is {weights_mb:.1f} MB (> 30 MB)")
    log(f"saved {model_dir}: {sorted(os.listdir(model_dir))}; weights {weights_mb:.1f} MB, {len(header)} tensors, "
        f"lm_head.weight {'present' if 'lm_head.weight' in header else 'absent (tied)'}")
    del model, stream
    if device.type == "cuda":
        torch.cuda.empty_cache()

    # (e) perplexity with the reloaded float32 model (what llmrt runs: bf16 weights, f32 math) and
    # (g) goldens. A failure here is reported, and the trained model is still packed.
    ppl_full = ppl_eval = None
    cases = []
    try:
        ppl_full, ppl_eval, cases = evaluate(model_dir, tok, held_ids, eval_ids, bos_id, eos_id, args, device,
                                             problems)
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        problems.append(f"evaluation failed: {type(e).__name__}: {e}")

    # model card
    seen = summary["tokens"]
    info = dict(params=n_params, corpus_mb=corpus_bytes / 1e6, train_docs=len(train_docs), val_docs=len(val_docs),
                train_tokens=len(fit), heldout_docs=len(held_docs), heldout_tokens=len(held_ids), vocab=vocab,
                bos=bos_id, eos=eos_id, weights_mb=weights_mb, steps=summary["steps"], batch=args.batch,
                context=args.context, tokens_seen=seen, epochs=seen / max(1, len(fit)),
                train_seconds=summary["train_seconds"], hardware=f"one {hardware}" if device.type == "cuda" else "CPU",
                weight_decay=args.weight_decay, lr=args.lr, warmup=args.warmup, grad_clip=args.grad_clip,
                seed=args.seed, kept=summary["kept"], final_train_loss=summary["final_train_loss"],
                final_val_loss=summary["final_val_loss"], torch=torch.__version__,
                transformers=transformers.__version__, tokenizers=tokenizers.__version__,
                heldout_mb=len(held_text.encode("utf-8")) / 1e6, eval_kb=len(eval_text.encode("utf-8")) / 1000,
                ppl_full=ppl_full, ppl_eval=ppl_eval)
    with open(os.path.join(model_dir, "README.md"), "w", encoding="utf-8") as f:
        f.write(model_card(info, ARCH, BOS, EOS, ROPE_THETA))

    # (h) pack
    missing = [n for n in MODEL_FILES if not os.path.isfile(os.path.join(model_dir, n))]
    if missing:
        problems.append(f"missing files: {missing}")
    extra = sorted(set(os.listdir(model_dir)) - set(MODEL_FILES))
    if extra:
        log(f"note: also written (not packed): {extra}")
    parts = write_tar(model_dir, out_dir, [n for n in MODEL_FILES if n not in missing])
    result = {k: v for k, v in info.items() if k not in ("ppl_full", "ppl_eval")}
    result.update(training=summary, perplexity_heldout_eval=ppl_eval, perplexity_full_heldout=ppl_full,
                  golden=[{k: c[k] for k in ("prompt", "prompt_ids", "new_ids", "new_text", "min_logit_gap")}
                          for c in cases],
                  files=[os.path.basename(p) for p in parts], problems=problems,
                  config=cfg_json, seconds_total=round(time.time() - T0, 1),
                  seconds_after_training=round(time.time() - t_train_end, 1))
    with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    log(f"wrote {[os.path.basename(p) for p in parts]} ({sum(os.path.getsize(p) for p in parts) / 1e6:.1f} MB) "
        f"and summary.json to {out_dir}")
    if len(parts) > 1:
        log("reassemble with: cat model.tar.gz.part* > model.tar.gz")
    log(f"SUMMARY params={n_params} steps={summary['steps']} tokens={seen} train_loss={summary['final_train_loss']:.4f} "
        f"val_loss={summary['final_val_loss']:.4f} ppl_heldout={(ppl_full or {}).get('ppl')} "
        f"ppl_heldout_eval={(ppl_eval or {}).get('ppl')} total_s={time.time() - T0:.0f}")
    if problems:
        for p in problems:
            log(f"PROBLEM: {p}")
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SystemExit:
        raise
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
        sys.stdout.flush()
        sys.exit(1)
