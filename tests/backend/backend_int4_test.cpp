// 4-bit weights (Backend::loadInt4Weight: W = (code - zero) * scale per group of inputs, AWQ's
// scheme) on the CUDA backend against the CPU reference, which dequantizes them into float32
// products. The scales have four significant bits, so every (code - zero) * scale is exact in
// bf16 and fp16 too: both backends multiply the same weights, and the outputs differ by float32
// summation order only — the W4A16 matrix-vector kernel (m <= 4, k and group multiples of 32) and
// the dequantized 16-bit product (other steps) alike.
#include "backend_ops_fixture.h"

namespace llmrt {
namespace {


class BackendInt4 : public BackendOps {
 protected:
  std::pair<TensorView, TensorView> int4Weight(int64_t n, int64_t k, int64_t group) {
    std::uniform_int_distribution<int> nibble(0, 15), mant(0, 7), ex(4, 8);
    std::vector<uint8_t>& codes = bytes_.emplace_back(static_cast<size_t>(n * k));
    std::vector<uint8_t>& zeros = bytes_.emplace_back(static_cast<size_t>(n * (k / group)));
    std::vector<float>& scales = floats_.emplace_back(static_cast<size_t>(n * (k / group)));
    for (uint8_t& c : codes) c = static_cast<uint8_t>(nibble(rng_));
    for (uint8_t& z : zeros) z = static_cast<uint8_t>(nibble(rng_));
    for (float& s : scales) s = std::ldexp(static_cast<float>(8 + mant(rng_)) / 8.0f, -ex(rng_));
    const TensorView cv(codes.data(), DType::kU8, Shape{n, k}), sv(scales.data(), DType::kF32, Shape{n, k / group}),
        zv(zeros.data(), DType::kU8, Shape{n, k / group});
    auto c = cpu_->loadInt4Weight(cv, sv, zv, group, "w"), g = gpu_->loadInt4Weight(cv, sv, zv, group, "w");
    EXPECT_TRUE(c.isOk()) << c.status().toString();
    EXPECT_TRUE(g.isOk()) << g.status().toString();
    EXPECT_TRUE(gpu_->finishWeights().isOk());
    return {*c, *g};
  }
  std::deque<std::vector<uint8_t>> bytes_;
  std::deque<std::vector<float>> floats_;
};

TEST_P(BackendInt4, LinearAndLinearAddMatchTheDequantizedProducts) {
  struct Case {
    int64_t m, k, n, group;
    bool bias;
  };
  // 16-bit activations, m <= 32, groups of 128 / 256: the tensor-core kernel (n 5, 1001, 130: partial
  // 16-row blocks; k 4096: several chunks per warp; m 9, 16, 24, 32: 2 and 4 tiles of 8 x rows, the
  // last partial); m <= 4 with groups of 32 / 64, and float32 activations: the CUDA-core kernel;
  // m 64, k 72: the dequantized product.
  for (const Case& c : {Case{1, 128, 5, 128, false}, Case{1, 4096, 1001, 128, true}, Case{2, 1024, 64, 32, false},
                        Case{3, 512, 33, 64, true}, Case{4, 2048, 130, 128, true}, Case{5, 512, 96, 128, false},
                        Case{8, 1024, 48, 128, true}, Case{6, 512, 20, 256, false}, Case{9, 512, 40, 128, false}, Case{16, 1024, 33, 128, true},
                        Case{24, 512, 64, 256, false}, Case{32, 2048, 48, 128, true},
                        Case{64, 1024, 200, 128, true}, Case{1, 72, 16, 8, true}}) {
    const std::string what = std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n) + " g" +
                             std::to_string(c.group);
    std::vector<float> x = randomVec(static_cast<size_t>(c.m * c.k), rng_);
    roundTo(x, gpu_->activationDtype());
    const std::vector<float> b = randomVec(static_cast<size_t>(c.n), rng_);
    const auto w = int4Weight(c.n, c.k, c.group);
    EXPECT_EQ(w.second.dtype, DType::kU8);
    const auto bias = weight(b, Shape{c.n});
    const auto xs = put(0, c.m, c.k, x, gpu_->activationDtype());
    const bool half_x = gpu_->activationDtype() != DType::kF32;
    const bool gemv = (half_x && c.m <= 32 && c.k % 128 == 0 && c.group % 128 == 0) ||
                      (c.m <= 4 && c.k % 32 == 0 && c.group % 32 == 0);
    for (const DType out_dtype : {DType::kF32, gpu_->activationDtype()}) {
      // (The dequantized product adds a bias to its 16-bit output, a second rounding: as every
      // 16-bit cuBLAS product's; compared in float32 only.)
      if (out_dtype != DType::kF32 && c.bias && !gemv) continue;
      const auto [got, want] = linearBoth(xs, w, c.bias ? &bias : nullptr, c.n, out_dtype);
      // (A 16-bit output may round the other way where the float32 sums differ: a step at most.)
      expectClose(got, want, 1e-5 + halfStep(out_dtype), 1e-5 * maxAbs(want) + 1e-4, "linear int4 " + what,
                  2 * halfStep(out_dtype));
    }
    const auto [got, want] =
        linearAddBoth(xs, w, c.bias ? &bias : nullptr, randomVec(static_cast<size_t>(c.m * c.n), rng_, 4.0f));
    expectClose(got, want, 1e-5, 1e-5 * maxAbs(want) + 1e-4, "linearAdd int4 " + what);
  }
}

TEST_P(BackendInt4, BadPartsAreOneLineErrors) {
  std::vector<uint8_t> codes(64, 3), zeros(2, 16);
  std::vector<float> scales(2, 1.0f);
  const TensorView cv(codes.data(), DType::kU8, Shape{2, 32}), sv(scales.data(), DType::kF32, Shape{2, 1}),
      zv(zeros.data(), DType::kU8, Shape{2, 1});
  auto r = gpu_->loadInt4Weight(cv, sv, zv, 32, "layers.0.o");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("zero point 16"), std::string::npos) << r.status().toString();
  r = cpu_->loadInt4Weight(cv, sv, zv, 24, "layers.0.o");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("does not divide"), std::string::npos) << r.status().toString();
}

INSTANTIATE_TEST_SUITE_P(Modes, BackendInt4,
                         ::testing::Values(Mode{DType::kF32, DType::kF32, "f32"},
                                           Mode{DType::kBF16, DType::kBF16, "bf16"},
                                           Mode{DType::kF16, DType::kF16, "fp16"}),
                         [](const ::testing::TestParamInfo<Mode>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace llmrt
