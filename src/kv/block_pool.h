// BlockPool: every block of both pools and the radix tree over them. It is the
// one place that mutates block state (reference counts, tree links, pool
// placement, eviction queues, lock counts); KvCacheManager decides *what* to
// do per sequence and calls these primitives.
//
// Block objects vs. slots. There is one block object per slot of either pool
// (plus the tree root). An object's (pool, slot) is where its KV lives. Moving
// a cached block between pools (offload / onboard) swaps the placements of two
// objects — the cached one and an empty one in the other pool — after queuing
// the copy, so the cached object keeps its identity and its place in the tree.
//
// Block states (exactly one): free (empty stack of its pool), private (held by
// one sequence, not in the tree), or in the tree: used (ref_count > 0) or
// cached (ref_count == 0).
//
// Eviction candidates: primary tree blocks with ref 0 and no primary child;
// secondary tree blocks with ref 0 and no child. Order: lowest priority, then
// oldest release stamp. Invariant: the parent of a primary block is primary.
//
// Locks: a primary tree block is locked when it is referenced or has a locked
// primary child. Unlocked primary tree blocks are exactly the blocks that
// repeated leaf eviction could free ("reclaimable").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "kv/child_index.h"
#include "kv/eviction_heap.h"
#include "kv/kv_clock.h"
#include "kv/kv_events.h"
#include "kv/kv_types.h"
#include "llmrt/status.h"

namespace llmrt::detail {

inline constexpr int32_t kNil = -1;
inline constexpr int64_t kNoExpiry = INT64_MAX;
inline constexpr int32_t kDefaultPriority = 35;

struct PoolBlock {
  BlockId slot = 0;
  KvPool pool = KvPool::kPrimary;
  bool in_tree = false;
  bool locked = false;
  bool reclaimable = false;  // in the primary tree and unlocked (counted in numReclaimable)
  int8_t heap = -1;          // eviction heap (pool index) holding this block, or -1
  int32_t priority = kDefaultPriority;
  int32_t ref_count = 0;
  int32_t parent = kNil;
  int32_t first_child = kNil;
  int32_t next_sibling = kNil;
  int32_t prev_sibling = kNil;
  int32_t num_children = 0;
  int32_t num_primary_children = 0;
  int32_t num_locked_children = 0;
  uint32_t generation = 0;  // bumped whenever the block leaves the tree
  uint64_t hash = 0;
  uint64_t last_used = 0;  // release stamp (logical clock)
  int64_t expiry_ms = kNoExpiry;
};

// Priority a releasing sequence wants for a block.
struct RetentionUpdate {
  int32_t priority = kDefaultPriority;
  std::optional<int64_t> duration_ms;
};

enum class EvictionAction : uint8_t {
  kOffload,      // primary → secondary
  kDrop,         // removed from the tree
  kCascadeDrop,  // a secondary descendant removed because its primary ancestor was dropped
};
struct EvictionRecord {
  KvPool pool;
  BlockId slot;
  int32_t priority;
  uint64_t last_used;
  uint64_t hash;
  EvictionAction action;
  int32_t incoming_priority;  // secondary evictions: priority of the block being offloaded; else -1
};
using EvictionObserver = std::function<void(const EvictionRecord&)>;

struct PartialMatch {
  int32_t block = kNil;
  int32_t num_tokens = 0;
};

struct BlockPoolCounters {
  uint64_t evicted_primary = 0;
  uint64_t evicted_secondary = 0;
  uint64_t offloaded = 0;
  uint64_t onboarded = 0;
};

class BlockPool {
 public:
  struct Params {
    int32_t tokens_per_block = 32;
    int32_t num_primary = 0;
    int32_t num_secondary = 0;
    int32_t offload_min_priority = kDefaultPriority;
    uint64_t hash_mask = ~uint64_t{0};  // tests only: provokes hash collisions
  };
  BlockPool(const Params& params, const KvClock* clock, KvEventBuffer* events);

  int32_t tokensPerBlock() const { return tpb_; }
  int32_t root() const { return root_; }
  const PoolBlock& at(int32_t b) const { return blocks_[b]; }
  int32_t ownerOf(KvPool pool, BlockId slot) const { return owner_[idx(pool)][slot]; }
  std::span<const TokenId> keyTokens(int32_t b) const { return {&keys_[size_t(b) * tpb_], size_t(tpb_)}; }

  int32_t numBlocks(KvPool p) const { return num_blocks_[idx(p)]; }
  int32_t numFree(KvPool p) const { return static_cast<int32_t>(empty_[idx(p)].size()); }
  int32_t numCached(KvPool p) const { return num_cached_[idx(p)]; }
  int32_t numUsed(KvPool p) const { return num_used_[idx(p)]; }
  int32_t numReclaimable() const { return reclaimable_; }
  // Primary blocks an allocation can obtain now (free + reclaimable).
  int32_t numAvailable() const { return numFree(KvPool::kPrimary) + reclaimable_; }

