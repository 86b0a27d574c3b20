// Sizing of the KV cache pools from the model's KV shape, the config and the
// memory the backend reports. Logs the lines TensorRT-LLM prints, so operators
// can compare:
//   Memory usage when calculating max tokens in paged kv cache: total: X GiB, available: Y GiB
//   Number of blocks in KV cache primary pool: N
//   Number of blocks in KV cache secondary pool: M, onboard blocks to primary memory before reuse: true
//   Max KV cache pages per sequence: P
//   Number of tokens per block: T.
//   [MemUsageChange] Allocated X GiB for max tokens in paged KV cache (N*T).
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "kv/kv_backend.h"
#include "llmrt/kv_cache_config.h"
#include "llmrt/status.h"

namespace llmrt {

// The KV shape of a model (what one token costs in every layer).
struct KvCacheLayout {
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;  // per layer, unless num_kv_heads_per_layer is given
  int32_t head_dim = 0;
  DType dtype = DType::kBF16;
  // Optional per-layer KV head counts (variable GQA); size must equal num_layers.
  std::vector<int32_t> num_kv_heads_per_layer;
  // Longest sequence (prompt + generated tokens) the engine accepts.
  int32_t max_sequence_length = 0;

  Status validate() const;
  // layers x 2 (K and V) x kv_heads x head_dim x dtype size.
  uint64_t bytesPerToken() const;
};

struct KvCacheSizing {
  int32_t tokens_per_block = 0;
  uint64_t bytes_per_block = 0;
  int32_t num_primary_blocks = 0;
  int32_t num_secondary_blocks = 0;
  // Block-table width the runner must provide per sequence (ceil(max_sequence_length / T)).
  int32_t max_blocks_per_sequence = 0;
  int32_t max_sequence_length = 0;
  uint64_t primary_pool_bytes = 0;    // num_primary_blocks * bytes_per_block
  uint64_t secondary_pool_bytes = 0;  // num_secondary_blocks * bytes_per_block
};

// Primary blocks = floor(fraction * free_bytes / bytes_per_block), fraction =
// free_gpu_memory_fraction (0.9 when unset); when max_tokens is set too, the
// smaller of that and ceil(max_tokens / T). Secondary blocks =
// floor(host_cache_size / bytes_per_block). `config` is a validated one
// (KvCacheConfig::validate). Fails (InvalidArgument) on a bad layout, and
// (ResourceExhausted) when not even one block fits.
Result<KvCacheSizing> computeKvCacheSizing(const KvCacheConfig& config, const KvCacheLayout& layout,
                                           const KvMemoryReporter& memory);

}  // namespace llmrt
