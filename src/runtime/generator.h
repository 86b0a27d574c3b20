// generate(): runs a set of requests to completion on an Engine — the path of
// `llmrt generate` and of tests until the in-flight batching executor lands.
// Requests are admitted in order while the KV cache can guarantee their whole
// length (prompt + max_tokens); context is computed in chunks of at most
// max_num_tokens per step; decode steps of all running sequences are packed
// together with context chunks of new ones.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "llmrt/finish_reason.h"
#include "llmrt/kv_cache_retention.h"
#include "llmrt/logprobs.h"
#include "llmrt/sampling_params.h"
#include "runtime/engine.h"
#include "sampling/sampler.h"

namespace llmrt {

struct GenerationRequest {
  std::vector<TokenId> prompt;
  SamplingParams params;
  std::optional<KvCacheRetentionConfig> retention;
  // Logits of every prompt position [prompt, vocab]. Such a request computes
  // its whole prompt (no prefix reuse), since cached positions have no logits.
  bool return_context_logits = false;
  bool return_generation_logits = false;  // logits of every generated step [steps, vocab] (sequence 0..n-1 each)
};

struct SequenceOutput {
  std::vector<TokenId> token_ids;  // generated tokens
  std::string text;
  FinishReason finish_reason = FinishReason::kNone;
  std::vector<TokenLogprobs> logprobs;  // one per generated token when params.logprobs is set
  std::vector<float> generation_logits;
};

struct GenerationOutput {
  Status status;  // a failed request (invalid, or cannot fit) fails alone
  std::vector<TokenId> prompt;
  std::vector<SequenceOutput> sequences;  // params.n of them
  std::vector<float> context_logits;
  int32_t num_cached_tokens = 0;  // prompt tokens of sequence 0 that came from the KV cache
  double time_to_first_token_s = 0.0;
  double total_time_s = 0.0;
};

// Streaming: called for each generated token with the request index, the
// sequence index within the request, the token, the newly final text, and the
// finish reason (kNone while running).
using GenerationCallback =
    std::function<void(size_t request, int sequence, TokenId token, const std::string& text_delta, FinishReason)>;

struct GenerationStats {
  uint64_t steps = 0;
  uint64_t context_tokens = 0;
  uint64_t generated_tokens = 0;
  double seconds = 0.0;
};

// Runs every request to completion. Fails as a whole only when the engine does
// (model or KV copy failure); a bad request gets its own error status.
Result<std::vector<GenerationOutput>> generate(Engine& engine, const std::vector<GenerationRequest>& requests,
                                               const GenerationCallback& on_token = nullptr,
                                               GenerationStats* stats = nullptr);

// The checks a request must pass before it is admitted (shared with the executor).
Status validateRequest(const Engine& engine, const GenerationRequest& request);

}  // namespace llmrt
