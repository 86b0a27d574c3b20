// Helpers shared by the backend op tests (backend_ops_test.cpp, backend_window_test.cpp).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace llmrt::optest {

inline std::vector<float> randomVec(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Rounds v to what a `dt` (BF16, F16; F32: unchanged) tensor stores.
inline void roundTo(std::vector<float>& v, DType dt) {
  if (dt == DType::kF32) return;
  std::vector<uint16_t> h(v.size());
  convertFromF32(v.data(), h.data(), dt, v.size());
  convertToF32(h.data(), dt, v.data(), v.size());
}

// Columns [begin, begin + n) of a row-major float matrix, as a strided view.
inline TensorView columns(const TensorView& t, int64_t begin, int64_t n) {
  TensorView v = t;
  v.data = t.as<float>() + begin;
  v.shape = Shape{t.shape[0], n};
  v.strides = Shape{t.strides[0], 1};
  return v;
}

}  // namespace llmrt::optest
