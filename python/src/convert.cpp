#include "convert.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>

#include "llmrt/config_options.h"

namespace llmrt::python {

void raise(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kOutOfRange:
      throw py::value_error(status.message());
    default:
      throw std::runtime_error(status.message());
  }
}

EngineConfig engineConfigFrom(const std::vector<std::pair<std::string, std::string>>& options) {
  EngineConfig config;
  for (const auto& [key, value] : options) check(setEngineOption(config, key, value));
  check(config.validate());
  return config;
}

py::dict engineConfigValues(const EngineConfig& config) {
  py::dict d;
  for (const OptionInfo& o : engineOptionTable()) d[py::str(std::string(o.key))] = engineOptionValue(config, o.key);
  return d;
}

namespace {

template <typename T>
T as(const std::string& field, py::handle v) {
  try {
    return v.cast<T>();
  } catch (const py::cast_error&) {
    throw py::type_error("SamplingParams: field '" + field + "' has a value of type " +
                         std::string(py::str(py::type::of(v).attr("__name__"))));
  }
}

}  // namespace

SamplingParams samplingParamsFrom(const py::dict& fields) {
  SamplingParams p;
  for (auto item : fields) {
    const std::string k = py::str(item.first);
    const py::handle v = item.second;
    if (v.is_none()) continue;
    if (k == "n") p.n = as<int>(k, v);
    else if (k == "temperature") p.temperature = as<float>(k, v);
    else if (k == "top_k") p.top_k = as<int>(k, v);
    else if (k == "top_p") p.top_p = as<float>(k, v);
    else if (k == "min_p") p.min_p = as<float>(k, v);
    else if (k == "repetition_penalty") p.repetition_penalty = as<float>(k, v);
    else if (k == "presence_penalty") p.presence_penalty = as<float>(k, v);
    else if (k == "frequency_penalty") p.frequency_penalty = as<float>(k, v);
    else if (k == "seed") p.seed = as<uint64_t>(k, v);
    else if (k == "max_tokens") p.max_tokens = as<int>(k, v);
    else if (k == "min_tokens") p.min_tokens = as<int>(k, v);
    else if (k == "ignore_eos") p.ignore_eos = as<bool>(k, v);
    else if (k == "stop_token_ids") p.stop_token_ids = as<std::vector<int32_t>>(k, v);
    else if (k == "stop") p.stop = as<std::vector<std::string>>(k, v);
    else if (k == "logit_bias") p.logit_bias = as<std::vector<std::pair<int32_t, float>>>(k, v);
    else if (k == "include_stop_str_in_output") p.include_stop_str_in_output = as<bool>(k, v);
    else if (k == "logprobs") p.logprobs = as<int>(k, v);
    else if (k == "skip_special_tokens") p.skip_special_tokens = as<bool>(k, v);
    else throw py::key_error("SamplingParams: no field '" + k + "'");
  }
  return p;
}

py::dict samplingParamsDict(const SamplingParams& p) {
  py::dict d;
  d["n"] = p.n;
  d["temperature"] = p.temperature;
  d["top_k"] = p.top_k;
  d["top_p"] = p.top_p;
  d["min_p"] = p.min_p;
  d["repetition_penalty"] = p.repetition_penalty;
  d["presence_penalty"] = p.presence_penalty;
  d["frequency_penalty"] = p.frequency_penalty;
  d["seed"] = p.seed ? py::object(py::int_(*p.seed)) : py::object(py::none());
  d["max_tokens"] = p.max_tokens;
  d["min_tokens"] = p.min_tokens;
  d["ignore_eos"] = p.ignore_eos;
  d["stop_token_ids"] = p.stop_token_ids;
  d["stop"] = p.stop;
  d["logit_bias"] = p.logit_bias;
  d["include_stop_str_in_output"] = p.include_stop_str_in_output;
  d["logprobs"] = p.logprobs ? py::object(py::int_(*p.logprobs)) : py::object(py::none());
  d["skip_special_tokens"] = p.skip_special_tokens;
  return d;
}

