#include "bench_requests.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "llmrt/file_io.h"
#include "llmrt/request_json.h"
#include "llmrt/tokenizer.h"

namespace llmrt::bench {
namespace {

using json = nlohmann::json;

Result<int64_t> drawLength(int64_t mean, const LengthDist& d, std::mt19937& rng) {
  double v = static_cast<double>(mean);
  if (d.kind == "uniform") {
    v = std::uniform_real_distribution<double>(v - d.spread, v + d.spread)(rng);
  } else if (d.kind == "normal") {
    v = std::normal_distribution<double>(v, d.spread)(rng);
  } else if (d.kind != "fixed") {
    return invalidArgument("length distribution '" + d.kind + "'; expected fixed, uniform or normal");
  }
  return std::clamp<int64_t>(std::llround(v), 1, std::max<int64_t>(1, 2 * mean));
}

Result<std::vector<TokenId>> encode(const Tokenizer* tok, const std::string& text, const std::string& where) {
  if (tok == nullptr) return invalidArgument(where + ": text needs the model's tokenizer, which it has none of");
  auto ids = tok->encode(text, true);
  if (!ids.isOk()) return invalidArgument(where + ": " + ids.status().message());
  return ids;
}

// One JSONL line: {"prompt": ...} or {"input_ids": [...]}, optional output length.
Result<BenchRequest> jsonlRequest(const json& j, const RequestsSpec& spec, const Tokenizer* tok,
                                  const std::string& where) {
  if (!j.is_object()) return invalidArgument(where + ": not a JSON object");
  BenchRequest r;
  if (j.contains("input_ids")) {
    const json& ids = j["input_ids"];
    if (!ids.is_array() || ids.empty()) return invalidArgument(where + ": \"input_ids\" must be a non-empty array");
    std::vector<TokenId> v;
    for (const json& t : ids) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX)
        return invalidArgument(where + ": \"input_ids\" holds something other than token ids");
      v.push_back(static_cast<TokenId>(t.get<int64_t>()));
    }
    r.input_len = static_cast<int64_t>(v.size());
    r.prompt = Prompt::fromIds(std::move(v));
  } else if (j.contains("prompt") && j["prompt"].is_string()) {
    LLMRT_ASSIGN_OR_RETURN(std::vector<TokenId> ids, encode(tok, j["prompt"].get<std::string>(), where));
    r.input_len = static_cast<int64_t>(ids.size());
    r.prompt = Prompt::fromIds(std::move(ids));
  } else {
    return invalidArgument(where + ": needs \"prompt\" (text) or \"input_ids\"");
  }
  r.output_len = spec.output_len;
  for (const char* key : {"output_tokens", "output_len", "max_tokens"}) {
    if (!j.contains(key)) continue;
    const json& v = j[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (int64_t{1} << 24))
      return invalidArgument(where + ": \"" + key + "\" must be an integer in [1, 2^24]");
    r.output_len = v.get<int64_t>();
    break;
  }
  return r;
}

// ShareGPT: [{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", "value": ...}, ...]}, ...].
Result<std::vector<BenchRequest>> shareGpt(const json& all, const RequestsSpec& spec, const Tokenizer* tok) {
  std::vector<BenchRequest> out;
  for (size_t i = 0; i < all.size() && static_cast<int64_t>(out.size()) < spec.num_requests; ++i) {
    const std::string where = spec.dataset + ": conversation " + std::to_string(i);
    const json& c = all[i];
    if (!c.is_object() || !c.contains("conversations") || !c["conversations"].is_array())
      return invalidArgument(where + ": expected an object with a \"conversations\" array (ShareGPT)");
    const json& turns = c["conversations"];
    if (turns.size() < 2) continue;  // nothing to answer (vllm bench skips these too)
    auto text = [&](size_t t) -> Result<std::string> {
      if (!turns[t].is_object() || !turns[t].contains("value") || !turns[t]["value"].is_string())
        return invalidArgument(where + ": turn " + std::to_string(t) + " has no \"value\" text");
      return turns[t]["value"].get<std::string>();
    };
    LLMRT_ASSIGN_OR_RETURN(std::string prompt, text(0));
    LLMRT_ASSIGN_OR_RETURN(std::string reply, text(1));
    LLMRT_ASSIGN_OR_RETURN(std::vector<TokenId> ids, encode(tok, prompt, where));
    LLMRT_ASSIGN_OR_RETURN(std::vector<TokenId> reply_ids, encode(tok, reply, where));
    if (ids.empty()) continue;
    BenchRequest r;
    r.input_len = static_cast<int64_t>(ids.size());
    r.output_len = std::max<int64_t>(1, static_cast<int64_t>(reply_ids.size()));
    r.prompt = Prompt::fromIds(std::move(ids));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

Result<std::vector<BenchRequest>> makeBenchRequests(const RequestsSpec& spec, const Tokenizer* tok, int64_t vocab,
                                                    int64_t max_seq_len, int64_t* dropped) {
  std::vector<BenchRequest> all;
  if (spec.dataset.empty()) {
    std::mt19937 rng(spec.seed);
    std::uniform_int_distribution<TokenId> token(10, static_cast<TokenId>(std::max<int64_t>(vocab - 11, 10)));
    for (int64_t i = 0; i < spec.num_requests; ++i) {
      BenchRequest r;
      LLMRT_ASSIGN_OR_RETURN(r.input_len, drawLength(spec.input_len, spec.input_dist, rng));
      LLMRT_ASSIGN_OR_RETURN(r.output_len, drawLength(spec.output_len, spec.output_dist, rng));
      std::vector<TokenId> ids(static_cast<size_t>(r.input_len));
      for (TokenId& t : ids) t = token(rng);
      r.prompt = Prompt::fromIds(std::move(ids));
      all.push_back(std::move(r));
    }
  } else {
    LLMRT_ASSIGN_OR_RETURN(std::string text, readRegularFile(spec.dataset, uint64_t{1} << 32));
    const size_t first = text.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && text[first] == '[') {
      json j = json::parse(text, nullptr, false);
      if (j.is_discarded() || !j.is_array())
        return invalidArgument(spec.dataset + ": not valid JSON (a ShareGPT file is one JSON array)");
      LLMRT_ASSIGN_OR_RETURN(all, shareGpt(j, spec, tok));
    } else {
      size_t pos = 0;
      int64_t line = 0;
      while (pos < text.size() && static_cast<int64_t>(all.size()) < spec.num_requests) {
        const size_t end = std::min(text.find('\n', pos), text.size());
        const std::string l = text.substr(pos, end - pos);
        pos = end + 1;
        ++line;
        if (l.find_first_not_of(" \t\r") == std::string::npos) continue;
        const std::string where = spec.dataset + ":" + std::to_string(line);
        // The library's strict reader: nesting bounded, duplicate keys refused, errors cut short.
        auto j = parseJsonObject(l, where, 8);
        if (!j.isOk()) return invalidArgument(j.status().message());
        LLMRT_ASSIGN_OR_RETURN(BenchRequest r, jsonlRequest(*j, spec, tok, where));
        all.push_back(std::move(r));
      }
    }
    if (all.empty()) return invalidArgument(spec.dataset + ": no requests");
  }
  std::vector<BenchRequest> kept;
  for (BenchRequest& r : all)
    if (r.input_len + r.output_len <= max_seq_len) kept.push_back(std::move(r));
  *dropped = static_cast<int64_t>(all.size() - kept.size());
  if (kept.empty())
    return invalidArgument("every request is longer than the max sequence length " + std::to_string(max_seq_len) +
                           " (--max-seq-len)");
  return kept;
}

}  // namespace llmrt::bench
