// Vocabulary of the KV cache manager: ids, pools, block copies, the
// out-of-blocks outcome and the extra key material (LoRA id, cache salt,
// multimodal hashes) that separates otherwise identical token prefixes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "llmrt/status.h"

namespace llmrt {

using TokenId = int32_t;
// A block's index inside its pool's memory (what block tables hold).
using BlockId = int32_t;
using SequenceId = uint64_t;

// A block table entry for a block released by the sliding window.
inline constexpr BlockId kNoBlock = -1;

enum class KvPool : uint8_t {
  kPrimary = 0,    // GPU memory (CPU memory on the CPU backend); the runner reads only this
  kSecondary = 1,  // host memory for offloaded blocks
};
std::string_view kvPoolName(KvPool pool);

// One block copy the backend must perform before the next step runs.
struct BlockCopy {
  KvPool src_pool = KvPool::kPrimary;
  BlockId src_block = 0;
  KvPool dst_pool = KvPool::kPrimary;
  BlockId dst_block = 0;
  // 0 = the whole block (all layers, K and V); n > 0 = only the KV of the
  // block's first n token slots (partial reuse, copy-on-write).
  int32_t num_tokens = 0;

  bool operator==(const BlockCopy&) const = default;
};

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
