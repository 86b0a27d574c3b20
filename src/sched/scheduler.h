// Scheduler: picks, every step, which sequences run and how many tokens each
// computes, under the KV cache (through KvCacheManager's allocation calls) and
// the micro-batch limits (max_batch_size sequences in flight, max_num_tokens
// tokens per step). Pure C++: no model, no device types. It is the only writer
// of the KV cache manager: the runner reads what it needs from the plan.
//
// ---- Per-step contract (the executor's loop is these three calls) ----------
//  1. schedule(requests) -> plan. In this order:
//       a. generation: every generating sequence appends its newest token
//          (KvCacheManager::appendToken, a placeholder while it is still being
//          sampled) and computes it (1 token, sampled);
//       b. admission of paused (MAX_UTILIZATION) then waiting requests, in order,
//          while the capacity policy, the batch size and the token budget allow;
//       c. context chunks of every admitted context sequence.
//     Generation goes first so running requests keep their inter-token latency.
//     The plan carries everything the step needs from the KV cache: each
//     sequence's cached count and block table, and the block copies to run
//     first (onboards, offloads, partial reuse), taken from the manager here.
//  2. onLaunched(plan) once the step is launched: the KV of every computed token
//     whose id is known is marked computed (full blocks become reusable); a
//     token computed from the device's copy of the previous step's sample
//     (`fed_last`) waits for its id. Each sampled sequence gets a placeholder
//     token where its sample goes (ScheduledSequence::token_pos).
//  3. onTokenKnown(request, pos, token) for each sampled token once it is back:
//     the placeholder (in the request and in the KV cache) becomes the token,
//     and a fed token computed meanwhile is marked computed.
// release() ends a request in any state (its blocks freed, placeholders kept
// until dropPending()).
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

// A token a launched step is still sampling (overlap): its place in SchedRequest::tokens.
inline constexpr TokenId kPendingToken = -1;

// One sequence as the scheduler sees it. The executor owns the object and fills
// the fields above `state` at intake; the scheduler keeps the rest, tokens
// included (it appends each sampled token's placeholder and resolves it).
struct SchedRequest {
  SequenceId id = 0;        // KV cache manager sequence id (unique)
  uint64_t arrival = 0;     // FCFS order: lower first
  // Prompt + generated tokens; the last num_pending are placeholders (kPendingToken).
  std::vector<TokenId> tokens;
  int32_t prompt_len = 0;
  int32_t max_new_tokens = 0;  // generated tokens allowed in all
  // Retention / key extras for addSequence (max_new_tokens, num_tokens_to_allocate and
  // num_prompt_tokens = prompt_len are set by the scheduler).
  AddSequenceOptions add_options;

  // ---- maintained by the scheduler ----
  SchedState state = SchedState::kWaiting;
  uint64_t start_order = 0;        // order of first admission (MAX_UTILIZATION pauses the highest)
  int32_t num_reused_tokens = -1;  // prompt tokens reused at first admission (-1 = not admitted yet)
  int32_t num_pauses = 0;
  int32_t num_pending = 0;         // placeholders at the end of `tokens` (at most two: overlap)
  bool fed_uncomputed = false;     // a launched step computed the newest token from the device's copy

  int32_t numGenerated() const { return static_cast<int32_t>(tokens.size()) - prompt_len; }
  int32_t remainingNewTokens() const { return max_new_tokens - numGenerated(); }
  bool holdsKv() const { return state == SchedState::kContext || state == SchedState::kGeneration; }
};

struct ScheduledSequence {
  ScheduledSequence() = default;
  ScheduledSequence(SchedRequest* r, int32_t n, bool context, bool sampled)
      : request(r), num_tokens(n), is_context(context), sample(sampled) {}
  SchedRequest* request = nullptr;
  int32_t num_tokens = 0;  // tokens to compute this step
  bool is_context = false;
  bool sample = false;     // the last computed position yields the next token
  // ---- filled once the plan is complete (what the runner reads) ----
  int32_t num_cached = 0;            // tokens whose KV is in the cache; computed: [num_cached, + num_tokens)
  std::vector<BlockId> block_table;  // covers [0, num_cached + num_tokens); released blocks read kNoBlock
  bool fed_last = false;  // the last computed token is the previous step's sample, still on the device
  // ---- set by onLaunched ----
  int32_t token_pos = -1;  // sample: where its token goes in request->tokens
};

struct SchedulePlan {
  std::vector<ScheduledSequence> sequences;  // generation entries first, then context chunks
  // Block copies to complete before the step reads or writes KV, in order (the KV cache
  // manager's queue, taken when the plan was made).
  std::vector<KvBlockCopy> copies;
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

  // The step of `plan` was launched (contract step 2): marks the KV of its known tokens computed,
  // gives each sampled sequence a placeholder (token_pos) and moves context sequences whose last
  // chunk ran to generation.
  Status onLaunched(SchedulePlan& plan);

  // A launched step's sample for `request` at `pos` (a placeholder) is known (contract step 3).
  // Errors: pos is not a placeholder; a KV cache manager error.
  Status onTokenKnown(SchedRequest& request, int32_t pos, TokenId token);

  // Ends a request (finished, cancelled, failed) in any state: frees its blocks.
  Status release(SchedRequest& request);
  // Drops the request's placeholders (its pending samples will not be part of it).
  void dropPending(SchedRequest& request);

  // Why `request` can never run with this cache (needs more blocks than it has),
  // or OK.
  Status checkFitsAlone(const SchedRequest& request) const;

  const SchedulerOptions& options() const { return options_; }
  // The KV cache this scheduler manages, for reading (stats, config, invariant checks): every
  // change to it goes through the calls above.
  const KvCacheManager& kvCache() const { return kv_; }
  // The KV cache events recorded since the last call (oldest first).
  std::vector<KvCacheEvent> drainKvEvents() { return kv_.drainEvents(); }
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
  // What the runner needs of each planned sequence (cached count, block table) and the copies.
  void completePlan(SchedulePlan& plan);
  void noteBrokenGuarantee();

  SchedulerOptions options_;
  KvCacheManager& kv_;
  int32_t total_blocks_ = 0;
  uint64_t next_start_order_ = 1;
  uint64_t num_broken_guarantees_ = 0;
};

}  // namespace llmrt
