// config.json parsing: JSON types and HF defaults. Range checks live in
// config_validate.cpp (validateModelConfig), which parseModelConfig calls last.
#include "loader/config_parser.h"

#include <array>

#include "core/mapped_file.h"
#include "loader/json_util.h"

namespace llmrt {

using detail::Json;

namespace {

struct ArchSpec {
  std::string_view architecture;
  std::string_view model_type;
  ModelArch arch;
  // HF config-class defaults for fields config.json may omit.
  int64_t max_position_embeddings;
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> eos_token_id;
  std::optional<int64_t> sliding_window;
  int64_t max_window_layers;
};

constexpr std::array<ArchSpec, 3> kArchs = {{
    {"LlamaForCausalLM", "llama", ModelArch::kLlama, 2048, 1, 2, std::nullopt, 0},
    {"MistralForCausalLM", "mistral", ModelArch::kMistral, 4096 * 32, 1, 2, 4096, 0},
    {"Qwen2ForCausalLM", "qwen2", ModelArch::kQwen2, 32768, std::nullopt, std::nullopt, 4096, 28},
}};

Status missingField(std::string_view where, std::string_view field, std::string_view expected) {
  return fieldError(where, field, "(missing)", expected);
}

Result<const ArchSpec*> resolveArch(const Json& root, std::string_view where) {
  std::optional<std::string> architecture;
  auto a = root.find("architectures");
  if (a != root.end() && !a->is_null()) {
    if (!a->is_array() || a->empty() || !(*a)[0].is_string()) {
      return fieldError(where, "architectures", jsonSnippet(*a), "a non-empty list of architecture names");
    }
    architecture = (*a)[0].get<std::string>();
  }
  std::optional<std::string> model_type;
  LLMRT_RETURN_IF_ERROR(detail::readString(root, "model_type", "model_type", where, &model_type));
  if (!architecture && !model_type) {
    return missingField(where, "architectures",
                        "LlamaForCausalLM, MistralForCausalLM or Qwen2ForCausalLM (or a model_type of llama, "
                        "mistral or qwen2)");
  }
  const ArchSpec* by_arch = nullptr;
  const ArchSpec* by_type = nullptr;
  for (const ArchSpec& s : kArchs) {
    if (architecture && *architecture == s.architecture) by_arch = &s;
    if (model_type && *model_type == s.model_type) by_type = &s;
  }
  if (architecture && by_arch == nullptr) {
    return fieldError(
        where, "architectures", jsonSnippet(*a),
        "one of LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM (unsupported architecture)");
  }
  if (model_type && by_type == nullptr) {
    return fieldError(where, "model_type", jsonSnippet(root["model_type"]),
                      "one of llama, mistral, qwen2 (unsupported model type)");
  }
  if (by_arch != nullptr && by_type != nullptr && by_arch != by_type) {
    return fieldError(where, "model_type", jsonSnippet(root["model_type"]),
                      "\"" + std::string(by_arch->model_type) + "\" to match architectures[0] \"" +
                          std::string(by_arch->architecture) + "\"");
  }
  return by_arch != nullptr ? by_arch : by_type;
}

Status requireInt(const Json& root, std::string_view key, std::string_view where, int64_t* out) {
  std::optional<int64_t> v;
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, key, key, where, &v));
  if (!v) return missingField(where, key, "an integer >= 1");
  *out = *v;
  return Status::ok();
}

bool isRopeLayerTypeKey(const std::string& k) { return k == "full_attention" || k == "sliding_attention"; }

// The RoPE parameter object to use (or nullptr) and the field name for messages.
Status selectRopeObject(const Json& root, std::string_view where, const Json** obj, std::string* field) {
  *obj = nullptr;
  for (std::string_view key : {"rope_scaling", "rope_parameters"}) {
    auto it = root.find(key);
    if (it == root.end() || it->is_null()) continue;
    if (!it->is_object()) return fieldError(where, key, jsonSnippet(*it), "an object or null");
    if (it->empty()) continue;  // {} means default RoPE
    *obj = &*it;
    *field = key;
    break;
  }
  if (*obj == nullptr) return Status::ok();
  // transformers 5.x may nest parameters per layer type: {"full_attention": {...}, ...}.
  bool nested = true;
  for (auto it = (*obj)->begin(); it != (*obj)->end(); ++it) {
    if (!isRopeLayerTypeKey(it.key()) || !it.value().is_object()) nested = false;
  }
  if (nested) {
    const Json* first = &(*obj)->begin().value();
    for (auto it = (*obj)->begin(); it != (*obj)->end(); ++it) {
      if (it.value() != *first) {
        return unimplemented(
            std::string(where) + ": field '" + *field +
            "' gives different RoPE parameters per layer type; not supported for the Llama family");
      }
    }
    *field += "." + (*obj)->begin().key();
    *obj = first;
  }
  return Status::ok();
}

