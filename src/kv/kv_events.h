// KV cache events (when KvCacheConfig::event_buffer_max_size > 0): what an
// external router or a monitoring tool needs to mirror the cache's contents.
// Events accumulate in a bounded buffer (the oldest are dropped and counted
// when it is full) until the caller drains them.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <variant>
#include <vector>

#include "kv/kv_types.h"

namespace llmrt {

// The pools were created (first event of every manager).
struct KvEventCreated {
  int32_t num_primary_blocks = 0;
  int32_t num_secondary_blocks = 0;
  int32_t tokens_per_block = 0;
};

// A full block entered the radix tree and can now be reused.
struct KvEventStored {
  std::optional<uint64_t> parent_hash;  // unset for the first block of a prefix
  uint64_t block_hash = 0;
  std::vector<TokenId> tokens;
  std::optional<uint64_t> lora_id;
  int32_t priority = 35;
  KvPool pool = KvPool::kPrimary;
};

// A block left the radix tree (evicted or dropped along with its dropped parent).
struct KvEventRemoved {
  uint64_t block_hash = 0;
  KvPool pool = KvPool::kPrimary;
};

struct KvPoolChange {
  KvPool from = KvPool::kPrimary;
  KvPool to = KvPool::kPrimary;
};
struct KvPriorityChange {
  int32_t from = 35;
  int32_t to = 35;
};

// A cached block moved between pools (offload / onboard) or changed priority.
struct KvEventUpdated {
  uint64_t block_hash = 0;
  std::optional<KvPoolChange> pool;
  std::optional<KvPriorityChange> priority;
};

struct KvCacheEvent {
  uint64_t event_id = 0;  // 0, 1, 2, ... per manager, gaps where events were dropped
  std::variant<KvEventCreated, KvEventStored, KvEventRemoved, KvEventUpdated> data;
};

class KvEventBuffer {
 public:
  explicit KvEventBuffer(uint64_t max_size) : max_size_(max_size) {}
  bool enabled() const { return max_size_ > 0; }

  template <typename T>
  void push(T&& data) {
    if (!enabled()) return;
    if (events_.size() >= max_size_) {
      events_.pop_front();
      ++dropped_;
    }
    events_.push_back(KvCacheEvent{next_id_++, std::forward<T>(data)});
  }
  std::vector<KvCacheEvent> drain() {
    std::vector<KvCacheEvent> out(std::make_move_iterator(events_.begin()),
                                  std::make_move_iterator(events_.end()));
    events_.clear();
    return out;
  }
  uint64_t dropped() const { return dropped_; }
  size_t size() const { return events_.size(); }

 private:
  uint64_t max_size_;
  uint64_t next_id_ = 0;
  uint64_t dropped_ = 0;
  std::deque<KvCacheEvent> events_;
};

}  // namespace llmrt
