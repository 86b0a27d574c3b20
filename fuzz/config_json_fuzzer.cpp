// libFuzzer target: the input bytes are config.json text, parsed and validated
// (parseModelConfig) and read for a quantization_config (and the FP8 / AWQ scheme resolved from it); inputs up to 64 KB
// also go through the generation_config.json and index.json parsers. Any result is
// fine; a crash or sanitizer report is a bug, as is an accepted config that
// fails validation, has an inconsistent per-layer sliding window or positions
// beyond kMaxSequenceLength, and an error message that is empty, spans lines
// or runs past 4 KB.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/logging.h"
#include "fuzz_util.h"
#include "loader/config_parser.h"
#include "loader/json_util.h"
#include "loader/decoder_weights.h"
#include "loader/quantization.h"
#include "loader/weight_store.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  llmrt::fuzz::quiet();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // Parsed once, as ModelDirectory does (parseModelConfig is this parse plus parseModelConfigJson).
  auto root = llmrt::detail::parseInputJson(text, "fuzz/config.json", llmrt::kHfJsonLimits);
  if (!root.isOk()) {
    llmrt::fuzz::checkMessage(root.status());
  } else {
    auto c = llmrt::parseModelConfigJson(*root, "fuzz/config.json");
    if (c.isOk()) {
      if (!llmrt::validateModelConfig(*c, "fuzz/config.json").isOk()) std::abort();
      if (c->head_dim < 2 || c->num_attention_heads % c->num_key_value_heads != 0) std::abort();
      if (c->max_position_embeddings > llmrt::kMaxSequenceLength) std::abort();
      // Cheap enough for small configs; bounds how much work one input can cause.
      if (c->num_hidden_layers <= 64) {
        for (int64_t l = -1; l <= c->num_hidden_layers; ++l) {
          auto w = c->slidingWindowForLayer(l);
          if (w && *w < 1) std::abort();
          if ((l < 0 || l >= c->num_hidden_layers) && w) std::abort();
        }
        const auto expected = llmrt::expectedTensors(*c);
        if (expected.size() < 3) std::abort();
      }
    } else {
      llmrt::fuzz::checkMessage(c.status());
    }
    auto q = llmrt::quantizationFromConfig(*root, "fuzz/config.json");
    if (q && (q->describe().empty() || q->describe().size() > 4096)) std::abort();
    if (q) {  // what llmrt would run of it (no tensors: a scheme or the refusal)
      llmrt::ModelConfig mc;
      const llmrt::Status s = llmrt::resolveQuantization(q, llmrt::WeightStore(), &mc);
      if (!s.isOk()) {
        llmrt::fuzz::checkMessage(s);
      } else if (mc.weight_quantization == "awq") {
        if (mc.awq_group_size < 1 || mc.awq_group_size > 65536) std::abort();
      } else if (mc.weight_quantization != "fp8" || mc.fp8_block_rows < 0 || mc.fp8_block_rows > 65536 ||
                 (mc.fp8_block_rows == 0) != (mc.fp8_block_cols == 0)) {
        std::abort();
      }
    }
  }
  // The other JSON files parse the text again: only small inputs, so the large-input pass
  // (megabyte inputs) spends its time on config.json; generation_config_fuzzer covers those.
  if (size > 65536) return 0;
  auto g = llmrt::parseGenerationConfig(text, "fuzz/generation_config.json");
  if (!g.isOk()) llmrt::fuzz::checkMessage(g.status());
  auto idx = llmrt::WeightStore::parseIndex(text, "fuzz/model.safetensors.index.json");
  if (idx.isOk() && idx->empty()) std::abort();
  if (!idx.isOk()) llmrt::fuzz::checkMessage(idx.status());
  return 0;
}
