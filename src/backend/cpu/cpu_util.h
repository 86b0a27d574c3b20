// Small helpers shared by the CPU backend's op files: 2-D view geometry and the MLP activations
// in float32 (torch's formulas).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/tensor.h"
#include "llmrt/model_config.h"

namespace llmrt::cpu {

// Row stride (elements) of a 2-D view; rows may be a slice of a wider buffer.
inline int64_t rowStride(const TensorView& t) { return t.shape.rank() >= 2 ? t.strides[0] : t.shape[0]; }
inline int64_t rows(const TensorView& t) { return t.shape.rank() >= 2 ? t.shape[0] : 1; }
inline int64_t cols(const TensorView& t) { return t.shape[t.shape.rank() - 1]; }

// transformers' ACT2FN functions.
inline float activate(Activation act, float x) {
  switch (act) {
    case Activation::kSilu:
      return x / (1.0f + std::exp(-x));
    case Activation::kGelu:
      return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
    case Activation::kGeluTanh:
      return 0.5f * x * (1.0f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case Activation::kRelu:
      return x > 0.0f ? x : 0.0f;
  }
  return x;
}

}  // namespace llmrt::cpu
