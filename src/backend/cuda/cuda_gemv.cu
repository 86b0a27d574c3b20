// Matrix-vector products for decode: out[m, n] = x[m, k] W[n, k]^T (+ bias) with W in
// bf16 or fp16 and at most kGemvMaxRows rows of x (float32 or W's type; out float32 or W's type). Batch-1
// decode is bound by reading W once, so the kernel is built around that stream (the backend routes products
// of up to 2 rows here by default: from 3 rows on cuBLAS's tensor cores win; CudaTuning::gemv_rows): each
// warp owns R consecutive rows of W and walks them with 16-byte loads (8 bf16 per lane, 512 contiguous bytes
// per warp and row), U chunks in flight per row (4 for m <= 2); x (a few KiB, shared by every warp) is read
// with 16-byte loads through L1. The dot products accumulate in float32 and are reduced across the warp at
// the end, bias added in the same pass. No conversion of x to bf16, no workspace: one launch per product.
//
// The RMSNorm between a residual product and the next product (o -> gate|up, down -> q/k/v) can
// be split over the two, so no norm kernel sits between them on the critical path: the residual
// product (GemvNormOut) also stores g * residual (g: the norm's weights; rounded to the normed
// rows' type, not yet scaled) and the sums of squares of groups of 8 residual columns; the next
// product (GemvNormIn) adds the groups' sums in rmsNorm()'s order (its first warp per block, into
// shared memory), then reads those rows as its x, scaling and rounding each entry as rmsNorm()
// stores it: the same bits as the norm kernel and the plain product.
//
// An MLP activation after a product (MLPs without a gate: GPT-2, GPT-J, NeoX, Falcon) can run in
// its epilogue (`act`): each output is rounded to out's type as the product stores it, then the
// activation kernel's function (cuda_activation.h) is applied and the result stored: the bits of
// the product followed by the activation kernel, one launch and one round trip fewer.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <optional>
#include <type_traits>

#include "backend/cuda/cuda_activation.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_pdl.h"
#include "backend/cuda/cuda_vec.h"

namespace llmrt::cuda {
namespace {

constexpr int kWarps = 8;  // per block

// 1 / rms of each of M rows into inv_rms (lane 0 writes), from norm_in's sums of squares, by one
// warp: J sums per lane and row in flight at once, passes of 32 * J groups, lane l adding groups
// l, l + 32, ... in order, then warpInvRms — rmsNorm()'s order (cuda_ops.cu), for every M.
template <int M>
__device__ __forceinline__ void rowsInvRms(const GemvNormIn& norm_in, int64_t k, int lane, float* inv_rms) {
  constexpr int J = M == 1 ? 16 : (M == 2 ? 8 : 4);
  float ss[M];
#pragma unroll
  for (int m = 0; m < M; ++m) ss[m] = 0.0f;
  for (int64_t base = 0; base < norm_in.parts; base += 32 * J) {
    float v[M][J];
#pragma unroll
    for (int m = 0; m < M; ++m)
#pragma unroll
      for (int j = 0; j < J; ++j) {
        const int64_t i = base + lane + 32 * j;
        v[m][j] = i < norm_in.parts ? norm_in.sums[m * norm_in.parts + i] : 0.0f;
      }
#pragma unroll
    for (int m = 0; m < M; ++m)
#pragma unroll
      for (int j = 0; j < J; ++j) ss[m] += v[m][j];
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float inv = warpInvRms(ss[m], k, norm_in.eps);
    if (lane == 0) inv_rms[m] = inv;
  }
}

// W: the weights' type (__nv_bfloat16 or __half); TX: x's type, float or W; out float or W (out_half).
// NORM_IN: x holds the rows g * residual rounded to TX (norm_in), each entry scaled by the row's
// 1 / rms and rounded to TX again (float: not rounded) before use; NORM_OUT: out is the float32
// residual (accumulate) and the rows' norm inputs go to norm_out. act >= 0: the activation
// (Act) of each output rounded to out's type (plain products only: not with accumulate, NORM_IN
// or NORM_OUT, whose kernels are compiled without it).
template <int M, int R, int U, typename W, typename TX, bool NORM_IN, bool NORM_OUT>
__device__ __forceinline__ void gemvBody(const TX* __restrict__ x, int64_t ld_x, const W* __restrict__ w,
                                         int64_t k, int64_t n, const float* __restrict__ bias,
                                         void* __restrict__ out, bool out_half, int64_t ld_out,
                                         bool accumulate, int prefetch, const GemvNormIn& norm_in,
                                         const GemvNormOut& norm_out, int act) {
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
      const int64_t pc = lane + 32 * static_cast<int64_t>(i);
      if (pc >= chunks) break;
#pragma unroll
      for (int r = 0; r < R; ++r) asm volatile("prefetch.global.L2 [%0];" ::"l"(rows[r] + pc));
    }
  // NORM_OUT: the norm's weights of this warp's rows (weights too: before the wait).
  float g[R];
#pragma unroll
  for (int r = 0; r < R; ++r) g[r] = NORM_OUT && n0 + r < n ? norm_out.g[n0 + r] : 0.0f;
  pdlWait();
  pdlLaunchDependents();
  // NORM_IN: 1 / rms of each row, from the producer's sums of squares per column group: the
  // block's first warp computes it into shared memory, every warp then takes it into registers.
  // (Every warp reading every sum sent a product's 6,144-14,336 warps to the same few L2 lines:
  // 1.2 ms per token slower on the H200.)
  float inv[NORM_IN ? M : 1];
  if constexpr (NORM_IN) {
    __shared__ float inv_rms[M];
    if (threadIdx.x < 32) rowsInvRms<M>(norm_in, k, lane, inv_rms);
    __syncthreads();
#pragma unroll
    for (int m = 0; m < M; ++m) inv[m] = inv_rms[m];
  }
  // x's 8 entries of row m at chunk cc as float32 (NORM_IN: scaled and rounded as rmsNorm stores them).
  auto xAt = [&](int m, int64_t cc, float4& a, float4& b) {
    load8(x + m * ld_x + 8 * cc, a, b);
    if constexpr (NORM_IN) {
      a = make_float4(a.x * inv[m], a.y * inv[m], a.z * inv[m], a.w * inv[m]);
      b = make_float4(b.x * inv[m], b.y * inv[m], b.z * inv[m], b.w * inv[m]);
      roundAs(a, x);
      roundAs(b, x);
    }
  };
  // Warps past the last row leave now, except where the block's shared values need every warp.
  if (!NORM_IN && !NORM_OUT && n0 >= n) return;
  float acc[M][R];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r) acc[m][r] = 0.0f;

