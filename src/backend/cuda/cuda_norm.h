// LayerNorm's row statistics and values, shared by the LayerNorm kernel (cuda_arch_ops.cu) and the
// matrix-vector product whose last block normalises the residual rows it wrote (cuda_gemv.cu,
// GemvLayerNorms), so that the two agree to the bit. Every sum runs in one fixed order that does
// not depend on the block's size, and every operation is an explicitly rounded intrinsic (no
// contraction into fused multiply-adds that one kernel might get and the other not).
// Internal to src/backend/cuda; include only from .cu files.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/cuda_vec.h"

namespace llmrt::cuda {

// How a block reads a row: through L1 (a row written by an earlier kernel), or through L2 only
// (ld.global.cg: a row other blocks of the same grid wrote, which this SM's L1 may hold stale).
struct CachedLoads {
  static __device__ __forceinline__ float load(const float* p) { return *p; }
  static __device__ __forceinline__ float4 load4(const float* p) {
    return *reinterpret_cast<const float4*>(p);
  }
};
struct L2Loads {
  static __device__ __forceinline__ float load(const float* p) { return __ldcg(p); }
  static __device__ __forceinline__ float4 load4(const float* p) {
    return __ldcg(reinterpret_cast<const float4*>(p));
  }
};

constexpr int kLayerNormGroup = 8;

// The sum over row xr (cols features) of f(feature), returned to every thread of the block, in an
// order independent of blockDim.x (a multiple of 32): groups of kLayerNormGroup consecutive
// features, each summed in feature order from its first; lane l of the first warp adds the groups
// l, l + 32, l + 64, ... in order; then the lanes' sums by xor shuffles. vec: cols a multiple of
// 8 and xr 16-byte aligned (two float4 loads per group; the same sums). `tile` holds blockDim.x
// floats.
template <typename Loads, typename F>
__device__ __forceinline__ float groupedRowSum(const float* xr, int64_t cols, bool vec, F f, float* tile) {
  const int64_t parts = (cols + kLayerNormGroup - 1) / kLayerNormGroup;
  float s = 0.0f;
  for (int64_t base = 0; base < parts; base += blockDim.x) {
    const int64_t q = base + threadIdx.x;
    float v = 0.0f;
    if (q < parts) {
      const int64_t j0 = q * kLayerNormGroup;
      if (vec) {
        const float4 a = Loads::load4(xr + j0), b = Loads::load4(xr + j0 + 4);
        v = f(a.x);
        v = __fadd_rn(v, f(a.y));
        v = __fadd_rn(v, f(a.z));
        v = __fadd_rn(v, f(a.w));
        v = __fadd_rn(v, f(b.x));
        v = __fadd_rn(v, f(b.y));
        v = __fadd_rn(v, f(b.z));
        v = __fadd_rn(v, f(b.w));
      } else {
        v = f(Loads::load(xr + j0));
        for (int64_t j = j0 + 1; j < j0 + kLayerNormGroup && j < cols; ++j)
          v = __fadd_rn(v, f(Loads::load(xr + j)));
      }
    }
    __syncthreads();  // the first warp has added the previous tile
    tile[threadIdx.x] = v;
    __syncthreads();
    if (threadIdx.x < 32)
      for (int64_t t = threadIdx.x; t < blockDim.x && base + t < parts; t += 32) s = __fadd_rn(s, tile[t]);
  }
  __syncthreads();  // every tile read before tile[0] is overwritten
  if (threadIdx.x < 32) {
    for (int o = 16; o > 0; o >>= 1) s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, o));
    if (threadIdx.x == 0) tile[0] = s;
  }
  __syncthreads();
  const float total = tile[0];
  __syncthreads();  // (tile is reused by the next call)
  return total;
}

// (mean, 1 / sqrt(var + eps)) of row xr for every thread: the mean, then the biased variance of
// the deviations (torch's layer_norm), each a groupedRowSum.
template <typename Loads>
__device__ __forceinline__ float2 layerNormStats(const float* xr, int64_t cols, float eps, bool vec,
                                                 float* tile) {
  const float n = static_cast<float>(cols);
  const float mean = __fdiv_rn(groupedRowSum<Loads>(
                                   xr, cols, vec, [](float v) { return v; }, tile),
                               n);
  const float ss = groupedRowSum<Loads>(
      xr, cols, vec,
      [mean](float v) {
        const float d = __fsub_rn(v, mean);
        return __fmul_rn(d, d);
      },
      tile);
  return make_float2(mean, __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, n), eps))));
}

// One normalised feature: (x - mean) * inv, then * g + b in one rounding.
__device__ __forceinline__ float layerNormValue(float x, float2 stats, float g, float b) {
  return __fmaf_rn(__fmul_rn(__fsub_rn(x, stats.x), stats.y), g, b);
}

// out[j] = layerNormValue(xr[j]) for the row, stored as TO (rounded to nearest); b null: no bias.
// vec4: cols a multiple of 4 and xr, g, b, out aligned for 4-feature accesses.
template <typename Loads, typename TO>
__device__ __forceinline__ void layerNormRow(const float* xr, int64_t cols, float2 stats, const float* g,
                                             const float* b, TO* out, bool vec4) {
  if (vec4) {
    for (int64_t i = 4 * static_cast<int64_t>(threadIdx.x); i < cols;
         i += 4 * static_cast<int64_t>(blockDim.x)) {
      const float4 x = Loads::load4(xr + i), w = *reinterpret_cast<const float4*>(g + i);
      const float4 c =
          b != nullptr ? *reinterpret_cast<const float4*>(b + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      store4(out + i,
             make_float4(layerNormValue(x.x, stats, w.x, c.x), layerNormValue(x.y, stats, w.y, c.y),
                         layerNormValue(x.z, stats, w.z, c.z), layerNormValue(x.w, stats, w.w, c.w)));
    }
    return;
  }
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x)
    storeFloat(out + i, layerNormValue(Loads::load(xr + i), stats, g[i], b != nullptr ? b[i] : 0.0f));
}

}  // namespace llmrt::cuda