Status parseRope(const Json& root, std::string_view where, ModelConfig* c, std::string* rope_field) {
  std::optional<double> theta, prf;
  LLMRT_RETURN_IF_ERROR(detail::readDouble(root, "rope_theta", "rope_theta", where, &theta));
  LLMRT_RETURN_IF_ERROR(
      detail::readDouble(root, "partial_rotary_factor", "partial_rotary_factor", where, &prf));

  const Json* rp = nullptr;
  std::string f;
  LLMRT_RETURN_IF_ERROR(selectRopeObject(root, where, &rp, &f));
  if (rp != nullptr) *rope_field = f;
  RopeScaling& rs = c->rope_scaling;
  rs = RopeScaling{};
  if (rp != nullptr) {
    auto field = [&](std::string_view k) { return f + "." + std::string(k); };
    std::optional<double> t2, p2;
    LLMRT_RETURN_IF_ERROR(detail::readDouble(*rp, "rope_theta", field("rope_theta"), where, &t2));
    LLMRT_RETURN_IF_ERROR(
        detail::readDouble(*rp, "partial_rotary_factor", field("partial_rotary_factor"), where, &p2));
    if (t2) theta = t2;  // values inside the RoPE dict take priority (transformers 5.x)
    if (p2) prf = p2;

    std::optional<std::string> type;
    LLMRT_RETURN_IF_ERROR(detail::readString(*rp, "rope_type", field("rope_type"), where, &type));
    std::string type_field = field("rope_type");
    if (!type) {
      LLMRT_RETURN_IF_ERROR(detail::readString(*rp, "type", field("type"), where, &type));
      type_field = field("type");
    }
    const std::string t = type.value_or("default");
    if (t == "default") {
      rs.type = RopeScalingType::kNone;
    } else if (t == "linear") {
      rs.type = RopeScalingType::kLinear;
    } else if (t == "dynamic") {
      rs.type = RopeScalingType::kDynamic;
    } else if (t == "llama3") {
      rs.type = RopeScalingType::kLlama3;
    } else if (t == "yarn") {
      rs.type = RopeScalingType::kYarn;
    } else if (t == "longrope") {
      return unimplemented(std::string(where) + ": field '" + type_field +
                           "' is \"longrope\", which this engine does not support for the Llama family");
    } else {
      return fieldError(where, type_field, jsonSnippet(Json(t)),
                        "one of default, linear, dynamic, llama3, yarn");
    }

    if (rs.type != RopeScalingType::kNone) {
      std::optional<double> factor;
      LLMRT_RETURN_IF_ERROR(detail::readDouble(*rp, "factor", field("factor"), where, &factor));
      if (!factor)
        return missingField(where, field("factor"), "a number > 0 (required for rope_type '" + t + "')");
      rs.factor = *factor;
    }
    std::optional<int64_t> orig;
    LLMRT_RETURN_IF_ERROR(detail::readInt(*rp, "original_max_position_embeddings",
                                          field("original_max_position_embeddings"), where, &orig));
    if (rs.type == RopeScalingType::kLlama3) {
      std::optional<double> lo, hi;
      LLMRT_RETURN_IF_ERROR(detail::readDouble(*rp, "low_freq_factor", field("low_freq_factor"), where, &lo));
      LLMRT_RETURN_IF_ERROR(
          detail::readDouble(*rp, "high_freq_factor", field("high_freq_factor"), where, &hi));
      if (!lo)
        return missingField(where, field("low_freq_factor"), "a number (required for rope_type 'llama3')");
      if (!hi)
        return missingField(where, field("high_freq_factor"), "a number (required for rope_type 'llama3')");
      if (!orig) {
        return missingField(where, field("original_max_position_embeddings"),
                            "an integer (required for rope_type 'llama3')");
      }
      rs.low_freq_factor = *lo;
      rs.high_freq_factor = *hi;
    }
    if (rs.type == RopeScalingType::kYarn) {
      std::optional<double> bf, bs, att, ms, msad;
      std::optional<bool> trunc;
      LLMRT_RETURN_IF_ERROR(detail::readDouble(*rp, "beta_fast", field("beta_fast"), where, &bf));
      LLMRT_RETURN_IF_ERROR(detail::readDouble(*rp, "beta_slow", field("beta_slow"), where, &bs));
      LLMRT_RETURN_IF_ERROR(
          detail::readDouble(*rp, "attention_factor", field("attention_factor"), where, &att));
      LLMRT_RETURN_IF_ERROR(detail::readDouble(*rp, "mscale", field("mscale"), where, &ms));
      LLMRT_RETURN_IF_ERROR(detail::readDouble(*rp, "mscale_all_dim", field("mscale_all_dim"), where, &msad));
      LLMRT_RETURN_IF_ERROR(detail::readBool(*rp, "truncate", field("truncate"), where, &trunc));
      // HF: `get("beta_fast") or 32`: 0 also means the default.
      if (bf && *bf != 0.0) rs.beta_fast = *bf;
      if (bs && *bs != 0.0) rs.beta_slow = *bs;
      rs.attention_factor = att;
      rs.mscale = ms;
      rs.mscale_all_dim = msad;
      if (trunc) rs.truncate = *trunc;
    }
    if (orig) {
      rs.original_max_position_embeddings = *orig;
    } else if (rs.type == RopeScalingType::kYarn) {
      // transformers 5.x standardisation fills it from max_position_embeddings.
      rs.original_max_position_embeddings = c->max_position_embeddings;
    }
  }
  c->rope_theta = theta.value_or(10000.0);
  c->partial_rotary_factor = prf.value_or(1.0);
  return Status::ok();
}

