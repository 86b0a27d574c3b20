#!/usr/bin/python3
"""Golden cases for llmrt's chat-template (Jinja2 subset) engine.

Renders every template in tests/data/chat_templates/templates/*.jinja, plus three templates read from
the shared tokenizer fixtures (../shared/testdata/tokenizers/{llama3,phi-3,qwen2-family}/tokenizer_config.json),
over a fixed set of conversations, exactly as transformers' `apply_chat_template(..., tokenize=False)` does
with Python's jinja2, and writes tests/data/chat_templates/cases.json.

Run with Debian's interpreter (it has jinja2; the pyenv `python3` on PATH does not):

    /usr/bin/python3 scripts/golden/make_chat_template_cases.py [--check]

--check renders everything again and fails if cases.json would change (determinism / staleness check).

What is reproduced from transformers (src/transformers/utils/chat_template_utils.py, `_compile_jinja_template`
and `render_jinja_template`; tokenization_utils_base.py `apply_chat_template`):
  * ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                  extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    (default keep_trailing_newline=False: ONE trailing newline of the template source is dropped);
  * filters["tojson"] = json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
                                   sort_keys=sort_keys)  (no HTML escaping, keys in insertion order);
  * globals["raise_exception"] raises jinja2.exceptions.TemplateError(message);
  * globals["strftime_now"](fmt) = now().strftime(fmt) -- here the clock is FIXED at FIXED_CLOCK below; a case whose
    template actually calls strftime_now carries "fixed_clock": "2024-07-26T12:00:00" and the engine under test must
    bind strftime_now to that instant to reproduce it;
  * render(messages=..., tools=..., documents=..., add_generation_prompt=..., **special_tokens_map, **kwargs):
    tools/documents are passed even when absent (as None -> JSON null), the special-token map holds only the tokens
    the tokenizer defines (bos_token, eos_token, unk_token, sep_token, pad_token, cls_token, mask_token as strings,
    additional_special_tokens as a list of strings; transformers 4.x `special_tokens_map`), and extra kwargs
    override special tokens.

Each case's "context" is exactly the keyword dict handed to render(). JSON object key order is significant
(tojson and dict iteration follow insertion order): parse it order-preserving.

Output: a JSON list, one case per line:
  {"name", "template", ["template_from"], ["fixed_clock"], "context", "expected"}                 or
  {"name", "template", ["template_from"], ["fixed_clock"], "context", "expected_error", "message"}
where expected_error is the Python exception class name (TemplateError for raise_exception, UndefinedError,
TypeError, ...) and message is str(exception).
"""

import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
DATA = os.path.join(REPO, "tests", "data", "chat_templates")
TEMPLATES = os.path.join(DATA, "templates")
SHARED = os.path.normpath(os.path.join(REPO, "..", "shared", "testdata"))
OUT = os.path.join(DATA, "cases.json")

FIXED_CLOCK = datetime.datetime(2024, 7, 26, 12, 0, 0)
MAX_BYTES = 1_500_000


# ----------------------------------------------------------------------------------------------------------
# The rendering environment (transformers' _compile_jinja_template, reimplemented)
# ----------------------------------------------------------------------------------------------------------
class ClockUsed(Exception):
    pass


_clock_calls = []


class AssistantTracker(Extension):
    """transformers' {% generation %} ... {% endgeneration %} extension; a pass-through when not tracking."""

    tags = {"generation"}

    def __init__(self, environment):
        super().__init__(environment)
        self._rendered_blocks = None
        self._generation_indices = None

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _generation_support(self, context, caller):
        rv = caller()
        if self._rendered_blocks is not None or self._generation_indices is not None:
            start_index = len("".join(self._rendered_blocks))
            self._generation_indices.append((start_index, start_index + len(rv)))
        return rv


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    _clock_calls.append(format)
    return FIXED_CLOCK.strftime(format)


def make_env():
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


# ----------------------------------------------------------------------------------------------------------
# Templates and their tokenizers' special tokens
# ----------------------------------------------------------------------------------------------------------
DS_BOS = "<\uff5cbegin\u2581of\u2581sentence\uff5c>"
DS_EOS = "<\uff5cend\u2581of\u2581sentence\uff5c>"
QWEN2_EXTRA = ["<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
               "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
               "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]

# name -> (special tokens map, features). Features: "tools" (renders tool definitions / calls), "system" (accepts a
# system message without raising), "parts" (understands content given as a list of parts).
TEMPLATE_INFO = {
    "llama-2-7b-chat": ({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, {"system"}),
    "llama-3.2-3b-instruct": ({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}, {"system", "tools", "llama_tools"}),
    "llama-3.3-70b-instruct": ({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}, {"system", "tools", "llama_tools"}),
    "hermes-3-llama-3.1-8b-tool_use": ({"bos_token": "<|begin_of_text|>", "eos_token": "<|im_end|>", "pad_token": "<|end_of_text|>"}, {"system", "tools", "requires_tools"}),
    "mistral-7b-instruct-v0.1": ({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, set()),
    "mistral-7b-instruct-v0.2": ({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, {"system"}),
    "mixtral-8x7b-instruct-v0.1": ({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, set()),
    "mistral-large-instruct-2407": ({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, {"system", "tools", "mistral_tools"}),
    "mistral-nemo-instruct-2407": ({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, {"system", "tools", "mistral_tools"}),
    "gemma-7b-it": ({"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>"}, set()),
    "gemma-2-2b-it": ({"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>"}, set()),
    "qwq-32b": ({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "additional_special_tokens": QWEN2_EXTRA}, {"system", "tools", "qwen_tools"}),
    "qwen1.5-72b-chat": ({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "additional_special_tokens": ["<|im_start|>", "<|im_end|>"]}, {"system"}),
    "qwen2-vl-dse-vllm": ({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "additional_special_tokens": QWEN2_EXTRA}, {"system", "parts"}),
    "phi-3-mini-4k-instruct": ({"bos_token": "<s>", "eos_token": "<|endoftext|>", "unk_token": "<unk>", "pad_token": "<|endoftext|>"}, {"system"}),
    "phi-3.5-mini-instruct": ({"bos_token": "<s>", "eos_token": "<|endoftext|>", "unk_token": "<unk>", "pad_token": "<|endoftext|>"}, {"system"}),
    "deepseek-r1-distill-qwen-32b": ({"bos_token": DS_BOS, "eos_token": DS_EOS, "pad_token": DS_EOS}, {"system", "tools", "deepseek_tools"}),
    "deepseek-v2-chat": ({"bos_token": DS_BOS, "eos_token": DS_EOS}, {"system"}),
    "deepseek-coder-33b-instruct": ({"bos_token": DS_BOS, "eos_token": "<|EOT|>", "pad_token": DS_EOS}, {"system"}),
    "falcon-instruct-vllm": ({"eos_token": "<|endoftext|>"}, {"system"}),
    "falcon-180b-chat-vllm": ({"eos_token": "<|endoftext|>"}, {"system"}),
    "chatglm2-6b-vllm": ({"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<unk>"}, {"system"}),
    "chatglm3-6b": ({"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<unk>"}, {"system"}),
    "glm-4-9b-chat": ({"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"}, {"system", "tools", "glm_tools"}),
    "internlm2-chat-7b": ({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, {"system"}),
    "baichuan2-vllm": ({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<unk>"}, {"system"}),
    "zephyr-7b-beta": ({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "</s>"}, {"system"}),
    "openhermes-2.5-mistral-7b": ({"bos_token": "<s>", "eos_token": "<|im_end|>", "unk_token": "<unk>"}, {"system"}),
    "command-r-plus": ({"bos_token": "<BOS_TOKEN>", "eos_token": "<|END_OF_TURN_TOKEN|>", "pad_token": "<PAD>"}, {"system"}),
    "granite-3.3-2b-instruct": ({"bos_token": "<|end_of_text|>", "eos_token": "<|end_of_text|>", "unk_token": "<|end_of_text|>", "pad_token": "<|end_of_text|>"}, {"system", "tools", "granite_tools"}),
}

SHARED_TEMPLATES = {
    # name -> (tokenizer dir under ../shared/testdata/tokenizers, features)
    "shared-llama3": ("llama3", {"system"}),
    "shared-phi-3": ("phi-3", set()),
    "shared-qwen2-family": ("qwen2-family", {"system", "tools", "qwen_tools", "qwen3"}),
}

SPECIAL_TOKEN_ATTRS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token",
                       "additional_special_tokens"]


def token_str(v):
    if isinstance(v, dict):  # AddedToken serialised in tokenizer_config.json
        return v.get("content")
    return v


def special_tokens_from_config(cfg):
    """transformers 4.x `special_tokens_map`: only the tokens that are set, as strings."""
    out = {}
    for attr in SPECIAL_TOKEN_ATTRS:
        v = cfg.get(attr)
        if not v:
            continue
        if attr == "additional_special_tokens":
            out[attr] = [token_str(t) for t in v]
        else:
            out[attr] = token_str(v)
    return out


def load_templates():
    """[(name, source, special_tokens, features, template_from_or_None)]"""
    out = []
    names = sorted(f[:-6] for f in os.listdir(TEMPLATES) if f.endswith(".jinja"))
    missing = set(TEMPLATE_INFO) ^ set(names)
    if missing:
        raise SystemExit("template files and TEMPLATE_INFO disagree: %s" % sorted(missing))
    for name in names:
        with open(os.path.join(TEMPLATES, name + ".jinja"), encoding="utf-8", newline="") as f:
            src = f.read()
        tokens, feats = TEMPLATE_INFO[name]
        out.append((name, src, tokens, feats, None))
    for name, (tokdir, feats) in SHARED_TEMPLATES.items():
        path = os.path.join(SHARED, "tokenizers", tokdir, "tokenizer_config.json")
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
        out.append((name, cfg["chat_template"], special_tokens_from_config(cfg), feats,
                    "shared:tokenizers/%s/tokenizer_config.json" % tokdir))
    return out


# ----------------------------------------------------------------------------------------------------------
# Conversations
# ----------------------------------------------------------------------------------------------------------
SYS = "You are a helpful assistant."


def m(role, content, **kw):
    d = {"role": role, "content": content}
    d.update(kw)
    return d


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and country, e.g. Paris, France"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"},
            },
            "required": ["location"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search_docs",
        "description": "Search the documentation. Returns at most `limit` hits for \"query\".",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Free text; may contain ünïcødé and \"quotes\""},
                "limit": {"type": "integer", "description": "Maximum number of hits"},
                "tags": {"type": "array", "items": {"type": "string"}, "description": "Only hits with these tags"},
                "exact": {"type": "boolean", "description": "Exact match only"},
            },
            "required": ["query"],
        },
    },
}
NOARG_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Current UTC time",
        "parameters": {"type": "object", "properties": {}},
    },
}
TOOLS = [WEATHER_TOOL, SEARCH_TOOL]

UNICODE_USER = "Traduis : « Ça va très bien » — 你好，世界！こんにちは 🌍🚀 👩‍💻 مرحبا بالعالم שלום Ελληνικά Ωμέγα ﬁ é (e\u0301)"
UNICODE_ASSISTANT = "Bien sûr ! 好的 👍 — مرحبا"
JINJA_LOOKING = "Render {{ x }} and {% if y %}yes{% endif %} and {# not a comment #} and {%- raw %} {{ bos_token }} '\" \\n"
SPECIAL_CHARS = "Line1\nLine2\r\n\ttabbed \\ backslash \"double\" 'single' </s> <|im_end|> [INST] <|eot_id|>\x00\x7f end"


def base_conversations():
    """(suffix, messages, add_generation_prompt, extra kwargs, tools) for every template."""
    long_conv = [m("system", SYS)]
    for i in range(10):
        long_conv.append(m("user", "Question %d: what is %d + %d?" % (i + 1, i, i * 2)))
        long_conv.append(m("assistant", "Answer %d: %d." % (i + 1, i + i * 2)))
    return [
        ("sys_user_gen", [m("system", SYS), m("user", "Hello!")], True, {}, None),
        ("sys_user_nogen", [m("system", SYS), m("user", "Hello!")], False, {}, None),
        ("multiturn_gen", [m("user", "Hi"), m("assistant", "Hello, how can I help?"), m("user", "Tell me a joke.")], True, {}, None),
        ("multiturn_sys_whitespace", [m("system", SYS), m("user", "Hello"), m("assistant", "Hi there"),
                                      m("user", "Who are you"), m("assistant", "   I am an assistant   "),
                                      m("user", "Another question")], True, {}, None),
        ("ends_with_assistant_nogen", [m("system", SYS), m("user", "Ping"), m("assistant", "Pong")], False, {}, None),
        ("no_system_two_rounds", [m("user", "What is 2+2?"), m("assistant", "4"), m("user", "And 3+3?"),
                                  m("assistant", "6"), m("user", "Thanks")], True, {}, None),
        ("single_user_nogen", [m("user", "Just one message.")], False, {}, None),
        ("empty_content", [m("user", "")], True, {}, None),
        ("empty_contents_multiturn", [m("system", ""), m("user", ""), m("assistant", ""), m("user", "Still there?")], True, {}, None),
        ("whitespace_only_content", [m("user", "   \n\t  ")], True, {}, None),
        ("unicode", [m("system", "Réponds en français. 日本語もOK。"), m("user", UNICODE_USER),
                     m("assistant", UNICODE_ASSISTANT), m("user", "🙂")], True, {}, None),
        ("jinja_looking_content", [m("user", JINJA_LOOKING), m("assistant", "{{ '}}' }} {% endfor %}"),
                                   m("user", "{% raw %}{{ x }}{% endraw %}")], True, {}, None),
        ("special_chars", [m("user", SPECIAL_CHARS)], True, {}, None),
        ("alternation_violation_user_user", [m("user", "First"), m("user", "Second")], True, {}, None),
        ("alternation_violation_assistant_first", [m("assistant", "I speak first."), m("user", "Ok")], True, {}, None),
        ("system_only", [m("system", SYS)], True, {}, None),
        ("empty_messages", [], True, {}, None),
        ("long_20_turns", long_conv, True, {}, None),
        ("content_text_parts", [m("user", [{"type": "text", "text": "Describe the weather"},
                                           {"type": "text", "text": " in one sentence."}])], True, {}, None),
        ("content_parts_with_image", [m("system", SYS), m("user", [{"type": "image"}, {"type": "text", "text": "What is in this picture?"}]),
                                      m("assistant", [{"type": "text", "text": "A cat."}]),
                                      m("user", [{"type": "text", "text": "And this one?"}, {"type": "image_url", "image_url": {"url": "data:,"}}])],
         True, {}, None),
        ("tools_given_plain_chat", [m("user", "What's the weather in Paris?")], True, {}, TOOLS),
        ("unknown_role", [m("user", "Hi"), m("narrator", "Meanwhile..."), m("assistant", "Hello")], False, {}, None),
        ("extra_message_keys", [m("user", "Hi", name="alice", metadata=""), m("assistant", "Hello", name="bot")], True, {}, None),
        ("custom_special_tokens_kwargs", [m("system", SYS), m("user", "Hi")], True,
         {"bos_token": "<BOS>", "eos_token": "<EOS>"}, None),
    ]


def tool_call(name, args, call_id=None, as_string=False):
    tc = {"type": "function", "function": {"name": name, "arguments": json.dumps(args) if as_string else args}}
    if call_id is not None:
        tc["id"] = call_id
    return tc


def tool_conversations(feats):
    """Tool-use conversations, shaped for the template family (the OpenAI/transformers message format)."""
    out = []
    ask = m("user", "What's the weather like in Paris and in Tōkyō?")
    if "llama_tools" in feats:
        calls = [tool_call("get_current_weather", {"location": "Paris, France", "unit": "celsius"})]
        conv = [m("system", SYS), ask, m("assistant", None, tool_calls=calls),
                m("tool", '{"temperature": 22, "unit": "celsius"}'), m("assistant", "It is 22 °C in Paris.")]
        out += [
            ("tools_definitions_only", [m("system", SYS), ask], True, {"date_string": "26 Jul 2024"}, TOOLS),
            ("tools_call_and_result", conv, True, {"date_string": "01 Jan 2025"}, TOOLS),
            ("tools_in_system_message", conv[:2], True, {"tools_in_user_message": False, "date_string": "26 Jul 2024"}, TOOLS),
            ("tools_result_as_mapping", [ask, m("assistant", None, tool_calls=calls), m("tool", {"temperature": 22})],
             True, {"date_string": "26 Jul 2024"}, TOOLS),
            ("tools_two_calls_rejected", [ask, m("assistant", None, tool_calls=calls * 2)], True, {"date_string": "26 Jul 2024"}, TOOLS),
            ("tools_builtin_ipython", [m("system", SYS), m("user", "Search for llama"),
                                       m("assistant", None, tool_calls=[tool_call("brave_search", {"query": "llama"})])],
             True, {"builtin_tools": ["brave_search", "wolfram_alpha", "code_interpreter"], "date_string": "26 Jul 2024"}, TOOLS),
            ("tools_no_user_message_error", [m("system", SYS)], True, {"date_string": "26 Jul 2024"}, TOOLS),
        ]
    if "mistral_tools" in feats:
        calls = [tool_call("get_current_weather", {"location": "Paris, France", "unit": "celsius"}, "abcDEF123"),
                 tool_call("get_current_weather", {"location": "Tokyo, Japan"}, "xyz789QRS")]
        conv = [m("system", SYS), m("user", "Hi"), m("assistant", "Hello!"), ask,
                m("assistant", None, tool_calls=calls),
                m("tool", '{"temperature": 22}', tool_call_id="abcDEF123"),
                m("tool", '{"temperature": 28}', tool_call_id="xyz789QRS"),
                m("assistant", "Paris: 22 °C, Tōkyō: 28 °C.")]
        out += [
            ("tools_definitions_only", [m("system", SYS), ask], True, {}, TOOLS + [NOARG_TOOL]),
            ("tools_parallel_calls_and_results", conv, False, {}, TOOLS),
            ("tools_bad_call_id", [ask, m("assistant", None, tool_calls=[tool_call("get_time", {}, "short")])], False, {}, TOOLS),
        ]
    if "qwen_tools" in feats:
        calls = [tool_call("get_current_weather", {"location": "Paris, France", "unit": "celsius"}),
                 tool_call("get_current_weather", {"location": "Tokyo, Japan"}, as_string=False)]
        conv = [m("system", SYS), ask, m("assistant", "Let me check.", tool_calls=calls),
                m("tool", '{"temperature": 22}'), m("tool", '{"temperature": 28}'),
                m("assistant", "Paris: 22 °C, Tōkyō: 28 °C.")]
        out += [
            ("tools_definitions_only", [m("system", SYS), ask], True, {}, TOOLS),
            ("tools_definitions_no_system", [ask], True, {}, TOOLS),
            ("tools_parallel_calls_and_results", conv, True, {}, TOOLS),
            ("tools_call_without_content", [ask, m("assistant", "", tool_calls=calls[:1]), m("tool", "22")], True, {}, TOOLS),
        ]
    if "qwen3" in feats:
        out += [
            ("thinking_disabled", [m("user", "Hi")], True, {"enable_thinking": False}, None),
            ("reasoning_content", [m("user", "2+2?"), m("assistant", "4", reasoning_content="Simple sum."),
                                   m("user", "3+3?")], True, {}, None),
            ("think_tags_in_content", [m("user", "2+2?"), m("assistant", "<think>\nadd them\n</think>\n\n4"),
                                       m("user", "ok")], True, {}, None),
            ("string_tool_arguments", [ask, m("assistant", "", tool_calls=[tool_call("get_current_weather", {"location": "Paris"}, as_string=True)])],
             False, {}, TOOLS),
        ]
    if "deepseek_tools" in feats:
        calls = [tool_call("get_current_weather", {"location": "Paris"}, as_string=True),
                 tool_call("get_current_weather", {"location": "Tokyo"}, as_string=True)]
        out += [
            ("tools_calls_and_outputs", [m("system", SYS), ask, m("assistant", None, tool_calls=calls),
                                         m("tool", "22"), m("tool", "28"), m("assistant", "Paris 22, Tokyo 28.")], True, {}, TOOLS),
            ("tools_pending_output", [ask, m("assistant", None, tool_calls=calls[:1]), m("tool", "22")], True, {}, TOOLS),
            ("think_in_history", [m("user", "2+2?"), m("assistant", "<think>easy</think>4"), m("user", "and 3+3?")], True, {}, None),
        ]
    if "glm_tools" in feats:
        out += [
            ("tools_in_system_item", [m("system", SYS, tools=TOOLS), ask], True, {}, None),
            ("metadata_field", [m("user", "Hi", metadata="meta"), m("assistant", "Hello", metadata="")], True, {}, None),
        ]
    if "granite_tools" in feats:
        docs = [{"doc_id": 1, "title": "Paris", "text": "Paris is the capital of France."},
                {"doc_id": "b", "title": "Tokyo", "text": "Tokyo is the capital of Japan."}]
        out += [
            ("tools_no_system_fixed_clock", [ask], True, {}, TOOLS),
            ("documents_and_controls_fixed_clock", [m("user", "Which city is the capital of France?")], True,
             {"documents": docs, "controls": {"citations": True, "hallucinations": True, "length": "short"}}, None),
            ("thinking_fixed_clock", [m("user", "Think about 2+2.")], True, {"thinking": True}, None),
            ("tool_response_roles", [m("system", SYS), ask,
                                     m("assistant_tool_call", '[{"name": "get_current_weather", "arguments": {"location": "Paris"}}]'),
                                     m("tool_response", '{"temperature": 22}')], True, {}, TOOLS),
        ]
    if "requires_tools" in feats:  # Hermes: its tool_use template iterates tools unconditionally
        calls = [tool_call("get_current_weather", {"location": "Paris, France", "unit": "celsius"}),
                 {"type": "function", "function": {"name": "search_docs", "arguments": '{"query": "paris"}'}}]
        conv = [m("system", SYS), ask, m("assistant", None, tool_calls=calls),
                m("tool", '{"temperature": 22}'), m("tool", "no hits"), m("assistant", "22 °C in Paris.")]
        out += [
            ("tools_definitions_only", [ask], True, {}, TOOLS + [NOARG_TOOL]),
            ("tools_parallel_calls_and_results", conv, True, {}, TOOLS),
            ("tools_with_return_schema", [ask], True, {}, [{"type": "function", "function": dict(
                WEATHER_TOOL["function"], **{"return": {"type": "object", "description": "Weather report"}})}]),
        ]
    return out


KEEP_SYSTEM_CASES = {"sys_user_gen", "sys_user_nogen", "system_only"}
KEEP_NO_TOOLS_CASES = {"sys_user_gen"}


def llama_dates(name):
    # Llama 3.2 formats strftime_now("%d %b %Y") when no date_string is given; pass one for the ordinary cases.
    return {"date_string": "26 Jul 2024"} if name == "llama-3.2-3b-instruct" else {}


# ----------------------------------------------------------------------------------------------------------
# Rendering
# ----------------------------------------------------------------------------------------------------------
def render_case(env, compiled, messages, tools, documents, add_generation_prompt, special_tokens, kwargs):
    context = {"messages": messages, "tools": tools, "documents": documents,
               "add_generation_prompt": add_generation_prompt}
    template_kwargs = dict(special_tokens)
    template_kwargs.update(kwargs)  # kwargs overwrite special tokens (transformers: {**special_tokens_map, **kwargs})
    # render(messages=..., tools=..., documents=..., add_generation_prompt=..., **template_kwargs): a kwarg named
    # like one of the four explicit arguments would be a Python TypeError in transformers; none is used here.
    for k in template_kwargs:
        if k in context:
            raise SystemExit("kwarg %r collides with an explicit render() argument" % k)
    context.update(template_kwargs)
    # Deep-copy through JSON so that what we record is exactly what we rendered with.
    context = json.loads(json.dumps(context, ensure_ascii=False))
    del _clock_calls[:]
    try:
        result = ("ok", compiled.render(**context))
    except Exception as e:  # the golden records whatever jinja2 raises
        result = ("error", type(e).__name__, str(e))
    return context, result, bool(_clock_calls)


def build_cases():
    env = make_env()
    cases = []
    names_seen = set()
    for name, src, special, feats, template_from in load_templates():
        compiled = env.from_string(src)
        convs = base_conversations() + tool_conversations(feats)
        if "llama_tools" in feats:
            # one case on the fixed clock (Llama 3.2 calls strftime_now when date_string is absent)
            convs.append(("no_date_string_fixed_clock", [m("system", SYS), m("user", "What day is it?")], True, {}, None))
        for suffix, messages, gen, kwargs, tools in convs:
            kwargs = dict(llama_dates(name), **kwargs) if suffix != "no_date_string_fixed_clock" else dict(kwargs)
            if "system" not in feats and suffix not in KEEP_SYSTEM_CASES:
                # The template rejects (or drops) system messages: keep the one case that shows it, and test the
                # rest of the conversations without their system message.
                messages = [x for x in messages if x["role"] != "system"]
            if "requires_tools" in feats and tools is None and suffix not in KEEP_NO_TOOLS_CASES:
                # Hermes' tool_use template iterates `tools` unconditionally (None -> TypeError, kept in one case).
                tools = [NOARG_TOOL]
            documents = kwargs.pop("documents", None)
            context, result, used_clock = render_case(env, compiled, messages, tools, documents, gen, special, kwargs)
            case_name = "%s/%s" % (name, suffix)
            if case_name in names_seen:
                raise SystemExit("duplicate case name " + case_name)
            names_seen.add(case_name)
            case = {"name": case_name, "template": name}
            if template_from:
                case["template_from"] = template_from
            if used_clock:
                case["fixed_clock"] = FIXED_CLOCK.isoformat()
            case["context"] = context
            if result[0] == "ok":
                case["expected"] = result[1]
            else:
                case["expected_error"] = result[1]
                case["message"] = result[2]
            cases.append(case)
    return cases


def serialise(cases):
    lines = [json.dumps(c, ensure_ascii=False, sort_keys=False) for c in cases]
    return "[\n" + ",\n".join(lines) + "\n]\n"


def main(argv):
    check = "--check" in argv
    cases = build_cases()
    text = serialise(cases)
    data = text.encode("utf-8")
    if len(data) > MAX_BYTES:
        raise SystemExit("cases.json would be %d bytes (limit %d)" % (len(data), MAX_BYTES))
    if check:
        with open(OUT, "rb") as f:
            if f.read() != data:
                raise SystemExit("cases.json is stale or rendering is not deterministic")
        print("cases.json up to date")
        return 0
    with open(OUT, "wb") as f:
        f.write(data)
    n_err = sum(1 for c in cases if "expected_error" in c)
    by_err = {}
    for c in cases:
        if "expected_error" in c:
            by_err[c["expected_error"]] = by_err.get(c["expected_error"], 0) + 1
    print("jinja2 %s: wrote %s: %d templates, %d cases (%d expected errors: %s), %d bytes" % (
        jinja2.__version__, os.path.relpath(OUT, REPO), len({c["template"] for c in cases}), len(cases), n_err,
        ", ".join("%s %d" % kv for kv in sorted(by_err.items())), len(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
