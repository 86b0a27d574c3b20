#!/usr/bin/env python3
"""Expected tokenizer outputs from HF `tokenizers` for llmrt's tokenizer tests.

Usage:
    tokenizer_fixtures.py TOKENIZER_DIR OUT_DIR [--corpus corpus.json] [--names a b ...] [--max-bytes N]
    tokenizer_fixtures.py --copy-from-shared ../shared/testdata TOKENIZER_DIR OUT_DIR

TOKENIZER_DIR holds copies of tokenizer files laid out as <name>/tokenizer.json
(llama2, llama3, mistral, phi-3, qwen2-family, falcon, gpt2, stories260K);
--copy-from-shared first fills it from a ../shared/testdata tree. For every
tokenizer found, each text of the corpus (tests/data/tokenizer/corpus.json by
default) is encoded with add_special_tokens False and True, and the ids with
special tokens are decoded with skip_special_tokens False and True. The
results go to OUT_DIR/expected_<name>.json (one case per line), which
tests/tokenizer/hf_parity_test.cpp reads.

The synthetic tokenizers (scripts/golden/make_synthetic_tokenizers.py) use
  tokenizer_fixtures.py tests/data/tokenizer/synthetic tests/data/tokenizer/synthetic --max-bytes 160

scripts/golden/tokenizer_fixtures.mjs does the same with the `tokenizers` npm
package (the same Rust library through its Node bindings) where Python's
`tokenizers` is not installed.
"""
import argparse
import json
import os
import shutil
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_CORPUS = os.path.join(REPO, "tests", "data", "tokenizer", "corpus.json")

# name -> path of its tokenizer.json under ../shared/testdata
SHARED_LAYOUT = {
    "llama2": "tokenizers/llama2/tokenizer.json",
    "llama3": "tokenizers/llama3/tokenizer.json",
    "mistral": "tokenizers/mistral/tokenizer.json",
    "phi-3": "tokenizers/phi-3/tokenizer.json",
    "qwen2-family": "tokenizers/qwen2-family/tokenizer.json",
    "falcon": "tokenizers/falcon/tokenizer.json",
    "gpt2": "tokenizers/gpt2/tokenizer.json",
    "stories260K": "models/stories260K-hf/tokenizer.json",
}


def copy_from_shared(shared, dest):
    for name, rel in SHARED_LAYOUT.items():
        src = os.path.join(shared, rel)
        if not os.path.isfile(src):
            print(f"skip {name}: {src} absent", file=sys.stderr)
            continue
        os.makedirs(os.path.join(dest, name), exist_ok=True)
        shutil.copyfile(src, os.path.join(dest, name, "tokenizer.json"))


def write_fixture(path, header, cases):
    # One case per line keeps diffs readable and the file small.
    with open(path, "w", encoding="utf-8") as f:
        f.write("{\n")
        for key, value in header.items():
            f.write(f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=False)},\n")
        f.write('"cases": [\n')
        f.write(",\n".join(json.dumps(c, ensure_ascii=False, separators=(",", ":")) for c in cases))
        f.write("\n]}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tokenizer_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--corpus", default=DEFAULT_CORPUS)
    ap.add_argument("--names", nargs="*", help="only these tokenizers")
    ap.add_argument("--max-bytes", type=int, default=0,
                    help="skip corpus texts longer than this many UTF-8 bytes (0: keep all)")
    ap.add_argument("--copy-from-shared", metavar="SHARED_TESTDATA",
                    help="first copy the tokenizer files from this ../shared/testdata tree")
    args = ap.parse_args()

    import tokenizers
    from tokenizers import Tokenizer

    if args.copy_from_shared:
        copy_from_shared(args.copy_from_shared, args.tokenizer_dir)
    with open(args.corpus, encoding="utf-8") as f:
        corpus = json.load(f)
    if args.max_bytes > 0:
        corpus = [c for c in corpus if len(c["text"].encode("utf-8")) <= args.max_bytes]
    os.makedirs(args.out_dir, exist_ok=True)
    generator = f"tokenizers {tokenizers.__version__} (python)"
    written = 0
    for name in sorted(os.listdir(args.tokenizer_dir)):
        if args.names and name not in args.names:
            continue
        path = os.path.join(args.tokenizer_dir, name, "tokenizer.json")
        if not os.path.isfile(path):
            continue
        tok = Tokenizer.from_file(path)
        cases = []
        for c in corpus:
            text = c["text"]
            ids = tok.encode(text, add_special_tokens=False).ids
            ids_special = tok.encode(text, add_special_tokens=True).ids
            cases.append({
                "id": c["id"],
                "text": text,
                "ids": ids,
                "ids_special": ids_special,
                "decode": tok.decode(ids_special, skip_special_tokens=False),
                "decode_skip": tok.decode(ids_special, skip_special_tokens=True),
            })
        out = os.path.join(args.out_dir, f"expected_{name}.json")
        write_fixture(out, {"tokenizer": name, "generator": generator,
                            "corpus": "tests/data/tokenizer/corpus.json"}, cases)
        print(f"{out}: {len(cases)} cases ({generator})")
        written += 1
    if written == 0:
        sys.exit(f"no <name>/tokenizer.json found under {args.tokenizer_dir}")


if __name__ == "__main__":
    main()
