// Executor: the in-flight batching runtime. Requests are enqueued from any
// thread; one background loop schedules every step under the KV cache and
// token budgets (schedule -> packed batch -> forward -> sample -> update ->
// respond), streams tokens, honours cancellation, and keeps iteration and
// request statistics. Transport-free: front ends (LLM API, CLI, server) sit
// on top. Mirrors TensorRT-LLM's executor API (enqueueRequest, awaitResponses,
// cancelRequest, shutdown, getLatestIterationStats).
//
//   auto ex = llmrt::Executor::create({.model = dir});   // an EngineConfig (llmrt/engine_config.h)
//   auto id = (*ex)->enqueueRequest(req);
//   for (auto& r : (*ex)->awaitResponses(*id)) ...   // until r.is_final
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "llmrt/engine_config.h"
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

using RequestId = uint64_t;

struct Request {
  std::vector<TokenId> input_token_ids;  // the prompt
  SamplingParams sampling_params;        // max/min tokens, stop ids/strings, logprobs, n, ...
  // true: a response with the new tokens after every step; false: one response
  // per sequence when it finishes.
  bool streaming = false;
  std::optional<KvCacheRetentionConfig> kv_cache_retention_config;
  // Logits of every prompt position [prompt, vocab] (in the final response of
  // sequence 0). Such a request computes its whole prompt: cached KV has no logits.
  bool return_context_logits = false;
  bool return_generation_logits = false;  // [new tokens, vocab] with each response
  bool detokenize = true;                 // fill Response::text (needs the model's tokenizer)
  // Called on the executor's loop thread with each response of this request
  // instead of queueing it for awaitResponses. Must not block for long and must
  // not call awaitResponses; it may enqueue or cancel.
  std::function<void(const struct Response&)> callback;
};

struct RequestStats {
  double queue_time_s = 0.0;        // enqueue -> first scheduled
  double time_to_first_token_s = 0.0;  // enqueue -> first generated token
  double total_time_s = 0.0;        // enqueue -> final response
  int32_t num_prompt_tokens = 0;
  int32_t num_cached_tokens = 0;    // prompt tokens whose KV came from the cache (first admission)
  int32_t num_generated_tokens = 0; // over all sequences
  int32_t num_pauses = 0;           // MAX_UTILIZATION evictions over all sequences
};

struct Response {
  RequestId request_id = 0;
  int sequence_index = 0;  // 0..n-1
  // Not OK: the request failed (invalid, cannot fit the KV cache, model error);
  // it is final and carries no tokens.
  Status status;
  std::vector<TokenId> new_tokens;  // streaming: this step's tokens; else all generated tokens
  std::string text;                 // the text of new_tokens (stop strings trimmed)
  FinishReason finish_reason = FinishReason::kNone;  // set when this sequence ended
  std::vector<TokenLogprobs> logprobs;   // one per new token when sampling_params.logprobs
  std::vector<float> generation_logits;  // [new tokens, vocab] when requested
  std::vector<float> context_logits;     // sequence 0's final response, when requested
  int32_t num_cached_tokens = 0;         // prompt tokens that came from the KV cache
  bool is_final = false;  // the last response of the whole request (every sequence ended)
  std::optional<RequestStats> stats;  // with the final response
};

// One scheduled sequence of an iteration (for tests and tracing).
struct ScheduledEntry {
  RequestId request_id = 0;
  int sequence_index = 0;
  int32_t num_tokens = 0;
  bool is_context = false;
};

struct IterationStats {
  uint64_t iteration = 0;
  double step_time_s = 0.0;  // schedule + forward + sample + responses
  int32_t num_scheduled_requests = 0;
  int32_t num_context_requests = 0;
  int32_t num_context_tokens = 0;
  int32_t num_generation_requests = 0;
  int32_t num_generation_tokens = 0;
  int32_t num_queued_requests = 0;  // waiting or paused after scheduling
  int32_t num_paused = 0;           // paused this step
  int32_t num_resumed = 0;          // resumed this step
  int32_t kv_used_blocks = 0;
  int32_t kv_free_blocks = 0;
  int32_t kv_total_blocks = 0;
  uint64_t kv_reused_blocks = 0;  // cumulative
  double kv_reuse_hit_rate = 0.0;
  std::vector<ScheduledEntry> scheduled;
  std::vector<RequestId> paused;
  std::vector<RequestId> resumed;
};