  // ---- allocation and references --------------------------------------
  // A private primary block with ref 1, evicting if needed; kNil when none.
  int32_t allocate();
  // +1 on a tree block (either pool). Reverse with unpin() (restores the exact
  // previous state) or release() (a use: stamps LRU, may change priority).
  void pin(int32_t b);
  void unpin(int32_t b);
  void release(int32_t b, const RetentionUpdate* update);
  // Moves a pinned secondary tree block into the primary pool (queues the copy).
  // Returns false, changing nothing, if no primary block can be obtained.
  bool onboard(int32_t b);

  // ---- radix tree --------------------------------------------------------
  uint64_t hashKey(uint64_t parent_hash, std::span<const TokenId> tokens,
                   std::span<const uint64_t> extras) const;
  // The child of `parent` whose full key is (tokens, extras), or kNil.
  int32_t findChild(int32_t parent, uint64_t hash, std::span<const TokenId> tokens,
                    std::span<const uint64_t> extras) const;
  // The child of `parent` with equal extras sharing the longest token prefix
  // with `tokens` (at most tokens.size()); ties prefer primary, then most recent.
  // Secondary blocks are candidates only if `allow_secondary`.
  PartialMatch findPartial(int32_t parent, std::span<const TokenId> tokens, std::span<const uint64_t> extras,
                           bool allow_secondary) const;
  // Puts private block `b` (full, computed) into the tree under `parent` (root or a primary tree block).
  void insert(int32_t b, int32_t parent, uint64_t hash, std::span<const TokenId> tokens,
              std::span<const uint64_t> extras, int32_t priority, std::optional<uint64_t> lora_id);
  bool isLive(int32_t b, uint32_t generation) const {
    return b == root_ || (blocks_[b].in_tree && blocks_[b].generation == generation);
  }

  // ---- copies, expiry ----------------------------------------------------
  void addCopy(const KvBlockCopy& c) { pending_.push_back(c); }
  std::vector<KvBlockCopy>& pendingCopies() { return pending_; }
  const std::vector<KvBlockCopy>& pendingCopies() const { return pending_; }
  // Applies expired retention durations (priority falls back to 35).
  void processExpirations();

  const BlockPoolCounters& counters() const { return counters_; }
  void setEvictionObserver(EvictionObserver obs) { observer_ = std::move(obs); }
  // Full O(n) audit of every invariant above; the message names the first violation.
  Status checkInvariants() const;

 private:
  static int idx(KvPool p) { return static_cast<int>(p); }
  int32_t takeEmpty(KvPool p);  // pops an empty block object of pool p
  void pushEmpty(int32_t b);
  int32_t takeEmptyPrimary();  // evicting if needed; kNil when impossible
  bool evictPrimary();
  int32_t obtainSecondary(int32_t incoming_priority);
  void offload(int32_t victim, int32_t empty_secondary);
  void dropSubtree(int32_t b, EvictionAction action);
  void removeFromTree(int32_t b);
  void swapPlacement(int32_t a, int32_t b);
  void setPriority(int32_t b, int32_t priority, std::optional<int64_t> duration_ms);
  void refreshCandidate(int32_t b);
  void refreshLock(int32_t b);
  void notify(int32_t b, EvictionAction action, int32_t incoming_priority);
  uint64_t heapKey(const PoolBlock& x) const { return EvictionHeap::makeKey(x.priority, x.last_used); }

  int32_t tpb_;
  int32_t num_blocks_[2];
  int32_t offload_min_priority_;
  uint64_t hash_mask_;
  int32_t root_;
  const KvClock* clock_;
  KvEventBuffer* events_;

  std::vector<PoolBlock> blocks_;
  std::vector<int32_t> owner_[2];  // slot → block object
  std::vector<TokenId> keys_;      // tokens_per_block token ids per block object
  std::vector<std::vector<uint64_t>> extras_;
  std::vector<int32_t> empty_[2];
  std::vector<int32_t> heap_pos_;
  EvictionHeap heap_primary_;
  EvictionHeap heap_secondary_;
  ChildIndex index_;
  struct Expiry {
    int64_t when;
    int32_t block;
    uint32_t generation;
    bool operator>(const Expiry& o) const { return when > o.when; }
  };
  std::vector<Expiry> expiries_;  // min-heap; stale entries are skipped
  std::vector<KvBlockCopy> pending_;

  int32_t num_cached_[2] = {0, 0};
  int32_t num_used_[2] = {0, 0};
  int32_t reclaimable_ = 0;
  uint64_t lru_clock_ = 0;
  BlockPoolCounters counters_;
  EvictionObserver observer_;
};

}  // namespace llmrt::detail
