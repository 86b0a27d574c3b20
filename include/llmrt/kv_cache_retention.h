// Per-request KV cache retention: how strongly the blocks of a request should
// be kept once no sequence uses them. Eviction takes the lowest priority first;
// a priority with a duration falls back to the default (35) when it expires.
// Mirrors TensorRT-LLM's KvCacheRetentionConfig.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "llmrt/status.h"

namespace llmrt {

// A range of prompt tokens [token_start, token_end) and the priority of the
// blocks whose first token lies in it.
struct TokenRangeRetentionConfig {
  int32_t token_start = 0;
  // Exclusive end; unset = to the end of the prompt.
  std::optional<int32_t> token_end;
  // 1 (evict first) .. 100 (keep longest).
  int32_t priority = 35;
  // How long the priority holds after the block is released, in ms (> 0);
  // unset = until the block is evicted.
  std::optional<int64_t> duration_ms;
};

struct KvCacheRetentionConfig {
  static constexpr int32_t kMinPriority = 1;
  static constexpr int32_t kMaxPriority = 100;
  static constexpr int32_t kDefaultPriority = 35;

  // Non-overlapping prompt ranges (any order). Prompt blocks no range covers get 35.
  std::vector<TokenRangeRetentionConfig> token_range_retention_configs;
  // Priority and duration of blocks whose first token is a generated token.
  int32_t decode_retention_priority = kDefaultPriority;
  std::optional<int64_t> decode_duration_ms;

  // OK, or an InvalidArgument naming the bad range/field (overlapping ranges,
  // priority outside 1..100, empty range, non-positive duration).
  Status validate() const;
};

}  // namespace llmrt
