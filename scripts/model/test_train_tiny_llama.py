#!/usr/bin/env python3
"""Checks of train_tiny_llama.py's pure-Python / torch parts that need no transformers or tokenizers:
the llmrt perplexity procedure (against a literal transcription of tools/llmrt/cmd_perplexity.cpp),
the learning-rate schedule, corpus reading, the training loop (with a stand-in model) and packing.

    python3 scripts/model/test_train_tiny_llama.py     (torch needed for some tests; skipped without)
"""
import gzip
import math
import os
import sys
import tarfile
import tempfile
import time
import types
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_llama_pack as P  # noqa: E402
import train_tiny_llama as T  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def llmrt_perplexity_reference(logprob_of, ids, bos, context):
    """Line-by-line transcription of cmd_perplexity.cpp; logprob_of(chunk) -> lp where lp[i]
    is log p(chunk[i + 1] | chunk[:i + 1])."""
    body = context - (1 if bos is not None else 0)
    n_chunks = len(ids) // body
    nll, count = 0.0, 0
    for c in range(n_chunks):
        chunk = ([bos] if bos is not None else []) + ids[c * body:(c + 1) * body]
        lp = logprob_of(chunk)
        first = len(chunk) // 2
        for i in range(first, len(chunk)):
            nll += -lp[i - 1]
            count += 1
    return math.exp(nll / count), count, n_chunks


