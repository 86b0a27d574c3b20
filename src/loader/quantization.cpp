#include "loader/quantization.h"

#include <array>
#include <cctype>

#include "core/mapped_file.h"
#include "loader/config_parser.h"
#include "loader/json_util.h"

namespace llmrt {

namespace {

// Parameters worth naming in a message, in this order, when a config gives them.
// clang-format off
constexpr std::array<std::string_view, 17> kDetailKeys = {
    "weight_block_size", "activation_scheme", "bits", "w_bit", "group_size", "q_group_size", "zero_point",
    "desc_act", "sym", "version", "load_in_4bit", "load_in_8bit", "bnb_4bit_quant_type", "format", "fmt",
    "quant_algo", "kv_cache_quant_algo"};

// The last name component of tensors that only quantized checkpoints hold.
constexpr std::array<std::string_view, 28> kQuantTensorSuffixes = {
    "weight_scale", "weight_scale_inv", "weight_scale_2", "input_scale", "output_scale", "k_scale", "v_scale",
    "kv_scale", "q_scale", "qweight", "qzeros", "scales", "g_idx", "SCB", "weight_format", "absmax", "quant_map",
    "nested_absmax", "nested_quant_map", "weight_packed", "weight_zero_point", "weight_g_idx", "weight_shape",
    "weight_global_scale", "input_global_scale", "input_zero_point", "zeros", "weight_zero"};
// clang-format on

std::string valueText(const Json& v) {
  if (v.is_string()) return printableText(v.get_ref<const std::string&>(), 40);
  if (v.is_array()) {
    // [128, 128] rather than jsonSnippet's compact [128,128]; a few elements at most.
    std::string s = "[";
    size_t i = 0;
    for (const Json& e : v) {
      if (i == 8) {
        s += ", ...";
        break;
      }
      if (i++ > 0) s += ", ";
      s += e.is_structured() ? jsonSnippet(e, 20) : jsonSnippet(e, 40);
    }
    return s + "]";
  }
  return jsonSnippet(v, 60);
}

// "key value" for the known keys `obj` gives (but the method's own key).
std::string detailsOf(const Json& obj, std::string_view method_key) {
  std::string d;
  if (!obj.is_object()) return d;
  for (std::string_view key : kDetailKeys) {
    if (key == method_key) continue;
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) continue;
    if (!d.empty()) d += ", ";
    d += std::string(key) + " " + valueText(*it);
    if (d.size() > 240) break;
  }
  return d;
}

// Fills method / details from `obj` (a quantization config object).
QuantizationConfig fromObject(std::string file, std::string_view prefix, const Json& obj,
                              std::string_view method_key) {
  QuantizationConfig q;
  q.file = std::move(file);
  q.raw = obj;
  if (obj.is_object()) {
    auto m = obj.find(method_key);
    if (m != obj.end() && !m->is_null()) {
      q.method_field = std::string(prefix) + std::string(method_key);
      q.method = valueText(*m);
    }
    q.details = detailsOf(obj, method_key);
  } else {
    q.details = jsonSnippet(obj, 60);
  }
  return q;
}

bool isQuantTensorName(std::string_view name) {
  if (name.find(".quant_state.") != std::string_view::npos) return true;
  const size_t dot = name.rfind('.');
  const std::string_view last = dot == std::string_view::npos ? name : name.substr(dot + 1);
  for (std::string_view s : kQuantTensorSuffixes) {
    if (last == s) return true;
  }
  return false;
}

bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::string QuantizationConfig::describe() const {
  std::string s;
  if (method_field.empty()) {
    s = "a quantization config";
  } else if (method.empty()) {
    s = method_field + " without a quant_method";
  } else {
    s = method_field + " '" + method + "'";
  }
  if (!details.empty()) s += " (" + details + ")";
  return s;
}

std::optional<QuantizationConfig> quantizationFromConfig(const Json& root, std::string_view where) {
  if (!root.is_object()) return std::nullopt;
  for (std::string_view field : {"quantization_config", "compression_config"}) {
    auto it = root.find(field);
    if (it == root.end() || it->is_null()) continue;
    QuantizationConfig q = fromObject(std::string(where), std::string(field) + ".", *it, "quant_method");
    if (q.method_field.empty())
      q.method_field = std::string(field);  // "quantization_config without a quant_method"
    return q;
  }
  return std::nullopt;
}

std::optional<QuantizationConfig> quantizationFromSideFiles(const std::string& dir) {
  const std::string base = !dir.empty() && dir.back() == '/' ? dir : dir + "/";
  for (const char* name : {"quantize_config.json", "hf_quant_config.json"}) {
    const std::string path = base + name;
    if (!fileExists(path)) continue;
    Result<std::string> text = readTextFile(path);
    Result<Json> j =
        text.isOk() ? detail::parseInputJson(*text, path, kHfJsonLimits) : Result<Json>(text.status());
    if (!j.isOk() || !j->is_object()) {
      QuantizationConfig q;
      q.file = path;
      q.details = j.isOk() ? "not a JSON object" : "unreadable";
      return q;
    }
    if (std::string_view(name) == "hf_quant_config.json") {
      // ModelOpt: {"producer": {...}, "quantization": {"quant_algo": "FP8", ...}}.
      auto inner = j->find("quantization");
      if (inner != j->end() && inner->is_object())
        return fromObject(path, "quantization.", *inner, "quant_algo");
    }
    return fromObject(path, "", *j, "quant_method");
  }
  return std::nullopt;
}

std::optional<std::string> findQuantizedTensor(const WeightStore& weights) {
  for (const WeightEntry& w : weights.entries()) {  // sorted by name
    if (isQuantTensorName(w.name)) {
      return "tensor '" + printableText(w.name) + "' (" + std::string(dtypeName(w.dtype)) + " " +
             w.shape.toString() + ") holds quantization data (scales, zero points or packed weights)";
    }
    if (endsWith(w.name, ".weight") &&
        (w.dtype == DType::kF8E4M3 || w.dtype == DType::kI8 || w.dtype == DType::kU8)) {
      return "tensor '" + printableText(w.name) + "' is " + std::string(dtypeName(w.dtype)) +
             " (quantized codes)";
    }
  }
  return std::nullopt;
}

Status checkNotQuantized(const std::optional<QuantizationConfig>& config, const WeightStore& weights) {
  const std::optional<std::string> tensor = findQuantizedTensor(weights);
  if (!config && !tensor) return Status::ok();
  std::string m;
  if (config) {
    m = config->file + ": " + config->describe() + " is not supported yet";
    if (tensor) m += "; " + weights.source() + ": " + *tensor;
  } else {
    m = weights.source() + ": " + *tensor + ": quantized checkpoints are not supported yet";
  }
  m += "; use a bf16/fp16/fp32 checkpoint";
  return unimplemented(std::move(m));
}

namespace {

std::string lowered(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::string stringField(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? lowered(it->get<std::string>()) : "";
}

// compressed-tensors (llm-compressor): "fp8" for format "float-quantized" (every group's weights
// 8-bit floats), "int8" for "int-quantized" (8-bit symmetric integers: W8A8 INT8, SmoothQuant's
// output), each with one scale per tensor or per output channel; "" for anything else.
std::string compressedTensorsScheme(const Json& raw) {
  const std::string format = stringField(raw, "format");
  const std::string type = format == "float-quantized" ? "float" : format == "int-quantized" ? "int" : "";
  if (type.empty()) return "";
  auto groups = raw.find("config_groups");
  if (groups == raw.end() || !groups->is_object() || groups->empty()) return "";
  for (const auto& [name, g] : groups->items()) {
    if (!g.is_object()) return "";
    auto w = g.find("weights");
    if (w == g.end() || !w->is_object()) return "";
    auto bits = w->find("num_bits");
    auto symmetric = w->find("symmetric");
    const std::string strategy = stringField(*w, "strategy");
    if (stringField(*w, "type") != type || bits == w->end() || !bits->is_number_integer() || *bits != 8 ||
        (strategy != "tensor" && strategy != "channel") ||
        (symmetric != w->end() && !(symmetric->is_boolean() && symmetric->get<bool>())))
      return "";
  }
  return type == "float" ? "fp8" : "int8";
}

// AutoAWQ's GEMM checkpoints: 4-bit codes with zero points, groups along the input.
Status resolveAwq(const QuantizationConfig& config, ModelConfig* model) {
  const Json& raw = config.raw;
  auto intField = [&](std::initializer_list<std::string_view> keys) -> std::optional<int64_t> {
    for (std::string_view k : keys) {
      auto it = raw.find(k);
      if (it != raw.end() && it->is_number_integer()) return it->get<int64_t>();
    }
    return std::nullopt;
  };
  const std::optional<int64_t> bits = intField({"bits", "w_bit"}), group = intField({"group_size", "q_group_size"});
  std::string version = stringField(raw, "version");
  if (version.empty()) version = "gemm";
  auto zero = raw.find("zero_point");
  const bool zero_point = zero == raw.end() || (zero->is_boolean() && zero->get<bool>());
  if (bits != 4 || !group || *group < 1 || *group > 65536 || version != "gemm" || !zero_point)
    return unimplemented(config.file + ": " + config.describe() +
                         " is not supported yet (llmrt reads AWQ version gemm, 4 bits, zero_point true, a "
                         "group_size in [1, 65536]); use a bf16/fp16/fp32 checkpoint");
  model->weight_quantization = "awq";
  model->awq_group_size = *group;
  return Status::ok();
}

}  // namespace

Status resolveQuantization(const std::optional<QuantizationConfig>& config, const WeightStore& weights,
                           ModelConfig* model) {
  model->weight_quantization.clear();
  model->fp8_block_rows = model->fp8_block_cols = 0;
  model->awq_group_size = 0;
  if (!config || !config->raw.is_object()) return checkNotQuantized(config, weights);
  const Json& raw = config->raw;
  const std::string method = stringField(raw, "quant_method"), algo = stringField(raw, "quant_algo");
  const std::string compressed = method == "compressed-tensors" ? compressedTensorsScheme(raw) : "";
  const bool fp8 = method == "fp8" || (method == "modelopt" && algo == "fp8") ||
                   (method.empty() && algo == "fp8") ||  // hf_quant_config.json's "quantization"
                   compressed == "fp8";
  if (method == "awq") return resolveAwq(*config, model);
  if (compressed == "int8") {
    model->weight_quantization = "int8";
    return Status::ok();
  }
  if (!fp8) return checkNotQuantized(config, weights);
  auto block = raw.find("weight_block_size");
  if (block != raw.end() && !block->is_null()) {
    const bool ok = block->is_array() && block->size() == 2 && (*block)[0].is_number_integer() &&
                    (*block)[1].is_number_integer() && (*block)[0].get<int64_t>() >= 1 &&
                    (*block)[1].get<int64_t>() >= 1 && (*block)[0].get<int64_t>() <= 65536 &&
                    (*block)[1].get<int64_t>() <= 65536;
    if (!ok)
      return invalidArgument(config->file + ": quantization_config.weight_block_size has value " +
                             jsonSnippet(*block, 60) + "; expected two integers in [1, 65536] such as [128, 128]");
    model->fp8_block_rows = (*block)[0].get<int64_t>();
    model->fp8_block_cols = (*block)[1].get<int64_t>();
  }
  model->weight_quantization = "fp8";
  return Status::ok();
}

}  // namespace llmrt
