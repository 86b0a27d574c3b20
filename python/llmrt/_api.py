"""The LLM class: tensorrt_llm.LLM's API over llmrt's C++ engine (the _llmrt extension)."""
from __future__ import annotations

import difflib
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _llmrt
from ._config import (KvCacheConfig, KvCacheRetentionConfig, SamplingParams, SchedulerConfig, check_bool,
                      check_float, check_int, option_text)
from ._outputs import ProgressBar, RequestOutput

__all__ = ["LLM", "Tokenizer"]

PromptInput = Union[str, Sequence[int], Dict[str, Any]]

# LLM keyword -> llmrt option key (llmrt/config_options.h); the value is set through the table.
_ENGINE_KWARGS = {
    "max_batch_size": "max_batch_size", "max_num_tokens": "max_num_tokens", "max_seq_len": "max_seq_len",
    "max_input_len": "max_input_len", "num_threads": "num_threads", "iter_stats_max_iterations":
    "iter_stats_max_iterations", "cuda_tuning": "cuda_tuning", "overlap": "overlap",
    "quantization": "quantization", "tensor_parallel_size": "tensor_parallel_size",
    "calibration_file": "calibration_file", "calibration_size": "calibration_size",
    "smoothquant_alpha": "smoothquant_alpha", "quantization_cache_dir": "quantization_cache_dir",
}
_STR_KWARGS = {"cuda_tuning", "overlap", "quantization", "calibration_file", "quantization_cache_dir"}
_FLOAT_KWARGS = {"smoothquant_alpha"}
# tensorrt_llm's backend names run llmrt's automatic choice (CUDA when a GPU is there).
_TRT_BACKENDS = {"pytorch", "tensorrt", "trt", "_autodeploy"}
_DTYPE_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32", "float": "float32"}
# Keywords accepted for compatibility when left at these values.
_COMPAT_KWARGS = {"pipeline_parallel_size": 1, "trust_remote_code": None,
                  "skip_tokenizer_init": False, "tokenizer_mode": "auto", "revision": None,
                  "tokenizer_revision": None, "enable_iter_perf_stats": None, "enable_attention_dp": False,
                  "speculative_config": None, "lora_config": None, "quant_config": None,
                  "disable_overlap_scheduler": None, "build_config": None, "gpus_per_node": None,
                  "moe_expert_parallel_size": None, "enable_chunked_prefill": None, "tokenizer": None}


def _want_tqdm(use_tqdm: Union[bool, str]) -> bool:
    if use_tqdm == "always":
        return True
    if use_tqdm is True:
        return sys.stderr.isatty()
    if use_tqdm is False:
        return False
    raise ValueError(f"generate: use_tqdm has value {use_tqdm!r}; expected True (on a terminal), False or 'always'")


class Tokenizer:
    """The model's tokenizer (tokenizer.json, tokenizer.model or *.tiktoken), exact against HF's."""

    def __init__(self, engine: Any):
        self._engine = engine

    def encode(self, text: str, add_special_tokens: bool = True) -> List[int]:
        return self._engine.encode(text, add_special_tokens)

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return self._engine.decode(list(token_ids), skip_special_tokens)

    def __call__(self, text: str, add_special_tokens: bool = True) -> Dict[str, List[int]]:
        return {"input_ids": self.encode(text, add_special_tokens)}


