#include "core/dtype.h"

#include <cassert>
#include <cmath>
#include <limits>

namespace llmrt {

size_t dtypeSize(DType dt) {
  switch (dt) {
    case DType::kF64:
    case DType::kI64: return 8;
    case DType::kF32:
    case DType::kI32: return 4;
    case DType::kF16:
    case DType::kBF16:
    case DType::kI16: return 2;
    case DType::kF8E4M3:
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: return 1;
  }
  return 0;
}

std::string_view dtypeName(DType dt) {
  switch (dt) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kF8E4M3: return "F8_E4M3";
    case DType::kF64: return "F64";
    case DType::kI8: return "I8";
    case DType::kU8: return "U8";
    case DType::kI16: return "I16";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
    case DType::kBool: return "BOOL";
  }
  return "?";
}

std::optional<DType> dtypeFromSafetensorsName(std::string_view n) {
  if (n == "F32") return DType::kF32;
  if (n == "F16") return DType::kF16;
  if (n == "BF16") return DType::kBF16;
  if (n == "F8_E4M3") return DType::kF8E4M3;
  if (n == "F64") return DType::kF64;
  if (n == "I8") return DType::kI8;
  if (n == "U8") return DType::kU8;
  if (n == "I16") return DType::kI16;
  if (n == "I32") return DType::kI32;
  if (n == "I64") return DType::kI64;
  if (n == "BOOL") return DType::kBool;
  return std::nullopt;
}

std::optional<DType> dtypeFromTorchName(std::string_view n) {
  if (n.substr(0, 6) == "torch.") n.remove_prefix(6);
  if (n == "float32" || n == "float") return DType::kF32;
  if (n == "float16" || n == "half") return DType::kF16;
  if (n == "bfloat16") return DType::kBF16;
  if (n == "float64" || n == "double") return DType::kF64;
  if (n == "float8_e4m3fn") return DType::kF8E4M3;
  return std::nullopt;
}

bool isFloatingPoint(DType dt) {
  return dt == DType::kF32 || dt == DType::kF16 || dt == DType::kBF16 || dt == DType::kF8E4M3 ||
         dt == DType::kF64;
}

float f16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bitsToFloat(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp != 0) return bitsToFloat(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return bitsToFloat(sign);  // signed zero
  // Subnormal: value = mant * 2^-24, exact in float32.
  float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
  return sign ? -v : v;
}

uint16_t f32ToF16(float f) {
  const uint32_t u = floatBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((a >> 13) & 0x3ffu);  // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: infinity
  if (a >= 0x38800000u) {                       // normal half (>= 2^-14)
    uint32_t r = a - 0x38000000u;               // rebias exponent 127 -> 15
    r += 0xfffu + ((r >> 13) & 1u);             // round to nearest even on 13 dropped bits
    return sign | static_cast<uint16_t>(r >> 13);
  }
  if (a < 0x33000000u) return sign;  // below half of the smallest subnormal (2^-25): zero
  // Subnormal half: shift the full mantissa right and round to nearest even.
  const uint32_t e = a >> 23;               // 102..112
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e;          // so that result = m >> shift (units of 2^-24)
  uint32_t r = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (r & 1u))) ++r;
  return sign | static_cast<uint16_t>(r);
}

float f8e4m3ToF32(uint8_t v) {
  const bool neg = v & 0x80u;
  const uint32_t exp = (v >> 3) & 0xfu;
  const uint32_t mant = v & 0x7u;
  float r;
  if (exp == 0xf && mant == 0x7) {
    r = std::numeric_limits<float>::quiet_NaN();
  } else if (exp == 0) {
    r = static_cast<float>(mant) * 0.001953125f;  // mant * 2^-9
  } else {
    r = bitsToFloat(((exp + 120u) << 23) | (mant << 20));
  }
  return neg ? -r : r;
}

uint8_t f32ToF8e4m3(float f) {
  const uint32_t u = floatBits(f);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u || a == 0x7f800000u) return sign | 0x7fu;  // NaN and inf -> NaN (no inf in e4m3fn)
  if (a >= 0x43f00000u) return sign | 0x7fu;  // >= 480 rounds beyond 448: NaN (as torch/c10)
  if (a >= 0x3c800000u) {                     // normal (>= 2^-6)
    uint32_t r = a - 0x3c000000u;             // rebias 127 -> 7
    r += 0x7ffffu + ((r >> 20) & 1u);
    return sign | static_cast<uint8_t>(r >> 20);
  }
  if (a < 0x3a000000u) return sign;  // below 2^-10 (half the smallest subnormal): zero
  const uint32_t e = a >> 23;        // 116..120
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 141u - e;   // result in units of 2^-9
  uint32_t r = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (r & 1u))) ++r;
  return sign | static_cast<uint8_t>(r);
}

namespace {
// Loads element i of an array that may be unaligned for T (safetensors data
// and mmapped files give no alignment guarantee); compiles to a plain load.
template <typename T>
inline T loadAt(const void* src, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const uint8_t*>(src) + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void castLoop(const void* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(loadAt<T>(src, i));
}
}  // namespace

void convertToF32(const void* src, DType dt, float* dst, size_t n) {
  switch (dt) {
    case DType::kF32: std::memcpy(dst, src, n * 4); return;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) dst[i] = f16ToF32(loadAt<uint16_t>(src, i));
      return;
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) dst[i] = bf16ToF32(loadAt<uint16_t>(src, i));
      return;
    case DType::kF8E4M3: {
      const uint8_t* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f8e4m3ToF32(s[i]);
      return;
    }
    case DType::kF64: castLoop<double>(src, dst, n); return;
    case DType::kI8: castLoop<int8_t>(src, dst, n); return;
    case DType::kU8:
    case DType::kBool: castLoop<uint8_t>(src, dst, n); return;
    case DType::kI16: castLoop<int16_t>(src, dst, n); return;
    case DType::kI32: castLoop<int32_t>(src, dst, n); return;
    case DType::kI64: castLoop<int64_t>(src, dst, n); return;
  }
}

void convertFromF32(const float* src, void* dst, DType dt, size_t n) {
  switch (dt) {
    case DType::kF32: std::memcpy(dst, src, n * 4); return;
    case DType::kF16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32ToF16(src[i]);
      return;
    }
    case DType::kBF16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32ToBf16(src[i]);
      return;
    }
    case DType::kF8E4M3: {
      uint8_t* d = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32ToF8e4m3(src[i]);
      return;
    }
    case DType::kF64: {
      double* d = static_cast<double*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = src[i];
      return;
    }
    default: assert(false && "convertFromF32: integer destination"); return;
  }
}

}  // namespace llmrt
