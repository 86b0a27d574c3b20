// The 16-bit float types the kernels are written for (bf16 and fp16), as the kernels see
// them: scalar conversions, eight consecutive features through 16-byte accesses (as two
// float4, also for float32 rows), and a host-side dispatch from a DType to the C++ type.
// Internal to src/backend/cuda; include only from .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "core/dtype.h"

namespace llmrt::cuda {

// 16 bytes of data no kernel writes while it runs (weights), read once: through the non-coherent
// path, not kept in L1 (the matrix-vector kernels' weight streams).
__device__ __forceinline__ uint4 loadStreaming(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// Scalar loads and stores that widen to / round (nearest even) from float32.
__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float toFloat(__half v) { return __half2float(v); }
__device__ __forceinline__ void storeFloat(float* p, float v) { *p = v; }
__device__ __forceinline__ void storeFloat(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void storeFloat(__half* p, float v) { *p = __float2half_rn(v); }
// An FP8 KV cache's codes (core/fp8.h's Fp8KvScale rule: the caller multiplies by the inverse
// scale; the conversion saturates, as the rule's clamp): the code's value, unscaled.
__device__ __forceinline__ float toFloat(__nv_fp8_e4m3 v) { return static_cast<float>(v); }
__device__ __forceinline__ void storeFloat(__nv_fp8_e4m3* p, float v) {
  p->__x = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}

// Two adjacent 16-bit values packed in 32 bits (the lower index in the low half).
__device__ __forceinline__ float2 pairToFloat2(uint32_t v, const __nv_bfloat16*) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
}
__device__ __forceinline__ float2 pairToFloat2(uint32_t v, const __half*) {
  return __half22float2(*reinterpret_cast<const __half2*>(&v));
}
// The dot product of 8 weights of type W (16 bytes) with 8 floats (a: the first 4), summed in
// order from a product, then fma: the matrix-vector kernels' (cuda_gemv.cu, cuda_moe.cu) order.
template <typename W>
__device__ __forceinline__ float dot8(const uint4& w, const float4& a, const float4& b) {
  const W* tag = nullptr;
  const float2 w0 = pairToFloat2(w.x, tag), w1 = pairToFloat2(w.y, tag);
  const float2 w2 = pairToFloat2(w.z, tag), w3 = pairToFloat2(w.w, tag);
  float s = w0.x * a.x;
  s = fmaf(w0.y, a.y, s);
  s = fmaf(w1.x, a.z, s);
  s = fmaf(w1.y, a.w, s);
  s = fmaf(w2.x, b.x, s);
  s = fmaf(w2.y, b.y, s);
  s = fmaf(w3.x, b.z, s);
  s = fmaf(w3.y, b.w, s);
  return s;
}
__device__ __forceinline__ uint32_t floatsToPair(float lo, float hi, const __nv_bfloat16*) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
__device__ __forceinline__ uint32_t floatsToPair(float lo, float hi, const __half*) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// A feature (four features) rounded to T's precision (nearest even) and widened back; T = float:
// unchanged.
__device__ __forceinline__ float roundAs(float v, const float*) { return v; }
__device__ __forceinline__ float roundAs(float v, const __nv_bfloat16*) { return __bfloat162float(__float2bfloat16_rn(v)); }
__device__ __forceinline__ float roundAs(float v, const __half*) { return __half2float(__float2half_rn(v)); }
__device__ __forceinline__ void roundAs(float4&, const float*) {}
template <typename H>
__device__ __forceinline__ void roundAs(float4& a, const H* tag) {
  const float2 lo = pairToFloat2(floatsToPair(a.x, a.y, tag), tag);
  const float2 hi = pairToFloat2(floatsToPair(a.z, a.w, tag), tag);
  a = make_float4(lo.x, lo.y, hi.x, hi.y);
}

// Row sums in groups of kRowSumGroup consecutive features (RMSNorm's sum of squares, LayerNorm's
// statistics): group q summed in feature order from its first, f applied to each feature; thread t
// takes groups t, t + blockDim.x, ...; lane l of the first warp adds groups l, l + 32, ... in
// order and returns that share (other threads: 0), an order that does not depend on blockDim.x (a
// multiple of 32). Every thread of the block calls it; `tile` holds blockDim.x floats. vec: cols
// a multiple of 8 and xr 16-byte aligned (two float4 loads per group; the same sums).
constexpr int kRowSumGroup = 8;
template <typename F>
__device__ __forceinline__ float groupedLaneSum(const float* xr, int64_t cols, bool vec, F f, float* tile) {
  const int64_t parts = (cols + kRowSumGroup - 1) / kRowSumGroup;
  float s = 0.0f;
  for (int64_t base = 0; base < parts; base += blockDim.x) {
    const int64_t q = base + threadIdx.x;
    float v = 0.0f;
    if (q < parts) {
      const int64_t j0 = q * kRowSumGroup;
      if (vec) {
        const float4 a = *reinterpret_cast<const float4*>(xr + j0),
                     b = *reinterpret_cast<const float4*>(xr + j0 + 4);
        v = f(a.x);
        v = __fadd_rn(v, f(a.y));
        v = __fadd_rn(v, f(a.z));
        v = __fadd_rn(v, f(a.w));
        v = __fadd_rn(v, f(b.x));
        v = __fadd_rn(v, f(b.y));
        v = __fadd_rn(v, f(b.z));
        v = __fadd_rn(v, f(b.w));
      } else {
        v = f(xr[j0]);
        for (int64_t j = j0 + 1; j < j0 + kRowSumGroup && j < cols; ++j) v = __fadd_rn(v, f(xr[j]));
      }
    }
    __syncthreads();  // the first warp has added the previous tile
    tile[threadIdx.x] = v;
    __syncthreads();
    if (threadIdx.x < 32)
      for (int64_t t = threadIdx.x; t < blockDim.x && base + t < parts; t += 32) s = __fadd_rn(s, tile[t]);
  }
  return s;
}

// RMSNorm's 1 / rms from each lane's share of a row's sum of squares (lane l: the squares of the
// kGemvNormGroup-column groups q = l, l + 32, ... added in order; cuda_kernels.h, GemvNormIn): the
// lanes' shares added by xor shuffles, then 1 / sqrt(ss / cols + eps). Every lane gets it. The
// norm kernel and the split matrix-vector products both end here, so they agree to the bit.
__device__ __forceinline__ float warpInvRms(float ss, int64_t cols, float eps) {
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  return 1.0f / sqrtf(ss / static_cast<float>(cols) + eps);
}

__device__ __forceinline__ void load8(const float* p, float4& a, float4& b) {
  a = reinterpret_cast<const float4*>(p)[0];
  b = reinterpret_cast<const float4*>(p)[1];
}
template <typename H>
__device__ __forceinline__ void load8(const H* p, float4& a, float4& b) {
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  const float2 f0 = pairToFloat2(v.x, p), f1 = pairToFloat2(v.y, p);
  const float2 f2 = pairToFloat2(v.z, p), f3 = pairToFloat2(v.w, p);
  a = make_float4(f0.x, f0.y, f1.x, f1.y);
  b = make_float4(f2.x, f2.y, f3.x, f3.y);
}
__device__ __forceinline__ void store8(float* p, const float4& a, const float4& b) {
  reinterpret_cast<float4*>(p)[0] = a;
  reinterpret_cast<float4*>(p)[1] = b;
}
template <typename H>
__device__ __forceinline__ void store8(H* p, const float4& a, const float4& b) {
  uint4 v;
  v.x = floatsToPair(a.x, a.y, p);
  v.y = floatsToPair(a.z, a.w, p);
  v.z = floatsToPair(b.x, b.y, p);
  v.w = floatsToPair(b.z, b.w, p);
  *reinterpret_cast<uint4*>(p) = v;
}

// Four consecutive features from a float4: one 16-byte (float32) or 8-byte (16-bit) store.
__device__ __forceinline__ void store4(float* p, const float4& a) { *reinterpret_cast<float4*>(p) = a; }
template <typename H>
__device__ __forceinline__ void store4(H* p, const float4& a) {
  uint2 v;
  v.x = floatsToPair(a.x, a.y, p);
  v.y = floatsToPair(a.z, a.w, p);
  *reinterpret_cast<uint2*>(p) = v;
}

__device__ __forceinline__ void store4(__nv_fp8_e4m3* p, const float4& a) {
  const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a.x, a.y), __NV_SATFINITE, __NV_E4M3);
  const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(a.z, a.w), __NV_SATFINITE, __NV_E4M3);
  *reinterpret_cast<uint32_t*>(p) = lo | (hi << 16);
}
// Eight E4M3 codes (8 bytes, the lowest index in the low byte) as eight fp16 values (exact: every
// E4M3 value is an fp16 value), the lowest index in the low half of .x.
__device__ __forceinline__ uint4 fp8x8ToHalf(uint2 codes) {
  uint4 h;
  uint32_t* o = &h.x;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t word = i < 2 ? codes.x : codes.y;
    const __half2_raw r =
        __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word >> (16 * (i & 1))), __NV_E4M3);
    o[i] = static_cast<uint32_t>(r.x) | (static_cast<uint32_t>(r.y) << 16);
  }
  return h;
}

