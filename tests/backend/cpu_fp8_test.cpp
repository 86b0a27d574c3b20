// The CPU reference's FP8 products (Backend::loadQuantizedWeight): x's rows quantized by core/fp8.h's
// rule, the code products summed, scaled by scale_x * scale_w, the bias added — checked against
// that formula computed here in double precision.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/fp8.h"
#include "op_test_util.h"

namespace llmrt {
namespace {

struct Fp8Weight {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
};

Fp8Weight quantize(const std::vector<float>& w, int64_t n, int64_t k) {
  Fp8Weight q{std::vector<uint8_t>(static_cast<size_t>(n * k)), std::vector<float>(static_cast<size_t>(n))};
  std::vector<float> copy = w;
  quantizeFp8Rows(TensorView(copy.data(), DType::kF32, Shape{n, k}), q.codes.data(), q.scales.data());
  return q;
}

// (q_x . codes_w) * (scale_x * scale_w) + bias, in double.
std::vector<double> reference(const std::vector<float>& x, const Fp8Weight& w, const std::vector<float>& bias,
                              int64_t m, int64_t k, int64_t n) {
  std::vector<double> out(static_cast<size_t>(m * n));
  std::vector<uint8_t> qx(static_cast<size_t>(k));
  for (int64_t r = 0; r < m; ++r) {
    const float sx = quantizeFp8Row(x.data() + r * k, k, qx.data()).scale;
    for (int64_t i = 0; i < n; ++i) {
      double s = 0.0;
      for (int64_t j = 0; j < k; ++j)
        s += static_cast<double>(f8e4m3ToF32(qx[static_cast<size_t>(j)])) *
             f8e4m3ToF32(w.codes[static_cast<size_t>(i * k + j)]);
      out[static_cast<size_t>(r * n + i)] =
          s * static_cast<double>(sx * w.scales[static_cast<size_t>(i)]) + (bias.empty() ? 0.0 : bias[static_cast<size_t>(i)]);
    }
  }
  return out;
}

TEST(CpuFp8, LinearAndLinearAddAreTheW8A8Formula) {
  std::mt19937 rng(11);
  CpuBackend cpu(2);
  for (const auto [m, k, n, with_bias] : {std::tuple{1, 64, 5, false}, std::tuple{3, 130, 17, true},
                                          std::tuple{9, 512, 64, true}}) {
    const std::vector<float> x = optest::randomVec(static_cast<size_t>(m * k), rng, 2.0f);
    const std::vector<float> w = optest::randomVec(static_cast<size_t>(n * k), rng, 0.05f);
    const std::vector<float> bias = with_bias ? optest::randomVec(static_cast<size_t>(n), rng) : std::vector<float>{};
    Fp8Weight q = quantize(w, n, k);
    auto wv = cpu.loadQuantizedWeight(TensorView(q.codes.data(), DType::kF8E4M3, Shape{n, k}),
                                TensorView(q.scales.data(), DType::kF32, Shape{n}), "w");
    ASSERT_TRUE(wv.isOk()) << wv.status().toString();
    EXPECT_EQ(wv->dtype, DType::kF8E4M3);
    EXPECT_EQ(wv->shape, (Shape{n, k}));
    std::vector<float> bcopy = bias;
    TensorView bv(bcopy.data(), DType::kF32, Shape{n});
    std::vector<float> xcopy = x, out(static_cast<size_t>(m * n), NAN);
    TensorView xv(xcopy.data(), DType::kF32, Shape{m, k}), ov(out.data(), DType::kF32, Shape{m, n});
    cpu.linear(xv, *wv, with_bias ? &bv : nullptr, ov);
    const std::vector<double> want = reference(x, q, bias, m, k, n);
    double max_ref = 0.0, unquantized_diff = 0.0;
    for (double v : want) max_ref = std::max(max_ref, std::fabs(v));
    for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], want[i], 1e-5 * max_ref) << i;
    // Not the float32 product: the activations were quantized.
    for (int64_t r = 0; r < m; ++r)
      for (int64_t i = 0; i < n; ++i) {
        double s = with_bias ? bias[static_cast<size_t>(i)] : 0.0;
        for (int64_t j = 0; j < k; ++j)
          s += static_cast<double>(x[static_cast<size_t>(r * k + j)]) *
               (f8e4m3ToF32(q.codes[static_cast<size_t>(i * k + j)]) * q.scales[static_cast<size_t>(i)]);
        unquantized_diff = std::max(unquantized_diff, std::fabs(s - want[static_cast<size_t>(r * n + i)]));
      }
    EXPECT_GT(unquantized_diff, 1e-6 * max_ref);
    EXPECT_LT(unquantized_diff, 0.1 * max_ref);
    // linearAdd: residual + that.
    std::vector<float> res = optest::randomVec(static_cast<size_t>(m * n), rng, 3.0f), res0 = res;
    TensorView rv(res.data(), DType::kF32, Shape{m, n});
    cpu.linearAdd(xv, *wv, with_bias ? &bv : nullptr, rv);
    for (size_t i = 0; i < res.size(); ++i) EXPECT_NEAR(res[i], res0[i] + want[i], 1e-5 * (max_ref + 3.0)) << i;
  }
}

TEST(CpuFp8, BadCodesOrScalesAreOneLineErrors) {
  CpuBackend cpu(1);
  std::vector<uint8_t> codes(12);
  std::vector<float> scales(3), two(2);
  auto r = cpu.loadQuantizedWeight(TensorView(codes.data(), DType::kU8, Shape{3, 4}),
                             TensorView(scales.data(), DType::kF32, Shape{3}), "layer.0.qkv");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("layer.0.qkv"), std::string::npos) << r.status().toString();
  EXPECT_NE(r.status().message().find("F8_E4M3"), std::string::npos) << r.status().toString();
  r = cpu.loadQuantizedWeight(TensorView(codes.data(), DType::kF8E4M3, Shape{3, 4}),
                        TensorView(two.data(), DType::kF32, Shape{2}), "w");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("one per row"), std::string::npos) << r.status().toString();
}

}  // namespace
}  // namespace llmrt
