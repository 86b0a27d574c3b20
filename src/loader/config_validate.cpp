// validateModelConfig: every range and consistency check on a ModelConfig, and
// the ModelConfig helpers declared in include/llmrt/model_config.h.
#include <cmath>
#include <string>

#include "core/logging.h"
#include "loader/arch_table.h"
#include "loader/config_parser.h"

namespace llmrt {

namespace {

// Upper limits well beyond any real model; they keep size arithmetic far from overflow.
constexpr int64_t kMaxVocab = (int64_t{1} << 31) - 1;
constexpr int64_t kMaxHidden = int64_t{1} << 20;
constexpr int64_t kMaxIntermediate = int64_t{1} << 22;
constexpr int64_t kMaxLayers = int64_t{1} << 14;
constexpr int64_t kMaxHeads = int64_t{1} << 14;
constexpr int64_t kMaxHeadDim = int64_t{1} << 14;
constexpr int64_t kMaxTokenId = (int64_t{1} << 31) - 1;

std::string num(double v) { return strprintf("%.17g", v); }

Status checkInt(std::string_view where, std::string_view field, int64_t v, int64_t lo, int64_t hi) {
  if (v >= lo && v <= hi) return Status::ok();
  return fieldError(where, field, std::to_string(v),
                    "an integer between " + std::to_string(lo) + " and " + std::to_string(hi));
}

Status checkPositive(std::string_view where, std::string_view field, double v) {
  if (std::isfinite(v) && v > 0) return Status::ok();
  return fieldError(where, field, num(v), "a finite number > 0");
}

Status validateRope(const ModelConfig& c, std::string_view where, std::string_view rope_field) {
  auto f = [&](std::string_view key) { return std::string(rope_field) + "." + std::string(key); };
  LLMRT_RETURN_IF_ERROR(checkPositive(where, "rope_theta", c.rope_theta));
  if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1)) {
    return fieldError(where, "partial_rotary_factor", num(c.partial_rotary_factor), "a number in (0, 1]");
  }
  const auto rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * c.partial_rotary_factor);
  if (rotary_dim < 2 || rotary_dim % 2 != 0) {
    return fieldError(where, "partial_rotary_factor", num(c.partial_rotary_factor),
                      "a factor giving an even rotary dimension >= 2 (head_dim " +
                          std::to_string(c.head_dim) + " x factor = " + std::to_string(rotary_dim) + ")");
  }
  const RopeScaling& r = c.rope_scaling;
  if (r.type == RopeScalingType::kNone) return Status::ok();
  LLMRT_RETURN_IF_ERROR(checkPositive(where, f("factor"), r.factor));
  if (r.original_max_position_embeddings != 0 || r.type == RopeScalingType::kLlama3 ||
      r.type == RopeScalingType::kYarn) {
    LLMRT_RETURN_IF_ERROR(checkSequenceLength(where, f("original_max_position_embeddings"),
                                              r.original_max_position_embeddings));
  }
  if (r.type == RopeScalingType::kLlama3) {
    LLMRT_RETURN_IF_ERROR(checkPositive(where, f("low_freq_factor"), r.low_freq_factor));
    LLMRT_RETURN_IF_ERROR(checkPositive(where, f("high_freq_factor"), r.high_freq_factor));
    if (r.high_freq_factor <= r.low_freq_factor) {
      return fieldError(where, f("high_freq_factor"), num(r.high_freq_factor),
                        "a number > low_freq_factor (" + num(r.low_freq_factor) + ")");
    }
  }
  if (r.type == RopeScalingType::kYarn) {
    LLMRT_RETURN_IF_ERROR(checkPositive(where, f("beta_fast"), r.beta_fast));
    LLMRT_RETURN_IF_ERROR(checkPositive(where, f("beta_slow"), r.beta_slow));
    if (r.attention_factor && !(*r.attention_factor >= 0)) {
      return fieldError(where, f("attention_factor"), num(*r.attention_factor), "a number >= 0");
    }
    if (r.mscale && !(*r.mscale >= 0)) {
      return fieldError(where, f("mscale"), num(*r.mscale), "a number >= 0");
    }
    if (r.mscale_all_dim && !(*r.mscale_all_dim >= 0)) {
      return fieldError(where, f("mscale_all_dim"), num(*r.mscale_all_dim), "a number >= 0");
    }
  }
  return Status::ok();
}

