// An indexed binary min-heap of block ids keyed by (priority, last-use stamp).
// Used instead of per-priority LRU lists because eviction is leaf-only: when a
// leaf goes, its parent becomes evictable with an *older* stamp than blocks
// already queued, which a list could only place by walking it. Every operation
// here is O(log n) and allocation-free after construction.
#pragma once

#include <cassert>
#include <cstdint>
#include <vector>

namespace llmrt::detail {

class EvictionHeap {
 public:
  // `positions` is indexed by block id and shared by all heaps (a block sits in
  // at most one); -1 means "in no heap".
  EvictionHeap(std::vector<int32_t>* positions, size_t capacity) : pos_(positions) {
    heap_.reserve(capacity);
  }

  static uint64_t makeKey(int32_t priority, uint64_t stamp) {
    return (static_cast<uint64_t>(priority) << 56) | (stamp & ((uint64_t{1} << 56) - 1));
  }

  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  int32_t top() const { return heap_.front().block; }
  bool contains(int32_t block) const { return (*pos_)[block] >= 0; }

  void push(int32_t block, uint64_t key) {
    assert((*pos_)[block] < 0);
    heap_.push_back({key, block});
    (*pos_)[block] = static_cast<int32_t>(heap_.size() - 1);
    siftUp(heap_.size() - 1);
  }
  void remove(int32_t block) {
    int32_t i = (*pos_)[block];
    assert(i >= 0);
    (*pos_)[block] = -1;
    size_t last = heap_.size() - 1;
    if (static_cast<size_t>(i) != last) {
      heap_[i] = heap_[last];
      (*pos_)[heap_[i].block] = i;
      heap_.pop_back();
      fix(static_cast<size_t>(i));
    } else {
      heap_.pop_back();
    }
  }
  void update(int32_t block, uint64_t key) {
    int32_t i = (*pos_)[block];
    assert(i >= 0);
    if (heap_[i].key == key) return;
    heap_[i].key = key;
    fix(static_cast<size_t>(i));
  }

  // For invariant checks.
  struct Entry {
    uint64_t key;
    int32_t block;
  };
  const std::vector<Entry>& entries() const { return heap_; }
  bool isHeap() const {
    for (size_t i = 1; i < heap_.size(); ++i)
      if (heap_[(i - 1) / 2].key > heap_[i].key) return false;
    return true;
  }

 private:
  void fix(size_t i) {
    if (i > 0 && heap_[(i - 1) / 2].key > heap_[i].key)
      siftUp(i);
    else
      siftDown(i);
  }
  void siftUp(size_t i) {
    Entry e = heap_[i];
    while (i > 0) {
      size_t p = (i - 1) / 2;
      if (heap_[p].key <= e.key) break;
      heap_[i] = heap_[p];
      (*pos_)[heap_[i].block] = static_cast<int32_t>(i);
      i = p;
    }
    heap_[i] = e;
    (*pos_)[e.block] = static_cast<int32_t>(i);
  }
  void siftDown(size_t i) {
    Entry e = heap_[i];
    const size_t n = heap_.size();
    for (;;) {
      size_t c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && heap_[c + 1].key < heap_[c].key) ++c;
      if (heap_[c].key >= e.key) break;
      heap_[i] = heap_[c];
      (*pos_)[heap_[i].block] = static_cast<int32_t>(i);
      i = c;
    }
    heap_[i] = e;
    (*pos_)[e.block] = static_cast<int32_t>(i);
  }

  std::vector<Entry> heap_;
  std::vector<int32_t>* pos_;
};

}  // namespace llmrt::detail
