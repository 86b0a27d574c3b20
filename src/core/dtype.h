// Element types and exact scalar conversions (round-to-nearest-even).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace llmrt {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kF8E4M3,  // OCP float8 e4m3fn: no infinities, NaN = S.1111.111, max 448
  kF64,
  kI8,
  kU8,
  kI16,
  kI32,
  kI64,
  kBool,
};

// Size of one element in bytes.
size_t dtypeSize(DType dt);
// Canonical name as safetensors spells it ("F32", "BF16", "F8_E4M3", ...).
std::string_view dtypeName(DType dt);
// Parses a safetensors dtype name; nullopt for an unknown one.
std::optional<DType> dtypeFromSafetensorsName(std::string_view name);
// Parses a torch dtype name ("float32", "bfloat16", "torch.float16", "half", ...).
std::optional<DType> dtypeFromTorchName(std::string_view name);
bool isFloatingPoint(DType dt);

// ---- scalar conversions ----------------------------------------------------
inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// bfloat16: the top 16 bits of a float32.
inline float bf16ToF32(uint16_t h) { return bitsToFloat(static_cast<uint32_t>(h) << 16); }
inline uint16_t f32ToBf16(float f) {
  uint32_t u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

float f16ToF32(uint16_t h);
uint16_t f32ToF16(float f);
float f8e4m3ToF32(uint8_t v);
uint8_t f32ToF8e4m3(float f);

// Converts `n` elements of `src` (type `src_dt`) to float32. Floating and
// integer types are supported; bool reads as 0/1. `src` need not be aligned.
void convertToF32(const void* src, DType src_dt, float* dst, size_t n);
// Converts `n` float32 values to `dst_dt` (floating types only).
void convertFromF32(const float* src, void* dst, DType dst_dt, size_t n);

}  // namespace llmrt
