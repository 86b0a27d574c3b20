// Matrix-vector products for decode: out[m, n] = x[m, k] W[n, k]^T (+ bias) with W in
// bf16 or fp16 and at most kGemvMaxRows rows of x (float32 or W's type; out float32 or W's type). Batch-1..8 decode is bound by
// reading W once, so the kernel is built around that stream: each warp owns R
// consecutive rows of W and walks them with 16-byte loads (8 bf16 per lane, 512
// contiguous bytes per warp and row), U chunks in flight per row (4 for m <= 2); x (a few KiB,
// shared by every warp) is read with 16-byte loads through L1. The dot products accumulate in
// float32 and are reduced across the warp at the end, bias added in the same pass.
// No conversion of x to bf16, no workspace: one launch per product.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_pdl.h"
#include "backend/cuda/cuda_vec.h"

namespace llmrt::cuda {
namespace {

constexpr int kWarps = 8;  // per block

__device__ __forceinline__ uint4 loadStreaming(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

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

// W: the weights' type (__nv_bfloat16 or __half); TX: float or W; out float or W (out_half).
template <int M, int R, int U, typename W, typename TX>
__global__ void __launch_bounds__(kWarps * 32) gemvKernel(const TX* __restrict__ x, int64_t ld_x,
                                                          const W* __restrict__ w, int64_t k,
                                                          int64_t n, const float* __restrict__ bias,
                                                          void* __restrict__ out, bool out_half, int64_t ld_out,
                                                          bool accumulate, int prefetch) {
  const int lane = threadIdx.x % 32;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32) * R;
  const uint4* rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const uint4*>(w + (n0 + r < n ? n0 + r : n - 1) * k);
  const int64_t chunks = k / 8;  // 16-byte chunks per row
  // The weights do not depend on earlier kernels: start pulling the first `prefetch` chunks
  // per lane and row into L2 while the kernel before this one finishes (cuda_pdl.h).
  if (n0 < n)
    for (int i = 0; i < prefetch; ++i) {
      const int64_t c = lane + 32 * static_cast<int64_t>(i);
      if (c >= chunks) break;
#pragma unroll
      for (int r = 0; r < R; ++r) asm volatile("prefetch.global.L2 [%0];" ::"l"(rows[r] + c));
    }
  pdlWait();
  pdlLaunchDependents();
  if (n0 >= n) return;
  float acc[M][R];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r) acc[m][r] = 0.0f;

  int64_t c = lane;
  // U chunks per row in flight per iteration (all loads issued before any math).
  for (; c + 32 * (U - 1) < chunks; c += 32 * U) {
    uint4 wv[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r) wv[u][r] = loadStreaming(rows[r] + c + 32 * u);
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        float4 a, b;
        load8(x + m * ld_x + 8 * (c + 32 * u), a, b);
#pragma unroll
        for (int r = 0; r < R; ++r) acc[m][r] += dot8<W>(wv[u][r], a, b);
      }
    }
  }
  for (; c < chunks; c += 32) {
    uint4 w0[R];
#pragma unroll
    for (int r = 0; r < R; ++r) w0[r] = loadStreaming(rows[r] + c);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float4 a0, b0;
      load8(x + m * ld_x + 8 * c, a0, b0);
#pragma unroll
      for (int r = 0; r < R; ++r) acc[m][r] += dot8<W>(w0[r], a0, b0);
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float v = acc[m][r];
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      acc[m][r] = v;
    }
  // Lane (m * R + r) % 32 writes element (m, r), spreading the stores.
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (lane == (m * R + r) % 32 && n0 + r < n) {
        const float v = acc[m][r] + (bias ? bias[n0 + r] : 0.0f);
        if (out_half) {
          storeFloat(static_cast<W*>(out) + m * ld_out + n0 + r, v);
        } else {
          float* o = static_cast<float*>(out) + m * ld_out + n0 + r;
          *o = accumulate ? *o + v : v;
        }
      }
}

