#include "kv/kv_cache_sizing.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "core/logging.h"

namespace llmrt {
namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
}

Status KvCacheLayout::validate() const {
  constexpr const char* kWhere = "KvCacheLayout";
  if (num_layers <= 0) return fieldError(kWhere, "num_layers", std::to_string(num_layers), "> 0");
  if (head_dim <= 0) return fieldError(kWhere, "head_dim", std::to_string(head_dim), "> 0");
  if (num_kv_heads_per_layer.empty()) {
    if (num_kv_heads <= 0) return fieldError(kWhere, "num_kv_heads", std::to_string(num_kv_heads), "> 0");
  } else {
    if (static_cast<int64_t>(num_kv_heads_per_layer.size()) != num_layers)
      return fieldError(kWhere, "num_kv_heads_per_layer size", std::to_string(num_kv_heads_per_layer.size()),
                        "num_layers (" + std::to_string(num_layers) + ") entries, or empty");
    for (size_t i = 0; i < num_kv_heads_per_layer.size(); ++i)
      if (num_kv_heads_per_layer[i] < 0)
        return fieldError(kWhere, strprintf("num_kv_heads_per_layer[%zu]", i),
                          std::to_string(num_kv_heads_per_layer[i]), ">= 0");
  }
  if (max_sequence_length <= 0)
    return fieldError(kWhere, "max_sequence_length", std::to_string(max_sequence_length), "> 0");
  if (bytesPerToken() == 0)
    return fieldError(kWhere, "num_kv_heads_per_layer", "all zero", "at least one KV head");
  return Status::ok();
}

uint64_t KvCacheLayout::bytesPerToken() const {
  uint64_t heads = 0;
  if (num_kv_heads_per_layer.empty()) {
    heads = static_cast<uint64_t>(std::max(0, num_layers)) * static_cast<uint64_t>(std::max(0, num_kv_heads));
  } else {
    for (int32_t h : num_kv_heads_per_layer) heads += static_cast<uint64_t>(std::max(0, h));
  }
  return heads * 2 * static_cast<uint64_t>(std::max(0, head_dim)) * dtypeSize(dtype);
}

Result<KvCacheSizing> computeKvCacheSizing(const KvCacheConfig& config, const KvCacheLayout& layout,
                                           const KvMemoryReporter& memory) {
  assert(config.validate().isOk() && "computeKvCacheSizing takes a validated KvCacheConfig");
  LLMRT_RETURN_IF_ERROR(layout.validate());
  const int32_t tpb = config.tokens_per_block;
  KvCacheSizing s;
  s.tokens_per_block = tpb;
  s.bytes_per_block = layout.bytesPerToken() * static_cast<uint64_t>(tpb);
  s.max_sequence_length = layout.max_sequence_length;
  s.max_blocks_per_sequence = (layout.max_sequence_length + tpb - 1) / tpb;

  const KvMemoryInfo mem = memory.primaryMemoryInfo();
  LLMRT_LOG_INFO(
      "Memory usage when calculating max tokens in paged kv cache: total: %0.2f GiB, available: %0.2f GiB",
      static_cast<double>(mem.total_bytes) / kGiB, static_cast<double>(mem.free_bytes) / kGiB);
  const double fraction = config.effectiveFreeGpuMemoryFraction();
  const double usable = std::floor(fraction * static_cast<double>(mem.free_bytes));
  int64_t blocks = static_cast<int64_t>(usable / static_cast<double>(s.bytes_per_block));
  if (config.max_tokens) {
    const int64_t by_tokens = (*config.max_tokens + tpb - 1) / tpb;
    if (config.free_gpu_memory_fraction) {
      LLMRT_LOG_WARNING(
          "Both free_gpu_memory_fraction and max_tokens are set (to %g and %lld, respectively). "
          "The smaller value will be used.",
          fraction, static_cast<long long>(*config.max_tokens));
    } else if (by_tokens < blocks) {
      LLMRT_LOG_INFO("Maximum kv-cache token overridden by configuration as '%lld'.",
                     static_cast<long long>(*config.max_tokens));
    }
    blocks = std::min(blocks, by_tokens);
  }
  if (blocks <= 0)
    return resourceExhausted(
        strprintf("KV cache sizing: %s free x free_gpu_memory_fraction %g leaves no room for one block of %s "
                  "(%d layers, tokens_per_block %d); free memory or lower tokens_per_block",
                  formatBytes(mem.free_bytes).c_str(), fraction, formatBytes(s.bytes_per_block).c_str(),
                  layout.num_layers, tpb));
  blocks = std::min<int64_t>(blocks, INT32_MAX / 4);
  s.num_primary_blocks = static_cast<int32_t>(blocks);
  LLMRT_LOG_INFO("Number of blocks in KV cache primary pool: %d", s.num_primary_blocks);

  s.num_secondary_blocks =
      static_cast<int32_t>(std::min<uint64_t>(config.host_cache_size / s.bytes_per_block, INT32_MAX / 4));
  LLMRT_LOG_INFO(
      "Number of blocks in KV cache secondary pool: %d, onboard blocks to primary memory before reuse: %s",
      s.num_secondary_blocks, config.onboard_blocks ? "true" : "false");
  if (s.num_primary_blocks < s.max_blocks_per_sequence)
    LLMRT_LOG_WARNING(
        "The KV cache primary pool (%d blocks) cannot hold one sequence of max_sequence_length %d "
        "(%d blocks); such sequences will not be admitted",
        s.num_primary_blocks, layout.max_sequence_length, s.max_blocks_per_sequence);
  LLMRT_LOG_INFO("Max KV cache pages per sequence: %d", s.max_blocks_per_sequence);
  LLMRT_LOG_INFO("Number of tokens per block: %d.", tpb);
  s.primary_pool_bytes = static_cast<uint64_t>(s.num_primary_blocks) * s.bytes_per_block;
  s.secondary_pool_bytes = static_cast<uint64_t>(s.num_secondary_blocks) * s.bytes_per_block;
  LLMRT_LOG_INFO("[MemUsageChange] Allocated %0.2f GiB for max tokens in paged KV cache (%lld).",
                 static_cast<double>(s.primary_pool_bytes) / kGiB,
                 static_cast<long long>(s.num_primary_blocks) * tpb);
  return s;
}

}  // namespace llmrt
