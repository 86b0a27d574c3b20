// Eight consecutive features through 16-byte accesses, as two float4, for float32 and bf16
// rows (the matrix-vector kernel's x, SiLU·mul). Pointers must be 16-byte aligned. Internal to
// src/backend/cuda; include only from .cu files.
#pragma once

#include <cuda_bf16.h>

namespace llmrt::cuda {

__device__ __forceinline__ void load8(const float* p, float4& a, float4& b) {
  a = reinterpret_cast<const float4*>(p)[0];
  b = reinterpret_cast<const float4*>(p)[1];
}
__device__ __forceinline__ void load8(const __nv_bfloat16* p, float4& a, float4& b) {
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  const float2 f0 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v.x));
  const float2 f1 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v.y));
  const float2 f2 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v.z));
  const float2 f3 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v.w));
  a = make_float4(f0.x, f0.y, f1.x, f1.y);
  b = make_float4(f2.x, f2.y, f3.x, f3.y);
}
__device__ __forceinline__ void store8(float* p, const float4& a, const float4& b) {
  reinterpret_cast<float4*>(p)[0] = a;
  reinterpret_cast<float4*>(p)[1] = b;
}
__device__ __forceinline__ void store8(__nv_bfloat16* p, const float4& a, const float4& b) {
  uint4 v;
  *reinterpret_cast<__nv_bfloat162*>(&v.x) = __floats2bfloat162_rn(a.x, a.y);
  *reinterpret_cast<__nv_bfloat162*>(&v.y) = __floats2bfloat162_rn(a.z, a.w);
  *reinterpret_cast<__nv_bfloat162*>(&v.z) = __floats2bfloat162_rn(b.x, b.y);
  *reinterpret_cast<__nv_bfloat162*>(&v.w) = __floats2bfloat162_rn(b.z, b.w);
  *reinterpret_cast<uint4*>(p) = v;
}

}  // namespace llmrt::cuda
