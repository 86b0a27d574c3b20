#include "generate_batch.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli_common.h"

namespace llmrt::cli {
namespace {

using nlohmann::json;

struct BatchItem {
  Prompt prompt;
  SamplingParams params;
  RequestOptions options;
};

template <typename T>
Status getField(const json& j, const char* key, T& out, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  try {
    out = it->get<T>();
  } catch (const std::exception& e) {
    return invalidArgument(where + ": field '" + key + "' has the wrong type (" + it->dump() + ")");
  }
  return Status::ok();
}

Status parseRetention(const json& j, KvCacheRetentionConfig& rc, const std::string& where) {
  if (!j.is_object()) return invalidArgument(where + ": kv_cache_retention_config must be an object");
  auto ranges = j.find("token_range_retention_configs");
  if (ranges != j.end()) {
    if (!ranges->is_array()) return invalidArgument(where + ": token_range_retention_configs must be an array");
    for (const json& r : *ranges) {
      if (!r.is_object()) return invalidArgument(where + ": each token range retention config must be an object");
      TokenRangeRetentionConfig t;
      LLMRT_RETURN_IF_ERROR(getField(r, "token_start", t.token_start, where));
      int32_t end = -1;
      LLMRT_RETURN_IF_ERROR(getField(r, "token_end", end, where));
      if (r.contains("token_end") && !r["token_end"].is_null()) t.token_end = end;
      LLMRT_RETURN_IF_ERROR(getField(r, "priority", t.priority, where));
      int64_t d = 0;
      LLMRT_RETURN_IF_ERROR(getField(r, "duration_ms", d, where));
      if (r.contains("duration_ms") && !r["duration_ms"].is_null()) t.duration_ms = d;
      rc.token_range_retention_configs.push_back(t);
    }
  }
  LLMRT_RETURN_IF_ERROR(getField(j, "decode_retention_priority", rc.decode_retention_priority, where));
  int64_t d = 0;
  LLMRT_RETURN_IF_ERROR(getField(j, "decode_duration_ms", d, where));
  if (j.contains("decode_duration_ms") && !j["decode_duration_ms"].is_null()) rc.decode_duration_ms = d;
  return Status::ok();
}

Status parseLine(const std::string& line, const std::string& where, const SamplingParams& defaults, BatchItem& item) {
  json j;
  try {
    j = json::parse(line);
  } catch (const std::exception& e) {
    return parseError(where + ": malformed JSON: " + e.what());
  }
  if (!j.is_object()) return parseError(where + ": expected a JSON object");
  static const std::set<std::string> kKnown = {
      "prompt", "input_ids", "max_tokens", "min_tokens", "temperature", "top_k", "top_p", "min_p",
      "repetition_penalty", "presence_penalty", "frequency_penalty", "seed", "ignore_eos", "stop",
      "stop_token_ids", "n", "logprobs", "kv_cache_retention_config"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!kKnown.count(it.key())) return invalidArgument(where + ": unknown field '" + it.key() + "'");
  const bool has_text = j.contains("prompt"), has_ids = j.contains("input_ids");
  if (has_text == has_ids) return invalidArgument(where + ": exactly one of 'prompt' or 'input_ids' is required");
  if (has_text) {
    std::string t;
    LLMRT_RETURN_IF_ERROR(getField(j, "prompt", t, where));
    item.prompt = Prompt::fromText(std::move(t));
  } else {
    std::vector<int64_t> ids;
    LLMRT_RETURN_IF_ERROR(getField(j, "input_ids", ids, where));
    std::vector<TokenId> tids;
    for (int64_t v : ids) {
      if (v < INT32_MIN || v > INT32_MAX) return invalidArgument(where + ": input_ids value " + std::to_string(v) + " is not a token id");
      tids.push_back(static_cast<TokenId>(v));
    }
    item.prompt = Prompt::fromIds(std::move(tids));
  }
  SamplingParams& p = item.params;
  p = defaults;
  LLMRT_RETURN_IF_ERROR(getField(j, "max_tokens", p.max_tokens, where));
  LLMRT_RETURN_IF_ERROR(getField(j, "min_tokens", p.min_tokens, where));
  LLMRT_RETURN_IF_ERROR(getField(j, "temperature", p.temperature, where));
  LLMRT_RETURN_IF_ERROR(getField(j, "top_k", p.top_k, where));
  LLMRT_RETURN_IF_ERROR(getField(j, "top_p", p.top_p, where));
  LLMRT_RETURN_IF_ERROR(getField(j, "min_p", p.min_p, where));
  LLMRT_RETURN_IF_ERROR(getField(j, "repetition_penalty", p.repetition_penalty, where));
  LLMRT_RETURN_IF_ERROR(getField(j, "presence_penalty", p.presence_penalty, where));
  LLMRT_RETURN_IF_ERROR(getField(j, "frequency_penalty", p.frequency_penalty, where));
  LLMRT_RETURN_IF_ERROR(getField(j, "ignore_eos", p.ignore_eos, where));
  LLMRT_RETURN_IF_ERROR(getField(j, "stop", p.stop, where));
  LLMRT_RETURN_IF_ERROR(getField(j, "stop_token_ids", p.stop_token_ids, where));
  LLMRT_RETURN_IF_ERROR(getField(j, "n", p.n, where));
  if (j.contains("seed") && !j["seed"].is_null()) {
    uint64_t s = 0;
    LLMRT_RETURN_IF_ERROR(getField(j, "seed", s, where));
    p.seed = s;
  }
  if (j.contains("logprobs") && !j["logprobs"].is_null()) {
    int k = 0;
    LLMRT_RETURN_IF_ERROR(getField(j, "logprobs", k, where));
    p.logprobs = k;
  }
  if (j.contains("kv_cache_retention_config") && !j["kv_cache_retention_config"].is_null()) {
    KvCacheRetentionConfig rc;
    LLMRT_RETURN_IF_ERROR(parseRetention(j["kv_cache_retention_config"], rc, where));
    item.options.kv_cache_retention_config = rc;
  }
  return Status::ok();
}

json completionJson(const CompletionOutput& c) {
  json o;
  o["index"] = c.index;
  o["output_ids"] = c.token_ids;
  o["text"] = c.text;
  o["finish_reason"] = std::string(toString(c.finish_reason));
  if (!c.logprobs.empty()) {
    json lps = json::array();
    for (const TokenLogprobs& lp : c.logprobs) {
      json top = json::array();
      for (const TokenLogprob& t : lp.top) top.push_back({t.token, t.logprob});
      lps.push_back({{"token", lp.chosen.token}, {"logprob", lp.chosen.logprob}, {"top", top}});
    }
    o["logprobs"] = lps;
  }
  return o;
}

}  // namespace

int runGenerateBatch(LLM& llm, const SamplingParams& defaults, const std::string& input_file,
                     const std::string& output_file) {
  std::ifstream in(input_file);
  if (!in) return fail(ioError("cannot open input file " + input_file));
  std::vector<BatchItem> items;
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines
    BatchItem item;
    Status s = parseLine(line, input_file + ":" + std::to_string(lineno), defaults, item);
    if (!s.isOk()) return fail(s);
    items.push_back(std::move(item));
  }
  if (items.empty()) return fail(invalidArgument(input_file + ": no requests"));

