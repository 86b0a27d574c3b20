#!/usr/bin/env python3
"""Writes large fuzzing seeds (1 MiB to 1.05 MiB each) for the large-input pass
of scripts/run_fuzzers.sh, at run time, so no megabyte-sized file is committed.

    fuzz/make_large_seeds.py KIND OUTDIR

KIND says what the fuzzer reads:
  json               any JSON document (a generic mix of the shapes below)
  config             config.json (a tiny Llama config with one pathological field)
  generation_config  generation_config.json (likewise)
  safetensors        a whole .safetensors file (8-byte length, JSON header, data)
  tokenizer          tokenizer.json (a tiny BPE tokenizer with one pathological part)
  stream             ids for the stream detokenizer fuzzer (random bytes, long byte runs)
  chat_template      Jinja chat templates (+ NUL + JSON context) for chat_template_fuzzer
  tiktoken           .tiktoken files (base64 token, rank per line) for tiktoken_file_fuzzer
  properties         serving.properties files (and OPTION_* lines) for serving_config_fuzzer

Every kind covers deep nesting (tens of thousands of levels), huge arrays,
long strings and keys, many keys, and values where parsers print them in
errors. A fuzzer registers its kind in run_fuzzers.sh's `large_seeds` array; a
new kind is a new entry in KINDS below.
"""
import json
import os
import struct
import sys

MIN = 1 << 20  # every seed is at least 1 MiB
MAX = 1_100_000  # run_fuzzers.sh passes -max_len=1100000


