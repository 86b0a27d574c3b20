"""Pure helpers (stdlib + numpy only) for the golden-reference generators in scripts/golden/.

No torch here, so these can be exercised on a machine without torch/transformers.
"""

import json
import math
import os
import shutil
import struct
import sys

import numpy as np


class GoldenError(Exception):
    """A check failed: the model's fixtures must not be used."""


def warn(msg):
    print("WARNING: " + msg, file=sys.stderr, flush=True)


def info(msg):
    print(msg, flush=True)


def expected_inv_freq(head_dim, theta, scaling, seq_len=None, max_position_embeddings=None):
    """inv_freq per HF's definitions, in float64. scaling: None or a dict with rope_type."""
    dim = int(head_dim)
    exps = np.arange(0, dim, 2, dtype=np.float64) / dim
    rope_type = "default"
    if scaling:
        rope_type = scaling.get("rope_type", scaling.get("type", "default")) or "default"
    if rope_type == "dynamic":
        mpe = float(max_position_embeddings)
        length = float(seq_len) if seq_len is not None and seq_len > mpe else mpe
        factor = float(scaling["factor"])
        base = float(theta) * ((factor * length / mpe) - (factor - 1.0)) ** (dim / (dim - 2.0))
        return 1.0 / base ** exps
    inv = 1.0 / float(theta) ** exps
    if rope_type == "default":
        return inv
    if rope_type == "linear":
        return inv / float(scaling["factor"])
    if rope_type == "llama3":
        factor = float(scaling["factor"])
        low = float(scaling["low_freq_factor"])
        high = float(scaling["high_freq_factor"])
        old_ctx = float(scaling["original_max_position_embeddings"])
        low_wavelen = old_ctx / low
        high_wavelen = old_ctx / high
        wavelen = 2.0 * math.pi / inv
        out = np.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (old_ctx / wavelen - low) / (high - low)
        smoothed = (1.0 - smooth) * out / factor + smooth * out
        medium = np.logical_and(np.logical_not(wavelen < high_wavelen), np.logical_not(wavelen > low_wavelen))
        return np.where(medium, smoothed, out)
    raise GoldenError("expected_inv_freq: unsupported rope_type %r" % (rope_type,))


def read_safetensors_header(path):
    """Returns {tensor name: {"dtype", "shape", "data_offsets"}} (no __metadata__)."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise GoldenError("%s: shorter than 8 bytes" % path)
        (n,) = struct.unpack("<Q", raw)
        size = os.path.getsize(path)
        if n <= 0 or 8 + n > size:
            raise GoldenError("%s: header length %d does not fit the file size %d" % (path, n, size))
        header = json.loads(f.read(n).decode("utf-8"))
    header.pop("__metadata__", None)
    return header


def save_logits_npy(path, logits):
    arr = np.ascontiguousarray(np.asarray(logits, dtype="<f4"))
    if arr.ndim != 2:
        raise GoldenError("%s: logits must be 2-D, got shape %s" % (path, arr.shape))
    if not np.all(np.isfinite(arr)):
        raise GoldenError("%s: logits contain NaN/Inf" % path)
    np.save(path, arr, allow_pickle=False)
    back = np.load(path, allow_pickle=False)
    if back.dtype != np.dtype("<f4") or back.shape != arr.shape or not np.array_equal(back, arr):
        raise GoldenError("%s: read-back mismatch" % path)
    return list(arr.shape)


def _is_scalar(x):
    return x is None or isinstance(x, (bool, int, float, str))


def dump_json(obj, indent=0):
    """JSON with dicts indented and lists of scalars kept on one line."""
    pad = " " * indent
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = []
        for k, v in obj.items():
            items.append(pad + " " + json.dumps(str(k)) + ": " + dump_json(v, indent + 1))
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, (list, tuple)):
        if all(_is_scalar(x) for x in obj):
            return "[" + ", ".join(json.dumps(x, allow_nan=False) for x in obj) + "]"
        items = [pad + " " + dump_json(x, indent + 1) for x in obj]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(obj, allow_nan=False)


def write_json(path, obj):
    text = dump_json(obj) + "\n"
    json.loads(text)  # must round-trip
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def prepare_model_dir(path):
    """Creates an empty directory, clearing an earlier run's output (never anything else)."""
    if os.path.lexists(path):
        if not os.path.isdir(path) or os.path.islink(path):
            raise GoldenError("%s exists and is not a directory" % path)
        entries = os.listdir(path)
        ours = {"config.json", "golden.json", "model.safetensors", "generation_config.json"}
        if entries and not ours.intersection(entries):
            raise GoldenError("refusing to clear %s: it does not look like an earlier output of this script "
                              "(none of %s); entries: %s" % (path, sorted(ours), sorted(entries)))
        shutil.rmtree(path)
    os.makedirs(path)


def dir_size(path):
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            total += os.path.getsize(os.path.join(root, name))
    return total


def make_prompts(vocab, lengths, seed):
    rng = np.random.RandomState(seed)
    return [[int(x) for x in rng.randint(3, vocab, size=n)] for n in lengths]


MIN_DISTINCT_IDS = 5


def is_degenerate(ids):
    """A continuation stuck in a short loop: fewer than MIN_DISTINCT_IDS distinct ids."""
    return len(set(ids)) < MIN_DISTINCT_IDS