  // (n0 >= n only with NORM_IN / NORM_OUT: such warps add nothing, they only join the block's barriers.)
  int64_t c = n0 < n ? lane : chunks;
  // U chunks per row from `at` on, all loads issued before any math. kTail: the row's last (fewer
  // than U) chunks of this lane, those past its end skipped: a width that is not a multiple of
  // 256 * U features (Falcon's 4,544 and 18,176) then ends on one step with its loads in flight
  // together, not one memory latency per chunk. (The sums in the same order either way.)
  auto step = [&](int64_t at, auto tail_tag) {
    constexpr bool kTail = decltype(tail_tag)::value;
    uint4 wv[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r)
        wv[u][r] = !kTail || at + 32 * u < chunks ? loadStreaming(rows[r] + at + 32 * u) : uint4{};
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (kTail && at + 32 * u >= chunks) break;
        float4 a, b;
        xAt(m, at + 32 * u, a, b);
#pragma unroll
        for (int r = 0; r < R; ++r) acc[m][r] += dot8<W>(wv[u][r], a, b);
      }
    }
  };
  for (; c + 32 * (U - 1) < chunks; c += 32 * U) step(c, std::false_type{});
  if (c < chunks) step(c, std::true_type{});
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float v = acc[m][r];
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      acc[m][r] = v;
    }
  // Lane (m * R + r) % 32 writes element (m, r), spreading the stores.
  // NORM_OUT: the squares of the residual entries this block wrote, by row and output column.
  __shared__ float row_sq[NORM_OUT ? M : 1][NORM_OUT ? kWarps * R : 1];
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (lane == (m * R + r) % 32) {
        float sq = 0.0f;
        if (n0 + r < n) {
          float v = acc[m][r] + (bias ? bias[n0 + r] : 0.0f);
          if constexpr (!NORM_IN && !NORM_OUT)  // the norm variants leave the activation code out
            if (act >= 0)
              v = activate(static_cast<Act>(act), out_half ? roundAs(v, static_cast<const W*>(nullptr)) : v);
          if (out_half) {
            storeFloat(static_cast<W*>(out) + m * ld_out + n0 + r, v);
          } else {
            float* o = static_cast<float*>(out) + m * ld_out + n0 + r;
            const float sum = accumulate ? *o + v : v;
            *o = sum;
            if constexpr (NORM_OUT) {
              sq = sum * sum;
              const float gv = g[r] * sum;
              if (norm_out.normed_half)
                storeFloat(static_cast<W*>(norm_out.normed) + m * norm_out.ld_normed + n0 + r, gv);
              else
                static_cast<float*>(norm_out.normed)[m * norm_out.ld_normed + n0 + r] = gv;
            }
          }
        }
        if constexpr (NORM_OUT) row_sq[m][(threadIdx.x / 32) * R + r] = sq;
      }
  }
  if constexpr (NORM_OUT) {
    // Sums of squares over groups of kGemvNormGroup consecutive columns, each added in column
    // order: the same groups and order for every row count and rows-per-warp, so a row's 1 / rms
    // (and the products after) does not depend on the batch it ran in.
    constexpr int kGroups = kWarps * R / kGemvNormGroup;
    __syncthreads();
    if (threadIdx.x < M * kGroups) {
      const int m = threadIdx.x / kGroups, q = threadIdx.x % kGroups;
      float v = 0.0f;
#pragma unroll
      for (int i = 0; i < kGemvNormGroup; ++i) v += row_sq[m][q * kGemvNormGroup + i];
      const int64_t group = static_cast<int64_t>(blockIdx.x) * kGroups + q;
      const int64_t parts = (n + kGemvNormGroup - 1) / kGemvNormGroup;
      if (group < parts) norm_out.sums[m * parts + group] = v;
    }
  }
}

