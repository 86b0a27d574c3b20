// KvBlockCopy: one copy of a KV cache block between or within the KV pools
// (offload to the host pool, onboard back, the copy-on-write of partial reuse).
// The one type for it: the KV cache manager (src/kv) queues these, the model
// runner hands them unchanged to Backend::copyKvBlocks, and the backends run
// them. It lives in core because kv and backend both sit directly above core
// and neither may include the other.
#pragma once

#include <cstdint>

namespace llmrt {

// Which pool a block lives in.
enum class KvPool : uint8_t {
  kPrimary = 0,    // GPU memory (CPU memory on the CPU backend); the runner reads only this
  kSecondary = 1,  // host memory for offloaded blocks
};

struct KvBlockCopy {
  // num_tokens of a copy of the whole block (every layer's K and V, every token slot).
  static constexpr int32_t kWholeBlock = -1;

  KvPool src_pool = KvPool::kPrimary;
  int32_t src_block = 0;
  KvPool dst_pool = KvPool::kPrimary;
  int32_t dst_block = 0;
  // kWholeBlock (any negative value, or a value >= tokens_per_block): the whole block;
  // n in [0, tokens_per_block): only the KV of the block's first n token slots, of every
  // layer's K and V (partial reuse).
  int32_t num_tokens = kWholeBlock;

  // The token slots this copy covers in a block of `tokens_per_block` slots.
  int32_t numTokens(int32_t tokens_per_block) const {
    return num_tokens < 0 || num_tokens >= tokens_per_block ? tokens_per_block : num_tokens;
  }
  bool wholeBlock(int32_t tokens_per_block) const { return numTokens(tokens_per_block) == tokens_per_block; }

  bool operator==(const KvBlockCopy&) const = default;
};

}  // namespace llmrt
