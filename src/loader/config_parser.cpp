// config.json parsing: JSON types and HF defaults. Range checks live in
// config_validate.cpp (validateModelConfig), which parseModelConfig calls last.
#include "loader/config_parser.h"

#include <array>
#include <cmath>

#include "core/mapped_file.h"
#include "loader/arch_table.h"
#include "loader/json_util.h"

namespace llmrt {

using detail::Json;

namespace {

Status missingField(std::string_view where, std::string_view field, std::string_view expected) {
  return fieldError(where, field, "(missing)", expected);
}

Result<const ArchEntry*> resolveArch(const Json& root, std::string_view where) {
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
  if (!architecture && !model_type)
    return missingField(where, "architectures", "one of " + supportedArchitectures() + " (or their model_type)");
  const ArchEntry* by_arch = nullptr;
  const ArchEntry* by_type = nullptr;
  std::string types;
  for (const ArchEntry& s : archTable()) {
    if (architecture && (*architecture == s.architecture || (!s.alias.empty() && *architecture == s.alias)))
      by_arch = &s;
    if (model_type && *model_type == s.model_type && by_type == nullptr) by_type = &s;
    if (!types.empty()) types += ", ";
    types += s.model_type;
  }
  if (architecture && by_arch == nullptr) {
    return fieldError(where, "architectures", jsonSnippet(*a),
                      "one of " + supportedArchitectures() + " (unsupported architecture)");
  }
  if (model_type && by_type == nullptr) {
    return fieldError(where, "model_type", jsonSnippet(root["model_type"]),
                      "one of " + types + " (unsupported model type)");
  }
  if (by_arch != nullptr && by_type != nullptr && by_arch->model_type != by_type->model_type) {
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
            "' gives different RoPE parameters per layer type; not supported");
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
                           "' is \"longrope\", which this engine does not support yet");
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

Status parseHiddenAct(const Json& root, std::string_view where, const ArchEntry& spec, ModelConfig* c) {
  const std::string_view key = spec.keys.hidden_act;
  std::optional<std::string> act;
  LLMRT_RETURN_IF_ERROR(detail::readString(root, key, key, where, &act));
  if (!act) act = std::string(spec.hidden_act);
  // transformers' ACT2FN names and the function each computes.
  static constexpr std::pair<std::string_view, Activation> kNames[] = {
      {"silu", Activation::kSilu},         {"swish", Activation::kSilu},
      {"gelu", Activation::kGelu},         {"gelu_new", Activation::kGeluTanh},
      {"gelu_pytorch_tanh", Activation::kGeluTanh}, {"gelu_fast", Activation::kGeluTanh},
      {"relu", Activation::kRelu},
  };
  for (const auto& [name, fn] : kNames) {
    if (*act == name) {
      c->hidden_act = *act;
      c->decoder.activation = fn;
      return Status::ok();
    }
  }
  return fieldError(where, key, jsonSnippet(Json(*act)),
                    "one of silu, swish, gelu, gelu_new, gelu_pytorch_tanh, gelu_fast, relu");
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
  LLMRT_ASSIGN_OR_RETURN(const ArchEntry* spec, resolveArch(root, where));
  const ConfigKeys& keys = spec->keys;
  ModelConfig c;
  c.arch = spec->arch;
  c.architecture = spec->architecture;
  c.model_type = spec->model_type;

  LLMRT_RETURN_IF_ERROR(requireInt(root, keys.vocab_size, where, &c.vocab_size));
  LLMRT_RETURN_IF_ERROR(requireInt(root, keys.hidden_size, where, &c.hidden_size));
  LLMRT_RETURN_IF_ERROR(requireInt(root, keys.num_hidden_layers, where, &c.num_hidden_layers));
  LLMRT_RETURN_IF_ERROR(requireInt(root, keys.num_attention_heads, where, &c.num_attention_heads));
  std::optional<int64_t> inter, kv, head_dim, max_pos, pad;
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, keys.intermediate_size, keys.intermediate_size, where, &inter));
  if (!inter && !keys.intermediate_optional) return missingField(where, keys.intermediate_size, "an integer >= 1");
  c.intermediate_size = inter.value_or(4 * c.hidden_size);
  if (!keys.num_key_value_heads.empty())
    LLMRT_RETURN_IF_ERROR(detail::readInt(root, keys.num_key_value_heads, keys.num_key_value_heads, where, &kv));
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, keys.head_dim, keys.head_dim, where, &head_dim));
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, keys.max_position_embeddings, keys.max_position_embeddings, where,
                                        &max_pos));
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
  LLMRT_RETURN_IF_ERROR(detail::readDouble(root, keys.norm_eps, keys.norm_eps, where, &eps));
  c.norm_eps = eps.value_or(spec->norm_eps);
  std::string rope_field = "rope_scaling";
  LLMRT_RETURN_IF_ERROR(parseRope(root, where, &c, &rope_field));

  std::optional<bool> tie;
  LLMRT_RETURN_IF_ERROR(detail::readBool(root, "tie_word_embeddings", "tie_word_embeddings", where, &tie));
  c.tie_word_embeddings = tie.value_or(spec->tie_word_embeddings);
  LLMRT_RETURN_IF_ERROR(parseHiddenAct(root, where, *spec, &c));
  LLMRT_RETURN_IF_ERROR(spec->describe(root, where, &c));
  if (c.decoder.attention_scale == 0.0 && c.head_dim > 0)
    c.decoder.attention_scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));

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
