// The LLM API: load a HuggingFace model directory and generate text, in the
// shape of TensorRT-LLM's LLM API (LLM, LlmArgs, SamplingParams, KvCacheConfig,
// KvCacheRetentionConfig, RequestOutput / CompletionOutput).
//
//   auto llm = llmrt::LLM::create({.model = "models/tiny",
//                                  .scheduler_config = {.capacity_scheduler_policy =
//                                                           llmrt::CapacitySchedulerPolicy::kMaxUtilization}});
//   auto outs = (*llm)->generate({llmrt::Prompt::fromText("Once upon a time")}, {params});
//
// LLM runs on the in-flight batching Executor (llmrt/executor.h): every call
// may overlap with others (generate from several threads, generateAsync).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "llmrt/engine_config.h"
#include "llmrt/executor.h"
#include "llmrt/finish_reason.h"
#include "llmrt/kv_cache_config.h"
#include "llmrt/kv_cache_events.h"
#include "llmrt/kv_cache_retention.h"
#include "llmrt/logprobs.h"
#include "llmrt/model_config.h"
#include "llmrt/sampling_params.h"
#include "llmrt/scheduler_config.h"
#include "llmrt/status.h"
#include "llmrt/tokenizer.h"

namespace llmrt {

// TensorRT-LLM's name for the engine's configuration (llmrt/engine_config.h):
// LlmArgs{.model = dir, .kv_cache_config = ..., .scheduler_config = ...}.
using LlmArgs = EngineConfig;

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
  uint64_t pauses = 0;   // MAX_UTILIZATION pauses
  uint64_t resumes = 0;
  uint64_t context_tokens = 0;
  uint64_t generated_tokens = 0;
  double seconds = 0.0;         // wall time of the engine's steps
  double device_seconds = 0.0;  // GPU time within them (0 on the CPU backend)
  // KV cache
  uint64_t reused_blocks = 0;
  uint64_t missed_blocks = 0;
  double reuse_hit_rate = 0.0;
  uint64_t evicted_blocks = 0;            // dropped from the primary pool (not offloaded)
  uint64_t evicted_secondary_blocks = 0;  // dropped from the secondary (host offload) pool
  uint64_t offloaded_blocks = 0;
  uint64_t onboarded_blocks = 0;
};

// One piece of a streamed request (generateAsync).
struct StreamDelta {
  int completion = 0;              // 0..n-1
  std::vector<TokenId> token_ids;  // new tokens
  std::string text;                // their text (held back while a stop string may still match)
  FinishReason finish_reason = FinishReason::kNone;
};

// A request in flight, from LLM::generateAsync. Thread-safe. Must not outlive
// the LLM that made it (destroying the LLM cancels what is still running).
class GenerationResult {
 public:
  ~GenerationResult();
  RequestId id() const;
  // Blocks for the next piece; false once the request has ended and every piece
  // was taken (or on timeout, where timed_out is set).
  bool next(StreamDelta& out, std::optional<std::chrono::milliseconds> timeout = std::nullopt,
            bool* timed_out = nullptr);
  // Blocks until the request ends; the whole output (pieces not taken by next() included).
  RequestOutput result();
  // Blocks until the request ends or `timeout` passes, taking no piece; true once it has ended.
  // (A front end waiting in slices of time, e.g. to notice Ctrl-C between them.)
  bool wait(std::chrono::milliseconds timeout);
  bool finished() const;
  // Cancels the request: its completions end with FinishReason::kCancelled.
  void abort();

  struct State;

 private:
  friend class LLM;
  GenerationResult() = default;
  std::shared_ptr<State> state_;
  Executor* executor_ = nullptr;
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

  // The same with one KvCacheRetentionConfig for all prompts or one per prompt
  // (another count is an error).
  Result<std::vector<RequestOutput>> generate(const std::vector<Prompt>& prompts,
                                              const std::vector<SamplingParams>& sampling_params,
                                              const std::vector<KvCacheRetentionConfig>& kv_cache_retention_config);

  // Starts one request and returns at once; stream it with next() or wait with
  // result(). Fails only on a prompt that cannot be tokenized or after shutdown
  // (an invalid request ends with an error status in its output).
  Result<std::unique_ptr<GenerationResult>> generateAsync(const Prompt& prompt, const SamplingParams& sampling_params,
                                                          const RequestOptions& options = {});
  // TensorRT-LLM's spelling of generateAsync.
  Result<std::unique_ptr<GenerationResult>> generate_async(const Prompt& prompt,
                                                           const SamplingParams& sampling_params,
                                                           const RequestOptions& options = {}) {
    return generateAsync(prompt, sampling_params, options);
  }

  // Teacher forcing: log p(token_ids[i] | token_ids[<i]) for i = 1..size-1, computed in one
  // pass over token_ids[0..size-2] (its KV is freed afterwards); size may reach max_seq_len.
  Result<std::vector<double>> promptLogprobs(const std::vector<TokenId>& token_ids);

  const ModelConfig& modelConfig() const;
  // The model's tokenizer, or null when the directory has none.
  const Tokenizer* tokenizer() const;
  // `base` with what generation_config.json sets (do_sample, temperature, top_k, top_p, min_p,
  // repetition_penalty, max_new_tokens); fields the file does not name keep their value.
  SamplingParams defaultSamplingParams(SamplingParams base = {}) const;
  LlmStats stats() const;
  // KV cache events since the last call (TensorRT-LLM's LLM.get_kv_cache_events): waits up to
  // `timeout` for at least one (unset: until there is one or the engine has shut down). Needs
  // kv_cache_config.event_buffer_max_size > 0. See Executor::getKvCacheEvents.
  std::vector<KvCacheEvent> getKvCacheEvents(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // The executor underneath (iteration stats, cancellation, direct requests).
  Executor& executor();

 private:
  LLM();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmrt
