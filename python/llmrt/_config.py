"""Configuration objects of the LLM API, with TensorRT-LLM's names: KvCacheConfig,
SchedulerConfig and its policies, KvCacheRetentionConfig, SamplingParams.

Each is a plain value checked for types here and for ranges by the C++ library (the same checks
and messages as the llmrt command and the server): engine options go through llmrt's option
table (llmrt/config_options.h) by key, e.g. ``kv_cache_config.enable_block_reuse``."""
from __future__ import annotations

import dataclasses
import datetime
import enum
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _llmrt

__all__ = [
    "CapacitySchedulerPolicy", "ContextChunkingPolicy", "SchedulerConfig", "KvCacheConfig",
    "KvCacheRetentionConfig", "SamplingParams",
]


def _type_name(v: Any) -> str:
    return type(v).__name__


def check_bool(owner: str, field: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"{owner}: field '{field}' must be a bool, got {_type_name(v)} {v!r}")
    return v


def check_int(owner: str, field: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{owner}: field '{field}' must be an int, got {_type_name(v)} {v!r}")
    return v


def check_float(owner: str, field: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{owner}: field '{field}' must be a number, got {_type_name(v)} {v!r}")
    return float(v)


def option_text(v: Any) -> str:
    """A Python value as llmrt's option table reads it."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, enum.Enum):
        return str(v.value)
    if isinstance(v, float):
        return repr(v)  # the shortest text that reads back as the same double
    return str(v)


class CapacitySchedulerPolicy(enum.Enum):
    """Which requests get KV cache blocks (tensorrt_llm.llmapi.CapacitySchedulerPolicy)."""
    GUARANTEED_NO_EVICT = "guaranteed_no_evict"
    MAX_UTILIZATION = "max_utilization"
    STATIC_BATCH = "static_batch"


class ContextChunkingPolicy(enum.Enum):
    """The order of prompt chunks within a step (tensorrt_llm.llmapi.ContextChunkingPolicy)."""
    FIRST_COME_FIRST_SERVED = "first_come_first_served"
    EQUAL_PROGRESS = "equal_progress"


def _enum(owner: str, field: str, cls: type, v: Any) -> enum.Enum:
    if isinstance(v, cls):
        return v
    if isinstance(v, str):
        for m in cls:
            if v.lower() in (m.value, m.name.lower()):
                return m
    names = ", ".join(m.name for m in cls)
    raise ValueError(f"{owner}: field '{field}' has value {v!r}; expected one of {names}")


@dataclasses.dataclass
class SchedulerConfig:
    """tensorrt_llm.llmapi.SchedulerConfig."""
    capacity_scheduler_policy: CapacitySchedulerPolicy = CapacitySchedulerPolicy.GUARANTEED_NO_EVICT
    context_chunking_policy: Optional[ContextChunkingPolicy] = None  # None: FIRST_COME_FIRST_SERVED
    dynamic_batch_config: Any = None  # accepted for compatibility; must stay None

    def _options(self) -> List[Tuple[str, str]]:
        out = [("scheduler_config.capacity_scheduler_policy",
                option_text(_enum("SchedulerConfig", "capacity_scheduler_policy", CapacitySchedulerPolicy,
                                  self.capacity_scheduler_policy)))]
        if self.context_chunking_policy is not None:
            out.append(("scheduler_config.context_chunking_policy",
                        option_text(_enum("SchedulerConfig", "context_chunking_policy", ContextChunkingPolicy,
                                          self.context_chunking_policy))))
        if self.dynamic_batch_config is not None:
            raise ValueError("SchedulerConfig: field 'dynamic_batch_config' is not supported by llmrt; leave it None")
        return out


# KvCacheConfig field -> (option key, kind); kind "bool", "int", "float", "int_list", "enum".
_KV_FIELDS = {
    "enable_block_reuse": "bool", "max_tokens": "int", "max_attention_window": "int_list",
    "free_gpu_memory_fraction": "float", "host_cache_size": "int", "onboard_blocks": "bool",
    "secondary_offload_min_priority": "int", "event_buffer_max_size": "int", "enable_partial_reuse": "bool",
    "tokens_per_block": "int", "dtype": "enum",
}
# Fields tensorrt_llm has that llmrt does not implement: accepted only at their default.
_KV_UNSUPPORTED = {"sink_token_length": None, "cross_kv_cache_fraction": None, "copy_on_partial_reuse": True,
                   "use_uvm": False, "attention_dp_events_gather_period_ms": None}


@dataclasses.dataclass
class KvCacheConfig:
    """tensorrt_llm.llmapi.KvCacheConfig; None leaves llmrt's default (docs/user-guide.md)."""
    enable_block_reuse: Optional[bool] = None
    max_tokens: Optional[int] = None
    max_attention_window: Optional[List[int]] = None
    sink_token_length: Optional[int] = None
    free_gpu_memory_fraction: Optional[float] = None
    host_cache_size: Optional[int] = None
    onboard_blocks: Optional[bool] = None
    cross_kv_cache_fraction: Optional[float] = None
    secondary_offload_min_priority: Optional[int] = None
    event_buffer_max_size: Optional[int] = None
    enable_partial_reuse: Optional[bool] = None
    copy_on_partial_reuse: bool = True
    use_uvm: bool = False
    tokens_per_block: Optional[int] = None
    dtype: Optional[str] = None  # "auto", "float32", "bfloat16", "float16", "fp8"
    attention_dp_events_gather_period_ms: Optional[int] = None

    def _options(self) -> List[Tuple[str, str]]:
        out: List[Tuple[str, str]] = []
        for name, default in _KV_UNSUPPORTED.items():
            if getattr(self, name) != default:
                raise ValueError(f"KvCacheConfig: field '{name}' is not supported by llmrt; "
                                 f"leave it at {default!r}")
        for name, kind in _KV_FIELDS.items():
            v = getattr(self, name)
            if v is None:
                continue
            key = "kv_cache_config." + name
            if kind == "bool":
                out.append((key, option_text(check_bool("KvCacheConfig", name, v))))
            elif kind == "int":
                out.append((key, option_text(check_int("KvCacheConfig", name, v))))
            elif kind == "float":
                out.append((key, option_text(check_float("KvCacheConfig", name, v))))
            elif kind == "int_list":
                values = [v] if isinstance(v, int) else v
                if not isinstance(values, (list, tuple)):
                    raise TypeError(f"KvCacheConfig: field '{name}' must be a list of ints, got {_type_name(v)}")
                out.extend((key, option_text(check_int("KvCacheConfig", name, w))) for w in values)
            else:
                if not isinstance(v, str):
                    raise TypeError(f"KvCacheConfig: field '{name}' must be a str, got {_type_name(v)}")
                out.append((key, v))
        return out


class _TokenRange:
    """KvCacheRetentionConfig.TokenRangeRetentionConfig(token_start, token_end, priority, duration_ms)."""
    __slots__ = ("token_start", "token_end", "priority", "duration_ms")

    def __init__(self, token_start: int, token_end: Optional[int] = None, priority: int = 35,
                 duration_ms: Union[None, int, datetime.timedelta] = None):
        self.token_start = token_start
        self.token_end = token_end
        self.priority = priority
        self.duration_ms = duration_ms

    def __repr__(self) -> str:
        return (f"TokenRangeRetentionConfig(token_start={self.token_start}, token_end={self.token_end}, "
                f"priority={self.priority}, duration_ms={self.duration_ms!r})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _TokenRange) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)


def _duration_ms(owner: str, field: str, v: Union[None, int, datetime.timedelta]) -> Optional[int]:
    if v is None:
        return None
    if isinstance(v, datetime.timedelta):
        return int(round(v.total_seconds() * 1000))
    return check_int(owner, field, v)


class KvCacheRetentionConfig:
    """tensorrt_llm.llmapi.KvCacheRetentionConfig: retention priorities (1..100, default 35) of a
    request's KV blocks by prompt token range, and of its generated tokens' blocks. Durations are
    datetime.timedelta (as tensorrt_llm) or milliseconds; None = the priority never lapses."""
    TokenRangeRetentionConfig = _TokenRange

    def __init__(self, token_range_retention_configs: Sequence[_TokenRange] = (),
                 decode_retention_priority: int = 35,
                 decode_duration_ms: Union[None, int, datetime.timedelta] = None,
                 transfer_mode: Any = None, directory: Optional[str] = None):
        if directory is not None:
            raise ValueError("KvCacheRetentionConfig: field 'directory' (GDS transfer) is not supported by llmrt")
        self.token_range_retention_configs = list(token_range_retention_configs)
        self.decode_retention_priority = decode_retention_priority
        self.decode_duration_ms = decode_duration_ms
        self.transfer_mode = transfer_mode

    def _cpp(self) -> tuple:
        owner = "KvCacheRetentionConfig"
        ranges = []
        for r in self.token_range_retention_configs:
            if not isinstance(r, _TokenRange):
                raise TypeError(f"{owner}: token_range_retention_configs holds a {_type_name(r)}; expected "
                                "KvCacheRetentionConfig.TokenRangeRetentionConfig")
            end = None if r.token_end is None else check_int(owner, "token_end", r.token_end)
            ranges.append((check_int(owner, "token_start", r.token_start), end,
                           check_int(owner, "priority", r.priority),
                           _duration_ms(owner, "duration_ms", r.duration_ms)))
        return (ranges, check_int(owner, "decode_retention_priority", self.decode_retention_priority),
                _duration_ms(owner, "decode_duration_ms", self.decode_duration_ms))


# SamplingParams fields tensorrt_llm has that llmrt does not implement: accepted at these values.
_SP_UNSUPPORTED = {
    "use_beam_search": False, "beam_search_diversity_rate": None, "length_penalty": None, "early_stopping": None,
    "no_repeat_ngram_size": None, "top_p_min": None, "top_p_reset_ids": None, "top_p_decay": None,
    "embedding_bias": None, "logits_processor": None, "apply_batched_logits_processor": False,
    "prompt_logprobs": None, "return_encoder_output": False, "lookahead_config": None,
    "guided_decoding": None, "additional_model_outputs": None, "beam_width_array": None,
    "return_perf_metrics": False, "pad_id": None,
}
_SP_ALIASES = {"random_seed": "seed", "max_new_tokens": "max_tokens", "stop_words": "stop",
               "beam_width": "best_of"}


class SamplingParams:
    """tensorrt_llm.SamplingParams (vLLM's names work too: they are mostly the same; vLLM's
    top_k=-1 means disabled, as 0 does; random_seed, max_new_tokens and stop_words are older
    tensorrt_llm spellings).

    Decoding is greedy when temperature is 0, when top_k is 1, or when none of temperature, top_k
    and top_p is given (tensorrt_llm's default); otherwise it samples (temperature default 1.0).
    max_tokens defaults to 32 as in tensorrt_llm. Fields llmrt does not implement (beam search,
    logits processors, guided decoding, ...) raise ValueError when set."""

    _FIELDS = dict(
        end_id=None, max_tokens=32, bad=None, bad_token_ids=None, stop=None, stop_token_ids=None,
        include_stop_str_in_output=False, n=1, best_of=None, top_k=None, top_p=None, seed=None,
        temperature=None, min_tokens=None, repetition_penalty=None, presence_penalty=None,
        frequency_penalty=None, min_p=None, logprobs=None, return_context_logits=False,
        return_generation_logits=False, exclude_input_from_output=True, ignore_eos=False,
        detokenize=True, add_special_tokens=True, truncate_prompt_tokens=None,
        skip_special_tokens=True, spaces_between_special_tokens=True, logit_bias=None, **_SP_UNSUPPORTED)

    def __init__(self, **kwargs: Any):
        for alias, name in _SP_ALIASES.items():
            if alias in kwargs:
                if name in kwargs:
                    raise TypeError(f"SamplingParams: both '{alias}' and '{name}' given")
                kwargs[name] = kwargs.pop(alias)
        unknown = sorted(set(kwargs) - set(self._FIELDS))
        if unknown:
            import difflib
            near = difflib.get_close_matches(unknown[0], list(self._FIELDS), n=1)
            raise TypeError(f"SamplingParams got an unexpected keyword argument '{unknown[0]}'"
                            + (f", did you mean '{near[0]}'?" if near else ""))
        for k, v in self._FIELDS.items():
            setattr(self, k, kwargs.get(k, v))
        self._cpp_fields()  # types and llmrt's ranges, now rather than at generate()

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={getattr(self, k)!r}" for k, v in self._FIELDS.items() if getattr(self, k) != v)
        return f"SamplingParams({shown})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SamplingParams) and all(getattr(self, k) == getattr(other, k) for k in self._FIELDS)

    @property
    def greedy(self) -> bool:
        if self.temperature is not None and self.temperature == 0:
            return True
        if self.top_k == 1:
            return True
        return self.temperature is None and self.top_k is None and self.top_p is None

    def _cpp_fields(self) -> Dict[str, Any]:
        """The C++ SamplingParams' fields (llmrt/sampling_params.h), checked by llmrt."""
        o = "SamplingParams"
        for name, default in _SP_UNSUPPORTED.items():
            if getattr(self, name) != default:
                raise ValueError(f"{o}: field '{name}' is not supported by llmrt; leave it at {default!r}")
        f: Dict[str, Any] = {}
        f["max_tokens"] = check_int(o, "max_tokens", self.max_tokens)
        f["n"] = check_int(o, "n", self.n)
        if self.best_of is not None and check_int(o, "best_of", self.best_of) != self.n:
            raise ValueError(f"{o}: field 'best_of' has value {self.best_of}; llmrt returns every sample, "
                             f"so best_of must equal n ({self.n}) or be None")
        if self.greedy:
            f["temperature"] = 0.0
        else:
            f["temperature"] = 1.0 if self.temperature is None else check_float(o, "temperature", self.temperature)
            if self.top_k is not None:
                top_k = check_int(o, "top_k", self.top_k)
                f["top_k"] = 0 if top_k == -1 else top_k
            if self.top_p is not None:
                f["top_p"] = check_float(o, "top_p", self.top_p)
        for name in ("min_p", "repetition_penalty", "presence_penalty", "frequency_penalty"):
            v = getattr(self, name)
            if v is not None:
                f[name] = check_float(o, name, v)
        if self.seed is not None:
            f["seed"] = check_int(o, "seed", self.seed)
        if self.min_tokens is not None:
            f["min_tokens"] = check_int(o, "min_tokens", self.min_tokens)
        f["ignore_eos"] = check_bool(o, "ignore_eos", self.ignore_eos)
        stop_ids = [check_int(o, "stop_token_ids", t) for t in (self.stop_token_ids or [])]
        if self.end_id is not None:  # tensorrt_llm's end_id: the id that ends generation
            stop_ids.append(check_int(o, "end_id", self.end_id))
        f["stop_token_ids"] = stop_ids
        stop = self.stop
        if isinstance(stop, str):
            stop = [stop]
        for s in stop or []:
            if not isinstance(s, str):
                raise TypeError(f"{o}: field 'stop' must be a str or a list of str, got {_type_name(s)}")
        f["stop"] = list(stop or [])
        f["include_stop_str_in_output"] = check_bool(o, "include_stop_str_in_output", self.include_stop_str_in_output)
        if self.logprobs is not None:
            f["logprobs"] = check_int(o, "logprobs", self.logprobs)
        f["skip_special_tokens"] = check_bool(o, "skip_special_tokens", self.skip_special_tokens)
        bias: Dict[int, float] = {}
        if self.logit_bias is not None:
            if not isinstance(self.logit_bias, dict):
                raise TypeError(f"{o}: field 'logit_bias' must be a dict of token id -> bias")
            bias = {check_int(o, "logit_bias", int(k) if isinstance(k, str) and k.lstrip('-').isdigit() else k):
                    check_float(o, "logit_bias", v) for k, v in self.logit_bias.items()}
        # bad_token_ids (tensorrt_llm): banned ids, as OpenAI's logit_bias -100 bans them.
        for t in self.bad_token_ids or []:
            bias[check_int(o, "bad_token_ids", t)] = -100.0
        if self.bad is not None:
            raise ValueError(f"{o}: field 'bad' (banned strings) is not supported by llmrt; use bad_token_ids")
        f["logit_bias"] = sorted(bias.items())
        for name in ("return_context_logits", "return_generation_logits", "detokenize", "add_special_tokens",
                     "exclude_input_from_output", "spaces_between_special_tokens"):
            check_bool(o, name, getattr(self, name))
        if not self.exclude_input_from_output:
            raise ValueError(f"{o}: field 'exclude_input_from_output' must be True: llmrt's outputs hold the "
                             "generated tokens only")
        if self.truncate_prompt_tokens is not None and check_int(o, "truncate_prompt_tokens",
                                                                  self.truncate_prompt_tokens) < 1:
            raise ValueError(f"{o}: field 'truncate_prompt_tokens' has value {self.truncate_prompt_tokens}; "
                             "expected an integer >= 1 or None")
        _llmrt.sampling_params(f)  # llmrt's own range checks (raises ValueError naming the field)
        return f
