// The two narrow interfaces through which the KV cache manager talks to the
// backend that owns the pool memory, plus simple implementations for tests:
//  - KvMemoryReporter: memory figures used once, to size the primary pool;
//  - KvBlockCopier: executes a batch of block copies between/within pools.
// src/kv never touches pool memory itself and includes no device headers.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_types.h"
#include "llmrt/status.h"

namespace llmrt {

struct KvMemoryInfo {
  uint64_t total_bytes = 0;  // device (or host, on the CPU backend) memory in all
  // What is still free once weights are loaded and activation/workspace memory
  // is reserved; the primary pool takes a fraction of this.
  uint64_t free_bytes = 0;
};

class KvMemoryReporter {
 public:
  virtual ~KvMemoryReporter() = default;
  virtual KvMemoryInfo primaryMemoryInfo() const = 0;
};

// Reports fixed numbers (tests, and front ends that size the cache by hand).
class FixedKvMemoryReporter final : public KvMemoryReporter {
 public:
  explicit FixedKvMemoryReporter(KvMemoryInfo info) : info_(info) {}
  KvMemoryInfo primaryMemoryInfo() const override { return info_; }

 private:
  KvMemoryInfo info_;
};

// Executes block copies. Contract (relied on by KvCacheManager::flushCopies):
//  - copies run with sequential semantics, in the order given: a later copy may
//    overwrite a block an earlier copy read, or read a block an earlier copy
//    wrote. A backend may run copies concurrently only where they touch
//    disjoint (pool, block) pairs.
//  - all copies happen after KV writes of previously launched steps and before
//    the next step reads or writes KV (stream order on the CUDA backend, which
//    may use a separate copy stream from pinned host memory if it orders it so).
//  - a KvBlockCopy with num_tokens = KvBlockCopy::kWholeBlock copies the whole block;
//    one with num_tokens = n in [0, tokens_per_block) copies only token slots [0, n)
//    of every layer's K and V (KvBlockCopy::numTokens).
// A failure leaves the destination blocks' contents undefined; callers treat
// it as fatal for the engine (the manager's bookkeeping assumes the copies ran).
class KvBlockCopier {
 public:
  virtual ~KvBlockCopier() = default;
  virtual Status copyBlocks(std::span<const KvBlockCopy> copies) = 0;
};

// Records every copy batch it is given (tests; the CPU backend implements the real one).
class RecordingBlockCopier final : public KvBlockCopier {
 public:
  Status copyBlocks(std::span<const KvBlockCopy> copies) override {
    batches_.emplace_back(copies.begin(), copies.end());
    return Status::ok();
  }
  const std::vector<std::vector<KvBlockCopy>>& batches() const { return batches_; }
  // All copies of all batches, in order.
  std::vector<KvBlockCopy> allCopies() const {
    std::vector<KvBlockCopy> out;
    for (const auto& b : batches_) out.insert(out.end(), b.begin(), b.end());
    return out;
  }
  void clear() { batches_.clear(); }

 private:
  std::vector<std::vector<KvBlockCopy>> batches_;
};

}  // namespace llmrt
