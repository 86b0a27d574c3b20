#!/usr/bin/env python3
"""Reference ids for llmrt's tokenizers without tokenizer.json, from Python's
sentencepiece and tiktoken (tests/tokenizer/sentencepiece_test.cpp and
tiktoken_test.cpp read them).

    make_tokenizer_model_ids.py stage SHARED DEST   # copy the input files out of ../shared/testdata
    make_tokenizer_model_ids.py run SRC OUT_DIR     # SRC: a ../shared/testdata tree, or DEST of `stage`

`run` needs python3 with sentencepiece and tiktoken (no network: nothing is
downloaded) and writes OUT_DIR/sentencepiece_ids.json and OUT_DIR/tiktoken_ids.json,
which belong in tests/data/tokenizer/:

- sentencepiece_ids.json: for each SentencePiece model (MODELS), every text of
  tokenizers/tests/strings.json encoded with sp.encode(text) (no BOS/EOS) and those
  ids decoded with sp.decode, plus the model's piece count and BOS/EOS ids (llmrt adds
  BOS = bos_id in front when add_special_tokens is set, as LlamaTokenizer does).
- tiktoken_ids.json: tiktoken.Encoding(pat_str=Qwen v1's PAT_STR, mergeable_ranks=...,
  special_tokens=Qwen v1's <|endoftext|>, <|im_start|>, <|im_end|>, <|extra_0..204|> from
  id max(151643, ranks)) over the byte-level vocabularies of VOCABULARIES (rank = id,
  the tokenizer.json's added tokens left out), each text NFC-normalized and encoded
  with allowed_special="all" (what Qwen's QWenTokenizer does), then decoded. The
  texts are strings.json's plus EXTRA_TEXTS (special tokens, contractions, digits,
  NFC, line ends). llmrt's test builds the same ranks from the same files at run time.

On the GPU machine (python3 there has both packages; ../shared does not travel):
    here:   scripts/golden/make_tokenizer_model_ids.py stage ../shared/testdata .carry-tok
            (and make git ignore it: echo /.carry-tok/ >> .git/info/exclude)
    device: python3 scripts/golden/make_tokenizer_model_ids.py run .carry-tok $OUT   (carry .carry-tok)
    here:   copy the two files it returns into tests/data/tokenizer/
"""
import json
import os
import shutil
import sys
import unicodedata

STRINGS = "tokenizers/tests/strings.json"
MODELS = [
    "tokenizers/llama2/tokenizer.model",
    "tokenizers/mistral/tokenizer.model.v1",
    "tokenizers/mistral/tokenizer.model.v3",
    "models/llama2c/tok512.model",
]
# name -> tokenizer.json whose byte-level vocabulary becomes the ranks
VOCABULARIES = {
    "gpt2_vocab": "tokenizers/gpt2/tokenizer.json",
    "qwen_vocab": "tokenizers/qwen2-family/tokenizer.json",  # Qwen2's vocabulary is qwen.tiktoken's
}

# tokenization_qwen.py
QWEN_PAT_STR = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
                r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN_SPECIAL_START = 151643
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [f"<|extra_{i}|>" for i in range(205)]

EXTRA_TEXTS = [
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
    "<|im_start|>assistant\n",
    "first<|endoftext|>second <|extra_0|><|extra_204|> <|extra_205|> <|endoftext",
    "<|im_start<|im_end|>|> <|IM_END|>",
    "I'M HERE, YOU'RE THERE, WE'VE GOT IT, HE'LL GO, SHE'D SAY, IT'S, DON'T",
    "it's 'S 'sup 'll've",
    "e\u0301 A\u030a \u212b \uff21 \u1e9b\u0323 caf\u00e9",
    "2024-06-01 12:34:56.789 1,234,567 \u0663\u0664 \u00bd \u2162",
    "line one\r\nline two\r\n\r\n  indented\n\n\n",
    "trailing spaces   \n   leading\t\ttabs \t \n",
    "nbsp\u00a0here \u3000ideographic\u2028line sep",
    "\u0645\u0631\u062d\u0628\u0627 \u05e9\u05dc\u05d5\u05dd \u0928\u092e\u0938\u094d\u0924\u0947 \ud55c\uad6d\uc5b4",
    "emoji \U0001F468\u200d\U0001F469\u200d\U0001F467 \U0001F3F3\ufe0f\u200d\U0001F308 \u2705\U0001F44D\U0001F3FD",
    "mixed123abc456 x2y z99 v1.2.3",
    "a" * 300,
    " " * 70 + "x",
    "\n" * 20,
    "$$$ ((( ))) !!! ??? ... --- ___ \"\"\" '''",
]


