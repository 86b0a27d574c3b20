// KvCacheManager: paged KV cache bookkeeping for the scheduler and the model
// runner. It hands out block ids and block tables, shares computed blocks
// between requests through a radix tree (prefix reuse), evicts by retention
// priority then LRU, offloads to and onboards from a host pool, applies a
// sliding window, and reports stats and events. It owns no KV memory: the
// backend owns the pools and performs the copies the manager requests.
//
// Not thread-safe: one thread (the executor loop) calls it.
//
// ---- Per-step contract (what the scheduler and runner rely on) -------------
// A sequence has tokens (prompt, then generated tokens appended one step at a
// time), a count of *allocated* tokens (their KV has a slot) and of *computed*
// tokens (their KV is written). computed <= allocated <= tokens.
//
//  1. Scheduling, any order over sequences:
//       addSequence(id, prompt, opts)       new request: reuses the longest cached
//                                           prefix, allocates the first chunk
//       allocatePromptTokens(id, n)         next context chunk of the prompt
//       appendToken(id, token)              decode: the token sampled last step
//       removeSequence(id)                  finish / cancel / pause
//     Each allocating call is all-or-nothing: kNoFreeBlocks means nothing changed
//     (the scheduler may remove another sequence and retry).
//  2. Before launching the step: flushCopies() (or takePendingCopies() and run them
//     yourself). Every copy the manager queued (offloads, onboards, partial-reuse
//     copies) must complete before the step reads or writes KV, in the given
//     order (see KvBlockCopier).
//  3. The runner reads blockTable(id) for each sequence *after* step 1's calls and
//     writes the KV of token positions [numComputedTokens, numAllocatedTokens) into
//     blockTable(id)[pos / T] at slot pos % T, reading positions before that.
//     Positions below numReusedTokens need no computation at all.
//  4. After the step's KV writes are done: markComputed(id, n). Full computed
//     blocks enter the radix tree right here (early reuse): a request added after
//     this call can reuse them while this sequence still runs. A computed block
//     equal to one already in the tree (computed concurrently by another
//     sequence) is replaced by that block in this table and freed.
//
// Block tables: entry i holds the primary-pool block of token positions
// [i*T, (i+1)*T); with a sliding window, entries of released blocks read kNoBlock.
// A table span stays valid until the next call that modifies that sequence.
// Blocks shared through reuse are never written: the last prompt token is always
// recomputed, and a partially matching block is copied into a fresh one first.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_backend.h"
#include "kv/kv_cache_sizing.h"
#include "kv/kv_clock.h"
#include "kv/kv_events.h"
#include "kv/kv_types.h"
#include "llmrt/kv_cache_config.h"
#include "llmrt/kv_cache_retention.h"
#include "llmrt/status.h"