// Argmax pieces (ties: the lowest id). keepBest: (bv, bi) becomes (v, i) when v is larger, or equal
// with a lower id. warpArgmax: (bv, bi) becomes the warp's maximum; every lane gets it.
__device__ __forceinline__ void keepBest(float v, int32_t i, float& bv, int32_t& bi) {
  if (v > bv || (v == bv && i < bi)) {
    bv = v;
    bi = i;
  }
}
__device__ __forceinline__ void warpArgmax(float& bv, int32_t& bi) {
  for (int o = 16; o > 0; o >>= 1)
    keepBest(__shfl_xor_sync(0xffffffffu, bv, o), __shfl_xor_sync(0xffffffffu, bi, o), bv, bi);
}

// Calls f(T{}) with T the element type of `dt` (float, __nv_bfloat16 or __half) and returns its
// result; cudaErrorInvalidValue for any other dtype.
template <typename F>
cudaError_t withElementType(DType dt, F&& f) {
  switch (dt) {
    case DType::kF32: return f(float{});
    case DType::kBF16: return f(__nv_bfloat16{});
    case DType::kF16: return f(__half{});
    default: return cudaErrorInvalidValue;
  }
}
// The same with the FP8 KV cache's codes too (__nv_fp8_e4m3): the KV write and the decode kernel.
template <typename F>
cudaError_t withKvType(DType dt, F&& f) {
  if (dt == DType::kF8E4M3) return f(__nv_fp8_e4m3{});
  return withElementType(dt, static_cast<F&&>(f));
}
// The same for the 16-bit types only.
template <typename F>
cudaError_t withHalfType(DType dt, F&& f) {
  switch (dt) {
    case DType::kBF16: return f(__nv_bfloat16{});
    case DType::kF16: return f(__half{});
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace llmrt::cuda
