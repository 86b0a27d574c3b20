// core/fp8.h: the one FP8 row-quantization rule.
#include "core/fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace llmrt {
namespace {

TEST(Fp8Rule, ScaleMapsTheRowMaximumTo448AndCodesAreWithinHalfAStep) {
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 3.0f);
  for (int64_t n : {1, 7, 64, 1001}) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = d(rng);
    std::vector<uint8_t> codes(v.size());
    const Fp8RowScale s = quantizeFp8Row(v.data(), n, codes.data());
    float amax = 0.0f;
    size_t at = 0;
    for (size_t i = 0; i < v.size(); ++i)
      if (std::fabs(v[i]) > amax) amax = std::fabs(v[at = i]);
    EXPECT_EQ(s.scale, amax / 448.0f);
    EXPECT_EQ(s.inverse, 448.0f / amax);
    EXPECT_EQ(std::fabs(f8e4m3ToF32(codes[at])), 448.0f) << "the largest entry takes the largest code";
    for (size_t i = 0; i < v.size(); ++i) {
      const float back = f8e4m3ToF32(codes[i]) * s.scale;
      // e4m3: 3 mantissa bits (half a step = 2^-4 relative); subnormals below 2^-6 * scale step 2^-9.
      EXPECT_LE(std::fabs(back - v[i]), std::fabs(v[i]) / 16.0f + s.scale * 0x1p-10f + 1e-7f) << i;
      EXPECT_EQ(codes[i], f32ToF8e4m3(v[i] * s.inverse)) << "a multiplication by the inverse, nearest even";
    }
  }
}

TEST(Fp8Rule, ZeroRowsHaveScaleOneAndNaNsDoNotSetTheScale) {
  std::vector<float> zeros(5, 0.0f);
  std::vector<uint8_t> codes(5, 0xAA);
  const Fp8RowScale z = quantizeFp8Row(zeros.data(), 5, codes.data());
  EXPECT_EQ(z.scale, 1.0f);
  EXPECT_EQ(z.inverse, 1.0f);
  for (uint8_t c : codes) EXPECT_EQ(c & 0x7f, 0);
  std::vector<float> with_nan{1.0f, NAN, -2.0f};
  const Fp8RowScale s = quantizeFp8Row(with_nan.data(), 3, codes.data());
  EXPECT_EQ(s.scale, 2.0f / 448.0f);
  EXPECT_TRUE(std::isnan(f8e4m3ToF32(codes[1])));
  EXPECT_EQ(f8e4m3ToF32(codes[2]), -448.0f);
}

TEST(Fp8Rule, MatrixRowsOfAnyFloatDtypeQuantizeAsTheirFloat32Values) {
  const int64_t rows = 3, cols = 9;
  std::vector<float> f(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < f.size(); ++i) f[i] = std::sin(static_cast<float>(i)) * static_cast<float>(i % 5 + 1);
  std::vector<uint16_t> bf(f.size());
  convertFromF32(f.data(), bf.data(), DType::kBF16, f.size());
  std::vector<float> widened(f.size());
  convertToF32(bf.data(), DType::kBF16, widened.data(), f.size());
  std::vector<uint8_t> codes(f.size()), want(f.size());
  std::vector<float> scales(rows);
  quantizeFp8Rows(TensorView(bf.data(), DType::kBF16, Shape{rows, cols}), codes.data(), scales.data());
  for (int64_t r = 0; r < rows; ++r) {
    const Fp8RowScale s = quantizeFp8Row(widened.data() + r * cols, cols, want.data() + r * cols);
    EXPECT_EQ(scales[static_cast<size_t>(r)], s.scale);
  }
  EXPECT_EQ(codes, want);
}

}  // namespace
}  // namespace llmrt