namespace llmrt {

struct KvCacheManagerOptions {
  // Executes flushCopies(); not owned; may be null if the caller uses takePendingCopies().
  KvBlockCopier* copier = nullptr;
  // Time source for retention durations; not owned; null = steady clock.
  const KvClock* clock = nullptr;
  // Longest sequence (tokens) accepted; 0 = unlimited. Set from KvCacheSizing by create().
  int32_t max_sequence_length = 0;
  // Sliding window (tokens, >= 0; 0 = none): a block is released once every position of it is
  // outside the window of the next position to compute (position p attends to (p - W, p]).
  // One block holds every layer, so this is the largest of the layers' windows (0 when any
  // layer attends fully): the engine resolves it from KvCacheConfig::max_attention_window and
  // the model (resolveAttentionWindows). The manager does not read max_attention_window itself.
  int32_t attention_window = 0;
  // Tests only: ANDed into every block hash to provoke collisions.
  uint64_t debug_hash_mask = ~uint64_t{0};
};

struct AddSequenceOptions {
  // Retention priorities of this request's blocks; none = leave priorities as
  // they are (new blocks get 35).
  std::optional<KvCacheRetentionConfig> retention;
  // LoRA id, cache salt, multimodal hashes: part of every block key.
  SequenceKeyExtras extras;
  // Expected generated tokens, for numBlocksNeededToComplete() and to reserve memory.
  int32_t max_new_tokens = 0;
  // Prompt tokens to allocate now, beyond the reused prefix (first context chunk);
  // unset = the whole rest of the prompt. 0 = only take the reused prefix.
  std::optional<int32_t> num_tokens_to_allocate;
  // The request's own prompt length when `prompt` also holds tokens it generated (a sequence
  // resumed after a pause re-enters with all its tokens): tokens from this position on are
  // generated tokens for retention: a block whose first token lies here or later takes
  // decode_retention_priority / decode_duration_ms, whatever the token ranges say. In
  // [1, prompt length]; unset = the whole prompt. Allocation and reuse treat all of `prompt`
  // alike either way.
  std::optional<int32_t> num_prompt_tokens;
};

struct AddSequenceResult {
  KvAllocStatus status = KvAllocStatus::kOk;  // kNoFreeBlocks: the sequence was not added
  // Prompt tokens whose KV exists already; the runner starts computing here.
  // Always <= prompt length - 1 (the last prompt token is recomputed for logits).
  int32_t num_reused_tokens = 0;
  int32_t num_reused_blocks = 0;     // full blocks shared from the tree (onboarded ones included)
  int32_t num_onboarded_blocks = 0;  // of those, copied back from the secondary pool
  int32_t num_partial_tokens = 0;    // of num_reused_tokens, copied into a fresh block (partial reuse)
  int32_t num_allocated_tokens = 0;  // tokens with a KV slot after the call
};

// What addSequence would reuse for this prompt now (no state changes).
struct PrefixMatch {
  int32_t num_reusable_tokens = 0;
  int32_t num_full_blocks = 0;       // shared blocks
  int32_t num_secondary_blocks = 0;  // of those, to onboard from the secondary pool
  int32_t num_partial_tokens = 0;    // copied into a fresh block
};

struct KvPoolStats {
  int32_t total = 0;
  int32_t free = 0;         // empty blocks
  int32_t used = 0;         // referenced by at least one sequence
  int32_t cached = 0;       // in the radix tree, unreferenced (reusable, evictable)
  int32_t reclaimable = 0;  // cached blocks eviction can free now (primary pool only)
};

struct KvCacheStats {
  int32_t tokens_per_block = 0;
  int32_t num_sequences = 0;
  KvPoolStats primary;
  KvPoolStats secondary;
  // Prompt blocks / tokens of added sequences that were reused or had to be computed.
  uint64_t reused_blocks = 0;  // full shared blocks + partially reused blocks
  uint64_t partial_reused_blocks = 0;
  uint64_t missed_blocks = 0;
  uint64_t reused_tokens = 0;
  uint64_t missed_tokens = 0;
  double block_hit_rate = 0.0;            // reused_blocks / (reused_blocks + missed_blocks)
  double token_hit_rate = 0.0;            // reused_tokens / (reused_tokens + missed_tokens)
  uint64_t evicted_primary_blocks = 0;    // dropped from the primary pool
  uint64_t evicted_secondary_blocks = 0;  // dropped from the secondary pool
  uint64_t offloaded_blocks = 0;
  uint64_t onboarded_blocks = 0;
  uint64_t allocation_failures = 0;  // calls answered kNoFreeBlocks
  uint64_t events_dropped = 0;
};

// One block slot as tests and debugging tools see it.
struct KvBlockInfo {
  KvPool pool = KvPool::kPrimary;
  BlockId block = 0;
  bool in_tree = false;
  bool evictable = false;  // an eviction candidate right now
  int32_t ref_count = 0;
  int32_t priority = 35;
  uint64_t last_used = 0;
  uint64_t hash = 0;
  std::optional<uint64_t> parent_hash;
  int32_t num_children = 0;
  int32_t num_primary_children = 0;
  std::vector<TokenId> tokens;  // the key tokens of a tree block
};

class KvCacheManager {
 public:
  // Builds a manager with explicit pool sizes (secondary 0 = no host pool). `config` is a
  // validated one (KvCacheConfig::validate, run once where the configuration enters: Executor::
  // create). Fails on a non-positive primary size or bad options.
  static Result<std::unique_ptr<KvCacheManager>> create(const KvCacheConfig& config,
                                                        int32_t num_primary_blocks,
                                                        int32_t num_secondary_blocks,
                                                        KvCacheManagerOptions options = {});
  // Builds a manager sized by computeKvCacheSizing().
  static Result<std::unique_ptr<KvCacheManager>> create(const KvCacheConfig& config,
                                                        const KvCacheSizing& sizing,
                                                        KvCacheManagerOptions options = {});

  KvCacheManager(const KvCacheManager&) = delete;
  KvCacheManager& operator=(const KvCacheManager&) = delete;
  ~KvCacheManager();

  // ---- sequences ------------------------------------------------------------
  // Registers sequence `id` with its prompt, reuses the longest cached prefix
  // (onboarding secondary blocks, partial copy) and allocates the first chunk.
  // Returns status kNoFreeBlocks (and adds nothing) when the blocks are not
  // there. Errors: duplicate id, empty prompt, prompt longer than the maximum
  // sequence length, invalid retention config or multimodal ranges.
  Result<AddSequenceResult> addSequence(SequenceId id, std::span<const TokenId> prompt,
                                        const AddSequenceOptions& options = {});

  // Allocates KV slots for the next `num_tokens` prompt tokens (a context chunk).
  // Errors: unknown id, num_tokens < 0 or beyond the prompt.
  Result<KvAllocStatus> allocatePromptTokens(SequenceId id, int32_t num_tokens);

  // Appends generated tokens (usually one: the token sampled last step, whose KV
  // the next step computes) and allocates their slots. On kNoFreeBlocks the
  // tokens are not appended. Errors: unknown id, prompt not fully allocated,
  // maximum sequence length exceeded.
  Result<KvAllocStatus> appendTokens(SequenceId id, std::span<const TokenId> tokens);
  Result<KvAllocStatus> appendToken(SequenceId id, TokenId token) { return appendTokens(id, {&token, 1}); }