#define LLMRT_GEMV_PARAMS                                                                    \
  const TX *__restrict__ x, int64_t ld_x, const W *__restrict__ w, int64_t k, int64_t n,     \
      const float *__restrict__ bias, void *__restrict__ out, bool out_half, int64_t ld_out, \
      bool accumulate, int prefetch, GemvNormIn norm_in, GemvNormOut norm_out, int act
#define LLMRT_GEMV_ARGS \
  x, ld_x, w, k, n, bias, out, out_half, ld_out, accumulate, prefetch, norm_in, norm_out, act
template <int M, int R, int U, typename W, typename TX, bool NORM_IN, bool NORM_OUT>
__global__ void __launch_bounds__(kWarps * 32) gemvKernel(LLMRT_GEMV_PARAMS) {
  gemvBody<M, R, U, W, TX, NORM_IN, NORM_OUT>(LLMRT_GEMV_ARGS);
}
// The NORM_IN products of one or two rows with a row per warp (q/k/v) held to the registers of
// the plain kernel: the sums' pass must not cost q/k/v (768 blocks) its single wave (6 blocks per
// SM at one row, 40 registers; 4 at two, 64 registers: a 48-register bound spilled 76 bytes).
template <int M, int R, int U, typename W, typename TX, bool NORM_IN, bool NORM_OUT>
__global__ void __launch_bounds__(kWarps * 32, M == 1 ? 6 : 4) gemvKernelBounded(LLMRT_GEMV_PARAMS) {
  gemvBody<M, R, U, W, TX, NORM_IN, NORM_OUT>(LLMRT_GEMV_ARGS);
}
#undef LLMRT_GEMV_PARAMS
#undef LLMRT_GEMV_ARGS

// Rows of W per warp: more as m grows (x is re-read from L1 once per row group). One row per
// warp where W has few rows (q/k/v, o, down: 4096-6144), so twice the warps keep loads in
// flight; two rows per warp for the wide ones (gate/up, lm_head).
constexpr int rowsPerWarp(int64_t m, int64_t n) { return m <= 2 ? (n <= 16384 ? 1 : 2) : 4; }

template <int M, int R, typename W, int U = (M <= 2 ? 4 : 2)>
cudaError_t launch(const void* x, DType x_dtype, int64_t ld_x, const void* w, int64_t k, int64_t n,
                   const float* bias, void* out, DType out_dtype, int64_t ld_out, bool accumulate,
                   const GemvNormIn* norm_in, const GemvNormOut* norm_out, int act, cudaStream_t stream) {
  const int64_t rows_per_block = static_cast<int64_t>(kWarps) * R;
  const unsigned blocks = static_cast<unsigned>((n + rows_per_block - 1) / rows_per_block);
  const auto* wb = static_cast<const W*>(w);
  const bool out_half = out_dtype != DType::kF32;
  // Prefetch at most ~16 MiB of W (a third of the L2) per product: chunks of 512 bytes per warp and row.
  const int prefetch = pdlEnabled() ? static_cast<int>(std::min<int64_t>(8, (int64_t{16} << 20) / (n * 512))) : 0;
  const GemvNormIn in = norm_in ? *norm_in : GemvNormIn{};
  const GemvNormOut no = norm_out ? *norm_out : GemvNormOut{};
  // Each (x type, norm part) pair is its own kernel; a product takes the normed rows in or writes
  // them out, not both.
  auto go = [&](auto tx_tag, auto norm_in_tag, auto norm_out_tag) {
    using TX = decltype(tx_tag);
    constexpr bool kIn = decltype(norm_in_tag)::value, kOut = decltype(norm_out_tag)::value;
    if constexpr (kIn && R == 1)
      return launchPdl(gemvKernelBounded<M, R, U, W, TX, kIn, kOut>, blocks, kWarps * 32, 0, stream,
                       static_cast<const TX*>(x), ld_x, wb, k, n, bias, out, out_half, ld_out, accumulate,
                       prefetch, in, no, act);
    else
      return launchPdl(gemvKernel<M, R, U, W, TX, kIn, kOut>, blocks, kWarps * 32, 0, stream,
                       static_cast<const TX*>(x), ld_x, wb, k, n, bias, out, out_half, ld_out, accumulate,
                       prefetch, in, no, act);
  };
  auto withX = [&](auto tx_tag) {
    if (norm_in) return go(tx_tag, std::true_type{}, std::false_type{});
    if (norm_out) return go(tx_tag, std::false_type{}, std::true_type{});
    return go(tx_tag, std::false_type{}, std::false_type{});
  };
  return x_dtype != DType::kF32 ? withX(W{}) : withX(float{});
}

