#include "model/attention_windows.h"

#include <algorithm>

#include "core/logging.h"

namespace llmrt {

std::string AttentionWindows::toString() const {
  auto one = [](int32_t w) { return w > 0 ? std::to_string(w) : std::string("full"); };
  if (per_layer.empty()) return "full";
  if (std::all_of(per_layer.begin(), per_layer.end(), [&](int32_t w) { return w == per_layer[0]; }))
    return per_layer[0] > 0 ? one(per_layer[0]) + " on every layer" : "full";
  std::string s = "[";
  for (size_t i = 0; i < per_layer.size(); ++i) s += (i ? ", " : "") + one(per_layer[i]);
  return s + "]";
}

Result<AttentionWindows> resolveAttentionWindows(const ModelConfig& config,
                                                 std::span<const int32_t> max_attention_window,
                                                 int64_t max_seq_len) {
  constexpr const char* kWhere = "KvCacheConfig";
  if (max_seq_len < 1)
    return fieldError("resolveAttentionWindows", "max_seq_len", std::to_string(max_seq_len), ">= 1");
  const int64_t layers = config.num_hidden_layers;
  const size_t k = max_attention_window.size();
  if (static_cast<int64_t>(k) > layers)
    return fieldError(
        kWhere, "max_attention_window", strprintf("a list of %zu windows", k),
        strprintf("at most one window per layer (the model has %lld layers; a shorter list repeats "
                  "over the layers)",
                  static_cast<long long>(layers)));
  AttentionWindows w;
  w.per_layer.resize(static_cast<size_t>(std::max<int64_t>(0, layers)));
  bool any_full = false;
  for (int64_t l = 0; l < layers; ++l) {
    const std::optional<int64_t> model = config.slidingWindowForLayer(l);
    int64_t win = model.value_or(0);
    if (k > 0) {
      const size_t i = static_cast<size_t>(l) % k;
      const int64_t asked = max_attention_window[i];
      if (asked <= 0)
        return fieldError(kWhere, strprintf("max_attention_window[%zu]", i), std::to_string(asked),
                          "> 0 tokens");
      if (model && asked > *model)
        return fieldError(kWhere, strprintf("max_attention_window[%zu]", i), std::to_string(asked),
                          strprintf("at most %lld, the model's own sliding window of layer %lld (config.json "
                                    "sliding_window): a layer cannot attend beyond its window",
                                    static_cast<long long>(*model), static_cast<long long>(l)));
      win = asked;
    }
    if (win >= max_seq_len) win = 0;  // the window covers every sequence: full attention
    w.per_layer[static_cast<size_t>(l)] = static_cast<int32_t>(win);
    any_full = any_full || win == 0;
  }
  if (!any_full && !w.per_layer.empty())
    w.kv_window = *std::max_element(w.per_layer.begin(), w.per_layer.end());
  return w;
}

}  // namespace llmrt
