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

enum class ModelArch {
  kLlama, kMistral, kQwen2, kGpt2, kGptBigCode, kGptJ, kGptNeoX, kFalcon, kPhi3, kGemma2, kGlm, kMixtral, kQwen2Moe,
  kInternLM2, kBaichuan, kQwen, kChatGlm
};

// ---- The decoder description --------------------------------------------------------------
// Every supported architecture is one decoder: embeddings, N blocks of (norm, attention, norm,
// MLP) wired by a residual rule, a final norm and an LM head. What differs between families is
// the values below; the loader fills them from config.json through each architecture's table
// (src/loader/arch_table.cpp), the model composes backend ops from them.

enum class NormKind : uint8_t { kRmsNorm, kLayerNorm };
// How a token's position enters: rotary embedding of q and k, a learned table added to the
// embeddings (GPT-2), or ALiBi biases on the attention scores.
enum class PositionEncoding : uint8_t { kRotary, kLearned, kAlibi };
// Which features rotary embedding pairs: i with i + rotary_dim/2 (GPT-NeoX "rotate_half", Llama)
// or 2i with 2i+1 (GPT-J "rotate_every_two", GLM). The loader permutes the q/k rows of an
// interleaved checkpoint into the half layout, so kernels know only that one.
enum class RotaryLayout : uint8_t { kHalf, kInterleaved };
enum class ResidualWiring : uint8_t {
  kSequential,        // x += attn(n1(x)); x += mlp(n2(x))                    (Llama, GPT-2)
  kParallel,          // x += attn(n1(x)) + mlp(n1(x))                        (GPT-J, Falcon-7B)
  kParallelTwoNorms,  // x += attn(n1(x)) + mlp(n2(x))                        (GPT-NeoX, Falcon-40B)
  kSandwich,          // x += n2(attn(n1(x))); x += n4(mlp(n3(x)))            (Gemma-2)
};
// The element-wise function of an MLP (transformers' ACT2FN names in comments).
enum class Activation : uint8_t {
  kSilu,      // "silu", "swish": x * sigmoid(x)
  kGelu,      // "gelu": 0.5 x (1 + erf(x / sqrt 2))
  kGeluTanh,  // "gelu_new", "gelu_pytorch_tanh", "gelu_fast": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  kRelu,      // "relu"
};

struct DecoderDescription {
  // Embeddings: token rows times `embedding_multiplier` (Gemma: sqrt(hidden_size)), plus the
  // learned position table with PositionEncoding::kLearned.
  double embedding_multiplier = 1.0;
  PositionEncoding positions = PositionEncoding::kRotary;
  RotaryLayout rotary_layout = RotaryLayout::kHalf;
  // Norms: kind, whether LayerNorm has a bias, and Gemma's weight stored as w for (1 + w).
  NormKind norm = NormKind::kRmsNorm;
  bool norm_bias = false;
  bool norm_weight_offset_one = false;
  ResidualWiring residual = ResidualWiring::kSequential;
  // Attention: scores scaled by attention_scale (1/sqrt(head_dim) unless the family says
  // otherwise: Gemma-2's query_pre_attn_scalar), then soft-capped when attn_logit_softcap > 0.
  double attention_scale = 0.0;
  double attn_logit_softcap = 0.0;
  // MLP: gated (act(gate) * up, then down) or plain (act(up), then down).
  bool mlp_gated = true;
  Activation activation = Activation::kSilu;
  // ALiBi: head h's slope (BLOOM's geometric series over the heads) times this (Falcon adds
  // the bias before scaling the scores, so its slopes are scaled by attention_scale).
  double alibi_slope_multiplier = 1.0;
  // LM head: a bias (GPT-J), rows L2-normalized at load (Baichuan2's NormHead), and a final
  // soft-cap of the logits (Gemma-2).
  bool lm_head_bias = false;
  bool lm_head_normalized = false;
  double final_logit_softcap = 0.0;
  // Mixture of experts (num_experts > 0), in the layers ModelConfig::moeLayer names: the MLP is
  // the weighted sum of `experts_per_token` of `num_experts` gated MLPs of moe_intermediate_size,
  // picked by a softmax router (probabilities renormalized over the picked ones when
  // norm_topk_prob), plus Qwen2-MoE's shared expert (shared_expert_intermediate_size > 0) scaled
  // by sigmoid of its own gate.
  int64_t num_experts = 0;
  int64_t experts_per_token = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = true;
  int64_t shared_expert_intermediate_size = 0;
  int64_t decoder_sparse_step = 1;       // every n-th layer is sparse (Qwen2-MoE)
  std::vector<int64_t> mlp_only_layers;  // dense layers among them (Qwen2-MoE)
};

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
  double norm_eps = 1e-6;  // rms_norm_eps, layer_norm_eps(ilon), as the family spells it
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  double partial_rotary_factor = 1.0;
  int64_t max_position_embeddings = 2048;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v/o biases (Llama attention_bias); Qwen2: q/k/v only
  bool o_proj_bias = false;     // true only when attention_bias on Llama-style models
  bool mlp_bias = false;
  std::string hidden_act = "silu";  // as config.json names it (description.activation is the function)
  DecoderDescription decoder;

  // Sliding-window attention. For Mistral: window applies to every layer.
  // For Qwen2: applies only when use_sliding_window, to layers >= max_window_layers
  // (or, when config.json gives layer_types, to the "sliding_attention" layers).
  // As in HF, Qwen2's sliding_window is nullopt when use_sliding_window is false.
  std::optional<int64_t> sliding_window;
  bool use_sliding_window = false;
  int64_t max_window_layers = 0;
  // "full_attention" / "sliding_attention" per layer (from config.json or derived as HF does:
  // Qwen2, Gemma-2); empty where every layer has `sliding_window` (none for Llama).
  std::vector<std::string> layer_types;

  std::vector<int64_t> bos_token_ids;
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> pad_token_id;
  std::string torch_dtype;  // as written: "bfloat16", "float16", "float32" (empty if absent)

  // A quantized checkpoint llmrt reads (src/loader/quantization.h), set by the loader from
  // quantization_config / hf_quant_config.json, its weights dequantized at load (activations and
  // the KV cache stay in the compute dtype): "fp8" = float8 E4M3 weights with float scales;
  // "int8" = compressed-tensors int8 weights with per-tensor / per-channel scales (W8A8 INT8,
  // e.g. SmoothQuant's output); "awq" = AutoAWQ GEMM int4 (`qweight` / `qzeros` / `scales`, awq_group_size). Empty: none.
  std::string weight_quantization;
  int64_t awq_group_size = 0;
  // fp8 block scales (`weight_scale_inv`, one per block_rows x block_cols block, transformers'
  // FineGrainedFP8Config / DeepSeek-V3 / Qwen3-FP8); 0: one scale per tensor or per output row
  // (`weight_scale`: vLLM / llm-compressor / ModelOpt FP8).
  int64_t fp8_block_rows = 0, fp8_block_cols = 0;

  // The sliding window (tokens) applied to `layer`, or nullopt for full attention.
  std::optional<int64_t> slidingWindowForLayer(int64_t layer) const;
  // Whether `layer`'s MLP is a mixture of experts.
  bool moeLayer(int64_t layer) const;
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