template <int M, int R, typename W, int U = (M <= 2 ? 4 : 2)>
cudaError_t launch(const void* x, DType x_dtype, int64_t ld_x, const void* w, int64_t k, int64_t n,
                   const float* bias, void* out, DType out_dtype, int64_t ld_out, bool accumulate,
                   cudaStream_t stream) {
  const int64_t rows_per_block = static_cast<int64_t>(kWarps) * R;
  const unsigned blocks = static_cast<unsigned>((n + rows_per_block - 1) / rows_per_block);
  const auto* wb = static_cast<const W*>(w);
  const bool out_half = out_dtype != DType::kF32;
  // Prefetch at most ~16 MiB of W (a third of the L2) per product: chunks of 512 bytes per warp and row.
  const int prefetch = pdlEnabled() ? static_cast<int>(std::min<int64_t>(8, (int64_t{16} << 20) / (n * 512))) : 0;
  if (x_dtype != DType::kF32)
    return launchPdl(gemvKernel<M, R, U, W, W>, blocks, kWarps * 32, 0, stream, static_cast<const W*>(x), ld_x, wb,
                     k, n, bias, out, out_half, ld_out, accumulate, prefetch);
  return launchPdl(gemvKernel<M, R, U, W, float>, blocks, kWarps * 32, 0, stream, static_cast<const float*>(x), ld_x,
                   wb, k, n, bias, out, out_half, ld_out, accumulate, prefetch);
}

template <typename W>
cudaError_t launchFor(const void* x, DType x_dtype, int64_t ld_x, const void* w, int64_t m, int64_t k, int64_t n,
                      const float* bias, void* out, DType out_dtype, int64_t ld_out, bool accumulate,
                      cudaStream_t stream) {
  // More rows of W per warp as m grows: x is re-read from L1 once per row group.
  // One row per warp where W has few rows (q/k/v, o, down: 4096-6144), so twice the warps
  // keep loads in flight; two rows per warp for the wide ones (gate/up, lm_head).
  const bool narrow = n <= 16384;
  switch (m) {
    case 1: return narrow ? launch<1, 1, W>(x, x_dtype, ld_x, w, k, n, bias, out, out_dtype, ld_out, accumulate, stream)
                          : launch<1, 2, W>(x, x_dtype, ld_x, w, k, n, bias, out, out_dtype, ld_out, accumulate, stream);
    case 2: return narrow ? launch<2, 1, W>(x, x_dtype, ld_x, w, k, n, bias, out, out_dtype, ld_out, accumulate, stream)
                          : launch<2, 2, W>(x, x_dtype, ld_x, w, k, n, bias, out, out_dtype, ld_out, accumulate, stream);
    case 3: return launch<3, 4, W>(x, x_dtype, ld_x, w, k, n, bias, out, out_dtype, ld_out, accumulate, stream);
    case 4: return launch<4, 4, W>(x, x_dtype, ld_x, w, k, n, bias, out, out_dtype, ld_out, accumulate, stream);
    case 5: return launch<5, 4, W>(x, x_dtype, ld_x, w, k, n, bias, out, out_dtype, ld_out, accumulate, stream);
    case 6: return launch<6, 4, W>(x, x_dtype, ld_x, w, k, n, bias, out, out_dtype, ld_out, accumulate, stream);
    case 7: return launch<7, 4, W>(x, x_dtype, ld_x, w, k, n, bias, out, out_dtype, ld_out, accumulate, stream);
    default: return launch<8, 4, W>(x, x_dtype, ld_x, w, k, n, bias, out, out_dtype, ld_out, accumulate, stream);
  }
}

}  // namespace

bool gemvSupported(const void* x, DType x_dtype, int64_t ld_x, int64_t m, int64_t k) {
  const int64_t per16 =  // elements per 16 bytes
      x_dtype == DType::kBF16 || x_dtype == DType::kF16 ? 8 : (x_dtype == DType::kF32 ? 4 : 0);
  return per16 > 0 && m >= 1 && m <= kGemvMaxRows && k % 8 == 0 && k > 0 && ld_x % per16 == 0 &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

cudaError_t gemv(const void* x, DType x_dtype, int64_t ld_x, const void* w, DType w_dtype, int64_t m, int64_t k,
                 int64_t n, const float* bias, void* out, DType out_dtype, int64_t ld_out, bool accumulate,
                 cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (!gemvSupported(x, x_dtype, ld_x, m, k) || reinterpret_cast<uintptr_t>(w) % 16 != 0 ||
      (x_dtype != DType::kF32 && x_dtype != w_dtype) || (out_dtype != DType::kF32 && out_dtype != w_dtype) ||
      (accumulate && out_dtype != DType::kF32))
    return cudaErrorInvalidValue;
  return withHalfType(w_dtype, [&](auto tag) { return launchFor<decltype(tag)>(x, x_dtype, ld_x, w, m, k, n, bias,
                                                                               out, out_dtype, ld_out, accumulate,
                                                                               stream); });
}

}  // namespace llmrt::cuda
