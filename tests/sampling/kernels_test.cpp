#include "sampling/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace llmrt::detail {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(FastExp, MatchesExpOverTheSamplersRange) {
  double worst = 0.0;
  for (float x = -87.0f; x <= 0.0f; x += 0.00731f) {
    const double ref = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(fastExp(x) - ref) / ref);
  }
  EXPECT_LT(worst, 3e-7);
  EXPECT_EQ(fastExp(0.0f), 1.0f);
  EXPECT_EQ(fastExp(-kInf), 0.0f);
  EXPECT_EQ(fastExp(-100.0f), 0.0f);
  EXPECT_NEAR(fastExp(-1.0f), 0.36787944f, 1e-7);
}

TEST(FastExp, IsMonotone) {
  float prev = 0.0f;
  for (float x = -87.0f; x <= 0.0f; x = std::nextafter(x, 1.0f) + 1e-4f) {
    const float y = fastExp(x);
    ASSERT_GE(y, prev) << x;
    prev = y;
  }
}

TEST(Kernels, MaxScanFlagsNanAndInf) {
  std::vector<float> x(37, -1.0f);
  x[20] = 3.0f;
  x[36] = -kInf;
  EXPECT_EQ(maxScan(x.data(), x.size()).max, 3.0f);
  EXPECT_FALSE(maxScan(x.data(), x.size()).invalid);
  x[35] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(maxScan(x.data(), x.size()).invalid);
  x[35] = 0.0f;
  x[3] = kInf;
  EXPECT_TRUE(maxScan(x.data(), x.size()).invalid);
  EXPECT_EQ(minFinite(x.data(), x.size()), -1.0f);
  const std::vector<float> masked(5, -kInf);
  EXPECT_EQ(minFinite(masked.data(), masked.size()), kInf);
}

TEST(Kernels, ExpStoreSumAndMask) {
  std::vector<float> x = {0.0f, -1.0f, -2.0f, -kInf, -0.5f};
  std::vector<float> p(x.size());
  const double s = expStore(x.data(), x.size(), 0.0f, 2.0f, p.data());
  EXPECT_NEAR(p[1], std::exp(-2.0), 1e-7);
  EXPECT_EQ(p[3], 0.0f);
  EXPECT_NEAR(s, 1 + std::exp(-2.0) + std::exp(-4.0) + std::exp(-1.0), 1e-6);
  EXPECT_NEAR(expSum(x.data(), x.size(), 0.0f), 1 + std::exp(-1.0) + std::exp(-2.0) + std::exp(-0.5), 1e-6);
  // Cut at (-0.5, id 4): keeps logits > -0.5 and id <= 4 at -0.5.
  const double kept = maskProbs(x.data(), p.data(), x.size(), true, -0.5f, 4, 0.0f);
  EXPECT_EQ(p[1], 0.0f);
  EXPECT_EQ(p[2], 0.0f);
  EXPECT_NEAR(kept, 1 + std::exp(-1.0), 1e-6);
  EXPECT_NEAR(maskProbs(x.data(), p.data(), x.size(), false, 0.0f, 0, 0.5f), 1.0, 1e-7);
  EXPECT_EQ(countGreater(x.data(), x.size(), -1.0f), 2u);
}

TEST(Kernels, EveryVectorWidthMatchesScalarFastExpBitForBit) {
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.0f, 5.0f);
  for (size_t n : {size_t{1}, size_t{15}, size_t{16}, size_t{257}, size_t{5000}}) {
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng);
    x[0] = -kInf;
    std::vector<float> base(n), wide(n);
    const bool was = setAvx2Enabled(false);
    const double s_base = expStore(x.data(), n, 3.0f, 0.7f, base.data());
    const double z_base = expSum(x.data(), n, 3.0f);
    setAvx2Enabled(true);
    const double s_wide = expStore(x.data(), n, 3.0f, 0.7f, wide.data());
    const double z_wide = expSum(x.data(), n, 3.0f);
    setAvx2Enabled(was);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(base[i], fastExp((x[i] - 3.0f) * 0.7f)) << i;
      ASSERT_EQ(wide[i], base[i]) << i;
    }
    EXPECT_EQ(s_base, s_wide) << n;
    EXPECT_EQ(z_base, z_wide) << n;
  }
  std::printf("AVX2 kernels %s on this machine\n", avx2Available() ? "available" : "not available");
}

TEST(Kernels, FirstAboveAndFirstEqual) {
  std::vector<float> x(100, 0.0f);
  x[3] = 1.0f;
  x[40] = 2.0f;
  x[99] = 3.0f;
  EXPECT_EQ(firstAbove(x.data(), 0, x.size(), 0.5f), 3u);
  EXPECT_EQ(firstAbove(x.data(), 4, x.size(), 0.5f), 40u);
  EXPECT_EQ(firstAbove(x.data(), 41, x.size(), 0.5f), 99u);
  EXPECT_EQ(firstAbove(x.data(), 0, x.size(), 5.0f), 100u);
  std::vector<uint16_t> b(100, 7);
  b[17] = 3;
  b[98] = 3;
  EXPECT_EQ(firstEqual(b.data(), 0, b.size(), 3), 17u);
  EXPECT_EQ(firstEqual(b.data(), 18, b.size(), 3), 98u);
  EXPECT_EQ(firstEqual(b.data(), 99, b.size(), 3), 100u);
  EXPECT_EQ(firstEqual(b.data(), 0, b.size(), 7), 0u);
}

TEST(Kernels, InverseCdfAcrossBlocks) {
  std::vector<float> p(2000, 0.0f);
  p[10] = 1.0f;
  p[700] = 2.0f;
  p[1999] = 1.0f;
  EXPECT_EQ(inverseCdf(p.data(), p.size(), 0.0), 10);
  EXPECT_EQ(inverseCdf(p.data(), p.size(), 0.999), 10);
  EXPECT_EQ(inverseCdf(p.data(), p.size(), 1.0), 700);
  EXPECT_EQ(inverseCdf(p.data(), p.size(), 2.5), 700);
  EXPECT_EQ(inverseCdf(p.data(), p.size(), 3.5), 1999);
  EXPECT_EQ(inverseCdf(p.data(), p.size(), 4.0), 1999);  // short total: last positive
  const std::vector<float> zeros(100, 0.0f);
  EXPECT_EQ(inverseCdf(zeros.data(), zeros.size(), 0.0), -1);
}

}  // namespace
}  // namespace llmrt::detail