class LLM:
    """An llmrt engine on a HuggingFace model directory, with tensorrt_llm.LLM's API.

        llm = LLM(model="models/llmrt-tiny", kv_cache_config=KvCacheConfig(max_tokens=4096))
        for out in llm.generate(["Once upon a time"], SamplingParams(max_tokens=32)):
            print(out.outputs[0].text)

    Keywords: model, backend ("auto", "cpu", "cuda"; tensorrt_llm's "pytorch" means auto), dtype
    ("auto", "bfloat16", "float16", "float32"), max_batch_size, max_num_tokens, max_seq_len,
    max_input_len, kv_cache_config, scheduler_config, enable_chunked_prefill,
    disable_overlap_scheduler, iter_stats_max_iterations, quantization ("auto", "none", "fp8", "int8",
    "smoothquant", "awq", as vLLM's; the last two calibrate at the first load, on calibration_file with
    calibration_size samples and smoothquant_alpha, and cache the result in quantization_cache_dir),
    tensor_parallel_size (0: every visible GPU), and llmrt's own num_threads, overlap
    ("auto", "on", "off"), cuda_tuning ("key=value,..."). None keeps llmrt's default. Bad values
    raise ValueError naming the field; unknown keywords raise TypeError."""

    def __init__(self, model: str, *, backend: Optional[str] = None, dtype: str = "auto",
                 kv_cache_config: Optional[KvCacheConfig] = None, scheduler_config: Optional[SchedulerConfig] = None,
                 **kwargs: Any):
        options = self._options(model, backend, dtype, kv_cache_config, scheduler_config, kwargs)
        self._engine = _llmrt.Engine(options)
        self._tokenizer = Tokenizer(self._engine) if self._engine.has_tokenizer else None
        self.model = model

    # ---- configuration -------------------------------------------------------------------
    @staticmethod
    def _options(model: Any, backend: Optional[str], dtype: Any, kv: Optional[KvCacheConfig],
                 sched: Optional[SchedulerConfig], kwargs: Dict[str, Any]) -> List[tuple]:
        if not isinstance(model, (str, os.PathLike)):
            raise TypeError(f"LLM: model must be a path (str), got {type(model).__name__}")
        opts: List[tuple] = [("model", os.fspath(model))]
        if backend is not None:
            if not isinstance(backend, str):
                raise TypeError(f"LLM: backend must be a str, got {type(backend).__name__}")
            opts.append(("backend", "auto" if backend in _TRT_BACKENDS else backend))
        if not isinstance(dtype, str):
            raise TypeError(f"LLM: dtype must be a str, got {type(dtype).__name__}")
        opts.append(("dtype", _DTYPE_ALIASES.get(dtype, dtype)))
        for name, value in kwargs.items():
            if name in _ENGINE_KWARGS:
                if value is None:
                    continue
                kind = "str" if name in _STR_KWARGS else "float" if name in _FLOAT_KWARGS else "int"
                if kind == "str":
                    v = os.fspath(value) if isinstance(value, os.PathLike) else value
                    if not isinstance(v, str):
                        raise TypeError(f"LLM: {name} must be a str, got {type(v).__name__}")
                else:
                    v = check_float("LLM", name, value) if kind == "float" else check_int("LLM", name, value)
                opts.append((_ENGINE_KWARGS[name], option_text(v)))
            elif name in _COMPAT_KWARGS:
                continue  # checked below
            else:
                known = list(_ENGINE_KWARGS) + list(_COMPAT_KWARGS) + ["backend", "dtype", "kv_cache_config",
                                                                      "scheduler_config"]
                near = difflib.get_close_matches(name, known, n=1)
                raise TypeError(f"LLM got an unexpected keyword argument '{name}'"
                                + (f", did you mean '{near[0]}'?" if near else ""))
        if kwargs.get("pipeline_parallel_size", 1) != 1:
            raise ValueError(f"LLM: field 'pipeline_parallel_size' has value {kwargs['pipeline_parallel_size']!r}; "
                             "llmrt has no pipeline parallelism (1)")
        for name in ("speculative_config", "lora_config", "quant_config", "build_config"):
            if kwargs.get(name) is not None:
                raise ValueError(f"LLM: field '{name}' is not supported by llmrt; leave it None")
        if kwargs.get("tokenizer") is not None and os.fspath(kwargs["tokenizer"]) != os.fspath(model):
            raise ValueError("LLM: field 'tokenizer' must be None or the model directory: llmrt reads the "
                             "tokenizer from the model directory")
        if kwargs.get("skip_tokenizer_init"):
            raise ValueError("LLM: field 'skip_tokenizer_init' is not supported; pass token ids as prompts instead")
        if kwargs.get("enable_attention_dp"):
            raise ValueError("LLM: field 'enable_attention_dp' is not supported by llmrt")
        if kv is not None:
            if not isinstance(kv, KvCacheConfig):
                raise TypeError(f"LLM: kv_cache_config must be a KvCacheConfig, got {type(kv).__name__}")
            opts.extend(kv._options())
        if sched is not None:
            if not isinstance(sched, SchedulerConfig):
                raise TypeError(f"LLM: scheduler_config must be a SchedulerConfig, got {type(sched).__name__}")
            opts.extend(sched._options())
        if kwargs.get("enable_chunked_prefill") is not None:
            opts.append(("scheduler_config.enable_chunked_context",
                         option_text(check_bool("LLM", "enable_chunked_prefill", kwargs["enable_chunked_prefill"]))))
        if kwargs.get("disable_overlap_scheduler") is not None:
            if check_bool("LLM", "disable_overlap_scheduler", kwargs["disable_overlap_scheduler"]):
                opts.append(("overlap", "off"))
        return opts

    @property
    def args(self) -> Dict[str, str]:
        """The engine's resolved configuration: {option key: value} (e.g. max_seq_len from the model)."""
        return self._live().config()

    @property
    def tokenizer(self) -> Optional[Tokenizer]:
        return self._tokenizer

    @property
    def model_config(self) -> Dict[str, Any]:
        return self._live().model_config()

    # ---- generation ----------------------------------------------------------------------
    def _submit(self, prompt: PromptInput, sp: SamplingParams, retention: Optional[KvCacheRetentionConfig],
                streaming: bool = False) -> RequestOutput:
        engine = self._live()
        if not isinstance(sp, SamplingParams):
            raise TypeError(f"generate: sampling_params must be SamplingParams, got {type(sp).__name__}")
        if retention is not None and not isinstance(retention, KvCacheRetentionConfig):
            raise TypeError("generate: kv_cache_retention_config must be a KvCacheRetentionConfig, "
                            f"got {type(retention).__name__}")
        text: Optional[str] = None
        if isinstance(prompt, dict):
            if "prompt_token_ids" in prompt:
                ids = prompt["prompt_token_ids"]
            elif "prompt" in prompt:
                ids = text = prompt["prompt"]
            else:
                raise ValueError("generate: a prompt dict needs 'prompt' or 'prompt_token_ids'")
        else:
            ids = prompt
        if isinstance(ids, str):
            text = ids
            if not sp.add_special_tokens or sp.truncate_prompt_tokens is not None:
                if self._tokenizer is None:
                    raise ValueError("generate: the model has no tokenizer; pass token ids")
                ids = self._tokenizer.encode(text, sp.add_special_tokens)
        else:
            if isinstance(ids, (bytes, bytearray)) or not all(
                    isinstance(t, int) and not isinstance(t, bool) for t in ids):
                raise TypeError("generate: a prompt is a str, a list of token ids or a dict with 'prompt' / "
                                "'prompt_token_ids'")
            ids = list(ids)
        if sp.truncate_prompt_tokens is not None and not isinstance(ids, str):
            ids = ids[-sp.truncate_prompt_tokens:]
        fields = sp._cpp_fields()
        options = {"retention": retention._cpp() if retention is not None else None,
                   "return_context_logits": sp.return_context_logits,
                   "return_generation_logits": sp.return_generation_logits}
        request = engine.submit(ids, fields, options)
        return RequestOutput(request, text, [] if isinstance(ids, str) else ids, sp.n, sp.detokenize, streaming)

    @staticmethod
    def _per_prompt(name: str, value: Any, count: int) -> List[Any]:
        if isinstance(value, (list, tuple)):
            if len(value) != count:
                raise ValueError(f"generate: {len(value)} {name} for {count} prompts; expected 1 or {count}")
            return list(value)
        return [value] * count

    def generate(self, inputs: Union[PromptInput, Sequence[PromptInput]],
                 sampling_params: Union[None, SamplingParams, Sequence[SamplingParams]] = None,
                 use_tqdm: Union[bool, str] = True,
                 kv_cache_retention_config: Union[None, KvCacheRetentionConfig,
                                                  Sequence[KvCacheRetentionConfig]] = None,
                 **kwargs: Any) -> Union[RequestOutput, List[RequestOutput]]:
        """Generates for one prompt (returns a RequestOutput) or a list of prompts (returns a list,
        in order). A prompt is a str, a list of token ids, or {"prompt": str} /
        {"prompt_token_ids": [...]}. sampling_params and kv_cache_retention_config: one for all
        prompts or a list with one per prompt. Blocks with the GIL released; Ctrl-C cancels the
        prompts and raises KeyboardInterrupt. A progress bar goes to stderr when it is a terminal
        (use_tqdm=True), always ("always") or never (False)."""
        for k in kwargs:
            if k not in ("lora_request", "prompt_adapter_request", "disaggregated_params", "scheduling_params"):
                raise TypeError(f"generate() got an unexpected keyword argument '{k}'")
            if kwargs[k] is not None:
                raise ValueError(f"generate: '{k}' is not supported by llmrt; leave it None")
        single = isinstance(inputs, (str, dict)) or (
            isinstance(inputs, (list, tuple)) and len(inputs) > 0 and all(
                isinstance(t, int) and not isinstance(t, bool) for t in inputs))
        prompts = [inputs] if single else list(inputs)
        sps = self._per_prompt("sampling_params", sampling_params if sampling_params is not None else SamplingParams(),
                               len(prompts))
        rets = self._per_prompt("kv_cache_retention_config", kv_cache_retention_config, len(prompts))
        bar = ProgressBar(len(prompts), _want_tqdm(use_tqdm))
        outs: List[RequestOutput] = []
        try:
            for p, sp, r in zip(prompts, sps, rets):
                outs.append(self._submit(p, sp, r))
            _llmrt.wait_all([o._request for o in outs], (lambda i: bar.update()) if bar.enabled else None)
        except BaseException:
            for o in outs:
                o.abort()
            raise
        finally:
            bar.close()
        for o in outs:
            o.result()
        return outs[0] if single else outs

    def generate_async(self, inputs: PromptInput, sampling_params: Optional[SamplingParams] = None,
                       kv_cache_retention_config: Optional[KvCacheRetentionConfig] = None,
                       streaming: bool = False, **kwargs: Any) -> RequestOutput:
        """Submits one prompt and returns at once. The result is the handle: `await` it (or
        aresult() / result()) for the final output, or with streaming=True iterate it (`async for`
        or `for`) over its states as tokens arrive (outputs[i].text_diff / token_ids_diff: what each
        state added)."""
        for k in kwargs:
            if k not in ("lora_request", "prompt_adapter_request", "disaggregated_params", "scheduling_params"):
                raise TypeError(f"generate_async() got an unexpected keyword argument '{k}'")
        return self._submit(inputs, sampling_params if sampling_params is not None else SamplingParams(),
                            kv_cache_retention_config, streaming)

    # ---- statistics and events -----------------------------------------------------------
    def get_stats(self, timeout: Optional[float] = 2) -> List[Dict[str, Any]]:
        """Iteration statistics since the last call (tensorrt_llm's shape: iter, iter_latency_ms,
        num_active_requests, inflight_batching_stats, kv_cache_stats); the last
        iter_stats_max_iterations are kept."""
        return self._live().iteration_stats()

    def get_kv_cache_events(self, timeout: Optional[float] = 2) -> List[Dict[str, Any]]:
        """KV cache events since the last call, as tensorrt_llm serializes them: {"event_id",
        "data": {"type": "created" | "stored" | "removed" | "updated", ...}, "window_size"}.
        Needs KvCacheConfig(event_buffer_max_size > 0). Waits up to `timeout` s for the first."""
        return self._live().kv_cache_events(timeout)

    def stats(self) -> Dict[str, Any]:
        """Cumulative counters: steps, tokens, KV cache reuse, evictions, offloads."""
        return self._live().stats()

    # ---- lifetime ------------------------------------------------------------------------
    def _live(self) -> Any:
        engine = getattr(self, "_engine", None)
        if engine is None:
            raise RuntimeError("LLM: the engine was shut down (shutdown() or the with-block ended)")
        return engine

    def shutdown(self) -> None:
        """Stops the engine (unfinished requests end cancelled) and frees it. Idempotent."""
        engine = getattr(self, "_engine", None)
        if engine is not None:
            engine.shutdown()
            self._engine = None

    def __enter__(self) -> "LLM":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.shutdown()
        return False

    def __del__(self) -> None:
        try:
            self.shutdown()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
