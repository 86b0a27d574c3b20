#include "result_json.h"

namespace llmrt::cli {

using nlohmann::json;

json completionJson(const CompletionOutput& c) {
  json o = {{"index", c.index},
            {"text", c.text},
            {"token_ids", c.token_ids},
            {"finish_reason", std::string(toString(c.finish_reason))}};
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

json resultJson(const RequestOutput& r) {
  json outputs = json::array();
  for (const CompletionOutput& c : r.outputs) outputs.push_back(completionJson(c));
  return {{"prompt_token_ids", r.prompt_token_ids}, {"outputs", outputs}, {"cached_tokens", r.cached_tokens}};
}

std::string jsonLine(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n"; }

}  // namespace llmrt::cli