def bytes_to_unicode():
    """GPT-2's byte-level alphabet: byte -> character."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def ranks_from_tokenizer_json(path):
    """{token bytes: rank} from a byte-level tokenizer.json (rank = id, added tokens left out)."""
    with open(path, encoding="utf-8") as f:
        root = json.load(f)
    added = {a["content"] for a in root.get("added_tokens") or []}
    char_to_byte = {c: b for b, c in bytes_to_unicode().items()}
    ranks = {}
    for token, rank in root["model"]["vocab"].items():
        if token in added:
            continue
        ranks[bytes(char_to_byte[ch] for ch in token)] = rank
    if sorted(ranks.values()) != list(range(len(ranks))):
        sys.exit(f"{path}: the ranks are not 0..{len(ranks) - 1}")
    return ranks


def load_texts(src):
    with open(os.path.join(src, STRINGS), encoding="utf-8") as f:
        return [s["text"] for s in json.load(f)]


def write_json(path, header, list_key, rows):
    """`header` with `list_key`: rows, one row per line (small diffs when regenerated)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("{\n")
        for k, v in header.items():
            f.write(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},\n")
        f.write(f"{json.dumps(list_key)}: {{\n")
        names = list(rows)
        for i, name in enumerate(names):
            entry = dict(rows[name])
            cases = entry.pop("cases")
            f.write(f"{json.dumps(name)}: {{\n")
            for k, v in entry.items():
                f.write(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},\n")
            f.write('  "cases": [\n')
            f.write(",\n".join("    " + json.dumps(c, ensure_ascii=False, separators=(",", ":")) for c in cases))
            f.write("\n  ]\n}" + ("," if i + 1 < len(names) else "") + "\n")
        f.write("}\n}\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def run_sentencepiece(src, out_dir):
    import sentencepiece as spm

    texts = load_texts(src)
    models = {}
    for rel in MODELS:
        path = os.path.join(src, rel)
        if not os.path.isfile(path):
            print(f"skip {rel}: absent", file=sys.stderr)
            continue
        sp = spm.SentencePieceProcessor(model_file=path)
        cases = []
        for t in texts:
            ids = sp.encode(t)
            cases.append({"ids": ids, "decoded": sp.decode(ids)})
        models[rel] = {"piece_size": sp.get_piece_size(), "bos_id": sp.bos_id(), "eos_id": sp.eos_id(),
                       "unk_id": sp.unk_id(), "cases": cases}
    header = {
        "description": "Python sentencepiece: sp.encode(text) (no BOS/EOS) of every text, and sp.decode of those ids",
        "produced_by": f"sentencepiece {spm.__version__} (scripts/golden/make_tokenizer_model_ids.py)",
        "strings_file": STRINGS,
        "texts": texts,
    }
    write_json(os.path.join(out_dir, "sentencepiece_ids.json"), header, "models", models)


def run_tiktoken(src, out_dir):
    import tiktoken

    texts = load_texts(src) + EXTRA_TEXTS
    encodings = {}
    for name, rel in VOCABULARIES.items():
        path = os.path.join(src, rel)
        if not os.path.isfile(path):
            print(f"skip {name}: {rel} absent", file=sys.stderr)
            continue
        ranks = ranks_from_tokenizer_json(path)
        start = max(QWEN_SPECIAL_START, max(ranks.values()) + 1)
        specials = {s: start + i for i, s in enumerate(QWEN_SPECIALS)}
        enc = tiktoken.Encoding(name=f"llmrt_{name}", pat_str=QWEN_PAT_STR, mergeable_ranks=ranks,
                                special_tokens=specials)
        cases = []
        for t in texts:
            ids = enc.encode(unicodedata.normalize("NFC", t), allowed_special="all")
            cases.append({"ids": ids, "decoded": enc.decode(ids, errors="replace")})
        encodings[name] = {"source": rel, "ranks": len(ranks), "special_start": start, "cases": cases}
    header = {
        "description": "Python tiktoken with Qwen v1's pat_str and special tokens over byte-level vocabularies "
                       "(rank = tokenizer.json id): encode(NFC(text), allowed_special='all') and decode",
        "produced_by": f"tiktoken {tiktoken.__version__} (scripts/golden/make_tokenizer_model_ids.py)",
        "pat_str": QWEN_PAT_STR,
        "texts": texts,
    }
    write_json(os.path.join(out_dir, "tiktoken_ids.json"), header, "encodings", encodings)


def stage(shared, dest):
    for rel in [STRINGS] + MODELS + list(VOCABULARIES.values()):
        src = os.path.join(shared, rel)
        if not os.path.isfile(src):
            print(f"skip {rel}: absent", file=sys.stderr)
            continue
        os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
        shutil.copyfile(src, os.path.join(dest, rel))
    print(f"staged into {dest}; make git ignore it (echo /{os.path.basename(os.path.normpath(dest))}/ >> "
          ".git/info/exclude) and carry it")


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("stage", "run"):
        sys.exit(__doc__)
    if sys.argv[1] == "stage":
        stage(sys.argv[2], sys.argv[3])
        return
    src, out_dir = sys.argv[2], sys.argv[3]
    os.makedirs(out_dir, exist_ok=True)
    run_sentencepiece(src, out_dir)
    run_tiktoken(src, out_dir)


if __name__ == "__main__":
    main()
