// ALiBi slopes as BLOOM's build_alibi_tensor makes them (Falcon and Baichuan-13B use the same).
#include <gtest/gtest.h>

#include <cmath>

#include "model/rope.h"

namespace llmrt {
namespace {

TEST(Alibi, SlopesOfAPowerOfTwoAreAGeometricSeries) {
  const std::vector<float> s = alibiSlopes(8);
  ASSERT_EQ(s.size(), 8u);
  for (int h = 0; h < 8; ++h) EXPECT_FLOAT_EQ(s[static_cast<size_t>(h)], std::ldexp(1.0f, -(h + 1)));
}

TEST(Alibi, OtherHeadCountsTakeTheOddPowersOfTheNextSeries) {
  // 6 heads: the 4-head series 2^-2, 2^-4, 2^-6, 2^-8, then 2^-1, 2^-3 (odd powers of 2^-1).
  EXPECT_EQ(alibiSlopes(6), (std::vector<float>{0.25f, 0.0625f, 0.015625f, 0.00390625f, 0.5f, 0.125f}));
  // 40 heads (Baichuan-13B): 2^(-(h+1)/4) for h < 32, then 2^(-(2k+1)/8).
  const std::vector<float> s = alibiSlopes(40);
  ASSERT_EQ(s.size(), 40u);
  EXPECT_NEAR(s[0], std::pow(2.0, -0.25), 1e-7);
  EXPECT_NEAR(s[31], std::pow(2.0, -8.0), 1e-9);
  EXPECT_NEAR(s[32], std::pow(2.0, -1.0 / 8), 1e-7);
  EXPECT_NEAR(s[39], std::pow(2.0, -15.0 / 8), 1e-7);
}

}  // namespace
}  // namespace llmrt
