// The 8-bit activation codes' rules on the device (core/fp8.h's E4M3, core/int8.h's INT8), shared by
// the quantization kernel of the 8-bit products (cuda_fp8.cu) and the ops that write those
// products' inputs already quantized (cuda_ops.cu). Internal to src/backend/cuda.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

namespace llmrt::cuda {

struct E4m3Codes {
  static constexpr float kMax = 448.0f;
  using Acc = float;
  __device__ static uint8_t code(float v) {
    return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
  }
};
struct Int8Codes {
  static constexpr float kMax = 127.0f;
  using Acc = int;
  __device__ static uint8_t code(float v) {
    const int c = max(-127, min(127, __float2int_rn(v)));  // (NaN: 0)
    return static_cast<uint8_t>(static_cast<int8_t>(c));
  }
};

// A row's scale and the multiplier of its values from its largest magnitude amax: amax / M and
// M / amax (IEEE divisions, as the CPU computes them), or 1 and 1 for a row of zeros.
template <typename C>
__device__ __forceinline__ float2 rowScaleInverse(float amax) {
  const bool nonzero = amax > 0.0f;
  return make_float2(nonzero ? amax / C::kMax : 1.0f, nonzero ? C::kMax / amax : 1.0f);
}

// Four values' codes (v times the row's inverse scale) in one word, feature i in byte i.
template <typename C>
__device__ __forceinline__ uint32_t packCodes4(const float4& v, float inverse) {
  return static_cast<uint32_t>(C::code(v.x * inverse)) |
         (static_cast<uint32_t>(C::code(v.y * inverse)) << 8) |
         (static_cast<uint32_t>(C::code(v.z * inverse)) << 16) |
         (static_cast<uint32_t>(C::code(v.w * inverse)) << 24);
}

// The largest magnitude of a float4 (fmaxf: a NaN is passed over, as in the quantization kernel).
__device__ __forceinline__ float absMax4(const float4& v) {
  return fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
}

// The largest of every thread's v in the block (blockDim.x a multiple of 32, at most 1024), for
// every thread; `warp_max` holds 32 floats. A max, so any order gives the same value. (No barrier
// after the reads: a second call in the same kernel needs a __syncthreads() before it.)
__device__ __forceinline__ float blockMax(float v, float* warp_max) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = v;
  __syncthreads();
  v = 0.0f;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) v = fmaxf(v, warp_max[w]);
  return v;
}

// `body` called with a tag of the codes' rule: Int8Codes where int8, else E4m3Codes.
template <typename F>
auto withCodes(bool int8, F&& body) {
  return int8 ? body(Int8Codes{}) : body(E4m3Codes{});
}

}  // namespace llmrt::cuda
