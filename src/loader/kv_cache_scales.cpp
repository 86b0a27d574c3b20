#include "loader/kv_cache_scales.h"

#include <cmath>
#include <optional>
#include <string>

namespace llmrt {
namespace {

// "a.b.k_proj.weight" -> "a.b.k_proj"; "a.b.k_proj" -> "a.b".
std::string parentOf(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? std::string() : name.substr(0, dot);
}

// The scale of `which` ("k_scale" / "v_scale") next to projection tensor `proj` (its module or the
// attention module above it): its value, nullopt when neither tensor exists.
Result<std::optional<float>> findScale(const WeightSource& weights, const std::string& proj,
                                       const char* which) {
  const std::string module = parentOf(proj);
  for (const std::string& name : {module + "." + which, parentOf(module) + "." + which}) {
    Result<TensorView> t = weights(name);
    if (!t.isOk() && t.status().code() == StatusCode::kNotFound) continue;
    if (!t.isOk()) return t.status();
    if (t->numel() != 1)
      return invalidArgument("KV cache scale '" + name + "' has " + std::to_string(t->numel()) +
                             " values; expected one (a per-tensor scale)");
    float v = 0.0f;
    convertToF32(t->data, t->dtype, &v, 1);
    if (!std::isfinite(v) || !(v > 0.0f))
      return invalidArgument("KV cache scale '" + name + "' is " + std::to_string(v) +
                             "; expected a positive finite number");
    return std::optional<float>(v);
  }
  return std::optional<float>();
}

}  // namespace

std::string kvCacheScaleName(const ModelConfig& config, int64_t layer, int kv) {
  const std::vector<std::string> qkv = decoderWeightTensors(DecoderWeight::kQkv, config, layer);
  const std::string& proj = qkv.size() == 3 ? qkv[static_cast<size_t>(1 + kv)] : qkv.at(0);
  return parentOf(parentOf(proj)) + (kv == 0 ? ".k_scale" : ".v_scale");
}

Result<std::vector<float>> checkpointKvCacheScales(const ModelConfig& config, const WeightSource& weights) {
  std::vector<float> scales;
  bool any = false, all = true;
  std::string missing;
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    const std::vector<std::string> qkv = decoderWeightTensors(DecoderWeight::kQkv, config, layer);
    if (qkv.empty()) return std::vector<float>();
    // Separate q / k / v: the k and v tensors; packed: the one tensor for both.
    const std::string& k_proj = qkv.size() == 3 ? qkv[1] : qkv[0];
    const std::string& v_proj = qkv.size() == 3 ? qkv[2] : qkv[0];
    LLMRT_ASSIGN_OR_RETURN(std::optional<float> k, findScale(weights, k_proj, "k_scale"));
    LLMRT_ASSIGN_OR_RETURN(std::optional<float> v, findScale(weights, v_proj, "v_scale"));
    if (!k && !v) {  // the older one scale for both (`kv_scale`)
      LLMRT_ASSIGN_OR_RETURN(const std::optional<float> kv, findScale(weights, k_proj, "kv_scale"));
      k = v = kv;
    }
    any = any || k || v;
    if ((!k || !v) && missing.empty())
      missing = parentOf(parentOf(k ? v_proj : k_proj)) + (k ? ".v_scale" : ".k_scale");
    all = all && k && v;
    scales.push_back(k.value_or(1.0f));
    scales.push_back(v.value_or(1.0f));
  }
  if (!any) return std::vector<float>();
  if (!all)
    return invalidArgument(
        "the checkpoint has KV cache scales (k_scale / v_scale) for some layers but not '" + missing +
        "'; expected both for every layer, or none");
  return scales;
}

}  // namespace llmrt
