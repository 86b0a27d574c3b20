// Conversions between the C++ API's values (include/llmrt/) and the plain Python values the
// pure-Python layer (python/llmrt/_api.py) exchanges with the extension: dicts of field names,
// lists, numpy arrays. The Python layer checks types and spells TensorRT-LLM's names; this side
// fills the C++ structs and leaves range checks to their validate().
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <utility>
#include <vector>

#include "llmrt/engine_config.h"
#include "llmrt/executor.h"
#include "llmrt/kv_cache_events.h"
#include "llmrt/llm.h"
#include "llmrt/sampling_params.h"
#include "llmrt/status.h"

namespace llmrt::python {

namespace py = pybind11;

// Raises the Python exception for a failed Status: ValueError for what the caller gave
// (InvalidArgument, NotFound, OutOfRange), RuntimeError for everything else; the message is
// the Status's.
[[noreturn]] void raise(const Status& status);

inline void check(const Status& status) {
  if (!status.isOk()) raise(status);
}

template <typename T>
T unwrap(Result<T> r) {
  if (!r.isOk()) raise(r.status());
  return std::move(*r);
}

// An EngineConfig from (option key, value text) pairs, set through the option table
// (llmrt/config_options.h) in order (list options: one pair per element), then validated.
EngineConfig engineConfigFrom(const std::vector<std::pair<std::string, std::string>>& options);
// {option key: value text} of every option in the table, as engineOptionValue writes them.
py::dict engineConfigValues(const EngineConfig& config);

// SamplingParams from {C++ field name: value}; None leaves a field at its default. Unknown
// names raise KeyError (the Python layer sends only known ones). Validated by the engine.
SamplingParams samplingParamsFrom(const py::dict& fields);
// {field name: value} of a SamplingParams (what _llmrt.sampling_params returns after validation).
py::dict samplingParamsDict(const SamplingParams& params);

// RequestOptions from {"retention": (ranges, decode_priority, decode_duration_ms) or None,
// "return_context_logits": bool, "return_generation_logits": bool}; a range is
// (start, end or None, priority, duration_ms or None).
RequestOptions requestOptionsFrom(const py::dict& fields);

// A RequestOutput as a dict: status (None or (code name, message)), prompt, prompt_token_ids,
// outputs (dicts: index, text, token_ids, finish_reason, logprobs, generation_logits),
// context_logits, cached_tokens, time_to_first_token_s, total_time_s. The logits become
// float32 numpy arrays that own the moved vectors (no copy); None when not requested.
py::dict requestOutputDict(RequestOutput&& out, int64_t vocab_size);

// One streamed piece: (completion index, token ids, text, finish reason name or None).
py::tuple streamDeltaTuple(const StreamDelta& delta);

py::dict llmStatsDict(const LlmStats& stats);
py::dict iterationStatsDict(const IterationStats& stats);
// A KV cache event in TensorRT-LLM's serialized shape: {"event_id", "data": {"type": "created" |
// "stored" | "removed" | "updated", ...}, "window_size"}.
py::dict kvCacheEventDict(const KvCacheEvent& event);

std::string finishReasonName(FinishReason reason);  // None -> ""; else "stop", "length", ...

}  // namespace llmrt::python
