#!/usr/bin/env python3
"""Writes small synthetic tokenizer.json files for llmrt's tokenizer tests.

Usage: make_synthetic_tokenizers.py [OUT_DIR]   (default tests/data/tokenizer/synthetic)

The vocabularies are trained here (a few hundred BPE merges over a short
built-in English text), so no third-party vocabulary is copied. Each variant
exercises components the real tokenizer files do not use: Metaspace with each
prepend scheme, added tokens with lstrip/rstrip/single_word/normalized,
NFKC/Lowercase/Strip/Replace/BertNormalizer, the Whitespace/BertPreTokenizer/
Digits/Punctuation/CharDelimiterSplit pre-tokenizers and split behaviours,
unknown tokens with and without fusing, templates with EOS, Bert/Roberta
processing, truncation and padding. Expected outputs come from
tokenizer_fixtures.py / .mjs run on OUT_DIR with --max-bytes 160 (files
expected_<name>.json there).
"""
import collections
import json
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TEXT = """Once upon a time there was a little girl who lived in a village near the forest.
Whenever she went out, the little girl wore a red riding cloak, so everyone in the village called her
Little Red Riding Hood. One morning, Little Red Riding Hood asked her mother if she could go to visit
her grandmother as it had been awhile since they'd seen each other. "That's a good idea," her mother said.
The numbers 1, 2, 3 and 42 were written on the wall: 2024-01-15, 3.14159, 100%!
Hello world, hello there; the weather is nice today. We're going to the park, aren't we?"""


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def train_bpe(words, base_symbols, num_merges):
    """Plain BPE training: merge the most frequent adjacent pair (ties: smallest pair)."""
    counts = collections.Counter(words)
    seqs = {w: list(w) for w in counts}
    vocab = list(dict.fromkeys(base_symbols))
    merges = []
    for _ in range(num_merges):
        pairs = collections.Counter()
        for w, c in counts.items():
            s = seqs[w]
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        best = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        if pairs[best] < 2:
            break
        merges.append(best)
        new = best[0] + best[1]
        if new not in vocab:
            vocab.append(new)
        for w in counts:
            s = seqs[w]
            out, i = [], 0
            while i < len(s):
                if i + 1 < len(s) and (s[i], s[i + 1]) == best:
                    out.append(new)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            seqs[w] = out
    return vocab, merges


def sp_base():
    """SentencePiece-style BPE: <unk> <s> </s>, 256 byte tokens, characters, merges over '▁word'."""
    words = ["\u2581" + w for w in TEXT.replace("\n", " ").split(" ") if w]
    chars = sorted(set("".join(words)))
    specials = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    vocab, merges = train_bpe(words, chars, 220)
    tokens = specials + vocab
    return {t: i for i, t in enumerate(tokens)}, [f"{a} {b}" for a, b in merges]


