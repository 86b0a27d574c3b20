#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/dtype.h"

namespace llmrt {
namespace {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtypeSize(DType::kF32), 4u);
  EXPECT_EQ(dtypeSize(DType::kBF16), 2u);
  EXPECT_EQ(dtypeSize(DType::kF8E4M3), 1u);
  EXPECT_EQ(dtypeSize(DType::kI64), 8u);
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3, DType::kF64, DType::kI8,
                   DType::kU8, DType::kI16, DType::kI32, DType::kI64, DType::kBool}) {
    auto back = dtypeFromSafetensorsName(dtypeName(dt));
    ASSERT_TRUE(back.has_value()) << dtypeName(dt);
    EXPECT_EQ(*back, dt);
  }
  EXPECT_FALSE(dtypeFromSafetensorsName("F4").has_value());
  EXPECT_EQ(dtypeFromTorchName("torch.bfloat16"), DType::kBF16);
  EXPECT_EQ(dtypeFromTorchName("float16"), DType::kF16);
  EXPECT_FALSE(dtypeFromTorchName("complex64").has_value());
}

TEST(DType, F16EdgeValues) {
  EXPECT_EQ(f32ToF16(0.0f), 0x0000);
  EXPECT_EQ(f32ToF16(-0.0f), 0x8000);
  EXPECT_EQ(f32ToF16(1.0f), 0x3c00);
  EXPECT_EQ(f32ToF16(65504.0f), 0x7bff);                       // max finite
  EXPECT_EQ(f32ToF16(65519.0f), 0x7bff);                       // rounds down to max
  EXPECT_EQ(f32ToF16(65520.0f), 0x7c00);                       // ties-to-even overflow: inf
  EXPECT_EQ(f32ToF16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(f32ToF16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(f32ToF16(std::ldexp(1.0f, -24)), 0x0001);          // smallest subnormal
  EXPECT_EQ(f32ToF16(std::ldexp(1.0f, -25)), 0x0000);          // tie to even: zero
  EXPECT_EQ(f32ToF16(std::ldexp(1.5f, -25)), 0x0001);          // above the tie
  EXPECT_EQ(f32ToF16(std::ldexp(3.0f, -25)), 0x0002);          // 1.5 ulp ties to even (2)
  EXPECT_EQ(f32ToF16(std::ldexp(1.0f, -14)), 0x0400);          // smallest normal
  EXPECT_EQ(f32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);   // tie, even stays
  EXPECT_EQ(f32ToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie, odd rounds up
  uint16_t nan = f32ToF16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_TRUE(std::isnan(f16ToF32(0x7e00)));
  EXPECT_EQ(f16ToF32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16ToF32(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(f16ToF32(0xfbff), -65504.0f);
  EXPECT_TRUE(std::signbit(f16ToF32(0x8000)));
  // Every finite half round-trips exactly.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue;
    ASSERT_EQ(f32ToF16(f16ToF32(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

TEST(DType, Bf16EdgeValues) {
  EXPECT_EQ(f32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(f32ToBf16(-2.0f), 0xc000);
  // 1 + 2^-8 is a tie between 1.0 and 1+2^-7: even (1.0) wins.
  EXPECT_EQ(f32ToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(f32ToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(f32ToBf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(f32ToBf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf
  EXPECT_EQ(f32ToBf16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(f32ToBf16(std::ldexp(1.0f, -133)), 0x0001);  // bf16 subnormal
  uint16_t nan = f32ToBf16(bitsToFloat(0x7f800001u));  // signalling NaN stays NaN
  EXPECT_TRUE(std::isnan(bf16ToF32(nan)));
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7f80) == 0x7f80) continue;
    ASSERT_EQ(f32ToBf16(bf16ToF32(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

TEST(DType, F8E4M3EdgeValues) {
  EXPECT_EQ(f32ToF8e4m3(1.0f), 0x38);
  EXPECT_EQ(f32ToF8e4m3(448.0f), 0x7e);
  EXPECT_EQ(f32ToF8e4m3(-448.0f), 0xfe);
  EXPECT_EQ(f32ToF8e4m3(464.0f), 0x7e);   // tie rounds to even (448)
  EXPECT_EQ(f32ToF8e4m3(480.0f), 0x7f);   // beyond: NaN (no infinity in e4m3fn)
  EXPECT_EQ(f32ToF8e4m3(std::numeric_limits<float>::infinity()), 0x7f);
  EXPECT_EQ(f32ToF8e4m3(std::ldexp(1.0f, -9)), 0x01);  // smallest subnormal
  EXPECT_EQ(f32ToF8e4m3(std::ldexp(1.0f, -10)), 0x00); // tie to even
  EXPECT_EQ(f32ToF8e4m3(std::ldexp(1.0f, -6)), 0x08);  // smallest normal
  EXPECT_TRUE(std::isnan(f8e4m3ToF32(0x7f)));
  EXPECT_TRUE(std::isnan(f8e4m3ToF32(0xff)));
  EXPECT_EQ(f8e4m3ToF32(0x7e), 448.0f);
  EXPECT_EQ(f8e4m3ToF32(0x01), std::ldexp(1.0f, -9));
  for (uint32_t v = 0; v < 0x100; ++v) {
    if ((v & 0x7f) == 0x7f) continue;
    ASSERT_EQ(f32ToF8e4m3(f8e4m3ToF32(static_cast<uint8_t>(v))), v) << std::hex << v;
  }
}

TEST(DType, BulkConversions) {
  const float src[5] = {0.5f, -1.25f, 3.0f, 1e-3f, -7.0f};
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16, DType::kF64}) {
    std::vector<uint8_t> buf(5 * dtypeSize(dt));
    convertFromF32(src, buf.data(), dt, 5);
    float back[5];
    convertToF32(buf.data(), dt, back, 5);
    for (int i = 0; i < 5; ++i) EXPECT_NEAR(back[i], src[i], std::fabs(src[i]) * 4e-3f) << dtypeName(dt);
  }
  // Unaligned sources (safetensors data carries no alignment guarantee).
  std::vector<uint8_t> raw(1 + 5 * 2);
  uint16_t halves[5];
  convertFromF32(src, halves, DType::kBF16, 5);
  std::memcpy(raw.data() + 1, halves, sizeof(halves));
  float unaligned[5];
  convertToF32(raw.data() + 1, DType::kBF16, unaligned, 5);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(unaligned[i], bf16ToF32(halves[i]));
  const int32_t ints[3] = {-5, 0, 70000};
  float out[3];
  convertToF32(ints, DType::kI32, out, 3);
  EXPECT_EQ(out[0], -5.0f);
  EXPECT_EQ(out[2], 70000.0f);
}

}  // namespace
}  // namespace llmrt
