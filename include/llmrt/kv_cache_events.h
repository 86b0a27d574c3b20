// KV cache events: what an external router (KV-aware routing) or a monitoring tool needs to
// mirror the contents of the KV cache's reuse tree. Mirrors TensorRT-LLM's executor
// KVCacheEvent (KVCacheCreatedData, KVCacheStoredData, KVCacheRemovedData,
// KVCacheUpdatedData), read with Executor::getKvCacheEvents / LLM::getKvCacheEvents (as
// TensorRT-LLM's KVCacheEventManager::getLatestEvents and LLM.get_kv_cache_events).
//
// Events are recorded when KvCacheConfig::event_buffer_max_size > 0; at most that many wait to
// be read (the oldest are dropped first: their ids are missing). Replaying them in id order
// gives the set of reusable blocks: Stored adds blocks under a parent, Removed takes them out,
// Updated moves a block between cache levels or changes its retention priority.
//
// Block hashes are deterministic: a block's hash chains its parent's hash, its tokens and its
// key extras (LoRA id, cache salt, multimodal items), so equal prefixes get equal hashes
// across runs and engines. The first block of a prefix has no parent hash.
#pragma once

#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

namespace llmrt {

using TokenId = int32_t;

// Cache levels (TensorRT-LLM's cacheLevel): where a block's KV lives.
// GPU memory (host memory on the CPU backend).
inline constexpr int32_t kKvCacheLevelPrimary = 0;
// The host offload pool (KvCacheConfig::host_cache_size).
inline constexpr int32_t kKvCacheLevelSecondary = 1;

// The cache was created (the first event).
struct KvCacheCreatedData {
  std::vector<int32_t> num_blocks_per_cache_level;  // [primary, secondary]
  int32_t tokens_per_block = 0;                     // (not in TensorRT-LLM's event)
};

// One block that entered the reuse tree.
struct KvCacheStoredBlockData {
  uint64_t block_hash = 0;
  std::vector<TokenId> tokens;  // its tokens_per_block token ids
  std::optional<uint64_t> lora_id;
  int32_t cache_level = kKvCacheLevelPrimary;
  int32_t priority = 35;  // retention priority (1..100)
};

// Blocks that entered the reuse tree: full blocks whose KV is computed, reusable by any
// request with the same prefix from now on. The parent of blocks[i] is blocks[i - 1]; the
// parent of blocks[0] is parent_hash (unset: blocks[0] starts a prefix).
struct KvCacheStoredData {
  std::optional<uint64_t> parent_hash;
  std::vector<KvCacheStoredBlockData> blocks;
};

// Blocks that left the reuse tree (evicted from either cache level, or dropped along with their
// evicted parent); their KV is gone.
struct KvCacheRemovedData {
  std::vector<uint64_t> block_hashes;
};

template <typename T>
struct KvCacheEventDiff {
  T old_value{};
  T new_value{};
};

// A block of the reuse tree moved between cache levels (offloaded to the host pool: 0 -> 1;
// onboarded for reuse: 1 -> 0) or changed retention priority (set by a request's
// KvCacheRetentionConfig when it releases the block, or back to 35 when a duration expires).
struct KvCacheUpdatedData {
  uint64_t block_hash = 0;
  std::optional<KvCacheEventDiff<int32_t>> cache_level;
  std::optional<KvCacheEventDiff<int32_t>> priority;
};

using KvCacheEventData =
    std::variant<KvCacheCreatedData, KvCacheStoredData, KvCacheRemovedData, KvCacheUpdatedData>;

struct KvCacheEvent {
  uint64_t event_id = 0;  // 0, 1, 2, ... in order; a gap where events were dropped
  KvCacheEventData data;
  // The attention window the cache keeps for a sequence (tokens): the sliding window, or the
  // longest sequence when every layer attends fully (0: unlimited).
  int32_t window_size = 0;
};

}  // namespace llmrt