Status checkTokenIds(std::string_view where, std::string_view field, const std::vector<int64_t>& ids) {
  for (int64_t id : ids) LLMRT_RETURN_IF_ERROR(checkInt(where, field, id, 0, kMaxTokenId));
  return Status::ok();
}

}  // namespace

Status checkSequenceLength(std::string_view where, std::string_view field, int64_t value) {
  if (value >= 1 && value <= kMaxSequenceLength) return Status::ok();
  return fieldError(where, field, std::to_string(value),
                    "an integer between 1 and " + std::to_string(kMaxSequenceLength) +
                        " (2^30, the longest sequence llmrt runs)");
}

Status validateModelConfig(const ModelConfig& c, std::string_view where) {
  return detail::validateModelConfig(c, where, "rope_scaling");
}

Status detail::validateModelConfig(const ModelConfig& c, std::string_view where,
                                   std::string_view rope_field) {
  LLMRT_RETURN_IF_ERROR(checkInt(where, "vocab_size", c.vocab_size, 1, kMaxVocab));
  LLMRT_RETURN_IF_ERROR(checkInt(where, "hidden_size", c.hidden_size, 1, kMaxHidden));
  LLMRT_RETURN_IF_ERROR(checkInt(where, "intermediate_size", c.intermediate_size, 1, kMaxIntermediate));
  LLMRT_RETURN_IF_ERROR(checkInt(where, "num_hidden_layers", c.num_hidden_layers, 1, kMaxLayers));
  LLMRT_RETURN_IF_ERROR(checkInt(where, "num_attention_heads", c.num_attention_heads, 1, kMaxHeads));
  if (!c.head_dim_explicit && c.hidden_size % c.num_attention_heads != 0) {
    return fieldError(
        where, "num_attention_heads", std::to_string(c.num_attention_heads),
        "a divisor of hidden_size (" + std::to_string(c.hidden_size) + ") when head_dim is not given");
  }
  LLMRT_RETURN_IF_ERROR(
      checkInt(where, "num_key_value_heads", c.num_key_value_heads, 1, c.num_attention_heads));
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return fieldError(where, "num_key_value_heads", std::to_string(c.num_key_value_heads),
                      "a divisor of num_attention_heads (" + std::to_string(c.num_attention_heads) + ")");
  }
  const std::string derived =
      c.head_dim_explicit ? "" : " (head_dim derived as hidden_size / num_attention_heads)";
  if (c.head_dim < 2 || c.head_dim > kMaxHeadDim) {
    return fieldError(where, "head_dim", std::to_string(c.head_dim),
                      "an integer between 2 and " + std::to_string(kMaxHeadDim) + derived);
  }
  if (c.head_dim % 2 != 0) {
    return fieldError(where, "head_dim", std::to_string(c.head_dim),
                      "an even integer (RoPE rotates pairs)" + derived);
  }
  if (!std::isfinite(c.norm_eps) || c.norm_eps <= 0 || c.norm_eps >= 1) {
    return fieldError(where, archEntry(c.arch).keys.norm_eps, num(c.norm_eps), "a number in (0, 1)");
  }
  const DecoderDescription& d = c.decoder;
  if (d.num_experts > 0) {
    LLMRT_RETURN_IF_ERROR(checkInt(where, "num_experts", d.num_experts, 1, 1 << 16));
    LLMRT_RETURN_IF_ERROR(checkInt(where, "num_experts_per_tok", d.experts_per_token, 1, d.num_experts));
    LLMRT_RETURN_IF_ERROR(checkInt(where, "moe_intermediate_size", d.moe_intermediate_size, 1, kMaxIntermediate));
    LLMRT_RETURN_IF_ERROR(checkInt(where, "shared_expert_intermediate_size", d.shared_expert_intermediate_size, 0,
                                   kMaxIntermediate));
    LLMRT_RETURN_IF_ERROR(checkInt(where, "decoder_sparse_step", d.decoder_sparse_step, 1, kMaxLayers));
    for (int64_t l : d.mlp_only_layers)
      LLMRT_RETURN_IF_ERROR(checkInt(where, "mlp_only_layers", l, 0, c.num_hidden_layers - 1));
  }
  if (!std::isfinite(d.attention_scale) || d.attention_scale <= 0)
    return fieldError(where, "attention scale", num(d.attention_scale), "a finite number > 0");
  if (!std::isfinite(d.attn_logit_softcap) || d.attn_logit_softcap < 0)
    return fieldError(where, "attn_logit_softcapping", num(d.attn_logit_softcap), "a number >= 0 or null");
  if (!std::isfinite(d.final_logit_softcap) || d.final_logit_softcap < 0)
    return fieldError(where, "final_logit_softcapping", num(d.final_logit_softcap), "a number >= 0 or null");
  LLMRT_RETURN_IF_ERROR(checkSequenceLength(where, "max_position_embeddings", c.max_position_embeddings));
  LLMRT_RETURN_IF_ERROR(validateRope(c, where, rope_field));

  if (c.sliding_window) {
    LLMRT_RETURN_IF_ERROR(checkSequenceLength(where, "sliding_window", *c.sliding_window));
  }
  LLMRT_RETURN_IF_ERROR(checkInt(where, "max_window_layers", c.max_window_layers, 0, kMaxLayers));
  if (!c.layer_types.empty()) {
    if (static_cast<int64_t>(c.layer_types.size()) != c.num_hidden_layers) {
      return fieldError(
          where, "layer_types", std::to_string(c.layer_types.size()) + " entries",
          "one entry per layer (num_hidden_layers = " + std::to_string(c.num_hidden_layers) + ")");
    }
    for (const std::string& t : c.layer_types) {
      if (t != "full_attention" && t != "sliding_attention") {
        return fieldError(where, "layer_types", "an entry \"" + t + "\"",
                          "\"full_attention\" or \"sliding_attention\"");
      }
    }
  }
  LLMRT_RETURN_IF_ERROR(checkTokenIds(where, "bos_token_id", c.bos_token_ids));
  LLMRT_RETURN_IF_ERROR(checkTokenIds(where, "eos_token_id", c.eos_token_ids));
  if (c.pad_token_id) LLMRT_RETURN_IF_ERROR(checkInt(where, "pad_token_id", *c.pad_token_id, 0, kMaxTokenId));
  return Status::ok();
}

