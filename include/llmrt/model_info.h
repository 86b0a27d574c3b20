// Model inspection for `llmrt inspect MODEL_DIR`: what a HuggingFace model
// directory holds (architecture, sizes, RoPE, windows, dtype, tokenizer) and
// what it costs (parameter count, weights memory, KV-cache bytes per token).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "llmrt/model_config.h"
#include "llmrt/status.h"

namespace llmrt {

struct ModelInfo {
  std::string model_dir;
  ModelConfig config;  // architecture, model_type and every math-relevant field

  // Weights, as found in the safetensors files.
  int64_t parameter_count = 0;  // elements over all tensors in the checkpoint
  uint64_t weights_bytes = 0;   // bytes of tensor data (what the weights occupy in memory)
  int64_t tensor_count = 0;
  std::vector<std::string> weight_files;  // the safetensors files (shards) read
  std::string weights_source;             // model.safetensors or the index file
  // "F32", "BF16", ...: the floating dtype holding most weight bytes.
  std::string dtype;
  // Bytes per dtype name, largest first, e.g. {{"BF16", 16e9}, {"F32", 2e5}}.
  std::vector<std::pair<std::string, uint64_t>> bytes_by_dtype;

  // KV cache per token: num_hidden_layers * 2 * num_key_value_heads * head_dim *
  // size of kv_dtype. kv_dtype is the checkpoint dtype (`dtype` above), not an
  // assumed bf16: an F32 checkpoint is counted at 4 bytes per element.
  std::string kv_dtype;
  uint64_t kv_dtype_bytes = 0;
  uint64_t kv_bytes_per_token = 0;

  bool has_tokenizer_json = false;
  std::string tokenizer_json_path;
  std::optional<GenerationDefaults> generation;  // when generation_config.json exists

  // The tensor check against the config (presence, shape, dtype). inspectModel
  // still succeeds when it fails, so the report can show what is wrong.
  bool weights_valid = false;
  std::string weights_error;
  std::vector<std::string> unused_tensors;  // in the files but not used by the model
};

// Reads `dir` (config.json, generation_config.json, safetensors headers,
// tokenizer.json presence). Fails (with a message naming the file and field) when
// the config is missing or invalid or the safetensors files cannot be opened or
// are malformed; a tensor mismatch is reported in weights_valid / weights_error.
Result<ModelInfo> inspectModel(const std::string& dir);

// Human-readable report, one "label: value" line per item, ending in '\n'.
std::string formatModelInfo(const ModelInfo& info);
// The same as one JSON object (pretty-printed, ending in '\n').
std::string modelInfoToJson(const ModelInfo& info);

// "260.0K", "1.24M", "8.03B": a parameter count with a K/M/B suffix.
std::string formatParameterCount(int64_t n);

}  // namespace llmrt
