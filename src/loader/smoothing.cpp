#include "loader/smoothing.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "loader/arch_table.h"
#include "loader/decoder_weights.h"

namespace llmrt {

std::vector<SmoothingGroup> smoothingGroups(const ModelConfig& c) {
  std::vector<SmoothingGroup> groups;
  if (archEntry(c.arch).names.transposed) return groups;
  using W = DecoderWeight;
  auto first = [&](W w, int64_t layer) {
    const std::vector<std::string> t = decoderWeightTensors(w, c, layer);
    return t.empty() ? std::string() : t.front();
  };
  auto append = [&](std::vector<std::string>& to, W w, int64_t layer) {
    for (std::string& n : decoderWeightTensors(w, c, layer)) to.push_back(std::move(n));
  };
  const ResidualWiring wiring = c.decoder.residual;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const bool moe = decoderWeightPresent(W::kRouter, c, l);
    SmoothingGroup attn{l, decoderWeightName(W::kQkv, l), first(W::kAttnNorm, l), first(W::kAttnNormBias, l), {}};
    append(attn.consumers, W::kQkv, l);
    if (wiring == ResidualWiring::kParallel && !moe) append(attn.consumers, W::kUp, l);
    groups.push_back(std::move(attn));
    if (moe || wiring == ResidualWiring::kParallel) continue;
    const W norm = wiring == ResidualWiring::kSandwich ? W::kPreMlpNorm : W::kMlpNorm;
    SmoothingGroup mlp{l, decoderWeightName(W::kUp, l), first(norm, l),
                       norm == W::kMlpNorm ? first(W::kMlpNormBias, l) : std::string(), {}};
    append(mlp.consumers, W::kUp, l);
    groups.push_back(std::move(mlp));
  }
  return groups;
}

std::vector<float> smoothingScales(std::span<const float> act_max, std::span<const float> weight_max, double alpha) {
  std::vector<float> s(act_max.size());
  for (size_t j = 0; j < s.size(); ++j) {
    const double a = std::max(static_cast<double>(act_max[j]), 1e-5);
    const double w = std::max(static_cast<double>(weight_max[j]), 1e-5);
    s[j] = static_cast<float>(std::pow(a, alpha) / std::pow(w, 1.0 - alpha));
  }
  return s;
}

void TensorSmoothing::add(const SmoothingGroup& g, std::vector<float> s, bool norm_weight_offset_one) {
  auto shared = std::make_shared<const std::vector<float>>(std::move(s));
  ops_[g.norm_weight] = {norm_weight_offset_one ? Kind::kDivideOffsetOne : Kind::kDivide, shared};
  if (!g.norm_bias.empty()) ops_[g.norm_bias] = {Kind::kDivide, shared};
  for (const std::string& m : g.consumers) ops_[m] = {Kind::kColumns, shared};
}

void TensorSmoothing::clip(const std::string& name, std::vector<float> max_abs, int64_t group) {
  clips_[name] = {std::move(max_abs), group};
}

Status TensorSmoothing::apply(const std::string& name, const Shape& shape, std::span<float> v) const {
  LLMRT_RETURN_IF_ERROR(scale(name, shape, v));
  auto c = clips_.find(name);
  if (c == clips_.end()) return Status::ok();
  const int64_t cols = shape.rank() == 2 ? shape[1] : 0, group = c->second.group;
  if (group < 1 || cols % group != 0 ||
      static_cast<int64_t>(c->second.max_abs.size()) * group != static_cast<int64_t>(v.size()))
    return invalidArgument("smoothing: the clipping of '" + name + "' does not fit its shape " +
                           shape.toString());
  for (size_t i = 0; i < v.size(); ++i) {
    const float m = c->second.max_abs[i / static_cast<size_t>(group)];
    v[i] = std::clamp(v[i], -m, m);
  }
  return Status::ok();
}

Status TensorSmoothing::scale(const std::string& name, const Shape& shape, std::span<float> v) const {
  auto it = ops_.find(name);
  if (it == ops_.end()) return Status::ok();
  const std::vector<float>& s = *it->second.s;
  const auto h = static_cast<int64_t>(s.size());
  const int64_t cols = shape.rank() == 2 ? shape[1] : shape.numel();
  if (cols != h || static_cast<int64_t>(v.size()) != shape.numel())
    return invalidArgument("smoothing: tensor '" + name + "' has shape " + shape.toString() + "; expected " +
                           (shape.rank() == 2 ? "[rows, " : "[") + std::to_string(h) + "]");
  switch (it->second.kind) {
    case Kind::kColumns:
      for (size_t i = 0; i < v.size(); ++i) v[i] *= s[i % s.size()];
      break;
    case Kind::kDivide:
      for (size_t j = 0; j < v.size(); ++j) v[j] /= s[j];
      break;
    case Kind::kDivideOffsetOne:
      for (size_t j = 0; j < v.size(); ++j) v[j] = (1.0f + v[j]) / s[j] - 1.0f;
      break;
  }
  return Status::ok();
}

}  // namespace llmrt
