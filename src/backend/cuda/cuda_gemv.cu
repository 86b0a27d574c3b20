// Matrix-vector products for decode: out[m, n] = x[m, k] W[n, k]^T (+ bias) with W in
// bf16 or fp16 and at most kGemvMaxRows rows of x (float32 or W's type; out float32 or W's type). Batch-1..8 decode is bound by
// reading W once, so the kernel is built around that stream: each warp owns R
// consecutive rows of W and walks them with 16-byte loads (8 bf16 per lane, 512
// contiguous bytes per warp and row), U chunks in flight per row (4 for m <= 2); x (a few KiB,
// shared by every warp) is read with 16-byte loads through L1. The dot products accumulate in
// float32 and are reduced across the warp at the end, bias added in the same pass.
// No conversion of x to bf16, no workspace: one launch per product.
// gemvNorm fuses what surrounds the decode products of a Llama block: the RMSNorm of the input
// row (each block norms it into shared memory after the previous kernel is done) and the
// SiLU·mul of the gate and up halves (in the store), in the separate kernels' arithmetic and order,
// so the bits are the same and two or three launches per product become one.
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

// The optional parts of a product (gemvNorm): x's row RMS-normed on the way in, and SiLU·mul of
// the two output halves on the way out.
struct NormIn {
  const float* x;  // the float32 row [k] to norm
  const float* w;  // the norm's weights [k]
  float eps;
  int threads;  // the float4 RMSNorm kernel's block size for k features (the order of its sum)
};

// The row of `in` RMS-normed into shared memory xs [k] as TX: the float4 RMSNorm kernel's
// arithmetic in its order (the first in.threads threads take its threads' float4 columns, then
// blockSums; rmsInverse, rmsScaled), so xs holds the bits that kernel writes.
template <typename TX>
__device__ __forceinline__ void normRowToShared(const NormIn& in, int64_t k, TX* xs) {
  __shared__ float red[1][32];
  const int n4 = static_cast<int>(k / 4), t = threadIdx.x;
  const float4* x4 = reinterpret_cast<const float4*>(in.x);
  float ss[1] = {0.0f};
  if (t < in.threads)
    for (int i = t; i < n4; i += in.threads) ss[0] += sumSquares(x4[i]);
  blockSums<1>(ss, red);
  const float inv = rmsInverse(ss[0], k, in.eps);
  const float4* g4 = reinterpret_cast<const float4*>(in.w);
  for (int i = t; i < n4; i += blockDim.x) store4(xs + 4 * i, rmsScaled(x4[i], g4[i], inv));
  __syncthreads();
}

// W: the weights' type (__nv_bfloat16 or __half); TX: x's type, float or W (with NORM: the normed
// row's type, x itself float32 in `norm`); out float or W (out_half). Each warp owns R rows of W.
// NORM (M = 1): x = the row of `norm` RMS-normed into shared memory first (normRowToShared).
// SILU: W is [gate; up] (n = 2 * inter rows) and out [M, inter] = siluTimes(gate, up) of the
// product's halves, each rounded to W first when out_half (what a W-typed product tensor
// holds): a warp owns R / 2 columns j, rows j of the gate half and inter + j of the up half.
template <int M, int R, int U, typename W, typename TX, bool NORM, bool SILU>
__global__ void __launch_bounds__(kWarps * 32) gemvKernel(const TX* __restrict__ x, int64_t ld_x,
                                                          const W* __restrict__ w, int64_t k,
                                                          int64_t n, const float* __restrict__ bias,
                                                          void* __restrict__ out, bool out_half, int64_t ld_out,
                                                          bool accumulate, int prefetch, NormIn norm) {
  static_assert(!SILU || R % 2 == 0, "SiLU·mul pairs gate and up rows");
  static_assert(!NORM || M == 1, "one normed row");
  constexpr int RO = SILU ? R / 2 : R;  // output columns per warp
  const int lane = threadIdx.x % 32;
  const int64_t n_out = SILU ? n / 2 : n;
  const int64_t j0 = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32) * RO;
  const uint4* rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t j = j0 + r % RO < n_out ? j0 + r % RO : n_out - 1;
    rows[r] = reinterpret_cast<const uint4*>(w + (SILU && r >= RO ? n_out + j : j) * k);
  }
  const int64_t chunks = k / 8;  // 16-byte chunks per row
  // The weights do not depend on earlier kernels: start pulling the first `prefetch` chunks
  // per lane and row into L2 while the kernel before this one finishes (cuda_pdl.h).
  if (j0 < n_out)
    for (int i = 0; i < prefetch; ++i) {
      const int64_t c = lane + 32 * static_cast<int64_t>(i);
      if (c >= chunks) break;
#pragma unroll
      for (int r = 0; r < R; ++r) asm volatile("prefetch.global.L2 [%0];" ::"l"(rows[r] + c));
    }
  if constexpr (NORM)  // and the norm's weights (128-byte lines)
    for (int64_t i = 32 * static_cast<int64_t>(threadIdx.x); i < k; i += 32 * kWarps * 32)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(norm.w + i));
  pdlWait();
  pdlLaunchDependents();
  if constexpr (NORM) {
    extern __shared__ __align__(16) unsigned char gemv_smem[];
    TX* xs = reinterpret_cast<TX*>(gemv_smem);
    normRowToShared(norm, k, xs);  // every thread of the block, before any returns
    x = xs;
    ld_x = k;
  }
  if (j0 >= n_out) return;
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
  // Lane (m * RO + r) % 32 writes element (m, r), spreading the stores.
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < RO; ++r)
      if (lane == (m * RO + r) % 32 && j0 + r < n_out) {
        const int64_t j = j0 + r;
        float v = acc[m][r] + (bias ? bias[j] : 0.0f);
        if constexpr (SILU) {
          float u = acc[m][RO + r] + (bias ? bias[n_out + j] : 0.0f);
          if (out_half) {
            v = roundThrough<W>(v);
            u = roundThrough<W>(u);
          }
          v = siluTimes(v, u);
        }
        if (out_half) {
          storeFloat(static_cast<W*>(out) + m * ld_out + j, v);
        } else {
          float* o = static_cast<float*>(out) + m * ld_out + j;
          *o = accumulate ? *o + v : v;
        }
      }
}

