// SmoothQuant's migration (Xiao et al., 2023) on checkpoint tensors. A norm's output x feeds
// products x W^T; dividing the norm's weight (and bias) by s_j per channel j and multiplying
// column j of every matrix that reads x by s_j leaves each product unchanged in real arithmetic,
// while the activations' outlier channels shrink before INT8 quantization. With per-channel
// activation maxima a_j (calibration) and column maxima w_j over the group's matrices,
// s_j = max(a_j, 1e-5)^alpha / max(w_j, 1e-5)^(1 - alpha), alpha the migration strength.
//
// The groups, per residual wiring (every family, through its decoder description):
//   attention: the norm before attention -> q/k/v (parallel wiring with one norm: and the MLP's
//              first matrices, which read the same output);
//   MLP:       sequential / two norms: the norm before the MLP -> gate/up (or the plain MLP's
//              first matrix); sandwich (Gemma-2): the pre-MLP norm -> gate/up.
// Mixture-of-experts layers smooth attention only (their experts are not quantized).
// Gemma's norm weights are stored as w for (1 + w): the smoothed w is (1 + w) / s - 1.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "llmrt/model_config.h"
#include "llmrt/status.h"

namespace llmrt {

struct SmoothingGroup {
  int64_t layer = 0;
  // The model weight (decoderWeightName, e.g. "layers.3.qkv") whose product input is the norm's
  // output: where calibration measures a_j.
  std::string observed;
  std::string norm_weight, norm_bias;  // checkpoint tensor names (norm_bias "" without a bias)
  std::vector<std::string> consumers;  // checkpoint matrices [out, hidden] reading the norm's output
};

// The groups of `config`'s model, layer by layer. Conv1D checkpoints (transposed matrices) have
// none (the caller refuses them).
std::vector<SmoothingGroup> smoothingGroups(const ModelConfig& config);

// SmoothQuant's s for one group: a (per-channel activation maxima) and w (per-column maxima of
// its matrices), both [hidden].
std::vector<float> smoothingScales(std::span<const float> act_max, std::span<const float> weight_max, double alpha);

// What smoothing does to checkpoint tensors, by name.
class TensorSmoothing {
 public:
  // Records s for `group`: its norm divided, its consumers' columns multiplied.
  void add(const SmoothingGroup& group, std::vector<float> s, bool norm_weight_offset_one);
  // Clamps matrix `name` [rows, cols] after its columns are scaled: each row's groups of `group`
  // columns to [-m, m], m = max_abs[row * (cols / group) + group index] (AWQ's clipping search).
  void clip(const std::string& name, std::vector<float> max_abs, int64_t group);
  // Whether `name` changes.
  bool touches(const std::string& name) const { return ops_.count(name) > 0 || clips_.count(name) > 0; }
  // Applies the change to `values`, the float32 contents of `name` with checkpoint shape `shape`.
  Status apply(const std::string& name, const Shape& shape, std::span<float> values) const;
  size_t size() const { return ops_.size(); }

 private:
  // The column scaling or the norm's division alone.
  Status scale(const std::string& name, const Shape& shape, std::span<float> values) const;
  struct Clip {
    std::vector<float> max_abs;
    int64_t group = 0;
  };
  std::unordered_map<std::string, Clip> clips_;
  enum class Kind : uint8_t { kColumns, kDivide, kDivideOffsetOne };
  struct Op {
    Kind kind;
    std::shared_ptr<const std::vector<float>> s;
  };
  std::unordered_map<std::string, Op> ops_;
};

}  // namespace llmrt
