// Block keys: what identifies the KV a full block holds.
//
// A block's key is (its parent block, its token ids, its extra words). The
// extra words encode, for block 0, the LoRA id and the cache salt (both reach
// every later block through the parent chain), and for every block the
// multimodal items whose positions overlap it. The radix tree compares keys in
// full; the 64-bit chained hash below is only an index and the identity shown
// to event consumers and external routers. It is deterministic across runs and
// processes, so routers may compute it themselves:
//   h(root) = kRootBlockHash
//   h(block) = absorb(h(parent), n_tokens, tokens as little-endian u32 pairs, extras)
// with absorb built from the splitmix64 finalizer (see block_key.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_types.h"

namespace llmrt {

inline constexpr uint64_t kRootBlockHash = 0x6c6c6d72742d6b76ULL;  // "llmrt-kv"

// The chained hash of a block whose parent has hash `parent_hash`.
uint64_t hashBlockKey(uint64_t parent_hash, std::span<const TokenId> tokens,
                      std::span<const uint64_t> extras);

// Appends to `out` the extra key words of block `block_index` (tokens
// [block_index * tokens_per_block, +tokens_per_block)). `out` is cleared first.
void buildBlockExtras(const SequenceKeyExtras& extras, int32_t block_index, int32_t tokens_per_block,
                      std::vector<uint64_t>& out);

}  // namespace llmrt
