// KvCacheConfig: how the paged KV cache is sized and how it behaves (block
// reuse, host offload, sliding window, events). A plain struct mirroring the
// Python LLM API's KvCacheConfig; validate() is the one place its fields are
// checked. The engine freezes it once the cache is built.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "llmrt/status.h"

namespace llmrt {

enum class KvCacheDtype { kAuto, kFloat32, kBFloat16, kFloat16, kFp8 };
// "auto", "float32", "bfloat16", "float16", "fp8" (E4M3 codes with a per-layer scale for K and
// one for V), and the parser of those names (nullopt otherwise).
std::string_view toString(KvCacheDtype dtype);
std::optional<KvCacheDtype> parseKvCacheDtype(std::string_view name);

struct KvCacheConfig {
  // The default of free_gpu_memory_fraction when it is unset.
  static constexpr double kDefaultFreeGpuMemoryFraction = 0.9;
  // The retention priority of blocks no retention config covers.
  static constexpr int32_t kDefaultRetentionPriority = 35;

  // Tokens held by one KV block. A power of two in [1, 65536].
  int32_t tokens_per_block = 32;

  // Upper bound on the tokens the primary pool holds (> 0). The pool gets the
  // smaller of this (rounded up to whole blocks) and the memory-derived size.
  std::optional<int64_t> max_tokens;

  // Fraction of the primary memory left free after weights and activations that
  // the primary pool may take. In (0, 1): 1.0 is rejected because the inputs and
  // outputs of each step still need memory. Unset means 0.9.
  std::optional<double> free_gpu_memory_fraction;

  // Bytes of host memory for the secondary (offload) pool; 0 = no secondary pool.
  uint64_t host_cache_size = 0;

  // Keep computed full blocks in a radix tree and hand them to later requests
  // with the same prefix.
  bool enable_block_reuse = true;

  // When a prompt matches only part of a cached block, copy the matching tokens'
  // KV into a fresh block instead of recomputing them (needs enable_block_reuse).
  bool enable_partial_reuse = true;

  // Copy reused secondary-pool blocks back into the primary pool before the
  // runner reads them. When false, a match ends at the first block that lives in
  // the secondary pool (our runners read only primary memory).
  bool onboard_blocks = true;

  // Attention windows in tokens (each > 0), as TensorRT-LLM's max_attention_window: every
  // layer attends only to its last W tokens (a query at position p sees keys (p - W, p]).
  // Empty = the model's own windows (config.json's sliding_window per layer; full attention
  // where it has none). One value = every layer; k values = a per-layer pattern repeated
  // over the layers (layer l takes entry l % k; at most one entry per layer). A W of at least
  // max_seq_len means full attention for its layers; a W larger than the model's own window
  // of a layer is an error (resolveAttentionWindows, when the engine loads). The KV cache
  // releases a block once it is outside every layer's window (never while a layer attends
  // fully).
  std::vector<int32_t> max_attention_window;

  // Reusable blocks evicted from the primary pool whose retention priority is at
  // least this are offloaded to the secondary pool instead of dropped. In [1, 100].
  int32_t secondary_offload_min_priority = kDefaultRetentionPriority;

  // Element type of the cached K/V: kAuto (the compute dtype: bfloat16 / float16 with 16-bit
  // weights on the GPU, float32 otherwise), kFloat32 (twice the memory of a 16-bit cache, K/V
  // not rounded: the most accurate attention with 16-bit weights; the activations stay float32
  // too), or kBFloat16 / kFloat16 (GPU with 16-bit weights only; either with either weights).
  KvCacheDtype dtype = KvCacheDtype::kAuto;

  // Capacity of the KV cache event buffer (events beyond it drop the oldest);
  // 0 = events disabled.
  uint64_t event_buffer_max_size = 0;

  // The effective free-memory fraction (the field, or 0.9 when unset).
  double effectiveFreeGpuMemoryFraction() const {
    return free_gpu_memory_fraction.value_or(kDefaultFreeGpuMemoryFraction);
  }

  // OK, or an InvalidArgument naming the first bad field, its value and what was expected.
  Status validate() const;
};

}  // namespace llmrt