struct Call {
  const void* x;
  DType x_dtype;  // with norm: the normed row's type
  int64_t ld_x;
  const void* w;
  int64_t k, n;
  const float* bias;
  void* out;
  DType out_dtype;
  int64_t ld_out;
  bool accumulate;
  const NormIn* norm;  // gemvNorm
  bool silu;
};

template <int M, int R, typename W, typename TX, bool NORM, bool SILU, int U = (M <= 2 ? 4 : 2)>
cudaError_t launchKernel(const Call& c, cudaStream_t stream) {
  constexpr int64_t outputs_per_warp = SILU ? R / 2 : R;
  const int64_t groups = ((SILU ? c.n / 2 : c.n) + outputs_per_warp - 1) / outputs_per_warp;
  const unsigned blocks = static_cast<unsigned>((groups + kWarps - 1) / kWarps);
  const bool out_half = c.out_dtype != DType::kF32;
  // Prefetch at most ~16 MiB of W (a third of the L2) per product: chunks of 512 bytes per warp and row.
  const int prefetch = pdlEnabled() ? static_cast<int>(std::min<int64_t>(8, (int64_t{16} << 20) / (c.n * 512))) : 0;
  const size_t smem = NORM ? static_cast<size_t>(c.k) * sizeof(TX) : 0;  // the normed row
  return launchPdl(gemvKernel<M, R, U, W, TX, NORM, SILU>, blocks, kWarps * 32, smem, stream,
                   static_cast<const TX*>(c.x), c.ld_x, static_cast<const W*>(c.w), c.k, c.n, c.bias, c.out, out_half,
                   c.ld_out, c.accumulate, prefetch, c.norm ? *c.norm : NormIn{});
}

template <int M, int R, typename W, typename TX>
cudaError_t launchMode(const Call& c, cudaStream_t stream) {
  if constexpr (M == 1) {
    if (c.norm) {
      // SiLU·mul pairs rows: at least two per warp.
      if (c.silu) return launchKernel<1, (R < 2 ? 2 : R), W, TX, true, true>(c, stream);
      return launchKernel<1, R, W, TX, true, false>(c, stream);
    }
  }
  return launchKernel<M, R, W, TX, false, false>(c, stream);
}

template <int M, int R, typename W>
cudaError_t launch(const Call& c, cudaStream_t stream) {
  if (c.x_dtype != DType::kF32) return launchMode<M, R, W, W>(c, stream);
  return launchMode<M, R, W, float>(c, stream);
}

template <typename W>
cudaError_t launchFor(int64_t m, const Call& c, cudaStream_t stream) {
  // More rows of W per warp as m grows: x is re-read from L1 once per row group.
  // One row per warp where W has few rows (q/k/v, o, down: 4096-6144), so twice the warps
  // keep loads in flight; two rows per warp for the wide ones (gate/up, lm_head).
  const bool narrow = c.n <= 16384;
  switch (m) {
    case 1: return narrow ? launch<1, 1, W>(c, stream) : launch<1, 2, W>(c, stream);
    case 2: return narrow ? launch<2, 1, W>(c, stream) : launch<2, 2, W>(c, stream);
    case 3: return launch<3, 4, W>(c, stream);
    case 4: return launch<4, 4, W>(c, stream);
    case 5: return launch<5, 4, W>(c, stream);
    case 6: return launch<6, 4, W>(c, stream);
    case 7: return launch<7, 4, W>(c, stream);
    default: return launch<8, 4, W>(c, stream);
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
  const Call c{x, x_dtype, ld_x, w, k, n, bias, out, out_dtype, ld_out, accumulate, nullptr, false};
  return withHalfType(w_dtype, [&](auto tag) { return launchFor<decltype(tag)>(m, c, stream); });
}

bool gemvNormSupported(const float* x, const float* norm_w, int64_t k, DType normed_dtype) {
  return (normed_dtype == DType::kF32 || normed_dtype == DType::kBF16 || normed_dtype == DType::kF16) && k > 0 &&
         k % 8 == 0 && rmsNormVecApplies(k) && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(norm_w) % 16 == 0;
}

cudaError_t gemvNorm(const float* x, const float* norm_w, float eps, DType normed_dtype, const void* w, DType w_dtype,
                     int64_t k, int64_t n, const float* bias, bool silu_mul, void* out, DType out_dtype,
                     cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (!gemvNormSupported(x, norm_w, k, normed_dtype) || reinterpret_cast<uintptr_t>(w) % 16 != 0 ||
      (normed_dtype != DType::kF32 && normed_dtype != w_dtype) || (out_dtype != DType::kF32 && out_dtype != w_dtype) ||
      (silu_mul && n % 2 != 0))
    return cudaErrorInvalidValue;
  const NormIn norm{x, norm_w, eps, rmsNormVecThreads(k)};
  const Call c{nullptr, normed_dtype, k, w, k, n, bias, out, out_dtype, 0, false, &norm, silu_mul};
  return withHalfType(w_dtype, [&](auto tag) { return launchFor<decltype(tag)>(1, c, stream); });
}

}  // namespace llmrt::cuda