def bl_base():
    """Byte-level BPE: the 256 alphabet characters, merges over GPT-2-style words."""
    enc = bytes_to_unicode()
    words = re.findall(r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+", TEXT)
    mapped = ["".join(enc[b] for b in w.encode("utf-8")) for w in words]
    alphabet = [enc[b] for b in range(256)]
    vocab, merges = train_bpe(mapped, alphabet, 250)
    return {t: i for i, t in enumerate(vocab)}, [[a, b] for a, b in merges]


def added(id_, content, special=True, normalized=False, lstrip=False, rstrip=False, single_word=False):
    return {"id": id_, "content": content, "single_word": single_word, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": normalized, "special": special}


def sp_decoder():
    return {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}


def bos_template():
    return {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}


def tokenizer(model, normalizer=None, pre_tokenizer=None, post_processor=None, decoder=None, added_tokens=(),
              truncation=None, padding=None):
    return {"version": "1.0", "truncation": truncation, "padding": padding, "added_tokens": list(added_tokens),
            "normalizer": normalizer, "pre_tokenizer": pre_tokenizer, "post_processor": post_processor,
            "decoder": decoder, "model": model}


def sp_model(vocab, merges, byte_fallback=True, fuse_unk=True, unk="<unk>"):
    return {"type": "BPE", "dropout": None, "unk_token": unk, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": fuse_unk, "byte_fallback": byte_fallback,
            "ignore_merges": False, "vocab": vocab, "merges": merges}


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "tests", "data", "tokenizer", "synthetic")
    sp_vocab, sp_merges = sp_base()
    bl_vocab, bl_merges = bl_base()
    n_sp = len(sp_vocab)
    base_added = [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")]
    variants = {}

    def metaspace(scheme, split, decoder="metaspace"):
        dec = ({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme, "split": split}
               if decoder == "metaspace" else sp_decoder())
        return tokenizer(sp_model(sp_vocab, sp_merges), None,
                         {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme, "split": split},
                         bos_template(), dec, base_added)

    variants["sp_metaspace_first"] = metaspace("first", False, decoder="sequence")
    variants["sp_metaspace_first_split"] = metaspace("first", True)
    variants["sp_metaspace_always"] = metaspace("always", True)
    variants["sp_metaspace_never"] = metaspace("never", True)
    legacy = metaspace("always", True)
    legacy["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True}
    legacy["decoder"] = {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True}
    variants["sp_metaspace_legacy"] = legacy

    flags = metaspace("first", False, decoder="sequence")
    flags["added_tokens"] = base_added + [
        added(n_sp, "<mask>", special=True, lstrip=True, rstrip=True),
        added(n_sp + 1, "[SEP]", special=False, single_word=True),
        added(n_sp + 2, "hello", special=False, normalized=True),
        added(n_sp + 3, "<eot>", special=True, rstrip=True),
        added(n_sp + 4, "<bot>", special=True, lstrip=True),
        added(n_sp + 5, "user", special=False, single_word=True, lstrip=True),
        added(sp_vocab["\u2581the"], "\u2581the", special=False, normalized=True),  # also a model token
    ]
    variants["sp_added_flags"] = flags

    legacy_norm = tokenizer(sp_model(sp_vocab, sp_merges),
                            {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                                 {"type": "Replace", "pattern": {"String": " "},
                                                                  "content": "\u2581"}]},
                            None, bos_template(), sp_decoder(),
                            base_added + [added(n_sp, "<mask>", special=True, normalized=True, lstrip=True),
                                          added(n_sp + 1, "Hood", special=False, normalized=True)])
    variants["sp_legacy_normalized_added"] = legacy_norm

    variants["sp_unk_fused"] = tokenizer(sp_model(sp_vocab, sp_merges, byte_fallback=False, fuse_unk=True),
                                         {"type": "Sequence", "normalizers": [
                                             {"type": "Prepend", "prepend": "\u2581"},
                                             {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
                                         None, None, sp_decoder(), base_added)
    variants["sp_unk_unfused"] = tokenizer(sp_model(sp_vocab, sp_merges, byte_fallback=False, fuse_unk=False),
                                           None, {"type": "Metaspace", "replacement": "\u2581",
                                                  "prepend_scheme": "always", "split": True},
                                           None, {"type": "Metaspace", "replacement": "\u2581",
                                                  "prepend_scheme": "always", "split": True}, base_added)

    variants["sp_normalizers"] = tokenizer(
        sp_model(sp_vocab, sp_merges),
        {"type": "Sequence", "normalizers": [
            {"type": "NFKC"}, {"type": "Lowercase"}, {"type": "Strip", "strip_left": True, "strip_right": True},
            {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
            {"type": "Prepend", "prepend": "\u2581"}]},
        {"type": "Digits", "individual_digits": True},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                    {"SpecialToken": {"id": "</s>", "type_id": 0}}],
         "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
         "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]},
                            "</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}},
        sp_decoder(), base_added)

    variants["sp_bert_style"] = tokenizer(
        sp_model(sp_vocab, sp_merges),
        {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None,
         "lowercase": True},
        {"type": "BertPreTokenizer"},
        {"type": "BertProcessing", "sep": ["</s>", 2], "cls": ["<s>", 1]},
        {"type": "WordPiece", "prefix": "##", "cleanup": True}, base_added)

    variants["sp_nfd_strip_accents"] = tokenizer(
        sp_model(sp_vocab, sp_merges),
        {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "StripAccents"}]},
        {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
                                              {"type": "Punctuation", "behavior": "MergedWithPrevious"}]},
        {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 1], "trim_offsets": True,
         "add_prefix_space": False},
        {"type": "BPEDecoder", "suffix": "</w>"}, base_added)

    variants["sp_splits"] = tokenizer(
        sp_model(sp_vocab, sp_merges), None,
        {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"String": ", "}, "behavior": "MergedWithNext", "invert": False},
            {"type": "Split", "pattern": {"Regex": "[aeiou]+"}, "behavior": "Contiguous", "invert": True},
            {"type": "Punctuation", "behavior": "Removed"},
            {"type": "CharDelimiterSplit", "delimiter": "x"},
            {"type": "Whitespace"}]},
        bos_template(), {"type": "Fuse"}, base_added,
        truncation={"direction": "Left", "max_length": 24, "strategy": "LongestFirst", "stride": 0},
        padding={"strategy": {"Fixed": 20}, "direction": "Left", "pad_to_multiple_of": None, "pad_id": 2,
                 "pad_type_id": 0, "pad_token": "</s>"})

    bl_model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                "vocab": bl_vocab, "merges": bl_merges}
    n_bl = len(bl_vocab)
    bl_added = [added(n_bl, "<|endoftext|>"), added(n_bl + 1, "<|pad|>", special=True, rstrip=True),
                added(n_bl + 2, " world", special=False, normalized=True)]
    variants["bl_prefix_space"] = tokenizer(
        bl_model, None, {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}, bl_added)
    variants["bl_split_nfkc"] = tokenizer(
        dict(bl_model, ignore_merges=True), {"type": "NFKC"},
        {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\p{N}{1,2}| ?\\p{L}+|\\s+(?!\\S)|\\s+|[^\\s\\p{L}\\p{N}]+"},
             "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}},
                                                  {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
         "pair": [], "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [n_bl],
                                                          "tokens": ["<|endoftext|>"]}}},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}, bl_added)

    os.makedirs(out_dir, exist_ok=True)
    for name, tok in variants.items():
        os.makedirs(os.path.join(out_dir, name), exist_ok=True)
        with open(os.path.join(out_dir, name, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(tok, f, ensure_ascii=False, separators=(",", ":"))
    print(f"{len(variants)} tokenizers in {out_dir}")


if __name__ == "__main__":
    main()
