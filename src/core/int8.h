// Symmetric INT8 row quantization: the one rule of every INT8 (W8A8) path — the CPU reference's
// activation quantization, the CUDA kernels (cuda_fp8.cu computes the same float32 operations),
// weights quantized at load and `llmrt quantize --method int8|smoothquant`.
//
// A row v[0..n) with amax = max |v_i| (NaNs ignored) has scale amax / 127 and inverse 127 / amax
// (both 1 for an all-zero row); its codes are clamp(round(v_i * inverse), -127, 127), round to
// nearest even, a NaN's code 0. As core/fp8.h, a multiplication by the inverse, so a kernel gets
// the same bits. The row is then code * scale. Products of INT8 codes are summed in int32, which
// is exact, so every backend gets the same sums.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/tensor.h"

namespace llmrt {

inline constexpr float kInt8Max = 127.0f;

struct Int8RowScale {
  float scale = 1.0f;    // dequantized value = code * scale
  float inverse = 1.0f;  // code = round(value * inverse)
};

inline Int8RowScale int8RowScale(float amax) {
  if (!(amax > 0.0f)) return {};
  return {amax / kInt8Max, kInt8Max / amax};
}

inline int8_t int8Code(float scaled) {
  if (std::isnan(scaled)) return 0;
  const float r = std::nearbyint(scaled);  // the default rounding mode: nearest even
  return static_cast<int8_t>(r > kInt8Max ? kInt8Max : (r < -kInt8Max ? -kInt8Max : r));
}

// Quantizes v[0..n) into codes[0..n) and returns its scale.
inline Int8RowScale quantizeInt8Row(const float* v, int64_t n, int8_t* codes) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(v[i]));
  const Int8RowScale s = int8RowScale(amax);
  for (int64_t i = 0; i < n; ++i) codes[i] = int8Code(v[i] * s.inverse);
  return s;
}

class ThreadPool;

// Quantizes each row of a contiguous [rows, cols] matrix of any float dtype (host memory):
// codes[rows * cols], scales[rows]; rows spread over `pool` when given.
void quantizeInt8Rows(const TensorView& w, int8_t* codes, float* scales, ThreadPool* pool = nullptr);

}  // namespace llmrt
