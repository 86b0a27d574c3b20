// ModelDirectory: everything the engine reads from a HuggingFace model
// directory — config.json (required), generation_config.json (optional), the
// safetensors weights (model.safetensors or a sharded index) and the path of
// tokenizer.json when present — opened, parsed and checked together.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "llmrt/model_config.h"
#include "llmrt/status.h"
#include "loader/quantization.h"
#include "loader/weight_store.h"

namespace llmrt {

struct ModelDirectoryOptions {
  // Check every expected tensor's presence, shape and dtype (checkWeights).
  bool check_weights = true;
  // Refuse a quantized checkpoint llmrt cannot read (resolveQuantization):
  // Unimplemented naming the method and a quantized tensor. Off only to
  // describe one (`llmrt inspect`).
  bool reject_quantized = true;
};

struct ModelDirectory {
  std::string dir;
  ModelConfig config;
  std::optional<GenerationDefaults> generation;  // set when generation_config.json exists
  std::optional<std::string> tokenizer_json;     // path, when tokenizer.json exists
  // config.json's quantization_config, or quantize_config.json / hf_quant_config.json.
  std::optional<QuantizationConfig> quantization;
  WeightStore weights;
  std::vector<std::string> unused_tensors;  // filled when weights were checked

  // Opens `dir`. Errors: NotFound for a missing directory, config.json or
  // weights; the parsers' errors (naming the file and field) for bad contents;
  // Unimplemented for a quantized checkpoint llmrt cannot read (FP8 ones are
// read: config.weight_quantization), checked
  // before checkWeights' errors for missing or misshapen tensors.
  static Result<ModelDirectory> open(const std::string& dir, const ModelDirectoryOptions& options = {});
};

// The floating dtype holding most weight bytes (the "checkpoint dtype"), or
// nullopt when the store has no floating tensors.
std::optional<DType> checkpointDtype(const WeightStore& weights);

// KV-cache bytes per token when K and V are stored in `kv_dtype`:
// num_hidden_layers * 2 * num_key_value_heads * head_dim * dtypeSize(kv_dtype).
uint64_t kvBytesPerToken(const ModelConfig& config, DType kv_dtype);

}  // namespace llmrt
