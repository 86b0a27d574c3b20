"""Model card, safetensors header reading and packing for train_tiny_llama.py (stdlib only)."""
from __future__ import annotations

import json
import os
import tarfile
import time

PART_BYTES = 15 * 1024 * 1024  # files coming back from the device are limited to 16 MiB each


def read_safetensors_header(path: str) -> dict:
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        h = json.loads(f.read(n))
    h.pop("__metadata__", None)
    return h


def model_card(info: dict, ARCH: dict, BOS: str, EOS: str, ROPE_THETA: float) -> str:  # noqa: N803
    """README.md for the model directory."""
    p = dict(info)
    for k in ("ppl_full", "ppl_eval"):
        if not p.get(k):
            p[k] = {"tokens": 0, "chunks": 0, "ppl": float("nan")}
    return f"""# llmrt-tiny

llmrt's own small default model: a {p['params'] / 1e6:.1f}M-parameter Llama (`LlamaForCausalLM`) trained from
scratch by `scripts/model/train_tiny_llama.py` on English text from Debian 12 packages. It exists so that
`llmrt generate` produces real text on a machine with no network and no GPU.

## Data

About {p['corpus_mb']:.0f} MB of English text from Debian 12 packages (package descriptions, man pages, the Python
documentation, Debian's policy/reference manuals, WordNet glosses, the King James Bible), cleaned and
deduplicated by `scripts/model/build_corpus.sh`. Sources, versions, licenses and byte counts: [CORPUS.md](CORPUS.md).
Split by document: {p['train_docs']} training documents ({p['val_docs']} of them kept aside for validation;
{p['train_tokens'] / 1e6:.1f}M tokens trained on) and {p['heldout_docs']} held-out documents
({p['heldout_tokens'] / 1e6:.2f}M tokens).

## Model

| | |
|---|---|
| architecture | LlamaForCausalLM, {ARCH['num_hidden_layers']} layers, hidden {ARCH['hidden_size']}, MLP {ARCH['intermediate_size']} (SiLU), {ARCH['num_attention_heads']} query / {ARCH['num_key_value_heads']} key-value heads (GQA) of dim {ARCH['head_dim']}, RoPE theta {ROPE_THETA:g}, RMSNorm eps {ARCH['rms_norm_eps']:g}, tied input/output embeddings |
| parameters | {p['params']:,} |
| context | {ARCH['max_position_embeddings']} tokens |
| tokenizer | byte-level BPE, vocabulary {p['vocab']} (`{BOS}` = {p['bos']}, `{EOS}` = {p['eos']}), Llama-3-style pre-tokenizer regex; BOS is prepended by the post-processor |
| weights | bfloat16 safetensors ({p['weights_mb']:.1f} MB) |

## Training

{p['steps']:,} steps of {p['batch']} windows x {p['context']} tokens ({p['tokens_seen'] / 1e6:.0f}M tokens seen, about
{p['epochs']:.1f} passes over the training tokens) in {p['train_seconds']:.0f} s on {p['hardware']}; AdamW
(betas 0.9/0.95, weight decay {p['weight_decay']}), peak learning rate {p['lr']:g} with {p['warmup']} warmup steps and cosine
decay over the time budget, bf16 autocast, gradient clipping {p['grad_clip']}, seed {p['seed']}. Kept checkpoint:
{p['kept']}. Final training loss {p['final_train_loss']:.3f}, validation loss {p['final_val_loss']:.3f}. Loss curve:
[loss_log.tsv](loss_log.tsv). torch {p['torch']}, transformers {p['transformers']}, tokenizers {p['tokenizers']}.

## Evaluation

Held-out perplexity, measured the way `llmrt perplexity --context {p['context']}` does (text encoded without
special tokens, chunks of BOS + {p['context'] - 1} tokens, second half of each chunk scored, float32 math on the
bf16 weights):

| file | tokens | chunks | perplexity |
|---|---|---|---|
| full held-out split ({p['heldout_mb']:.2f} MB) | {p['ppl_full']['tokens']:,} | {p['ppl_full']['chunks']} | {p['ppl_full']['ppl']:.3f} |
| `heldout_eval.txt` (its first {p['eval_kb']:.0f} KB) | {p['ppl_eval']['tokens']:,} | {p['ppl_eval']['chunks']} | {p['ppl_eval']['ppl']:.3f} |

Documents in these files are separated by blank lines, whereas training marked document ends with
`{EOS}`; each document boundary therefore costs a little perplexity.

`golden.json` holds greedy continuations of a few prompts computed by HF transformers in float32.

## Limitations

A tiny model trained for minutes: it continues text in the style of its corpus (Debian package
descriptions, Unix manual pages, Python documentation, dictionary glosses, King James English) and
is often repetitive or wrong. It knows little about the world, is not instruction-tuned or aligned,
and should not be relied on for anything. English only.
"""


def write_tar(model_dir: str, out_dir: str, names: list[str]) -> list[str]:
    path = os.path.join(out_dir, "model.tar.gz")
    with tarfile.open(path, "w:gz", compresslevel=6) as tar:
        for n in names:
            ti = tar.gettarinfo(os.path.join(model_dir, n), arcname=n)
            ti.uid = ti.gid = 0
            ti.uname = ti.gname = ""
            ti.mtime = int(time.time())
            with open(os.path.join(model_dir, n), "rb") as f:
                tar.addfile(ti, f)
    size = os.path.getsize(path)
    if size <= PART_BYTES:
        return [path]
    parts = []
    with open(path, "rb") as f:
        i = 0
        while True:
            chunk = f.read(PART_BYTES)
            if not chunk:
                break
            p = f"{path}.part{i:02d}"
            with open(p, "wb") as g:
                g.write(chunk)
            parts.append(p)
            i += 1
    os.remove(path)
    return parts