  // Overlapped steps: sets token `pos` of a sequence, appended as a placeholder before it was
  // sampled. Errors: unknown id, pos outside the tokens, or a computed token (computed
  // blocks are keyed by their tokens, so a token must be known before markComputed).
  Status resolveToken(SequenceId id, int32_t pos, TokenId token);

  // Marks the next `num_tokens` allocated tokens as computed (their KV is
  // written). Full computed blocks become reusable now; blocks that left the
  // sliding window are released. Errors: unknown id, more than allocated.
  Status markComputed(SequenceId id, int32_t num_tokens);

  // Frees the sequence's blocks (finish, cancel or pause). Computed full blocks
  // stay cached for reuse when reuse is enabled. Errors: unknown id.
  Status removeSequence(SequenceId id);

  bool hasSequence(SequenceId id) const { return sequences_.count(id) != 0; }
  // The sequence's block table (primary block ids); empty for an unknown id.
  std::span<const BlockId> blockTable(SequenceId id) const;
  int32_t numReusedTokens(SequenceId id) const;  // -1 for an unknown id (same below)
  int32_t numComputedTokens(SequenceId id) const;
  int32_t numAllocatedTokens(SequenceId id) const;
  int32_t numTokens(SequenceId id) const;  // prompt + appended tokens

  // ---- admission control ---------------------------------------------------
  // Primary blocks the sequence may still need from the pool to reach
  // prompt + max_new_tokens (an upper bound; exact without a sliding window).
  int32_t numBlocksNeededToComplete(SequenceId id) const;
  // The same for a request not yet added, ignoring reuse.
  int32_t numBlocksNeeded(int32_t prompt_len, int32_t max_new_tokens) const;
  int32_t numFreeBlocks() const { return pool_.numFree(KvPool::kPrimary); }
  int32_t numReclaimableBlocks() const { return pool_.numReclaimable(); }
  int32_t numAvailableBlocks() const { return pool_.numAvailable(); }
  // What addSequence would reuse for this prompt (no state changes).
  PrefixMatch lookupPrefix(std::span<const TokenId> prompt, const SequenceKeyExtras& extras = {}) const;

  // ---- copies ----------------------------------------------------------------
  bool hasPendingCopies() const { return !pool_.pendingCopies().empty(); }
  // Hands the queued copies to the configured copier and clears the queue.
  // FailedPrecondition without a copier; the copier's error otherwise.
  Status flushCopies();
  // Returns and clears the queued copies (for callers that run copies themselves).
  std::vector<KvBlockCopy> takePendingCopies();

  // ---- observability ---------------------------------------------------------
  KvCacheStats stats() const;
  std::vector<KvCacheEvent> drainEvents() { return events_.drain(); }
  const KvCacheConfig& config() const { return config_; }
  int32_t tokensPerBlock() const { return tpb_; }
  int32_t attentionWindow() const { return options_.attention_window; }  // 0 = no window
  int32_t maxBlocksPerSequence() const { return max_blocks_per_seq_; }

  // ---- introspection (tests, debugging) --------------------------------------
  KvBlockInfo blockInfo(KvPool pool, BlockId block) const;
  // Audits the block pool and the per-sequence holdings (reference counts equal
  // holders, no block in two places, counters add up). O(blocks + tokens).
  Status checkInvariants() const;
  // Called for every eviction decision, before state changes.
  void setEvictionObserver(detail::EvictionObserver observer) {
    pool_.setEvictionObserver(std::move(observer));
  }

 private:
  struct Sequence;
  struct Match;
  KvCacheManager(const KvCacheConfig& config, int32_t num_primary, int32_t num_secondary,
                 KvCacheManagerOptions options);

  Sequence* find(SequenceId id);
  const Sequence* find(SequenceId id) const;
  void matchPrefix(std::span<const TokenId> prompt, const SequenceKeyExtras& extras, Match& out) const;
  KvAllocStatus extend(Sequence& seq, int32_t num_tokens);
  void storeFullBlocks(Sequence& seq);
  void releaseOutOfWindow(Sequence& seq);
  void releaseBlock(Sequence& seq, int32_t index);
  detail::RetentionUpdate retentionFor(const Sequence& seq, int32_t block_index) const;
  int32_t peakBlocks(int64_t total_tokens, int32_t max_chunk) const;

  KvCacheConfig config_;
  KvCacheManagerOptions options_;
  std::unique_ptr<SteadyKvClock> own_clock_;
  int32_t tpb_;
  int32_t max_blocks_per_seq_;  // 0 = unlimited
  KvEventBuffer events_;
  detail::BlockPool pool_;
  std::unordered_map<SequenceId, std::unique_ptr<Sequence>> sequences_;
  mutable std::unique_ptr<Match> scratch_match_;
  mutable std::vector<uint64_t> scratch_extras_;

  uint64_t reused_blocks_ = 0, partial_reused_blocks_ = 0, missed_blocks_ = 0;
  uint64_t reused_tokens_ = 0, missed_tokens_ = 0, alloc_failures_ = 0;
};

}  // namespace llmrt
