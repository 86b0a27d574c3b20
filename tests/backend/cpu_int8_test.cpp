// The CPU reference's INT8 products (Backend::loadQuantizedWeight with I8 codes): x's rows
// quantized by core/int8.h's rule, the code products summed in int32, then
// float(sum) * (scale_x * scale_w) + bias — checked bit for bit against that formula computed
// here with a 64-bit sum, and against the float32 product of the dequantized weights (near, not
// equal: the activations really are quantized).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/int8.h"
#include "op_test_util.h"

namespace llmrt {
namespace {

struct Int8Weight {
  std::vector<int8_t> codes;
  std::vector<float> scales;
};

Int8Weight quantize(const std::vector<float>& w, int64_t n, int64_t k) {
  Int8Weight q{std::vector<int8_t>(static_cast<size_t>(n * k)), std::vector<float>(static_cast<size_t>(n))};
  std::vector<float> copy = w;
  quantizeInt8Rows(TensorView(copy.data(), DType::kF32, Shape{n, k}), q.codes.data(), q.scales.data());
  return q;
}

std::vector<float> reference(const std::vector<float>& x, const Int8Weight& w, const std::vector<float>& bias,
                             int64_t m, int64_t k, int64_t n) {
  std::vector<float> out(static_cast<size_t>(m * n));
  std::vector<int8_t> qx(static_cast<size_t>(k));
  for (int64_t r = 0; r < m; ++r) {
    const float sx = quantizeInt8Row(x.data() + r * k, k, qx.data()).scale;
    for (int64_t i = 0; i < n; ++i) {
      int64_t s = 0;
      for (int64_t j = 0; j < k; ++j) s += int64_t{qx[static_cast<size_t>(j)]} * w.codes[static_cast<size_t>(i * k + j)];
      const float v = static_cast<float>(s) * (sx * w.scales[static_cast<size_t>(i)]);
      out[static_cast<size_t>(r * n + i)] = v + (bias.empty() ? 0.0f : bias[static_cast<size_t>(i)]);
    }
  }
  return out;
}

TEST(CpuInt8, RowRule) {
  const float v[5] = {0.5f, -1.0f, 0.25f, NAN, 0.0f};
  int8_t codes[5];
  const Int8RowScale s = quantizeInt8Row(v, 5, codes);
  EXPECT_EQ(s.scale, 1.0f / 127.0f);
  EXPECT_EQ(codes[0], 64);  // 63.5: to even
  EXPECT_EQ(codes[1], -127);
  EXPECT_EQ(codes[2], 32);  // 31.75
  EXPECT_EQ(codes[3], 0);   // NaN
  EXPECT_EQ(codes[4], 0);
  const float zeros[3] = {0.0f, 0.0f, 0.0f};
  EXPECT_EQ(quantizeInt8Row(zeros, 3, codes).scale, 1.0f);
  EXPECT_EQ(codes[0], 0);
}

TEST(CpuInt8, LinearAndLinearAddAreTheW8A8Formula) {
  std::mt19937 rng(12);
  CpuBackend cpu(2);
  for (const auto [m, k, n, with_bias] : {std::tuple{1, 64, 5, false}, std::tuple{3, 130, 17, true},
                                          std::tuple{9, 4096, 64, true}}) {
    const std::vector<float> x = optest::randomVec(static_cast<size_t>(m * k), rng, 2.0f);
    const std::vector<float> w = optest::randomVec(static_cast<size_t>(n * k), rng, 0.05f);
    const std::vector<float> bias = with_bias ? optest::randomVec(static_cast<size_t>(n), rng) : std::vector<float>{};
    Int8Weight q = quantize(w, n, k);
    auto wv = cpu.loadQuantizedWeight(TensorView(q.codes.data(), DType::kI8, Shape{n, k}),
                                      TensorView(q.scales.data(), DType::kF32, Shape{n}), "w");
    ASSERT_TRUE(wv.isOk()) << wv.status().toString();
    EXPECT_EQ(wv->dtype, DType::kI8);
    EXPECT_EQ(wv->shape, (Shape{n, k}));
    std::vector<float> bcopy = bias;
    TensorView bv(bcopy.data(), DType::kF32, Shape{n});
    std::vector<float> xcopy = x, out(static_cast<size_t>(m * n), NAN);
    TensorView xv(xcopy.data(), DType::kF32, Shape{m, k}), ov(out.data(), DType::kF32, Shape{m, n});
    cpu.linear(xv, *wv, with_bias ? &bv : nullptr, ov);
    const std::vector<float> want = reference(x, q, bias, m, k, n);
    double max_ref = 0.0, unquantized_diff = 0.0;
    for (float v : want) max_ref = std::max(max_ref, static_cast<double>(std::fabs(v)));
    for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], want[i]) << i;
    for (int64_t r = 0; r < m; ++r)
      for (int64_t i = 0; i < n; ++i) {
        double s = with_bias ? bias[static_cast<size_t>(i)] : 0.0;
        for (int64_t j = 0; j < k; ++j)
          s += static_cast<double>(x[static_cast<size_t>(r * k + j)]) *
               (q.codes[static_cast<size_t>(i * k + j)] * q.scales[static_cast<size_t>(i)]);
        unquantized_diff = std::max(unquantized_diff, std::fabs(s - want[static_cast<size_t>(r * n + i)]));
      }
    EXPECT_GT(unquantized_diff, 1e-6 * max_ref);
    EXPECT_LT(unquantized_diff, 0.05 * max_ref);
    // linearAdd: residual + that, one rounding.
    std::vector<float> res = optest::randomVec(static_cast<size_t>(m * n), rng, 3.0f), res0 = res;
    TensorView rv(res.data(), DType::kF32, Shape{m, n});
    cpu.linearAdd(xv, *wv, with_bias ? &bv : nullptr, rv);
    for (size_t i = 0; i < res.size(); ++i) EXPECT_EQ(res[i], res0[i] + want[i]) << i;
  }
}

