// The radix tree's child index: one open-addressing table (linear probing,
// backward-shift deletion) from a block's chained hash to the block. A hash
// only narrows the search: find() asks the caller to confirm each candidate by
// comparing the full key (parent, tokens, extras), so equal hashes of different
// keys coexist and can never be confused. Sized once for every block of both
// pools; no allocation after construction.
#pragma once

#include <cstdint>
#include <vector>

namespace llmrt::detail {

class ChildIndex {
 public:
  explicit ChildIndex(size_t max_entries) {
    size_t cap = 16;
    while (cap < 2 * max_entries + 16) cap <<= 1;
    slots_.assign(cap, Slot{0, -1});
    mask_ = cap - 1;
  }

  void insert(uint64_t hash, int32_t block) {
    size_t i = hash & mask_;
    while (slots_[i].block >= 0) i = (i + 1) & mask_;
    slots_[i] = {hash, block};
    ++size_;
  }

  // Returns the first block with this hash for which `matches(block)` holds, or -1.
  template <typename Pred>
  int32_t find(uint64_t hash, Pred&& matches) const {
    for (size_t i = hash & mask_; slots_[i].block >= 0; i = (i + 1) & mask_) {
      if (slots_[i].hash == hash && matches(slots_[i].block)) return slots_[i].block;
    }
    return -1;
  }

  // Removes the entry (hash, block); returns false if absent.
  bool erase(uint64_t hash, int32_t block) {
    size_t i = hash & mask_;
    for (;; i = (i + 1) & mask_) {
      if (slots_[i].block < 0) return false;
      if (slots_[i].block == block && slots_[i].hash == hash) break;
    }
    // Backward shift: pull later entries of the cluster into the hole when their
    // home position does not lie cyclically in (hole, j].
    size_t hole = i;
    for (size_t j = (i + 1) & mask_; slots_[j].block >= 0; j = (j + 1) & mask_) {
      size_t home = slots_[j].hash & mask_;
      bool home_in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
      if (!home_in_range) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole] = {0, -1};
    --size_;
    return true;
  }

  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t hash;
    int32_t block;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace llmrt::detail
