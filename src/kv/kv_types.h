// Vocabulary of the KV cache manager: ids, pools (with block copies from core), the
// out-of-blocks outcome and the extra key material (LoRA id, cache salt,
// multimodal hashes) that separates otherwise identical token prefixes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/kv_block_copy.h"
#include "llmrt/status.h"

namespace llmrt {

using TokenId = int32_t;
// A block's index inside its pool's memory (what block tables hold).
using BlockId = int32_t;
using SequenceId = uint64_t;

// A block table entry for a block released by the sliding window.
inline constexpr BlockId kNoBlock = -1;

// KvPool and KvBlockCopy (the block copies the backend must perform before the next
// step runs; num_tokens = KvBlockCopy::kWholeBlock for a whole block) are core types
// shared with the backend: core/kv_block_copy.h.
std::string_view kvPoolName(KvPool pool);

// Outcome of a request for blocks. Running out is normal: the scheduler waits,
// preempts or evicts, and nothing in the manager changed.
enum class KvAllocStatus : uint8_t {
  kOk = 0,
  kNoFreeBlocks,
};
// "Can't allocate new blocks. No free blocks left" for kNoFreeBlocks, "OK" otherwise.
std::string_view kvAllocStatusMessage(KvAllocStatus status);
// The same outcome as a Status (ResourceExhausted with the message above).
Status toStatus(KvAllocStatus status);

// One multimodal item (image, audio clip) whose placeholder tokens occupy
// prompt positions [start, start + length). Its content hash is part of the key
// of every block those positions touch, so two images behind the same
// placeholder ids never share KV.
struct MultimodalInput {
  std::array<uint64_t, 4> hash{};  // 256-bit content hash computed by the front end
  int32_t start = 0;
  int32_t length = 0;
};

// Key material beyond token ids. Sequences whose extras differ never share a block.
struct SequenceKeyExtras {
  std::optional<uint64_t> lora_id;
  // Compared in full (not only through a hash), so tenants that use distinct
  // salts can never read each other's KV even under a hash collision.
  std::optional<std::string> cache_salt;
  std::vector<MultimodalInput> multimodal;

  bool empty() const { return !lora_id && !cache_salt && multimodal.empty(); }
};

}  // namespace llmrt
