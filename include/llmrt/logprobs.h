// Log-probability of one token, as reported with generated tokens.
#pragma once

#include <cstdint>
#include <vector>

namespace llmrt {

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
  bool operator==(const TokenLogprob&) const = default;
};

// The chosen token's logprob and the top alternatives (logprob descending).
struct TokenLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;
};

}  // namespace llmrt
