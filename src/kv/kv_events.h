// The KV cache manager's event buffer (when KvCacheConfig::event_buffer_max_size > 0).
// The events are the public ones (llmrt/kv_cache_events.h): what an external router or a
// monitoring tool needs to mirror the cache's contents. They accumulate in a bounded
// buffer (the oldest are dropped and counted when it is full) until the caller drains
// them; the executor moves them to its own queue after every step.
#pragma once

#include <cstdint>
#include <deque>
#include <iterator>
#include <utility>
#include <vector>

#include "kv/kv_types.h"
#include "llmrt/kv_cache_events.h"

namespace llmrt {

// The cache level of a pool in events (TensorRT-LLM's cacheLevel).
inline int32_t kvCacheLevel(KvPool pool) {
  return pool == KvPool::kPrimary ? kKvCacheLevelPrimary : kKvCacheLevelSecondary;
}

class KvEventBuffer {
 public:
  // window_size: KvCacheEvent::window_size of every event.
  explicit KvEventBuffer(uint64_t max_size, int32_t window_size = 0)
      : max_size_(max_size), window_size_(window_size) {}
  bool enabled() const { return max_size_ > 0; }

  void push(KvCacheEventData data) {
    if (!enabled()) return;
    if (events_.size() >= max_size_) {
      events_.pop_front();
      ++dropped_;
    }
    events_.push_back(KvCacheEvent{next_id_++, std::move(data), window_size_});
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
  int32_t window_size_;
  uint64_t next_id_ = 0;
  uint64_t dropped_ = 0;
  std::deque<KvCacheEvent> events_;
};

}  // namespace llmrt