RequestOptions requestOptionsFrom(const py::dict& fields) {
  RequestOptions o;
  if (fields.contains("return_context_logits")) o.return_context_logits = fields["return_context_logits"].cast<bool>();
  if (fields.contains("return_generation_logits"))
    o.return_generation_logits = fields["return_generation_logits"].cast<bool>();
  if (fields.contains("retention") && !fields["retention"].is_none()) {
    const py::tuple r = fields["retention"].cast<py::tuple>();
    KvCacheRetentionConfig c;
    for (py::handle range : r[0].cast<py::list>()) {
      const py::tuple t = range.cast<py::tuple>();
      TokenRangeRetentionConfig tr;
      tr.token_start = t[0].cast<int32_t>();
      if (!t[1].is_none()) tr.token_end = t[1].cast<int32_t>();
      tr.priority = t[2].cast<int32_t>();
      if (!t[3].is_none()) tr.duration_ms = t[3].cast<int64_t>();
      c.token_range_retention_configs.push_back(tr);
    }
    c.decode_retention_priority = r[1].cast<int32_t>();
    if (!r[2].is_none()) c.decode_duration_ms = r[2].cast<int64_t>();
    o.kv_cache_retention_config = std::move(c);
  }
  return o;
}

namespace {

// A float32 array [rows, cols] owning `v` (moved, not copied); None when empty.
py::object floatArray(std::vector<float>&& v, int64_t cols) {
  if (v.empty() || cols <= 0) return py::none();
  auto* owned = new std::vector<float>(std::move(v));
  py::capsule free_when_done(owned, [](void* p) { delete static_cast<std::vector<float>*>(p); });
  const int64_t rows = static_cast<int64_t>(owned->size()) / cols;
  return py::array_t<float>({rows, cols}, {cols * static_cast<int64_t>(sizeof(float)), int64_t{sizeof(float)}},
                            owned->data(), free_when_done);
}

}  // namespace

std::string finishReasonName(FinishReason reason) {
  return reason == FinishReason::kNone ? std::string() : std::string(toString(reason));
}

py::dict requestOutputDict(RequestOutput&& out, int64_t vocab_size) {
  py::dict d;
  if (out.status.isOk()) d["status"] = py::none();
  else d["status"] = py::make_tuple(std::string(statusCodeName(out.status.code())), out.status.message());
  d["prompt"] = out.prompt;
  d["prompt_token_ids"] = out.prompt_token_ids;
  py::list outputs;
  for (CompletionOutput& c : out.outputs) {
    py::dict o;
    o["index"] = c.index;
    o["text"] = c.text;
    o["token_ids"] = c.token_ids;
    o["finish_reason"] = finishReasonName(c.finish_reason);
    py::list lps;
    for (const TokenLogprobs& t : c.logprobs) {
      py::list top;
      for (const TokenLogprob& a : t.top) top.append(py::make_tuple(a.token, a.logprob));
      lps.append(py::make_tuple(t.chosen.token, t.chosen.logprob, top));
    }
    o["logprobs"] = lps;
    o["generation_logits"] = floatArray(std::move(c.generation_logits), vocab_size);
    outputs.append(o);
  }
  d["outputs"] = outputs;
  d["context_logits"] = floatArray(std::move(out.context_logits), vocab_size);
  d["cached_tokens"] = out.cached_tokens;
  d["time_to_first_token_s"] = out.time_to_first_token_s;
  d["total_time_s"] = out.total_time_s;
  return d;
}

py::tuple streamDeltaTuple(const StreamDelta& delta) {
  const std::string reason = finishReasonName(delta.finish_reason);
  return py::make_tuple(delta.completion, delta.token_ids, delta.text,
                        reason.empty() ? py::object(py::none()) : py::object(py::str(reason)));
}

