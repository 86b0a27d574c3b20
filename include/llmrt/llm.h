// The LLM API: load a HuggingFace model directory and generate text, in the
// shape of TensorRT-LLM's LLM API (LLM, LlmArgs, SamplingParams, KvCacheConfig,
// KvCacheRetentionConfig, RequestOutput / CompletionOutput).
//
//   auto llm = llmrt::LLM::create({.model = "models/tiny"});
//   auto outs = (*llm)->generate({llmrt::Prompt::text("Once upon a time")}, {params});
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "llmrt/finish_reason.h"
#include "llmrt/kv_cache_config.h"
#include "llmrt/kv_cache_retention.h"
#include "llmrt/logprobs.h"
#include "llmrt/model_config.h"
#include "llmrt/sampling_params.h"
#include "llmrt/status.h"
#include "llmrt/tokenizer.h"

namespace llmrt {

struct LlmArgs {
  std::string model;                // HF model directory
  std::string backend = "cpu";      // "cpu"; "cuda" once the CUDA backend lands
  KvCacheConfig kv_cache_config;
  int64_t max_seq_len = 0;          // prompt + generated tokens; 0 = the model's max_position_embeddings
  int64_t max_num_tokens = 8192;    // tokens computed per step (longer prompts are chunked)
  int num_threads = 0;              // CPU backend threads; 0 = all cores
};

// A prompt: text (tokenized with the model's tokenizer, special tokens added)
// or token ids used as they are.
struct Prompt {
  std::optional<std::string> text;
  std::vector<TokenId> token_ids;
  static Prompt fromText(std::string t) { return Prompt{std::move(t), {}}; }
  static Prompt fromIds(std::vector<TokenId> ids) { return Prompt{std::nullopt, std::move(ids)}; }
};

struct RequestOptions {
  std::optional<KvCacheRetentionConfig> kv_cache_retention_config;
  bool return_context_logits = false;     // RequestOutput::context_logits [prompt tokens, vocab]
  bool return_generation_logits = false;  // CompletionOutput::generation_logits [tokens, vocab]
};

struct CompletionOutput {
  int index = 0;  // 0..n-1
  std::string text;
  std::vector<TokenId> token_ids;  // generated tokens (the stop token included)
  FinishReason finish_reason = FinishReason::kNone;
  std::vector<TokenLogprobs> logprobs;  // when SamplingParams::logprobs is set
  std::vector<float> generation_logits;
};

struct RequestOutput {
  Status status;  // not OK: the request failed (invalid, or cannot fit the KV cache); others are unaffected
  std::string prompt;
  std::vector<TokenId> prompt_token_ids;
  std::vector<CompletionOutput> outputs;
  std::vector<float> context_logits;
  int32_t cached_tokens = 0;  // prompt tokens whose KV came from the cache
  double time_to_first_token_s = 0.0;
  double total_time_s = 0.0;
};

// Streaming: (request index, completion index, token, new text, finish reason).
using TokenCallback =
    std::function<void(size_t request, int completion, TokenId token, const std::string& text, FinishReason finish)>;

struct LlmStats {
  uint64_t steps = 0;
  uint64_t context_tokens = 0;
  uint64_t generated_tokens = 0;
  double seconds = 0.0;
  // KV cache
  uint64_t reused_blocks = 0;
  uint64_t missed_blocks = 0;
  double reuse_hit_rate = 0.0;
  uint64_t evicted_blocks = 0;
  uint64_t offloaded_blocks = 0;
  uint64_t onboarded_blocks = 0;
};

class LLM {
 public:
  static Result<std::unique_ptr<LLM>> create(const LlmArgs& args);
  ~LLM();

  // One SamplingParams for all prompts, or one per prompt (another count is an
  // error). Returns one RequestOutput per prompt, in order; a bad request
  // fails alone through its status. Fails as a whole only if the engine does.
  Result<std::vector<RequestOutput>> generate(const std::vector<Prompt>& prompts,
                                              const std::vector<SamplingParams>& sampling_params,
                                              const std::vector<RequestOptions>& options = {},
                                              const TokenCallback& on_token = nullptr);

  // Teacher forcing: log p(token_ids[i] | token_ids[<i]) for i = 1..size-1,
  // computed in one pass over the sequence (its KV is freed afterwards).
  Result<std::vector<double>> promptLogprobs(const std::vector<TokenId>& token_ids);

  const ModelConfig& modelConfig() const;
  // The model's tokenizer, or null when the directory has none.
  const Tokenizer* tokenizer() const;
  // Defaults from generation_config.json applied to a SamplingParams.
  SamplingParams defaultSamplingParams() const;
  LlmStats stats() const;

 private:
  LLM();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmrt
