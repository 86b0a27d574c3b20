// Scheduler: picks, every step, which sequences run and how many tokens each
// computes, under the KV cache (through KvCacheManager's allocation calls) and
// the micro-batch limits (max_batch_size sequences in flight, max_num_tokens
// tokens per step). Pure C++: no model, no device types; the executor owns the
// request state and the scheduler moves it between phases.
//
// A step's plan is built in this order:
//   1. generation: every generating sequence appends the token sampled last step
//      (KvCacheManager::appendToken) and computes it (1 token, sampled);
//   2. context in progress: the next chunk of every admitted context sequence;
//   3. resumes (MAX_UTILIZATION), then new requests, in arrival order, while the
//      capacity policy, the batch size and the token budget allow.
// Generation goes first so running requests keep their inter-token latency.
//
// Per-sequence token bookkeeping: in the context phase the sequence computes
// all of `tokens` (the prompt, or for a resumed sequence prompt + generated
// tokens) and samples after the last one; in the generation phase the KV cache
// holds every token but the last (sampled last step, computed this step).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "llmrt/scheduler_config.h"
#include "llmrt/status.h"

namespace llmrt {

enum class SchedState {
  kWaiting,     // not admitted yet; holds no KV
  kContext,     // admitted; prompt chunks being computed
  kGeneration,  // prompt computed; one token per step
  kPaused,      // MAX_UTILIZATION evicted it; holds no KV; resumes by recomputing (reuse makes it cheap)
  kDone,        // finished, cancelled or failed; holds no KV
};
std::string_view toString(SchedState state);

// One sequence as the scheduler sees it. The executor owns it and keeps
// `tokens` current (appending each sampled token); the scheduler owns `state`
// and the bookkeeping fields below it.
struct SchedRequest {
  SequenceId id = 0;        // KV cache manager sequence id (unique)
  uint64_t arrival = 0;     // FCFS order: lower first
  const std::vector<TokenId>* tokens = nullptr;  // prompt + generated tokens
  int32_t prompt_len = 0;
  int32_t max_new_tokens = 0;  // generated tokens allowed in all
  // Retention / key extras for addSequence (max_new_tokens and
  // num_tokens_to_allocate are set by the scheduler).
  AddSequenceOptions add_options;

  // ---- maintained by the scheduler ----
  SchedState state = SchedState::kWaiting;
  uint64_t start_order = 0;        // order of first admission (MAX_UTILIZATION pauses the highest)
  int32_t num_reused_tokens = -1;  // prompt tokens reused at first admission (-1 = not admitted yet)
  int32_t num_pauses = 0;

  int32_t numGenerated() const { return static_cast<int32_t>(tokens->size()) - prompt_len; }
  int32_t remainingNewTokens() const { return max_new_tokens - numGenerated(); }
  bool holdsKv() const { return state == SchedState::kContext || state == SchedState::kGeneration; }
};

struct ScheduledSequence {
  SchedRequest* request = nullptr;
  int32_t num_tokens = 0;  // tokens to compute this step
  bool is_context = false;
  bool sample = false;     // the last computed position yields the next token
};

struct SchedulePlan {
  std::vector<ScheduledSequence> sequences;  // generation entries first, then context chunks
  std::vector<SchedRequest*> admitted;       // first admission this step
  std::vector<SchedRequest*> resumed;        // re-admitted after a pause
  std::vector<SchedRequest*> paused;         // removed from the KV cache this step
  // Requests that can never run (need more KV than the whole cache); now kDone.
  std::vector<std::pair<SchedRequest*, Status>> failed;
  int32_t num_context_tokens = 0;
  int32_t num_generation_tokens = 0;

  bool empty() const { return sequences.empty(); }
};

struct SchedulerOptions {
  SchedulerConfig config;
  int32_t max_batch_size = 256;   // sequences holding KV at once (in flight)
  int32_t max_num_tokens = 8192;  // tokens computed per step
};

class Scheduler {
 public:
  Scheduler(const SchedulerOptions& options, KvCacheManager& kv);

  // Builds the next step over `requests` (any order; kDone ones are skipped),
  // making the KV cache calls the plan needs. Fails only on a KV manager error
  // (a broken invariant), never on running out of blocks.
  Result<SchedulePlan> schedule(std::span<SchedRequest* const> requests);

  // After the step ran (KV marked computed): context sequences whose last chunk
  // was computed move to generation.
  void onStepComplete(const SchedulePlan& plan);

  // Ends a request (finished, cancelled, failed) in any state: frees its blocks.
  Status release(SchedRequest& request);

  // Why `request` can never run with this cache (needs more blocks than it has),
  // or OK.
  Status checkFitsAlone(const SchedRequest& request) const;

  const SchedulerOptions& options() const { return options_; }
  // Times a GUARANTEED_NO_EVICT / STATIC_BATCH reservation fell short and a
  // request had to be paused after all. A safety net: the KV cache manager keeps
  // free + reclaimable from shrinking without an allocation, so this stays 0
  // unless that invariant breaks; the pause keeps requests running if it does.
  uint64_t numBrokenGuarantees() const { return num_broken_guarantees_; }

 private:
  struct Context;
  Status scheduleGeneration(Context& ctx);
  Status scheduleContextChunks(Context& ctx);
  Status admit(Context& ctx);
  Status pause(Context& ctx, SchedRequest& victim);
  // Pauses the most recently started in-flight request not yet in the plan
  // (other than `keep`); false when there is none.
  Result<bool> pauseLatest(Context& ctx, const SchedRequest* keep);
  int32_t reservedBlocks(const Context& ctx) const;
  void noteBrokenGuarantee();

  SchedulerOptions options_;
  KvCacheManager& kv_;
  int32_t total_blocks_ = 0;
  uint64_t next_start_order_ = 1;
  uint64_t num_broken_guarantees_ = 0;
};

}  // namespace llmrt
