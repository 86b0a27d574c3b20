// AutoAWQ's packing as `llmrt quantize --method awq` writes it (loader/awq_pack.h), decoded here
// independently with AutoAWQ's order (word nibble i holds output column [0, 2, 4, 6, 1, 3, 5, 7][i]
// of its 8): the decoded weights equal awqRoundTrip's bit for bit, codes and zero points are 4-bit,
// scales are fp16 values of (max - min) / 15, and every weight lies within half a scale of its
// original.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "loader/awq_pack.h"

namespace llmrt {
namespace {

TEST(AwqPack, DecodesToTheRoundTripAndStaysWithinHalfAScale) {
  constexpr int64_t out = 24, in = 256, group = 128;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> w(static_cast<size_t>(out * in));
  for (float& v : w) v = nd(rng);
  w[7] = 0.5f;  // an outlier in row 0's first group
  const AwqPacked p = packAwq(w.data(), out, in, group);
  ASSERT_EQ(p.qweight.size(), static_cast<size_t>(in * out / 8));
  ASSERT_EQ(p.qzeros.size(), static_cast<size_t>(in / group * out / 8));
  ASSERT_EQ(p.scales.size(), static_cast<size_t>(in / group * out));
  std::vector<float> rt(w.size());
  awqRoundTrip(w.data(), out, in, group, rt.data());
  constexpr int kOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  auto nibble = [&](uint32_t word, int64_t c) {
    for (int i = 0; i < 8; ++i)
      if (kOrder[i] == c % 8) return static_cast<int>((word >> (4 * i)) & 15u);
    return -1;
  };
  for (int64_t r = 0; r < in; ++r)
    for (int64_t c = 0; c < out; ++c) {
      const int64_t g = r / group;
      const int code = nibble(p.qweight[static_cast<size_t>(r * (out / 8) + c / 8)], c);
      const int zero = nibble(p.qzeros[static_cast<size_t>(g * (out / 8) + c / 8)], c);
      const float scale = f16ToF32(p.scales[static_cast<size_t>(g * out + c)]);
      const float v = static_cast<float>(code - zero) * scale;
      ASSERT_EQ(v, rt[static_cast<size_t>(c * in + r)]) << "row " << c << " input " << r;
      EXPECT_LE(std::fabs(v - w[static_cast<size_t>(c * in + r)]), 0.5f * scale * 1.001f) << c << ", " << r;
    }
  // Row 0's first group spans the outlier: its scale is about (0.5 - min) / 15.
  float mn = 0.0f;
  for (int64_t i = 0; i < group; ++i) mn = std::min(mn, w[static_cast<size_t>(i)]);
  EXPECT_NEAR(f16ToF32(p.scales[0]), (0.5f - mn) / 15.0f, 1e-3f * (0.5f - mn) / 15.0f);
}

}  // namespace
}  // namespace llmrt