Status parseSlidingWindow(const Json& root, std::string_view where, const ArchSpec& spec, ModelConfig* c) {
  c->sliding_window.reset();
  c->use_sliding_window = false;
  c->max_window_layers = 0;
  c->layer_types.clear();
  if (spec.arch == ModelArch::kLlama) return Status::ok();  // Llama has no sliding window

  std::optional<int64_t> window = spec.sliding_window;
  auto it = root.find("sliding_window");
  if (it != root.end()) {
    if (it->is_null()) {
      window.reset();
    } else if (std::optional<int64_t> v = jsonInt64(*it)) {
      window = *v;
    } else {
      return fieldError(where, "sliding_window", jsonSnippet(*it), "an integer >= 1 or null");
    }
  }
  if (spec.arch == ModelArch::kMistral) {
    c->sliding_window = window;
    return Status::ok();
  }

  // Qwen2
  std::optional<bool> use;
  std::optional<int64_t> mwl;
  LLMRT_RETURN_IF_ERROR(detail::readBool(root, "use_sliding_window", "use_sliding_window", where, &use));
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, "max_window_layers", "max_window_layers", where, &mwl));
  c->use_sliding_window = use.value_or(false);
  c->max_window_layers = mwl.value_or(spec.max_window_layers);
  c->sliding_window = c->use_sliding_window ? window : std::nullopt;

  auto lt = root.find("layer_types");
  if (lt != root.end() && !lt->is_null()) {
    if (!lt->is_array()) {
      return fieldError(where, "layer_types", jsonSnippet(*lt),
                        "a list of \"full_attention\" / \"sliding_attention\"");
    }
    for (const Json& e : *lt) {
      if (!e.is_string()) {
        return fieldError(where, "layer_types", jsonSnippet(*lt),
                          "a list of \"full_attention\" / \"sliding_attention\"");
      }
      c->layer_types.push_back(e.get<std::string>());
    }
  } else if (c->num_hidden_layers > 0 && c->num_hidden_layers <= (1 << 14)) {
    for (int64_t i = 0; i < c->num_hidden_layers; ++i) {
      const bool sliding = c->sliding_window.has_value() && i >= c->max_window_layers;
      c->layer_types.emplace_back(sliding ? "sliding_attention" : "full_attention");
    }
  }
  return Status::ok();
}

Status parseHiddenAct(const Json& root, std::string_view where, ModelConfig* c) {
  std::optional<std::string> act;
  LLMRT_RETURN_IF_ERROR(detail::readString(root, "hidden_act", "hidden_act", where, &act));
  if (!act) act = "silu";
  if (*act == "swish") act = "silu";  // the same function in transformers' ACT2FN
  for (std::string_view ok : {"silu", "gelu", "gelu_new", "gelu_pytorch_tanh", "relu"}) {
    if (*act == ok) {
      c->hidden_act = *act;
      return Status::ok();
    }
  }
  return fieldError(where, "hidden_act", jsonSnippet(Json(*act)),
                    "one of silu, swish, gelu, gelu_new, gelu_pytorch_tanh, relu");
}

}  // namespace

Result<ModelConfig> parseModelConfig(std::string_view text, std::string_view where) {
  LLMRT_ASSIGN_OR_RETURN(Json root, detail::parseInputJson(text, where, kHfJsonLimits));
  return parseModelConfigJson(root, where);
}