@unittest.skipIf(torch is None, "torch not installed")
class PerplexityTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.V = 37
        self.emb = torch.randn(self.V, 8)
        self.pos = torch.randn(64, 8) * 0.5
        self.out = torch.randn(8, self.V)

    def logits(self, x):
        # A position-dependent, context-dependent stand-in for a causal LM: cumulative mean of
        # embeddings plus a position term, projected to the vocabulary.
        e = self.emb[x]
        csum = e.cumsum(1) / torch.arange(1, x.shape[1] + 1).view(1, -1, 1)
        return (csum + self.pos[: x.shape[1]]) @ self.out

    def test_matches_cpp_procedure(self):
        g = torch.Generator().manual_seed(1)
        ids = torch.randint(2, self.V, (1000,), generator=g).tolist()
        for context in (16, 17, 32):
            for bos in (1, None):
                def lp_of(chunk):
                    x = torch.tensor([chunk])
                    logp = torch.log_softmax(self.logits(x).float(), -1)[0]
                    return [float(logp[i, chunk[i + 1]]) for i in range(len(chunk) - 1)]

                want, count, n = llmrt_perplexity_reference(lp_of, ids, bos, context)
                got = T.chunked_perplexity(self.logits, ids, bos, context, batch=3)
                self.assertAlmostEqual(got["ppl"], want, places=5)
                self.assertEqual(got["scored_tokens"], count)
                self.assertEqual(got["chunks"], n)
                body = context - (1 if bos is not None else 0)
                self.assertEqual(n, len(ids) // body)
                self.assertEqual(count, n * (context - context // 2))

    def test_uniform_model_gives_vocab_size(self):
        ids = list(range(2, 30)) * 10
        got = T.chunked_perplexity(lambda x: torch.zeros(x.shape[0], x.shape[1], self.V), ids, 1, 16)
        self.assertAlmostEqual(got["ppl"], float(self.V), places=4)

    def test_too_short(self):
        with self.assertRaises(T.TrainError):
            T.chunked_perplexity(self.logits, [3, 4, 5], 1, 16)


class ScheduleTest(unittest.TestCase):
    def test_warmup_then_cosine(self):
        self.assertAlmostEqual(T.lr_at(0, 0.0, 1e-3, 10, 0.1), 1e-4)
        self.assertAlmostEqual(T.lr_at(9, 0.0, 1e-3, 10, 0.1), 1e-3)
        self.assertAlmostEqual(T.lr_at(10, 0.0, 1e-3, 10, 0.1), 1e-3)
        self.assertAlmostEqual(T.lr_at(50, 0.5, 1e-3, 10, 0.1), 1e-3 * (0.1 + 0.9 * 0.5))
        self.assertAlmostEqual(T.lr_at(99, 1.0, 1e-3, 10, 0.1), 1e-4)
        self.assertAlmostEqual(T.lr_at(99, 1.7, 1e-3, 10, 0.1), 1e-4)


class CorpusTest(unittest.TestCase):
    def test_read_and_truncate(self):
        docs = ["first doc\n\nsecond para", "  indented start", "third é"]
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "x.txt.gz")
            text = T.DOC_SEP.join(docs) + "\n"
            with gzip.open(p, "wb") as f:
                f.write(text.encode("utf-8"))
            got_text, got_docs = T.read_docs(p)
            self.assertEqual(got_text, text)
            self.assertEqual(got_docs, docs)
        self.assertEqual(T.truncate_docs(docs, 5), docs[0] + "\n")
        n0 = len(docs[0].encode()) + 3
        n1 = len(docs[1].encode()) + 3
        self.assertEqual(T.truncate_docs(docs, n0 + n1), docs[0] + T.DOC_SEP + docs[1] + "\n")
        self.assertEqual(T.truncate_docs(docs, 10**6), text)


class ArchTest(unittest.TestCase):
    def test_parameter_count_in_range(self):
        a = T.ARCH
        h, hd, L = a["hidden_size"], a["head_dim"], a["num_hidden_layers"]
        q = h * a["num_attention_heads"] * hd * 2  # q_proj and o_proj
        kv = 2 * h * a["num_key_value_heads"] * hd
        mlp = 3 * h * a["intermediate_size"]
        n = L * (q + kv + mlp + 2 * h) + 8192 * h + h  # tied embeddings
        self.assertEqual(n, 12_587_904)
        self.assertTrue(10_000_000 <= n <= 15_000_000)
        self.assertLessEqual(n * 2, 30_000_000)  # bf16 bytes


@unittest.skipIf(torch is None, "torch not installed")
class TrainLoopTest(unittest.TestCase):
    class Tiny(torch.nn.Module if torch else object):
        def __init__(self, v):
            super().__init__()
            self.emb = torch.nn.Embedding(v, 16)
            self.lin = torch.nn.Linear(16, v)

        def forward(self, input_ids=None, use_cache=False):
            return types.SimpleNamespace(logits=self.lin(torch.tanh(self.emb(input_ids))))

    def test_learns_and_logs(self):
        torch.manual_seed(0)
        V = 11
        pattern = torch.tensor([2, 3, 4, 5, 6, 7, 8, 9, 10, 1] * 400)  # deterministic successor
        model = self.Tiny(V)
        args = T.parse_args(["--corpus", "x", "--out", "y", "--context", "16", "--batch", "8", "--lr", "3e-2",
                             "--warmup", "5", "--log-every", "5", "--val-every-s", "0", "--max-steps", "150",
                             "--no-compile"])
        val = pattern[: 4 * 17].view(4, 17)
        with tempfile.TemporaryDirectory() as d:
            log_path = os.path.join(d, "loss_log.tsv")
            s = T.train_loop(model, pattern, val, args, time.time() + 120, torch.device("cpu"), log_path)
            with open(log_path) as f:
                rows = [l.rstrip("\n").split("\t") for l in f]
        self.assertEqual(rows[0], ["step", "tokens", "elapsed_s", "lr", "train_loss", "val_loss"])
        self.assertEqual(s["steps"], 150)
        self.assertEqual(s["tokens"], 150 * 8 * 16)
        first_loss = float(rows[1][4])
        self.assertGreater(first_loss, 1.5)
        self.assertLess(s["final_val_loss"], 0.3)
        self.assertTrue(all(r[5] for r in rows[2:]))  # val every log step with val_every_s=0

    def test_deadline_stops(self):
        model = self.Tiny(11)
        args = T.parse_args(["--corpus", "x", "--out", "y", "--context", "16", "--batch", "4", "--no-compile"])
        stream = torch.randint(1, 11, (500,))
        with tempfile.TemporaryDirectory() as d:
            t = time.time()
            s = T.train_loop(model, stream, stream[:34].view(2, 17), args, time.time() + 1.0, torch.device("cpu"),
                             os.path.join(d, "l.tsv"))
        self.assertLess(time.time() - t, 10)
        self.assertGreater(s["steps"], 0)


class PackTest(unittest.TestCase):
    def test_split_and_reassemble(self):
        old = P.PART_BYTES
        try:
            P.PART_BYTES = 1000
            with tempfile.TemporaryDirectory() as d:
                src, out = os.path.join(d, "m"), os.path.join(d, "o")
                os.makedirs(src)
                os.makedirs(out)
                payload = os.urandom(5000)
                with open(os.path.join(src, "model.safetensors"), "wb") as f:
                    f.write(payload)
                with open(os.path.join(src, "config.json"), "w") as f:
                    f.write("{}")
                parts = T.write_tar(src, out, ["config.json", "model.safetensors"])
                self.assertGreater(len(parts), 1)
                self.assertTrue(all(os.path.getsize(p) <= 1000 for p in parts))
                whole = os.path.join(d, "model.tar.gz")
                with open(whole, "wb") as f:
                    for p in sorted(parts):
                        f.write(open(p, "rb").read())
                with tarfile.open(whole) as tar:
                    self.assertEqual(tar.getnames(), ["config.json", "model.safetensors"])
                    self.assertEqual(tar.extractfile("model.safetensors").read(), payload)
        finally:
            P.PART_BYTES = old


if __name__ == "__main__":
    unittest.main(verbosity=2)