TEST(CpuInt8, BadCodesAreOneLineErrors) {
  CpuBackend cpu(1);
  std::vector<int8_t> codes(12);
  std::vector<float> scales(3);
  auto r = cpu.loadQuantizedWeight(TensorView(codes.data(), DType::kI8, Shape{12}),
                                   TensorView(scales.data(), DType::kF32, Shape{3}), "layer.0.o");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("layer.0.o"), std::string::npos) << r.status().toString();
  EXPECT_NE(r.status().message().find("I8 [out, in]"), std::string::npos) << r.status().toString();
  EXPECT_TRUE(cpu.supportsQuantizedWeights(DType::kI8));
  EXPECT_FALSE(cpu.supportsQuantizedWeights(DType::kU8));
}

// 4-bit weights (Backend::loadInt4Weight's default body, the CPU's): dequantized into a float32
// weight, float(code - zero) * scale per group; bad parts are one-line errors.
TEST(CpuInt4, LoadDequantizesAndChecksItsParts) {
  CpuBackend cpu(1);
  std::vector<uint8_t> codes = {0, 15, 7, 8, 1, 2, 3, 4}, zeros = {8, 0, 3, 15};
  std::vector<float> scales = {0.5f, 2.0f, 0.25f, 1.0f};
  const TensorView cv(codes.data(), DType::kU8, Shape{2, 4}), sv(scales.data(), DType::kF32, Shape{2, 2}),
      zv(zeros.data(), DType::kU8, Shape{2, 2});
  auto w = cpu.loadInt4Weight(cv, sv, zv, 2, "w");
  ASSERT_TRUE(w.isOk()) << w.status().toString();
  EXPECT_EQ(w->dtype, DType::kF32);
  const std::vector<float> want = {-4.0f, 3.5f, 14.0f, 16.0f, -0.5f, -0.25f, -12.0f, -11.0f};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(w->as<const float>()[i], want[i]) << i;
  zeros[1] = 16;
  auto bad = cpu.loadInt4Weight(cv, sv, zv, 2, "layers.1.down");
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("layers.1.down"), std::string::npos) << bad.status().toString();
  EXPECT_NE(bad.status().message().find("zero point 16"), std::string::npos) << bad.status().toString();
  bad = cpu.loadInt4Weight(cv, sv, zv, 3, "w");
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("does not divide"), std::string::npos) << bad.status().toString();
}

}  // namespace
}  // namespace llmrt