py::dict llmStatsDict(const LlmStats& s) {
  py::dict d;
  d["steps"] = s.steps;
  d["pauses"] = s.pauses;
  d["resumes"] = s.resumes;
  d["context_tokens"] = s.context_tokens;
  d["generated_tokens"] = s.generated_tokens;
  d["seconds"] = s.seconds;
  d["device_seconds"] = s.device_seconds;
  d["reused_blocks"] = s.reused_blocks;
  d["missed_blocks"] = s.missed_blocks;
  d["reuse_hit_rate"] = s.reuse_hit_rate;
  d["evicted_blocks"] = s.evicted_blocks;
  d["evicted_secondary_blocks"] = s.evicted_secondary_blocks;
  d["offloaded_blocks"] = s.offloaded_blocks;
  d["onboarded_blocks"] = s.onboarded_blocks;
  return d;
}

py::dict iterationStatsDict(const IterationStats& s) {
  py::dict d;
  d["iter"] = s.iteration;
  d["iter_latency_ms"] = s.step_time_s * 1e3;
  d["num_active_requests"] = s.num_scheduled_requests;
  d["num_queued_requests"] = s.num_queued_requests;
  py::dict ifb;
  ifb["num_context_requests"] = s.num_context_requests;
  ifb["num_ctx_tokens"] = s.num_context_tokens;
  ifb["num_gen_requests"] = s.num_generation_requests;
  ifb["num_gen_tokens"] = s.num_generation_tokens;
  ifb["num_paused_requests"] = s.num_paused;
  ifb["num_resumed_requests"] = s.num_resumed;
  d["inflight_batching_stats"] = ifb;
  py::dict kv;
  kv["used_num_blocks"] = s.kv_used_blocks;
  kv["free_num_blocks"] = s.kv_free_blocks;
  kv["max_num_blocks"] = s.kv_total_blocks;
  kv["reused_blocks"] = s.kv_reused_blocks;
  kv["cache_hit_rate"] = s.kv_reuse_hit_rate;
  d["kv_cache_stats"] = kv;
  return d;
}

namespace {

template <typename T>
py::object diffDict(const std::optional<KvCacheEventDiff<T>>& diff) {
  if (!diff) return py::none();
  py::dict d;
  d["type"] = "event_diff";
  d["old_value"] = diff->old_value;
  d["new_value"] = diff->new_value;
  return d;
}

py::dict eventData(const KvCacheEventData& data) {
  py::dict d;
  if (const auto* c = std::get_if<KvCacheCreatedData>(&data)) {
    d["type"] = "created";
    d["num_blocks_per_cache_level"] = c->num_blocks_per_cache_level;
    d["tokens_per_block"] = c->tokens_per_block;
  } else if (const auto* s = std::get_if<KvCacheStoredData>(&data)) {
    d["type"] = "stored";
    d["parent_hash"] = s->parent_hash ? py::object(py::int_(*s->parent_hash)) : py::object(py::none());
    py::list blocks;
    for (const KvCacheStoredBlockData& b : s->blocks) {
      py::dict bd;
      bd["type"] = "stored_block";
      bd["block_hash"] = b.block_hash;
      py::list tokens;
      for (TokenId t : b.tokens) {
        py::dict td;
        td["type"] = "unique_token";
        td["token_id"] = t;
        td["token_extra_id"] = 0;
        tokens.append(td);
      }
      bd["tokens"] = tokens;
      bd["lora_id"] = b.lora_id ? py::object(py::int_(*b.lora_id)) : py::object(py::none());
      bd["cache_level"] = b.cache_level;
      bd["priority"] = b.priority;
      blocks.append(bd);
    }
    d["blocks"] = blocks;
  } else if (const auto* r = std::get_if<KvCacheRemovedData>(&data)) {
    d["type"] = "removed";
    d["block_hashes"] = r->block_hashes;
  } else if (const auto* u = std::get_if<KvCacheUpdatedData>(&data)) {
    d["type"] = "updated";
    d["block_hash"] = u->block_hash;
    d["cache_level"] = diffDict(u->cache_level);
    d["priority"] = diffDict(u->priority);
  }
  return d;
}

}  // namespace

py::dict kvCacheEventDict(const KvCacheEvent& e) {
  py::dict d;
  d["event_id"] = e.event_id;
  d["data"] = eventData(e.data);
  d["window_size"] = e.window_size;
  return d;
}

}  // namespace llmrt::python
