// Float8 E4M3 (e4m3fn) row quantization: the one rule of every FP8 path — the CPU reference's
// activation quantization, the CUDA kernels (cuda_fp8.cu computes the same float32 operations),
// weights quantized at load and `llmrt quantize`.
//
// A row v[0..n) with amax = max |v_i| (NaNs ignored) has scale amax / 448 and inverse 448 / amax
// (both 1 for an all-zero row); its codes are e4m3(v_i * inverse), round to nearest even. It is
// a multiplication by the inverse, not a division by the scale, so a kernel gets the same bits
// cheaply; |v_i * inverse| <= 448 up to one rounding, which rounds to 448. The row is then
// code * scale.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "core/tensor.h"

namespace llmrt {

inline constexpr float kFp8E4M3Max = 448.0f;

struct Fp8RowScale {
  float scale = 1.0f;    // dequantized value = code * scale
  float inverse = 1.0f;  // code = e4m3(value * inverse)
};

inline Fp8RowScale fp8RowScale(float amax) {
  if (!(amax > 0.0f)) return {};
  return {amax / kFp8E4M3Max, kFp8E4M3Max / amax};
}

// Quantizes v[0..n) into codes[0..n) (F8_E4M3 bytes) and returns its scale.
inline Fp8RowScale quantizeFp8Row(const float* v, int64_t n, uint8_t* codes) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(v[i]));
  const Fp8RowScale s = fp8RowScale(amax);
  for (int64_t i = 0; i < n; ++i) codes[i] = f32ToF8e4m3(v[i] * s.inverse);
  return s;
}

// The FP8 KV cache (KvCacheDtype fp8): one scale per layer for K and one for V; a value x is
// stored as e4m3(clamp(x * inverse, +-448)) with inverse = 1 / scale (saturating, as
// cvt.rn.satfinite), and read back as code * scale.
struct Fp8KvScale {
  float scale = 1.0f;
  float inverse = 1.0f;
  static Fp8KvScale of(float scale) { return {scale, 1.0f / scale}; }
};
inline uint8_t fp8KvCode(float x, float inverse) {
  const float y = x * inverse;
  return f32ToF8e4m3(y > kFp8E4M3Max ? kFp8E4M3Max : y < -kFp8E4M3Max ? -kFp8E4M3Max : y);
}

// The value of every E4M3 code (f8e4m3ToF32 of 0..255), for loops that decode many.
inline const float* f8e4m3Values() {
  static const auto table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[static_cast<size_t>(i)] = f8e4m3ToF32(static_cast<uint8_t>(i));
    return t;
  }();
  return table.data();
}

class ThreadPool;

// Quantizes each row of a contiguous [rows, cols] matrix of any float dtype (host memory):
// codes[rows * cols], scales[rows]; rows spread over `pool` when given.
void quantizeFp8Rows(const TensorView& w, uint8_t* codes, float* scales, ThreadPool* pool = nullptr);

}  // namespace llmrt
