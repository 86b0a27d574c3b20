#!/usr/bin/env python3
"""Encode throughput of HF `tokenizers` on the same documents as llmrt_tokenizer_bench.

Usage: RAYON_NUM_THREADS=1 hf_tokenizer_bench.py TOKENIZER_JSON TEXT_FILE [--repeat N] [--doc-bytes B]
                                                   [--no-special] [--check-ids IDS.txt]

The text is cut exactly as bench/tokenizer/tokenizer_bench.cpp cuts it (at
"\\n\\n", paragraphs joined until a document has >= B bytes). Two single-threaded
measurements are reported: Tokenizer.encode called per document in a loop,
and encode_batch over all documents (RAYON_NUM_THREADS=1 is set before the
library loads). Best of N passes; MB/s counts 10^6 bytes of input. The last
lines are JSON, one per mode, comparable to llmrt's JSON line.
"""
import argparse
import json
import os
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def split_documents(data: bytes, doc_bytes: int):
    docs, start, pos = [], 0, 0
    while pos < len(data):
        hit = data.find(b"\n\n", pos)
        end = len(data) if hit < 0 else hit + 2
        pos = end
        if end - start >= doc_bytes or end == len(data):
            docs.append(data[start:end].decode("utf-8"))
            start = end
    return docs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tokenizer_json")
    ap.add_argument("text_file")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--doc-bytes", type=int, default=2000)
    ap.add_argument("--no-special", action="store_true")
    args = ap.parse_args()

    import tokenizers
    from tokenizers import Tokenizer

    t0 = time.perf_counter()
    tok = Tokenizer.from_file(args.tokenizer_json)
    load_s = time.perf_counter() - t0
    with open(args.text_file, "rb") as f:
        data = f.read()
    docs = split_documents(data, args.doc_bytes)
    add_special = not args.no_special

    results = {}
    for mode in ("encode", "encode_batch"):
        best, tokens = float("inf"), 0
        for _ in range(max(1, args.repeat)):
            start = time.perf_counter()
            if mode == "encode":
                n = sum(len(tok.encode(d, add_special_tokens=add_special).ids) for d in docs)
            else:
                n = sum(len(e.ids) for e in tok.encode_batch(docs, add_special_tokens=add_special))
            best = min(best, time.perf_counter() - start)
            tokens = n
        results[mode] = (best, tokens)

    print(f"tokenizer   {args.tokenizer_json} (loaded in {load_s:.2f} s), tokenizers {tokenizers.__version__}")
    print(f"text        {args.text_file}: {len(data)} bytes, {len(docs)} documents (>= {args.doc_bytes} bytes each)")
    for mode, (best, tokens) in results.items():
        print(f"{mode:<12}{tokens} tokens, best of {args.repeat}: {best:.3f} s -> "
              f"{len(data) / 1e6 / best:.2f} MB/s, {tokens / best:.0f} tokens/s "
              f"(RAYON_NUM_THREADS={os.environ['RAYON_NUM_THREADS']})")
    for mode, (best, tokens) in results.items():
        print(json.dumps({"impl": f"hf-tokenizers-{tokenizers.__version__}-{mode}",
                          "tokenizer": args.tokenizer_json, "bytes": len(data), "documents": len(docs),
                          "tokens": tokens, "seconds": round(best, 6),
                          "mb_per_s": round(len(data) / 1e6 / best, 3), "tokens_per_s": round(tokens / best, 1),
                          "load_seconds": round(load_s, 3), "threads": 1}))


if __name__ == "__main__":
    sys.exit(main())
