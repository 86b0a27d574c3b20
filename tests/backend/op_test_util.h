// Helpers shared by the backend op tests (backend_ops_test.cpp, backend_attention_test.cpp,
// backend_arch_ops_test.cpp, backend_window_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
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

// Half a step of a 16-bit type: rounding alone moves a value by up to |v| * 2^-8 in bf16,
// 2^-11 in fp16 (0 for float32).
inline double halfStep(DType dt) { return dt == DType::kBF16 ? 1.0 / 256 : (dt == DType::kF16 ? 1.0 / 2048 : 0.0); }

// The largest |v|.
inline double maxAbs(const std::vector<float>& v) {
  double m = 0.0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

// Relative L2 error and largest absolute difference beyond |ref| * elem_rel (16-bit outputs pass
// halfStep); NaN anywhere fails, and so does an infinity the reference does not have.
inline void expectClose(const std::vector<float>& got, const std::vector<float>& ref, double rel_tol, double abs_tol,
                        const std::string& what, double elem_rel = 0.0) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double num = 0.0, den = 0.0, max_abs = 0.0;
  size_t worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << what << ": NaN (unwritten?) at " << i;
    if (std::isinf(got[i]) || std::isinf(ref[i])) {
      ASSERT_EQ(got[i], ref[i]) << what << ": infinity at " << i;
      continue;
    }
    const double d = static_cast<double>(got[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
    const double beyond = std::abs(d) - std::abs(static_cast<double>(ref[i])) * elem_rel;
    if (beyond > max_abs) {
      max_abs = beyond;
      worst = i;
    }
  }
  const double rel = std::sqrt(num / std::max(den, 1e-30));
  EXPECT_LE(rel, rel_tol) << what << ": relative L2 error";
  EXPECT_LE(max_abs, abs_tol) << what << ": max |diff| (beyond |ref| * " << elem_rel << ") at " << worst
                              << " (got " << got[worst] << ", ref " << ref[worst] << ")";
}

}  // namespace llmrt::optest
