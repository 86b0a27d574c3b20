// libFuzzer target: the input bytes are config.json text, parsed and validated
// (parseModelConfig); the same bytes also go through the generation_config.json
// and index.json parsers. Any result is fine; a crash or sanitizer report is a
// bug, as is an accepted config that fails validation or has an inconsistent
// per-layer sliding window.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/logging.h"
#include "loader/config_parser.h"
#include "loader/llama_weights.h"
#include "loader/weight_store.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  llmrt::setLogLevel(llmrt::LogLevel::kOff);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto c = llmrt::parseModelConfig(text, "fuzz/config.json");
  if (c.isOk()) {
    if (!llmrt::validateModelConfig(*c, "fuzz/config.json").isOk()) std::abort();
    if (c->head_dim < 2 || c->num_attention_heads % c->num_key_value_heads != 0) std::abort();
    // Cheap enough for small configs; bounds how much work one input can cause.
    if (c->num_hidden_layers <= 64) {
      for (int64_t l = -1; l <= c->num_hidden_layers; ++l) {
        auto w = c->slidingWindowForLayer(l);
        if (w && *w < 1) std::abort();
        if ((l < 0 || l >= c->num_hidden_layers) && w) std::abort();
      }
      const auto expected = llmrt::expectedLlamaTensors(*c);
      if (expected.size() < 3) std::abort();
    }
  } else if (c.status().message().empty()) {
    std::abort();
  }
  auto g = llmrt::parseGenerationConfig(text, "fuzz/generation_config.json");
  if (!g.isOk() && g.status().message().empty()) std::abort();
  auto idx = llmrt::WeightStore::parseIndex(text, "fuzz/model.safetensors.index.json");
  if (idx.isOk() && idx->empty()) std::abort();
  return 0;
}