Result<ModelConfig> parseModelConfigJson(const Json& root, std::string_view where) {
  if (!root.is_object()) {
    return parseError(std::string(where) + ": expected a JSON object; got " + jsonSnippet(root));
  }
  LLMRT_ASSIGN_OR_RETURN(const ArchSpec* spec, resolveArch(root, where));
  ModelConfig c;
  c.arch = spec->arch;
  c.architecture = spec->architecture;
  c.model_type = spec->model_type;

  LLMRT_RETURN_IF_ERROR(requireInt(root, "vocab_size", where, &c.vocab_size));
  LLMRT_RETURN_IF_ERROR(requireInt(root, "hidden_size", where, &c.hidden_size));
  LLMRT_RETURN_IF_ERROR(requireInt(root, "intermediate_size", where, &c.intermediate_size));
  LLMRT_RETURN_IF_ERROR(requireInt(root, "num_hidden_layers", where, &c.num_hidden_layers));
  LLMRT_RETURN_IF_ERROR(requireInt(root, "num_attention_heads", where, &c.num_attention_heads));

  std::optional<int64_t> kv, head_dim, max_pos, pad;
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, "num_key_value_heads", "num_key_value_heads", where, &kv));
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, "head_dim", "head_dim", where, &head_dim));
  LLMRT_RETURN_IF_ERROR(
      detail::readInt(root, "max_position_embeddings", "max_position_embeddings", where, &max_pos));
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, "pad_token_id", "pad_token_id", where, &pad));
  c.num_key_value_heads = kv.value_or(c.num_attention_heads);
  c.head_dim_explicit = head_dim.has_value();
  if (head_dim) {
    c.head_dim = *head_dim;
  } else if (c.num_attention_heads > 0) {
    c.head_dim = c.hidden_size / c.num_attention_heads;  // exactness checked by validateModelConfig
  }
  c.max_position_embeddings = max_pos.value_or(spec->max_position_embeddings);
  c.pad_token_id = pad;

  std::optional<double> eps;
  LLMRT_RETURN_IF_ERROR(detail::readDouble(root, "rms_norm_eps", "rms_norm_eps", where, &eps));
  c.rms_norm_eps = eps.value_or(1e-6);
  std::string rope_field = "rope_scaling";
  LLMRT_RETURN_IF_ERROR(parseRope(root, where, &c, &rope_field));

  std::optional<bool> tie, attn_bias, mlp_bias;
  LLMRT_RETURN_IF_ERROR(detail::readBool(root, "tie_word_embeddings", "tie_word_embeddings", where, &tie));
  c.tie_word_embeddings = tie.value_or(false);
  switch (c.arch) {
    case ModelArch::kLlama:
      LLMRT_RETURN_IF_ERROR(detail::readBool(root, "attention_bias", "attention_bias", where, &attn_bias));
      LLMRT_RETURN_IF_ERROR(detail::readBool(root, "mlp_bias", "mlp_bias", where, &mlp_bias));
      c.attention_bias = attn_bias.value_or(false);
      c.o_proj_bias = c.attention_bias;
      c.mlp_bias = mlp_bias.value_or(false);
      break;
    case ModelArch::kMistral:
      c.attention_bias = c.o_proj_bias = c.mlp_bias = false;
      break;
    case ModelArch::kQwen2:
      c.attention_bias = true;
      c.o_proj_bias = false;
      c.mlp_bias = false;
      break;
  }
  LLMRT_RETURN_IF_ERROR(parseHiddenAct(root, where, &c));
  LLMRT_RETURN_IF_ERROR(parseSlidingWindow(root, where, *spec, &c));

  std::optional<std::vector<int64_t>> bos, eos;
  LLMRT_RETURN_IF_ERROR(detail::readIntOrIntList(root, "bos_token_id", "bos_token_id", where, &bos));
  LLMRT_RETURN_IF_ERROR(detail::readIntOrIntList(root, "eos_token_id", "eos_token_id", where, &eos));
  // Absent keys take the config class default; an explicit null means none.
  if (bos) {
    c.bos_token_ids = *bos;
  } else if (!root.contains("bos_token_id") && spec->bos_token_id) {
    c.bos_token_ids = {*spec->bos_token_id};
  }
  if (eos) {
    c.eos_token_ids = *eos;
  } else if (!root.contains("eos_token_id") && spec->eos_token_id) {
    c.eos_token_ids = {*spec->eos_token_id};
  }

  // transformers 5.x writes `dtype`; 4.x `torch_dtype`.
  std::optional<std::string> dtype;
  LLMRT_RETURN_IF_ERROR(detail::readString(root, "dtype", "dtype", where, &dtype));
  if (!dtype) LLMRT_RETURN_IF_ERROR(detail::readString(root, "torch_dtype", "torch_dtype", where, &dtype));
  c.torch_dtype = dtype.value_or("");

  LLMRT_RETURN_IF_ERROR(detail::validateModelConfig(c, where, rope_field));
  return c;
}

Result<ModelConfig> loadModelConfig(const std::string& path) {
  LLMRT_ASSIGN_OR_RETURN(std::string text, readTextFile(path));
  return parseModelConfig(text, path);
}

}  // namespace llmrt
