// SamplingParams::validate: every field checked against its documented range.
#include "llmrt/sampling_params.h"

#include <cmath>
#include <string>

#include "core/logging.h"

namespace llmrt {
namespace {

constexpr std::string_view kWhere = "SamplingParams";

std::string num(double v) { return strprintf("%g", v); }

Status bad(std::string_view field, const std::string& value, std::string_view expected) {
  return fieldError(kWhere, field, value, expected);
}

}  // namespace

Status SamplingParams::validate(std::optional<int64_t> vocab_size) const {
  if (vocab_size && *vocab_size <= 0) {
    return invalidArgument(strprintf("SamplingParams::validate: vocab_size %lld must be > 0",
                                     static_cast<long long>(*vocab_size)));
  }
  if (n < 1 || n > kMaxN) return bad("n", std::to_string(n), strprintf("an integer in [1, %d]", kMaxN));
  if (!std::isfinite(temperature) || temperature < 0.0f) {
    return bad("temperature", num(temperature), "a finite number >= 0 (0 = greedy)");
  }
  if (top_k < 0) return bad("top_k", std::to_string(top_k), "an integer >= 0 (0 = disabled)");
  if (!(top_p > 0.0f && top_p <= 1.0f)) return bad("top_p", num(top_p), "a number in (0, 1]");
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return bad("min_p", num(min_p), "a number in [0, 1]");
  if (!std::isfinite(repetition_penalty) || !(repetition_penalty > 0.0f)) {
    return bad("repetition_penalty", num(repetition_penalty), "a finite number > 0 (1 = disabled)");
  }
  const std::string penalty_range = strprintf("a number in [%g, %g]", -kMaxAbsPenalty, kMaxAbsPenalty);
  if (!(std::fabs(presence_penalty) <= kMaxAbsPenalty)) {
    return bad("presence_penalty", num(presence_penalty), penalty_range);
  }
  if (!(std::fabs(frequency_penalty) <= kMaxAbsPenalty)) {
    return bad("frequency_penalty", num(frequency_penalty), penalty_range);
  }
  if (max_tokens < 1) return bad("max_tokens", std::to_string(max_tokens), "an integer >= 1");
  if (min_tokens < 0 || min_tokens > max_tokens) {
    return bad("min_tokens", std::to_string(min_tokens),
               strprintf("an integer in [0, max_tokens = %d]", max_tokens));
  }
  for (size_t i = 0; i < stop_token_ids.size(); ++i) {
    const int32_t id = stop_token_ids[i];
    if (id < 0 || (vocab_size && id >= *vocab_size)) {
      return bad(strprintf("stop_token_ids[%zu]", i), std::to_string(id),
                 vocab_size ? strprintf("a token id in [0, %lld)", static_cast<long long>(*vocab_size))
                            : std::string("a token id >= 0"));
    }
  }
  for (size_t i = 0; i < logit_bias.size(); ++i) {
    const auto& [id, bias] = logit_bias[i];
    if (id < 0 || (vocab_size && id >= *vocab_size)) {
      return bad(strprintf("logit_bias[%zu]", i), std::to_string(id),
                 vocab_size ? strprintf("a token id in [0, %lld)", static_cast<long long>(*vocab_size))
                            : std::string("a token id >= 0"));
    }
    if (!(std::fabs(bias) <= kMaxLogitBias)) {
      return bad(strprintf("logit_bias[%zu]", i), num(bias), strprintf("a bias in [%g, %g]", -kMaxLogitBias, kMaxLogitBias));
    }
    for (size_t j = 0; j < i; ++j)
      if (logit_bias[j].first == id)
        return bad(strprintf("logit_bias[%zu]", i), std::to_string(id), "a token id not listed before");
  }
  for (size_t i = 0; i < stop.size(); ++i) {
    if (stop[i].empty()) return bad(strprintf("stop[%zu]", i), "\"\"", "a non-empty string");
  }
  if (logprobs && (*logprobs < 0 || *logprobs > kMaxLogprobs)) {
    return bad("logprobs", std::to_string(*logprobs),
               strprintf("an integer in [0, %d] (0 = chosen token only)", kMaxLogprobs));
  }
  return Status::ok();
}

}  // namespace llmrt