template <typename W>
cudaError_t launchFor(const void* x, DType x_dtype, int64_t ld_x, const void* w, int64_t m, int64_t k,
                      int64_t n, const float* bias, void* out, DType out_dtype, int64_t ld_out,
                      bool accumulate, const GemvNormIn* norm_in, const GemvNormOut* norm_out, int act,
                      cudaStream_t stream) {
  const bool wide = rowsPerWarp(m, n) == 2;
#define LLMRT_GEMV_LAUNCH(M, R)                                                                           \
  launch<M, R, W>(x, x_dtype, ld_x, w, k, n, bias, out, out_dtype, ld_out, accumulate, norm_in, norm_out, \
                  act, stream)
  switch (m) {
    case 1: return wide ? LLMRT_GEMV_LAUNCH(1, 2) : LLMRT_GEMV_LAUNCH(1, 1);
    case 2: return wide ? LLMRT_GEMV_LAUNCH(2, 2) : LLMRT_GEMV_LAUNCH(2, 1);
    case 3: return LLMRT_GEMV_LAUNCH(3, 4);
    case 4: return LLMRT_GEMV_LAUNCH(4, 4);
    case 5: return LLMRT_GEMV_LAUNCH(5, 4);
    case 6: return LLMRT_GEMV_LAUNCH(6, 4);
    case 7: return LLMRT_GEMV_LAUNCH(7, 4);
    default: return LLMRT_GEMV_LAUNCH(8, 4);
  }
#undef LLMRT_GEMV_LAUNCH
}

}  // namespace

bool gemvSupported(const void* x, DType x_dtype, int64_t ld_x, int64_t m, int64_t k) {
  const int64_t per16 =  // elements per 16 bytes
      x_dtype == DType::kBF16 || x_dtype == DType::kF16 ? 8 : (x_dtype == DType::kF32 ? 4 : 0);
  return per16 > 0 && m >= 1 && m <= kGemvMaxRows && k % 8 == 0 && k > 0 && ld_x % per16 == 0 &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

cudaError_t gemv(const void* x, DType x_dtype, int64_t ld_x, const void* w, DType w_dtype, int64_t m,
                 int64_t k, int64_t n, const float* bias, void* out, DType out_dtype, int64_t ld_out,
                 bool accumulate, cudaStream_t stream, const GemvNormIn* norm_in, const GemvNormOut* norm_out,
                 std::optional<Act> act) {
  if (n == 0) return cudaSuccess;
  if (!gemvSupported(x, x_dtype, ld_x, m, k) || reinterpret_cast<uintptr_t>(w) % 16 != 0 ||
      (x_dtype != DType::kF32 && x_dtype != w_dtype) || (out_dtype != DType::kF32 && out_dtype != w_dtype) ||
      (accumulate && out_dtype != DType::kF32) || (norm_in && norm_out) ||
      (act && (accumulate || norm_in || norm_out)) ||
      (norm_in && (norm_in->sums == nullptr || norm_in->parts < 1)) ||
      (norm_out && (out_dtype != DType::kF32 || norm_out->g == nullptr || norm_out->normed == nullptr ||
                    norm_out->sums == nullptr)))
    return cudaErrorInvalidValue;
  return withHalfType(w_dtype, [&](auto tag) {
    return launchFor<decltype(tag)>(x, x_dtype, ld_x, w, m, k, n, bias, out, out_dtype, ld_out, accumulate,
                                    norm_in, norm_out, act ? static_cast<int>(*act) : -1, stream);
  });
}

}  // namespace llmrt::cuda