std::optional<int64_t> ModelConfig::slidingWindowForLayer(int64_t layer) const {
  if (layer < 0 || layer >= num_hidden_layers) return std::nullopt;
  // Per-layer types where the family has them (Qwen2, Gemma-2), else the one window of every
  // layer (Mistral, Phi-3; none for Llama and most others). Qwen2's window is nullopt unless
  // use_sliding_window, as in HF.
  if (!layer_types.empty() && layer_types[static_cast<size_t>(layer)] != "sliding_attention") return std::nullopt;
  return sliding_window;
}

bool ModelConfig::moeLayer(int64_t layer) const {
  const DecoderDescription& d = decoder;
  if (d.num_experts <= 0 || layer < 0 || layer >= num_hidden_layers) return false;
  for (int64_t l : d.mlp_only_layers)
    if (l == layer) return false;
  return d.decoder_sparse_step > 0 && (layer + 1) % d.decoder_sparse_step == 0;
}

std::string_view ropeScalingTypeName(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::kNone:
      return "none";
    case RopeScalingType::kLinear:
      return "linear";
    case RopeScalingType::kDynamic:
      return "dynamic";
    case RopeScalingType::kLlama3:
      return "llama3";
    case RopeScalingType::kYarn:
      return "yarn";
  }
  return "?";
}

std::string_view modelArchName(ModelArch arch) { return archEntry(arch).model_type; }

}  // namespace llmrt
