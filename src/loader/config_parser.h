// config.json and generation_config.json → ModelConfig / GenerationDefaults for
// the Llama family (llama, mistral, qwen2), with HF transformers semantics.
//
// Accepted spellings: transformers 4.x (`rope_theta`, `rope_scaling` with `type`
// or `rope_type`, `torch_dtype`) and 5.x (`rope_parameters` holding rope_type,
// rope_theta and the scaling fields; `dtype`). When both `rope_scaling` and
// `rope_parameters` are given, a non-empty `rope_scaling` wins (as in 5.x).
//
// Per-architecture semantics (as transformers' modeling code):
//   llama:   attention_bias → q/k/v/o biases; mlp_bias; no sliding window.
//   mistral: no biases (attention_bias/mlp_bias keys are ignored, as HF does);
//            sliding_window (default 4096, null = none) applies to every layer.
//   qwen2:   q/k/v biases, no o_proj or MLP bias; the window applies only when
//            use_sliding_window, to layers whose layer_types entry is
//            "sliding_attention" (default: layers >= max_window_layers).
// Absent fields take the HF defaults of the architecture's config class; the
// core sizes (vocab_size, hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads) are required.
#pragma once

#include <string>
#include <string_view>

#include "core/json.h"
#include "llmrt/model_config.h"
#include "llmrt/status.h"

namespace llmrt {

// How config.json, generation_config.json and model.safetensors.index.json are
// read: nesting deeper than 64 levels is an error (real files nest 5 at most);
// a key given twice keeps its last value, as HF transformers' json.load does
// (so a model runs here with the values it runs with there).
inline constexpr JsonParseLimits kHfJsonLimits{.max_depth = 64, .reject_duplicate_keys = false};

// The longest sequence llmrt runs, in tokens (positions and KV layouts are
// 32-bit): 2^30. config.json's max_position_embeddings (and windows, RoPE
// lengths) above it are rejected at parse time, so `llmrt inspect` refuses
// what `llmrt generate` would; the engine checks a user's max_seq_len with the
// same function, so both give the same message.
inline constexpr int64_t kMaxSequenceLength = int64_t{1} << 30;
// OK when 1 <= value <= kMaxSequenceLength; else fieldError(where, field,
// value, "an integer between 1 and 1073741824 (2^30, the longest sequence llmrt runs)").
Status checkSequenceLength(std::string_view where, std::string_view field, int64_t value);

// Parses config.json text and validates the result (validateModelConfig).
// `where` names the file in messages. Errors: ParseError for invalid JSON,
// InvalidArgument (fieldError wording) for wrong types and absurd values,
// Unimplemented for recognised but unsupported features (longrope, per-layer
// RoPE parameters that differ).
Result<ModelConfig> parseModelConfig(std::string_view json_text, std::string_view where = "config.json");
// Reads and parses `path` (errors name the path).
Result<ModelConfig> loadModelConfig(const std::string& path);
// The same from config.json already parsed (with kHfJsonLimits); `root` may be any JSON value.
Result<ModelConfig> parseModelConfigJson(const Json& root, std::string_view where);

// Every range and consistency check on a ModelConfig, in one place: positive
// sizes below sane limits, heads divisible by kv heads, hidden_size divisible by
// heads when head_dim is derived, even head_dim, rope parameters, windows,
// layer_types, token ids. Errors use fieldError(where, field, value, expected).
Status validateModelConfig(const ModelConfig& config, std::string_view where = "config.json");

namespace detail {
// validateModelConfig naming the RoPE fields as config.json spelled them
// (`rope_field` is "rope_scaling", "rope_parameters", ...).
Status validateModelConfig(const ModelConfig& config, std::string_view where, std::string_view rope_field);
}  // namespace detail

// Parses generation_config.json text; absent or null fields stay unset.
Result<GenerationDefaults> parseGenerationConfig(std::string_view json_text,
                                                 std::string_view where = "generation_config.json");
Result<GenerationDefaults> loadGenerationConfig(const std::string& path);

}  // namespace llmrt