def pad_json(text):
    """Pads JSON text with trailing whitespace (still valid JSON) up to MIN bytes."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) < MIN:
        data += b" " * (MIN - len(data))
    return data


def huge_array(element, n_bytes):
    count = max(1, n_bytes // (len(element) + 1))
    return "[" + ",".join([element] * count) + "]"


def join_until(parts, n_bytes, sep=","):
    """Joins items from the iterator `parts` until the text reaches about `n_bytes`."""
    out, size = [], 0
    for p in parts:
        if size >= n_bytes:
            break
        out.append(p)
        size += len(p) + len(sep)
    return sep.join(out)


def deep_arrays(depth):
    return "[" * depth + "]" * depth


def deep_objects(depth, key="k"):
    return ('{"%s":' % key) * depth + "1" + "}" * depth


def generic_values():
    """Pathological JSON values of about 1 MiB, by name."""
    n = MIN
    return {
        "deep_arrays": deep_arrays(n // 2),
        "deep_objects": deep_objects(n // 6),
        "deep_mixed": '[{"a":' * (n // 8) + "0" + "}]" * (n // 8),
        "unclosed_deep": "[" * n,
        "huge_int_array": huge_array("7", n),
        "huge_float_array": huge_array("-1.5e308", n),
        "huge_string_array": huge_array('"s"', n),
        "huge_object_array": huge_array("{}", n),
        "long_string": '"' + "x" * n + '"',
        "long_escaped_string": '"' + "\\u00e9\\n" * (n // 12) + '"',
        "unterminated_string": '"' + "y" * n,
        "long_number": "1" * n,
        "many_keys": "{" + join_until(('"k%d":%d' % (i, i) for i in range(n)), n - 10) + "}",
        "long_key": '{"' + "k" * n + '":1}',
        "duplicate_keys": "{" + join_until(('"dup":%d' % i for i in range(n)), n - 10) + "}",
        "long_key_deep": '{"' + "q" * (n // 2) + '":' + deep_arrays(n // 4) + "}",
        "newline_keys": "{" + join_until(('"a\\nb%d":{}' % i for i in range(n)), n - 20) + ',"a\\nb0":1}',
    }


def tiny_config():
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 32,
        "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False,
        "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32",
    }


def with_field(base, field, raw_value):
    """`base` as JSON text with `field` set to the raw JSON text `raw_value`."""
    obj = dict(base)
    obj.pop(field, None)
    text = json.dumps(obj)
    return text[:-1] + ', "%s": %s}' % (field, raw_value)


def config_seeds():
    values = generic_values()
    base = tiny_config()
    seeds = {}
    fields = ["architectures", "model_type", "eos_token_id", "rope_scaling", "rope_parameters",
              "layer_types", "sliding_window", "hidden_act", "quantization_config"]
    for i, (name, value) in enumerate(sorted(values.items())):
        field = fields[i % len(fields)]
        seeds["config_%s_in_%s" % (name, field)] = with_field(base, field, value)
    # A valid config with a megabyte of layer_types (num_hidden_layers to match).
    qwen = dict(base, architectures=["Qwen2ForCausalLM"], model_type="qwen2", use_sliding_window=True,
                sliding_window=4096, num_hidden_layers=16384)
    qwen["layer_types"] = ["sliding_attention", "full_attention"] * 8192
    seeds["config_qwen2_layer_types"] = json.dumps(qwen)
    # A quantization_config of a megabyte (many config groups).
    quant = {"quant_method": "compressed-tensors", "format": "float-quantized",
             "config_groups": {"group_%d" % i: {"targets": ["Linear"], "weights": {"num_bits": 8}}
                               for i in range(MIN // 70)}}
    seeds["config_big_quantization_config"] = json.dumps(dict(base, quantization_config=quant))
    return {k: pad_json(v) for k, v in seeds.items()}


def generation_config_seeds():
    values = generic_values()
    base = {"bos_token_id": 1, "eos_token_id": [2, 3], "do_sample": True, "temperature": 0.7, "top_p": 0.9}
    fields = ["eos_token_id", "bos_token_id", "temperature", "top_k", "pad_token_id", "do_sample"]
    seeds = {}
    for i, (name, value) in enumerate(sorted(values.items())):
        field = fields[i % len(fields)]
        seeds["generation_%s_in_%s" % (name, field)] = with_field(base, field, value)
    seeds["generation_many_eos_ids"] = json.dumps(dict(base, eos_token_id=list(range(MIN // 8))))
    return {k: pad_json(v) for k, v in seeds.items()}


def json_seeds():
    return {"json_" + k: pad_json(v) for k, v in generic_values().items()}


def safetensors_file(header_text, data=b"", pad_to=MIN):
    """8-byte length + header (space-padded so the file reaches `pad_to`) + data."""
    header = header_text.encode("utf-8", "surrogatepass")
    room = pad_to - 8 - len(header) - len(data)
    if room > 0:
        header += b" " * room
    return struct.pack("<Q", len(header)) + header + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def safetensors_seeds():
    seeds = {}
    # Valid: one 1 MiB F32 tensor (the data buffer is what is large).
    n = MIN // 4
    seeds["st_big_tensor"] = safetensors_file(json.dumps({"w": entry("F32", [n], 0, 4 * n)}), b"\0" * (4 * n),
                                              pad_to=0)
    # Valid: a 1 MiB header of ~2,000 empty tensors with long names.
    pad = "p" * 480
    tensors = {"model.layers.%d.%s" % (i, pad): entry("BF16", [0], 0, 0) for i in range(MIN // 560)}
    tensors["__metadata__"] = {"format": "pt"}
    seeds["st_many_tensors"] = safetensors_file(json.dumps(tensors))
    # Valid: a few tensors and a huge __metadata__.
    meta = {"key%d" % i: "v" * 40 for i in range(MIN // 56)}
    seeds["st_big_metadata"] = safetensors_file(json.dumps({"__metadata__": meta, "a": entry("F16", [2], 0, 4)}),
                                                b"\1\2\3\4")
    # Broken in ways the parser must name briefly.
    seeds["st_deep_header"] = safetensors_file(deep_arrays(MIN // 2 - 8))
    seeds["st_deep_entry"] = safetensors_file('{"w":' + deep_objects(MIN // 6) + "}")
    seeds["st_huge_shape"] = safetensors_file('{"w":{"dtype":"F32","shape":%s,"data_offsets":[0,4]}}'
                                              % huge_array("1", MIN - 100), b"\0" * 4)
    seeds["st_huge_offsets"] = safetensors_file('{"w":{"dtype":"F32","shape":[1],"data_offsets":%s}}'
                                                % huge_array("0", MIN - 100))
    seeds["st_long_name"] = safetensors_file(json.dumps({"n" * (MIN - 100): entry("Q4", [1], 0, 1)}), b"\0")
    seeds["st_long_dtype"] = safetensors_file(json.dumps({"w": entry("F" * (MIN - 100), [1], 0, 4)}), b"\0" * 4)
    seeds["st_duplicate_at_end"] = safetensors_file(
        json.dumps(tensors)[:-1] + ', "model.layers.0.%s": {"dtype":"F32","shape":[0],"data_offsets":[0,0]}}' % pad)
    seeds["st_overlap"] = safetensors_file(json.dumps({"a": entry("F32", [n], 0, 4 * n),
                                                       "b": entry("F32", [n], 4, 4 * n + 4)}),
                                           b"\0" * (4 * n + 4), pad_to=0)
    # The length field says more than the file holds.
    big = safetensors_file(json.dumps({"w": entry("F32", [1], 0, 4)}), b"\0" * 4)
    seeds["st_length_past_end"] = struct.pack("<Q", len(big) + 1000) + big[8:]
    return seeds


def tiny_tokenizer(vocab_extra=0, merges=True):
    """A small valid tokenizer.json object (BPE, byte fallback), `vocab_extra` more tokens."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "a": 3, "b": 4, "ab": 5, "\u2581": 6, "\u2581a": 7}
    for i in range(vocab_extra):
        vocab["tok%d" % i] = len(vocab)
    return {"version": "1.0",
            "added_tokens": [{"id": 1, "content": "<s>", "special": True, "normalized": False}],
            "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                               {"type": "Replace", "pattern": {"String": " "},
                                                                "content": "\u2581"}]},
            "pre_tokenizer": None,
            "post_processor": {"type": "TemplateProcessing", "single": "<s> $A",
                               "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
            "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"},
                                                          "content": " "},
                                                         {"type": "ByteFallback"}, {"type": "Fuse"},
                                                         {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
            "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": True, "vocab": vocab,
                      "merges": ["a b", "\u2581 a"] if merges else []}}


