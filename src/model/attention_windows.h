// The attention window of every layer, resolved once when the engine loads from the
// model's own sliding windows (config.json) and KvCacheConfig::max_attention_window
// (TensorRT-LLM's per-layer list). The model applies the per-layer windows to its
// attention; the KV cache manager releases blocks by the widest of them (one block
// holds every layer, so a block may go only once it is outside every layer's window).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "llmrt/model_config.h"
#include "llmrt/status.h"

namespace llmrt {

struct AttentionWindows {
  // Tokens per layer (a query at position p sees keys (p - W, p]); 0 = full attention.
  std::vector<int32_t> per_layer;
  // The largest per-layer window, 0 when any layer attends fully: what the KV cache manager
  // releases blocks by (KvCacheManagerOptions::attention_window) and the model's steps
  // declare (StepInputs::attention_window).
  int32_t kv_window = 0;

  // "full" / "4096 on every layer" / "[16, full, 16, full]" for the engine's log line.
  std::string toString() const;
};

// Resolves the windows of `config`'s layers:
//   - layer l takes max_attention_window[l % k] (k = the list's size; none when empty), else
//     the model's own window of that layer (ModelConfig::slidingWindowForLayer; none = full);
//   - a window of at least max_seq_len is full attention (0);
//   - kv_window is the largest window, or 0 when any layer attends fully.
// Errors (InvalidArgument): more entries than layers; an entry larger than the model's own
// window of a layer it applies to (the message names the entry, both values and the layer);
// max_seq_len < 1.
Result<AttentionWindows> resolveAttentionWindows(const ModelConfig& config,
                                                 std::span<const int32_t> max_attention_window,
                                                 int64_t max_seq_len);

}  // namespace llmrt