  std::vector<Prompt> prompts;
  std::vector<SamplingParams> params;
  std::vector<RequestOptions> options;
  for (BatchItem& it : items) {
    prompts.push_back(std::move(it.prompt));
    params.push_back(std::move(it.params));
    options.push_back(std::move(it.options));
  }
  auto outs = llm.generate(prompts, params, options);
  if (!outs.isOk()) return fail(outs.status());

  std::FILE* out = stdout;
  if (!output_file.empty()) {
    out = std::fopen(output_file.c_str(), "w");
    if (out == nullptr) return fail(ioError("cannot open output file " + output_file));
  }
  for (size_t i = 0; i < outs->size(); ++i) {
    const RequestOutput& r = (*outs)[i];
    json o;
    o["index"] = i;
    if (!r.status.isOk()) {
      o["error"] = r.status.message();
      o["finish_reason"] = "error";
    } else {
      const CompletionOutput& c = r.outputs.at(0);
      o["output_ids"] = c.token_ids;
      o["text"] = c.text;
      o["finish_reason"] = std::string(toString(c.finish_reason));
      o["cached_tokens"] = r.cached_tokens;
      o["prompt_tokens"] = r.prompt_token_ids.size();
      if (r.outputs.size() > 1 || !c.logprobs.empty()) {
        json all = json::array();
        for (const CompletionOutput& x : r.outputs) all.push_back(completionJson(x));
        o["outputs"] = all;
      }
    }
    const std::string s = o.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    std::fputs(s.c_str(), out);
  }
  const LlmStats st = llm.stats();
  json stats = {{"requests", outs->size()},
                {"steps", st.steps},
                {"context_tokens", st.context_tokens},
                {"generated_tokens", st.generated_tokens},
                {"seconds", st.seconds},
                {"kv_reuse_hit_rate", st.reuse_hit_rate},
                {"kv_reused_blocks", st.reused_blocks},
                {"kv_evicted_blocks", st.evicted_blocks},
                {"kv_offloaded_blocks", st.offloaded_blocks},
                {"kv_onboarded_blocks", st.onboarded_blocks},
                {"pauses", st.pauses},
                {"resumes", st.resumes}};
  const std::string s = json{{"stats", stats}}.dump() + "\n";
  std::fputs(s.c_str(), out);
  if (out != stdout && std::fclose(out) != 0) return fail(ioError("writing " + output_file + " failed"));
  return 0;
}

}  // namespace llmrt::cli