def nested_sequences(list_key, leaf, n_bytes):
    head = '{"type":"Sequence","%s":[' % list_key
    levels = n_bytes // (len(head) + 2)
    return head * levels + leaf + "]}" * levels


def tokenizer_seeds():
    """tokenizer.json files of 1 MiB: the tokenizer_json_fuzzer's large pass."""
    n = MIN
    base = tiny_tokenizer()
    seeds = {}
    # Generic pathological values in each component field.
    fields = ["normalizer", "pre_tokenizer", "post_processor", "decoder", "added_tokens", "padding",
              "truncation", "model", "version"]
    for i, (name, value) in enumerate(sorted(generic_values().items())):
        field = fields[i % len(fields)]
        seeds["tok_%s_in_%s" % (name, field)] = with_field(base, field, value)
    # Sequences nested tens of thousands deep, of each component.
    for field, key, leaf in [("pre_tokenizer", "pretokenizers", '{"type":"WhitespaceSplit"}'),
                             ("normalizer", "normalizers", '{"type":"Lowercase"}'),
                             ("decoder", "decoders", '{"type":"Fuse"}'),
                             ("post_processor", "processors", '{"type":"ByteLevel"}')]:
        seeds["tok_nested_%s" % key] = with_field(base, field, nested_sequences(key, leaf, n - 2000))
    # A valid tokenizer of 1 MiB (50,000 tokens), and the same with huge padding / a sparse id.
    big = tiny_tokenizer(vocab_extra=n // 21)
    seeds["tok_big_vocab"] = json.dumps(big)
    seeds["tok_big_vocab_fixed_padding"] = json.dumps(dict(big, padding={"strategy": {"Fixed": 2 ** 31},
                                                                         "pad_id": 0}))
    seeds["tok_big_vocab_pad_multiple"] = json.dumps(dict(big, padding={"strategy": "BatchLongest",
                                                                        "pad_to_multiple_of": 2 ** 30,
                                                                        "pad_id": 0}))
    sparse = tiny_tokenizer(vocab_extra=n // 21)
    sparse["model"]["vocab"]["far"] = 2 ** 28
    seeds["tok_big_vocab_sparse_id"] = json.dumps(sparse)
    # Many added tokens; a megabyte of merges.
    many = tiny_tokenizer()
    many["added_tokens"] = [{"id": 8 + i, "content": "<extra_%d>" % i, "special": i % 2 == 0,
                             "normalized": i % 3 == 0} for i in range(n // 90)]
    seeds["tok_many_added_tokens"] = json.dumps(many)
    merges = tiny_tokenizer()
    merges["model"]["merges"] = ["a b"] * (n // 7)
    seeds["tok_many_merges"] = json.dumps(merges)
    # A Replace whose content multiplies a normalized added token; a huge regex; huge template / ids.
    blowup = tiny_tokenizer()
    blowup["normalizer"] = {"type": "Replace", "pattern": {"String": "a"}, "content": "x" * (n // 2)}
    blowup["added_tokens"] = [{"id": 8, "content": "a" * (n // 2 - 1000), "normalized": True}]
    seeds["tok_replace_blowup"] = json.dumps(blowup)
    regex = tiny_tokenizer()
    regex["pre_tokenizer"] = {"type": "Split", "behavior": "Isolated",
                              "pattern": {"Regex": "|".join("w%d" % i for i in range(n // 7))}}
    seeds["tok_huge_regex"] = json.dumps(regex)
    backtrack = tiny_tokenizer()
    backtrack["pre_tokenizer"] = {"type": "Split", "behavior": "Isolated", "pattern": {"Regex": "(a+)+b"}}
    backtrack["model"]["vocab"].update({"a" * 40 + "c": 8})
    seeds["tok_backtracking_regex"] = json.dumps(backtrack)
    template = tiny_tokenizer()
    template["post_processor"]["single"] = "$A " + "<s> " * (n // 4)
    seeds["tok_long_template"] = json.dumps(template)
    ids = tiny_tokenizer()
    ids["post_processor"]["special_tokens"]["<s>"]["ids"] = list(range(n // 16))
    ids["post_processor"]["special_tokens"]["<s>"]["tokens"] = ["<s>"] * (n // 16)
    seeds["tok_huge_special_ids"] = json.dumps(ids)
    text = json.dumps(big)
    seeds["tok_duplicate_model_at_end"] = text[:-1] + ', "model": 1}'
    return {k: pad_json(v) for k, v in seeds.items()}


def stream_seeds():
    """Inputs of 1 MiB for the stream_detokenizer_fuzzer: a selector byte, then 2 bytes per id."""
    import random
    rng = random.Random(1234)
    seeds = {}
    for sel in range(12):
        # Mostly byte tokens (long byte runs), then mixes with special and vocabulary ids.
        top = [0x00, 0x00, 0x40, 0x80, 0xC0] if sel % 3 else [0x00]
        ids = bytearray()
        while len(ids) < MIN:
            ids += bytes([rng.choice(top) | rng.randrange(64), rng.randrange(256)])
        seeds["stream_%02d" % sel] = bytes([sel | (0x10 if sel & 4 else 0) | (0x20 if sel & 8 else 0)]) + bytes(ids)
    return seeds


CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] | trim"
          " + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def chat_template_seeds():
    """Chat templates of 1 MiB (template, or template + NUL + JSON context) for chat_template_fuzzer."""
    n = MIN
    seeds = {}
    # Pathological template source.
    seeds["tmpl_deep_parens"] = "{{ " + "(" * (n // 2) + "1" + ")" * (n // 2) + " }}"
    seeds["tmpl_unclosed_parens"] = "{{ " + "(" * n
    seeds["tmpl_deep_lists"] = "{{ " + "[" * (n // 2) + "]" * (n // 2) + " }}"
    seeds["tmpl_deep_dicts"] = "{{ " + "{'a': " * (n // 7) + "1" + "}" * (n // 7) + " }}"
    seeds["tmpl_deep_not"] = "{{ " + "not " * (n // 4) + "x }}"
    seeds["tmpl_deep_minus"] = "{{ " + "-" * n + "1 }}"
    seeds["tmpl_deep_if"] = "{% if true %}" * (n // 13)
    seeds["tmpl_deep_for"] = "{% for x in messages %}" * (n // 23) + "{% endfor %}" * (n // 23)
    seeds["tmpl_long_add_chain"] = "{{ 1" + " + 1" * (n // 4) + " }}"
    seeds["tmpl_long_concat_chain"] = "{{ 'a'" + " ~ 'a'" * (n // 6) + " }}"
    seeds["tmpl_long_filter_chain"] = "{{ 'x'" + "|trim" * (n // 5) + " }}"
    seeds["tmpl_long_attr_chain"] = "{{ messages" + ".x" * (n // 2) + " }}"
    seeds["tmpl_many_elifs"] = "{% if x == 0 %}" + "".join(
        "{%% elif x == %d %%}%d" % (i, i) for i in range(1, n // 30)) + "{% endif %}"
    seeds["tmpl_long_string"] = "{{ '" + "s" * n + "' }}"
    seeds["tmpl_long_escapes"] = "{{ '" + "\\u00e9\\n" * (n // 8) + "' }}"
    seeds["tmpl_unterminated_string"] = "{{ '" + "y" * n
    seeds["tmpl_long_data"] = "text " * (n // 5)
    seeds["tmpl_many_tags"] = "{{ 1 }}" * (n // 7)
    seeds["tmpl_many_comments"] = "{# c #}\n" * (n // 8)
    seeds["tmpl_unclosed_comment"] = "{#" + "c" * n
    seeds["tmpl_long_name"] = "{{ " + "n" * n + " }}"
    seeds["tmpl_long_number"] = "{{ " + "9" * n + " }}"
    seeds["tmpl_big_list_literal"] = "{{ [" + ",".join(["1"] * (n // 2)) + "]|length }}"
    seeds["tmpl_big_dict_literal"] = "{{ {" + ",".join("'k%d': %d" % (i, i) for i in range(n // 14)) + "}|length }}"
    seeds["tmpl_many_macros"] = "".join("{%% macro m%d(a, b=1) %%}{{ a }}{%% endmacro %%}{{ m%d(%d) }}" % (i, i, i)
                                        for i in range(n // 60))
    seeds["tmpl_raw_block"] = "{% raw %}" + "{{ x }}" * (n // 7) + "{% endraw %}"
    seeds["tmpl_recursion"] = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}" + " " * n
    seeds["tmpl_string_growth"] = ("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
                                   "{% endfor %}{{ ns.s|length }}") + " " * n
    seeds["tmpl_nested_loops"] = "{% for i in range(100000) %}{% for j in range(100000) %}{{ i }}{% endfor %}{% endfor %}" + " " * n
    # A real template with a megabyte of context.
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": "message %d " % i + "w" * 40} for i in range(n // 80)]
    seeds["ctx_many_messages"] = CHATML + "\0" + json.dumps({"messages": msgs, "add_generation_prompt": True})
    seeds["ctx_long_content"] = CHATML + "\0" + json.dumps({"messages": [{"role": "user", "content": "z" * n}]})
    seeds["ctx_deep_content"] = CHATML + "\0" + '{"messages": [{"role": "user", "content": ' + deep_arrays(n // 2) + "}]}"
    seeds["ctx_deep_tools"] = "{{ tools|tojson }}\0" + '{"tools": ' + deep_objects(n // 6) + "}"
    seeds["ctx_big_tools"] = "{% for t in tools %}{{ t|tojson(indent=2) }}{% endfor %}\0" + json.dumps(
        {"tools": [{"type": "function", "function": {"name": "f%d" % i, "parameters": {"type": "object"}}}
                   for i in range(n // 80)]})
    for name, value in sorted(generic_values().items()):
        seeds["ctx_generic_%s" % name] = CHATML + "\0" + value
    out = {}
    for k, v in seeds.items():
        data = v.encode("utf-8", "surrogatepass")
        if len(data) < MIN:
            data += b" " * (MIN - len(data))
        out[k] = data[:MAX]
    return out


def tiktoken_seeds():
    """.tiktoken files of 1 MiB for tiktoken_file_fuzzer: large valid vocabularies, one
    megabyte-long token or line, a megabyte of blank lines, bad endings and duplicates."""
    import base64
    import random
    rng = random.Random(4321)

    def line(token, rank, eol="\n"):
        return base64.b64encode(token).decode() + " " + str(rank) + eol

    byte_lines = "".join(line(bytes([b]), b) for b in range(256))

    def vocabulary(eol="\n", alphabet=b"abcdefgh \n"):
        seen, out, rank = set(), [byte_lines.replace("\n", eol)], 256
        size = len(out[0])
        while size < MIN + 64:
            tok = bytes(rng.choice(alphabet) for _ in range(rng.randrange(2, 9)))
            if tok in seen:
                continue
            seen.add(tok)
            out.append(line(tok, rank, eol))
            size += len(out[-1])
            rank += 1
        return "".join(out)

    def pad(text, filler="\n"):
        data = text.encode()
        return data + filler.encode() * max(0, MIN - len(data))

    huge_token = bytes(rng.randrange(256) for _ in range(MIN * 3 // 4))
    seeds = {
        "vocab_lf": vocabulary().encode(),
        "vocab_crlf": vocabulary("\r\n").encode(),
        "vocab_cr": vocabulary("\r").encode(),
        "vocab_bytes_alphabet": vocabulary(alphabet=bytes(range(256))).encode(),
        "huge_token": (byte_lines + line(huge_token, 256)).encode(),
        "huge_line_no_space": pad(byte_lines + "QUJD" * (MIN // 4), ""),
        "blank_lines": pad(byte_lines),
        "spaces_only_lines": pad(byte_lines + "YWI= 256\n", "  \n"),
        "duplicate_rank_at_end": (vocabulary() + line(b"zz_dup", 300)).encode(),
        "duplicate_token_at_end": (vocabulary() + line(b"a", 10 ** 6)).encode(),
        "sparse_rank_at_end": (vocabulary() + line(b"zz_far", 2 ** 30)).encode(),
        "missing_byte": vocabulary().replace(line(bytes([65]), 65), "").encode(),
        "huge_rank_digits": pad(byte_lines + "YWI= " + "9" * 1000 + "\n"),
        "many_fields": pad(byte_lines + "YWI= 256" + " 7" * (MIN // 2) + "\n", ""),
    }
    return {"tiktoken_" + k: v[:MAX] for k, v in seeds.items()}


def properties_seeds():
    """serving.properties files of 1 MiB for serving_config_fuzzer: a megabyte-long value, key and
    comment, a megabyte of backslash continuations, many keys (and one repeated), long digit runs
    where counts and fractions are read, and the same as OPTION_* environment lines."""
    base = "engine=MPI\noption.max_input_len=1024\noption.rolling_batch=trtllm\n"

    def pad(text, filler="\n"):
        data = text.encode()
        return data + filler.encode() * max(0, MIN - len(data))

    many = "".join("option.key_%d=%d\n" % (i, i) for i in range(MIN // 20))
    seeds = {
        "huge_value": pad(base + "option.model_id=" + "m" * MIN + "\n", ""),
        "huge_fraction": pad(base + "option.kv_cache_free_gpu_mem_fraction=0." + "9" * MIN + "\n", ""),
        "huge_count": pad(base + "option.max_rolling_batch_size=" + "7" * MIN + "\n", ""),
        "huge_key": pad(base + "option." + "k" * MIN + "=1\n", ""),
        "huge_comment": pad(base + "#" + "c" * MIN + "\n", ""),
        "continuations": pad(base + "option.max_input_len=1" + "\\\n2" * (MIN // 3) + "\n", ""),
        "trailing_continuation": pad(base + "option.dtype=bf16" + "\\\n" * (MIN // 2), ""),
        "many_keys": pad(base + many),
        "repeated_key": pad(base + "option.max_input_len=5\n" * (MIN // 23)),
        "no_separator": pad(base + "x" * MIN, ""),
        "crlf": pad(base.replace("\n", "\r\n") + "option.dtype=fp16\r\n" * (MIN // 19), ""),
        "environment": pad("OPTION_MAX_INPUT_LEN=" + "8" * (MIN // 2) + "\nHF_MODEL_ID=" + "/" * (MIN // 2) + "\n",
                           ""),
        "blank_lines": pad(base + " \t\n" * (MIN // 3)),
    }
    return {"properties_" + k: v[:MAX] for k, v in seeds.items()}


KINDS = {
    "json": json_seeds,
    "config": config_seeds,
    "generation_config": generation_config_seeds,
    "safetensors": safetensors_seeds,
    "tokenizer": tokenizer_seeds,
    "stream": stream_seeds,
    "chat_template": chat_template_seeds,
    "tiktoken": tiktoken_seeds,
    "properties": properties_seeds,
}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in KINDS:
        sys.exit("usage: make_large_seeds.py {%s} OUTDIR" % ",".join(sorted(KINDS)))
    kind, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    for name, data in sorted(KINDS[kind]().items()):
        if not MIN <= len(data) <= MAX:
            sys.exit("make_large_seeds.py: seed %s is %d bytes, outside [%d, %d]" % (name, len(data), MIN, MAX))
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