struct ExecutorStats {
  uint64_t steps = 0;
  uint64_t context_tokens = 0;  // prompt tokens computed (reused ones not included)
  uint64_t generated_tokens = 0;
  uint64_t pauses = 0;
  uint64_t resumes = 0;
  uint64_t requests_completed = 0;
  uint64_t requests_failed = 0;
  uint64_t requests_cancelled = 0;
  double busy_seconds = 0.0;    // wall time of the steps (scheduling, model, bookkeeping)
  double device_seconds = 0.0;  // the GPU's time in those steps (0 on the CPU backend)
  uint64_t overlapped_steps = 0;  // steps launched before the previous step's tokens were back
  // Requests now (gauges, as of the last step): running (a sequence holds KV and computes),
  // waiting (queued or not admitted yet; never ran) and paused (evicted by MAX_UTILIZATION, none running).
  int32_t num_running_requests = 0;
  int32_t num_waiting_requests = 0;
  int32_t num_paused_requests = 0;
  // KV cache
  int32_t kv_total_blocks = 0;
  int32_t kv_free_blocks = 0;
  int32_t kv_used_blocks = 0;
  int32_t kv_num_sequences = 0;
  uint64_t kv_reused_blocks = 0;
  uint64_t kv_missed_blocks = 0;
  double kv_reuse_hit_rate = 0.0;
  uint64_t kv_evicted_blocks = 0;            // dropped from the primary pool (not offloaded)
  uint64_t kv_evicted_secondary_blocks = 0;  // dropped from the secondary (host offload) pool
  uint64_t kv_offloaded_blocks = 0;
  uint64_t kv_onboarded_blocks = 0;
};

class Executor {
 public:
  // Validates `config` (EngineConfig::validate(), the one check of its fields), loads the model,
  // resolves what depends on it, sizes the KV cache and starts the loop thread.
  static Result<std::unique_ptr<Executor>> create(const EngineConfig& config);
  ~Executor();  // shutdown()

  // Queues a request; returns its id. An invalid request is still accepted and
  // answered with one final error response (so a batch's ids stay aligned);
  // Result fails only after shutdown().
  Result<RequestId> enqueueRequest(Request request);
  Result<std::vector<RequestId>> enqueueRequests(std::vector<Request> requests);

  // Responses queued for `id` (or for any request), waiting up to `timeout`
  // for at least one; empty on timeout. Responses of a request with a callback
  // never queue.
  std::vector<Response> awaitResponses(RequestId id, std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  std::vector<Response> awaitResponses(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // Number of responses ready for `id` (or all).
  size_t getNumResponsesReady(std::optional<RequestId> id = std::nullopt) const;

  // Cancels a request in any state; its sequences end with kCancelled and its
  // blocks are freed. Unknown or finished ids are ignored.
  void cancelRequest(RequestId id);

  // Stops the loop: unfinished requests end with kCancelled. Idempotent.
  void shutdown();

  // Iteration stats since the last call (at most iter_stats_max_iterations).
  std::vector<IterationStats> getLatestIterationStats();
  // KV cache events since the last call (llmrt/kv_cache_events.h), oldest first, as TensorRT-LLM's
  // KVCacheEventManager::getLatestEvents: waits up to `timeout` for at least one (unset: until
  // there is one or the executor has shut down); empty on timeout. Events are recorded only
  // with kv_cache_config.event_buffer_max_size > 0 (else this returns empty at once); at most
  // that many wait here, the oldest are dropped first (their ids are missing). Thread-safe.
  std::vector<KvCacheEvent> getKvCacheEvents(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  ExecutorStats stats() const;
  // Requests not yet answered finally.
  size_t numActiveRequests() const;
  // Blocks until every enqueued request has its final response, or `timeout`.
  bool waitIdle(std::optional<std::chrono::milliseconds> timeout = std::nullopt) const;

  // The configuration as the engine runs it: `auto` choices made, lengths and KV limits filled in.
  const EngineConfig& config() const;
  const ModelConfig& modelConfig() const;
  const Tokenizer* tokenizer() const;  // null when the model directory has none
  // `base` with what generation_config.json sets (do_sample, temperature, top_k, top_p, min_p,
  // repetition_penalty, max_new_tokens); fields the file does not name keep their value.
  SamplingParams defaultSamplingParams(SamplingParams base = {}) const;
  int64_t maxSeqLen() const;
  // KV cache block accounting audit (tests): checks the KV manager's invariants
  // on the loop thread. OK when consistent.
  Status checkKvInvariants();

  struct Impl;

 private:
  Executor();
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmrt
