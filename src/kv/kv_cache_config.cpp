// validate() of the public KV cache config structs (include/llmrt/kv_cache_*.h).
#include "llmrt/kv_cache_config.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/logging.h"
#include "llmrt/kv_cache_retention.h"

namespace llmrt {
namespace {

std::string rangeText(const TokenRangeRetentionConfig& r) {
  return r.token_end ? strprintf("[%d, %d)", r.token_start, *r.token_end)
                     : strprintf("[%d, end of prompt)", r.token_start);
}

}  // namespace

Status KvCacheConfig::validate() const {
  constexpr const char* kWhere = "KvCacheConfig";
  if (tokens_per_block < 1 || tokens_per_block > 65536 || (tokens_per_block & (tokens_per_block - 1)) != 0)
    return fieldError(kWhere, "tokens_per_block", std::to_string(tokens_per_block),
                      "a power of two in [1, 65536] (e.g. 32)");
  if (max_tokens && *max_tokens <= 0)
    return fieldError(kWhere, "max_tokens", std::to_string(*max_tokens), "> 0, or unset");
  if (free_gpu_memory_fraction) {
    const double f = *free_gpu_memory_fraction;
    if (!std::isfinite(f) || f <= 0.0 || f >= 1.0)
      return fieldError(
          kWhere, "free_gpu_memory_fraction", strprintf("%g", f),
          "a fraction in (0, 1) such as 0.9 (1.0 leaves no memory for step inputs and outputs)");
  }
  if (max_attention_window && *max_attention_window <= 0)
    return fieldError(kWhere, "max_attention_window", std::to_string(*max_attention_window),
                      "> 0 tokens, or unset");
  if (dtype != "auto" && dtype != "float32" && dtype != "bfloat16" && dtype != "float16")
    return fieldError(kWhere, "dtype", "\"" + dtype + "\"", "\"auto\", \"float32\", \"bfloat16\" or \"float16\"");
  if (secondary_offload_min_priority < KvCacheRetentionConfig::kMinPriority ||
      secondary_offload_min_priority > KvCacheRetentionConfig::kMaxPriority)
    return fieldError(kWhere, "secondary_offload_min_priority",
                      std::to_string(secondary_offload_min_priority), "a retention priority in [1, 100]");
  return Status::ok();
}

Status KvCacheRetentionConfig::validate() const {
  constexpr const char* kWhere = "KvCacheRetentionConfig";
  const auto& ranges = token_range_retention_configs;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const TokenRangeRetentionConfig& r = ranges[i];
    const std::string f = strprintf("token_range_retention_configs[%zu]", i);
    if (r.token_start < 0)
      return fieldError(kWhere, f + ".token_start", std::to_string(r.token_start), ">= 0");
    if (r.token_end && *r.token_end <= r.token_start)
      return fieldError(kWhere, f + ".token_end", std::to_string(*r.token_end),
                        strprintf("> token_start (%d), or unset for the end of the prompt", r.token_start));
    if (r.priority < kMinPriority || r.priority > kMaxPriority)
      return fieldError(kWhere, f + ".priority", std::to_string(r.priority), "in [1, 100]");
    if (r.duration_ms && *r.duration_ms <= 0)
      return fieldError(kWhere, f + ".duration_ms", std::to_string(*r.duration_ms), "> 0 ms, or unset");
  }
  std::vector<size_t> order(ranges.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return ranges[a].token_start < ranges[b].token_start; });
  for (size_t j = 1; j < order.size(); ++j) {
    const auto& a = ranges[order[j - 1]];
    const auto& b = ranges[order[j]];
    if (!a.token_end || *a.token_end > b.token_start)
      return invalidArgument(
          strprintf("%s: token_range_retention_configs[%zu] %s and [%zu] %s overlap; "
                    "expected disjoint token ranges",
                    kWhere, order[j - 1], rangeText(a).c_str(), order[j], rangeText(b).c_str()));
  }
  if (decode_retention_priority < kMinPriority || decode_retention_priority > kMaxPriority)
    return fieldError(kWhere, "decode_retention_priority", std::to_string(decode_retention_priority),
                      "in [1, 100]");
  if (decode_duration_ms && *decode_duration_ms <= 0)
    return fieldError(kWhere, "decode_duration_ms", std::to_string(*decode_duration_ms), "> 0 ms, or unset");
  return Status::ok();
}

}  // namespace llmrt
