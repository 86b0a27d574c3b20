#include "core/philox.h"

#include <gtest/gtest.h>

#include <set>

namespace llmrt {
namespace {

// Known-answer vectors from Random123's tests/kat_vectors ("philox4x32 10" lines).
TEST(Philox, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(philox4x32({0, 0, 0, 0}, {0, 0}),
            (PhiloxCounter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}),
            (PhiloxCounter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}),
            (PhiloxCounter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, IsConstexpr) {
  static_assert(philox4x32({0, 0, 0, 0}, {0, 0})[0] == 0x6627e8d5u);
  constexpr double u = philoxUniform(1, 2, 3);
  static_assert(u >= 0.0 && u < 1.0);
}

TEST(Philox, UniformFollowsTheDocumentedMapping) {
  const uint64_t seed = 0x0123456789abcdefull, step = 0x1122334455ull;
  const PhiloxCounter out =
      philox4x32({0x22334455u, 0x11u, 7u, kPhiloxStreamToken}, {0x89abcdefu, 0x01234567u});
  const uint64_t bits = (static_cast<uint64_t>(out[1]) << 32) | out[0];
  EXPECT_EQ(philoxUniform(seed, step, 7), static_cast<double>(bits >> 11) / 9007199254740992.0);
}

TEST(Philox, UniformIsAPureFunctionOfItsInputs) {
  EXPECT_EQ(philoxUniform(42, 10, 0), philoxUniform(42, 10, 0));
  std::set<double> seen;
  for (uint64_t seed : {0ull, 1ull, 42ull})
    for (uint64_t step = 0; step < 20; ++step)
      for (uint32_t idx = 0; idx < 4; ++idx) seen.insert(philoxUniform(seed, step, idx));
  EXPECT_EQ(seen.size(), 3u * 20u * 4u);
  EXPECT_NE(philoxUniform(1, 0, 0, 0), philoxUniform(1, 0, 0, 1));
}

TEST(Philox, UniformMeanAndRange) {
  double sum = 0.0, lo = 1.0, hi = 0.0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double u = philoxUniform(7, static_cast<uint64_t>(i), 0);
    sum += u;
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);
  EXPECT_GE(lo, 0.0);
  EXPECT_LT(lo, 0.001);
  EXPECT_LT(hi, 1.0);
  EXPECT_GT(hi, 0.999);
}

}  // namespace
}  // namespace llmrt
