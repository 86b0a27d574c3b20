// ModelConfig: every field of a HuggingFace config.json that changes the math
// of a supported architecture. Filled by the loader (src/loader) from
// config.json (transformers 4.x and 5.x spellings) and validated there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llmrt {

enum class RopeScalingType { kNone, kLinear, kDynamic, kLlama3, kYarn };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 0;  // llama3, yarn, dynamic (0 = use max_position_embeddings)
  // yarn
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  std::optional<double> mscale;           // yarn (DeepSeek-style); absent in plain yarn
  std::optional<double> mscale_all_dim;
  std::optional<double> attention_factor; // yarn: overrides the computed 0.1*ln(factor)+1
  bool truncate = true;                   // yarn: HF "truncate" (default true)
};

enum class ModelArch { kLlama, kMistral, kQwen2 };

struct ModelConfig {
  std::string architecture;  // e.g. "LlamaForCausalLM"
  std::string model_type;    // "llama", "mistral", "qwen2"
  ModelArch arch = ModelArch::kLlama;

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // defaults to num_attention_heads
  int64_t head_dim = 0;             // explicit, or hidden_size / num_attention_heads
  bool head_dim_explicit = false;   // head_dim came from config.json (not derived)
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  double partial_rotary_factor = 1.0;
  int64_t max_position_embeddings = 2048;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v/o biases (Llama attention_bias); Qwen2: q/k/v only
  bool o_proj_bias = false;     // true only when attention_bias on Llama-style models
  bool mlp_bias = false;
  std::string hidden_act = "silu";

  // Sliding-window attention. For Mistral: window applies to every layer.
  // For Qwen2: applies only when use_sliding_window, to layers >= max_window_layers
  // (or, when config.json gives layer_types, to the "sliding_attention" layers).
  // As in HF, Qwen2's sliding_window is nullopt when use_sliding_window is false.
  std::optional<int64_t> sliding_window;
  bool use_sliding_window = false;
  int64_t max_window_layers = 0;
  // Qwen2 only: "full_attention" / "sliding_attention" per layer (from config.json
  // or derived as HF does); empty for other architectures.
  std::vector<std::string> layer_types;

  std::vector<int64_t> bos_token_ids;
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> pad_token_id;
  std::string torch_dtype;  // as written: "bfloat16", "float16", "float32" (empty if absent)

  // The sliding window (tokens) applied to `layer`, or nullopt for full attention.
  std::optional<int64_t> slidingWindowForLayer(int64_t layer) const;
  int64_t qSize() const { return num_attention_heads * head_dim; }
  int64_t kvSize() const { return num_key_value_heads * head_dim; }
};

// Sampling defaults read from generation_config.json (absent fields stay unset).
struct GenerationDefaults {
  std::optional<bool> do_sample;
  std::optional<double> temperature;
  std::optional<int64_t> top_k;
  std::optional<double> top_p;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  std::optional<int64_t> max_new_tokens;
  std::optional<int64_t> max_length;
  std::vector<int64_t> bos_token_ids;
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> pad_token_id;
};

// Names used in messages and reports (implemented in src/loader).
std::string_view ropeScalingTypeName(RopeScalingType type);  // "none", "linear", "dynamic", "llama3", "yarn"
std::string_view modelArchName(ModelArch arch);              // "llama", "mistral", "qwen2"

}  // namespace llmrt
