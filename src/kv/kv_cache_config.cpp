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

std::string_view toString(KvCacheDtype dtype) {
  switch (dtype) {
    case KvCacheDtype::kAuto: return "auto";
    case KvCacheDtype::kFloat32: return "float32";
    case KvCacheDtype::kBFloat16: return "bfloat16";
    case KvCacheDtype::kFloat16: return "float16";
    case KvCacheDtype::kFp8: return "fp8";
  }
  return "?";
}

std::optional<KvCacheDtype> parseKvCacheDtype(std::string_view name) {
  for (KvCacheDtype d : {KvCacheDtype::kAuto, KvCacheDtype::kFloat32, KvCacheDtype::kBFloat16, KvCacheDtype::kFloat16,
                         KvCacheDtype::kFp8})
    if (name == toString(d)) return d;
  return std::nullopt;
}

Status KvCacheConfig::validate() const {
  constexpr const char* kWhere = "KvCacheConfig";
  if (tokens_per_block < 1 || tokens_per_block > 65536 || (tokens_per_block & (tokens_per_block - 1)) != 0)
    return fieldError(kWhere, "tokens_per_block", std::to_string(tokens_per_block),
                      "a power of two in [1, 65536] (e.g. 32)");
  // 2^40 tokens is beyond any memory; the bound keeps the sizing arithmetic far from overflow.
  if (max_tokens && (*max_tokens <= 0 || *max_tokens > (int64_t{1} << 40)))
    return fieldError(kWhere, "max_tokens", std::to_string(*max_tokens), "an integer in [1, 2^40], or unset");
  if (host_cache_size > (uint64_t{1} << 50))
    return fieldError(kWhere, "host_cache_size", std::to_string(host_cache_size),
                      "a byte count in [0, 2^50] (0 = no host cache)");
  if (free_gpu_memory_fraction) {
    const double f = *free_gpu_memory_fraction;
    if (!std::isfinite(f) || f <= 0.0 || f >= 1.0)
      return fieldError(
          kWhere, "free_gpu_memory_fraction", strprintf("%g", f),
          "a fraction in (0, 1) such as 0.9 (1.0 leaves no memory for step inputs and outputs)");
  }
  for (size_t i = 0; i < max_attention_window.size(); ++i)
    if (max_attention_window[i] <= 0)
      return fieldError(kWhere, strprintf("max_attention_window[%zu]", i), std::to_string(max_attention_window[i]),
                        "> 0 tokens (a window of at least max_seq_len is full attention), or an empty list for "
                        "the model's own windows");
  if (!parseKvCacheDtype(toString(dtype)))
    return fieldError(kWhere, "dtype", std::to_string(static_cast<int>(dtype)), "auto, float32, bfloat16, float16 or fp8");
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
