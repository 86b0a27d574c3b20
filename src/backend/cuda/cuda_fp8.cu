// 8-bit (W8A8) products, float8 E4M3 or INT8 codes: activation rows quantized by core/fp8.h's or
// core/int8.h's rule, products of codes summed on the tensor cores, the scales applied to the sums.
//
// w8a8QuantizeRows: one block per row; the row's amax (a max, so any order gives the same value),
// then scale = amax / M and inverse = M / amax (M = 448 or 127; IEEE division, as the CPU computes
// them), and each code cvt.rn.satfinite(v * inverse) (E4M3) or clamp(cvt.rni(v * inverse), +-127)
// (INT8): the CPU reference's bits.
//
// w8a8Gemv (decode-sized products, m <= 8 rows): bound by reading W's codes once. A block owns 16
// rows of W; its 8 warps take interleaved 64-byte chunks of k, and each lane of a warp loads 16
// bytes of W row g = lane / 4 and of row g + 8 (lane % 4 picks the 16-byte quarter of the chunk)
// plus the same 16 bytes of x's row g, then two mma.m16n8k32 e4m3 multiply them: the 16 bytes are
// split over the k slots of A and B alike (a sum over k does not care which slot holds which k), so
// each load feeds the tensor cores without a shuffle. x's rows are the MMA's 8 columns (rows past m
// are zeros); E4M3: each chunk's sums are added to float32 accumulators (chunkMma); INT8: the
// MMA's int32 accumulators sum all of k (exact). The warps' 16 x 8 sums meet in shared memory,
// added in warp order, then out = sum * (scale_x * scale_w) (+ bias), stored or added to a float32
// out (INT8: every operation rounded on its own, the CPU's order, so the outputs are its bits).
#include <cuda_fp8.h>

#include <algorithm>
#include <type_traits>

#include "backend/cuda/cuda_codes.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_pdl.h"
#include "backend/cuda/cuda_vec.h"

namespace llmrt::cuda {
namespace {

constexpr int kQuantThreads = 256;

template <typename T, typename C>
__global__ void __launch_bounds__(kQuantThreads)
    quantizeRowsKernel(const T* __restrict__ x, int64_t ld_x, int64_t k, uint8_t* __restrict__ q,
                       float* __restrict__ scales) {
  pdlWait();
  pdlLaunchDependents();
  const T* row = x + blockIdx.x * ld_x;
  float amax = 0.0f;
  for (int64_t i = threadIdx.x; i < k; i += kQuantThreads) amax = fmaxf(amax, fabsf(toFloat(row[i])));
  __shared__ float warp_max[32];
  const float2 si = rowScaleInverse<C>(blockMax(amax, warp_max));
  const float inverse = si.y;
  if (threadIdx.x == 0) scales[blockIdx.x] = si.x;
  uint8_t* qrow = q + blockIdx.x * k;
  for (int64_t i = threadIdx.x; i < k; i += kQuantThreads) qrow[i] = C::code(toFloat(row[i]) * inverse);
}

// d += A (16 x 32, rows g / g + 8 in a0 a2 / a1 a3) * B (32 x 8, column g in b0 b1), e4m3 in, f32 accumulate.
__device__ __forceinline__ void mmaE4m3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

// One 64-byte chunk of k: two MMAs from zero, their sums added to d on the CUDA cores. Hopper's
// FP8 MMA keeps fewer accumulator bits than float32, so a long k summed inside the tensor core
// drifts (~3e-3 relative at k = 4096 in the op tests); promoting every 64 codes keeps d a
// float32 sum of exact-ish partial sums.
__device__ __forceinline__ void chunkMma(float (&d)[4], const uint4& wa, const uint4& wb, const uint4& xv) {
  float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  mmaE4m3(t, wa.x, wb.x, wa.y, wb.y, xv.x, xv.y);
  mmaE4m3(t, wa.z, wb.z, wa.w, wb.w, xv.z, xv.w);
#pragma unroll
  for (int i = 0; i < 4; ++i) d[i] += t[i];
}

// d += A * B as mmaE4m3, int8 in, int32 accumulate (exact).
__device__ __forceinline__ void mmaS8(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                      uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

__device__ __forceinline__ void chunkMma(int (&d)[4], const uint4& wa, const uint4& wb, const uint4& xv) {
  mmaS8(d, wa.x, wb.x, wa.y, wb.y, xv.x, xv.y);
  mmaS8(d, wa.z, wb.z, wa.w, wb.w, xv.z, xv.w);
}

// A sum of code products scaled: E4M3 as the FP8 path always computed it (contractable); INT8
// with every operation rounded on its own, as the CPU reference computes it.
__device__ __forceinline__ float scaledSum(float s, float sx, float sw, float b) { return s * (sx * sw) + b; }
__device__ __forceinline__ float scaledSum(int s, float sx, float sw, float b) {
  return __fadd_rn(__fmul_rn(__int2float_rn(s), __fmul_rn(sx, sw)), b);
}

constexpr int kGemvWarps = 8;
constexpr int kRowsPerBlock = 16;
constexpr int kChunk = 64;  // bytes of k per warp step (4 lanes x 16 bytes)
constexpr int kUnroll = 4;  // chunks per lane in flight

template <typename OUT, typename C>
__global__ void __launch_bounds__(kGemvWarps * 32)
    gemvKernel(const uint8_t* __restrict__ x, const float* __restrict__ sx, int m, int64_t k,
                  const uint8_t* __restrict__ w, const float* __restrict__ sw, int64_t n,
                  const float* __restrict__ bias, OUT* __restrict__ out, int64_t ld_out, bool accumulate) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock;
  const uint8_t* row_a = w + min(n0 + g, n - 1) * k + t * 16;
  const uint8_t* row_b = w + min(n0 + g + 8, n - 1) * k + t * 16;
  const bool has_x = g < m;
  const uint8_t* row_x = x + min(g, m - 1) * k + t * 16;
  const int64_t chunks = k / kChunk;
  // Weights first (no earlier kernel writes them): into L2 while the quantization finishes.
  for (int i = 0; i < kUnroll; ++i) {
    const int64_t c = warp + static_cast<int64_t>(kGemvWarps) * i;
    if (c >= chunks) break;
    asm volatile("prefetch.global.L2 [%0];" ::"l"(row_a + c * kChunk));
    asm volatile("prefetch.global.L2 [%0];" ::"l"(row_b + c * kChunk));
  }
  pdlWait();
  pdlLaunchDependents();
  using Acc = typename C::Acc;
  Acc d[4] = {0, 0, 0, 0};
  const uint4 zero = make_uint4(0, 0, 0, 0);
  int64_t c = warp;
  for (; c + kGemvWarps * (kUnroll - 1) < chunks; c += kGemvWarps * kUnroll) {
    uint4 wa[kUnroll], wb[kUnroll], xv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t off = (c + kGemvWarps * u) * kChunk;
      wa[u] = loadStreaming(reinterpret_cast<const uint4*>(row_a + off));
      wb[u] = loadStreaming(reinterpret_cast<const uint4*>(row_b + off));
      xv[u] = has_x ? *reinterpret_cast<const uint4*>(row_x + off) : zero;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) chunkMma(d, wa[u], wb[u], xv[u]);
  }
  for (; c < chunks; c += kGemvWarps) {
    const int64_t off = c * kChunk;
    const uint4 wa = loadStreaming(reinterpret_cast<const uint4*>(row_a + off));
    const uint4 wb = loadStreaming(reinterpret_cast<const uint4*>(row_b + off));
    const uint4 xv = has_x ? *reinterpret_cast<const uint4*>(row_x + off) : zero;
    chunkMma(d, wa, wb, xv);
  }
  // d: (row g, x rows 2t, 2t + 1), (row g + 8, the same x rows).
  __shared__ Acc sums[kGemvWarps][kRowsPerBlock][8];
  sums[warp][g][2 * t] = d[0];
  sums[warp][g][2 * t + 1] = d[1];
  sums[warp][g + 8][2 * t] = d[2];
  sums[warp][g + 8][2 * t + 1] = d[3];
  __syncthreads();
  if (threadIdx.x >= kRowsPerBlock * 8) return;
  const int r = threadIdx.x % kRowsPerBlock, j = threadIdx.x / kRowsPerBlock;
  if (j >= m || n0 + r >= n) return;
  Acc s = 0;
#pragma unroll
  for (int i = 0; i < kGemvWarps; ++i) s += sums[i][r][j];
  const float v = scaledSum(s, sx[j], sw[n0 + r], bias ? bias[n0 + r] : 0.0f);
  OUT* o = out + j * ld_out + n0 + r;
  if constexpr (std::is_same_v<OUT, float>) {
    *o = accumulate ? __fadd_rn(*o, v) : v;
  } else {
    storeFloat(o, v);
  }
}

// The row-per-warp variant for one or two rows of x (w8a8Gemv's row_warp_rows): each warp owns
// one row of W and walks it as the 16-bit kernel walks its rows, 16 bytes per lane, 512 contiguous
// bytes per warp and step, U steps in flight, no shared memory and no block barrier. The lane's 16
// codes and x's 16 codes at the same k feed two MMAs used on their diagonal: A's row g holds the
// first 8 bytes of lanes 4g..4g+3 (a0, a2), row g + 8 their last 8 (a1, a3); B's column g holds the
// first 8 bytes of x at those lanes (first MMA) or the last 8 (second). So D1[g][g] + D2[g + 8][g]
// is the dot product of lanes 4g..4g+3's 64 bytes with x's, held by lane 4g + g / 2 (d[g % 2] and
// d[2 + g % 2]); the rest of D is not used. E4M3: each MMA from zero, its diagonal entry added to a
// float32 sum (32 products per MMA inside the tensor core); INT8: int32 throughout (exact).
template <typename Acc>
__device__ __forceinline__ void diagMma(Acc& acc, const uint4& w, const uint4& x, bool odd) {
  Acc t1[4] = {0, 0, 0, 0}, t2[4] = {0, 0, 0, 0};
  if constexpr (std::is_same_v<Acc, float>) {
    mmaE4m3(t1, w.x, w.z, w.y, w.w, x.x, x.y);
    mmaE4m3(t2, w.x, w.z, w.y, w.w, x.z, x.w);
  } else {
    mmaS8(t1, w.x, w.z, w.y, w.w, x.x, x.y);
    mmaS8(t2, w.x, w.z, w.y, w.w, x.z, x.w);
  }
  acc += (odd ? t1[1] : t1[0]) + (odd ? t2[3] : t2[2]);
}

template <typename OUT, typename C, int M, int U>
__global__ void __launch_bounds__(kGemvWarps * 32)
    gemvRowKernel(const uint8_t* __restrict__ x, const float* __restrict__ sx, int64_t k,
                  const uint8_t* __restrict__ w, const float* __restrict__ sw, int64_t n,
                  const float* __restrict__ bias, OUT* __restrict__ out, int64_t ld_out, bool accumulate) {
  const int lane = threadIdx.x % 32, g = lane / 4;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + threadIdx.x / 32;
  const uint4* wr = reinterpret_cast<const uint4*>(w + (row < n ? row : n - 1) * k);
  const int64_t pieces = k / 16;  // 16-byte pieces of a row
  // Weights first (no earlier kernel writes them): into L2 while the producer of x finishes.
  if (row < n)
    for (int u = 0; u < U && lane + 32 * u < pieces; ++u)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(wr + lane + 32 * u));
  pdlWait();
  pdlLaunchDependents();
  if (row >= n) return;  // (whole warps: the MMAs below need every lane of a warp)
  using Acc = typename C::Acc;
  Acc acc[M];
#pragma unroll
  for (int j = 0; j < M; ++j) acc[j] = 0;
  const bool odd = g % 2 != 0;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  const uint4* xr = reinterpret_cast<const uint4*>(x);
  int64_t base = 0;
  for (; base + 32 * U <= pieces; base += 32 * U) {
    uint4 wv[U];
#pragma unroll
    for (int u = 0; u < U; ++u) wv[u] = loadStreaming(wr + base + 32 * u + lane);
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < M; ++j) diagMma(acc[j], wv[u], xr[j * pieces + base + 32 * u + lane], odd);
  }
  if (base < pieces) {  // the last (< 32 U) pieces, loads all in flight; lanes past the row's end add zeros
    uint4 wv[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t p = base + 32 * u + lane;
      wv[u] = p < pieces ? loadStreaming(wr + p) : zero;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (base + 32 * u >= pieces) break;  // (warp-uniform)
      const int64_t p = base + 32 * u + lane;
#pragma unroll
      for (int j = 0; j < M; ++j) diagMma(acc[j], wv[u], p < pieces ? xr[j * pieces + p] : zero, odd);
    }
  }
  const bool holds = lane % 4 == g / 2;  // lane 4g + g / 2 holds group g's dot product
#pragma unroll
  for (int j = 0; j < M; ++j) {
    Acc s = holds ? acc[j] : Acc(0);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == j) {
      const float v = scaledSum(s, sx[j], sw[row], bias ? bias[row] : 0.0f);
      OUT* o = out + j * ld_out + row;
      if constexpr (std::is_same_v<OUT, float>) {
        *o = accumulate ? __fadd_rn(*o, v) : v;
      } else {
        storeFloat(o, v);
      }
    }
  }
}

template <typename OUT, typename ACC>
__global__ void scaleOutKernel(const ACC* __restrict__ sums, int64_t ld_sums, int64_t m, int64_t n,
                               const float* __restrict__ sx, const float* __restrict__ sw, const float* __restrict__ bias, OUT* __restrict__ out,
                               int64_t ld_out, bool accumulate) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m * n) return;
  const int64_t j = i / n, r = i % n;
  const float v = scaledSum(sums[j * ld_sums + r], sx[j], sw[r], bias ? bias[r] : 0.0f);
  OUT* o = out + j * ld_out + r;
  if constexpr (std::is_same_v<OUT, float>) {
    *o = accumulate ? __fadd_rn(*o, v) : v;
  } else {
    storeFloat(o, v);
  }
}

// scaleOutKernel over four consecutive columns per thread (16-byte loads of the sums, scales and
// bias; n, ld_sums and ld_out multiples of 4, 16-byte aligned pointers): blockIdx.y is the row, so
// no 64-bit divisions. The same operations per element, so the same bits.
template <typename OUT, typename ACC>
__global__ void scaleOutVecKernel(const ACC* __restrict__ sums, int64_t ld_sums, int64_t n,
                                  const float* __restrict__ sx, const float* __restrict__ sw,
                                  const float* __restrict__ bias, OUT* __restrict__ out, int64_t ld_out,
                                  bool accumulate) {
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
  if (c >= n) return;
  const int64_t j = blockIdx.y;
  using Acc4 = std::conditional_t<std::is_same_v<ACC, int>, int4, float4>;
  const Acc4 s = *reinterpret_cast<const Acc4*>(sums + j * ld_sums + c);
  const float4 w = *reinterpret_cast<const float4*>(sw + c);
  const float4 b = bias ? *reinterpret_cast<const float4*>(bias + c) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const float x = sx[j];
  float4 v = make_float4(scaledSum(s.x, x, w.x, b.x), scaledSum(s.y, x, w.y, b.y),
                         scaledSum(s.z, x, w.z, b.z), scaledSum(s.w, x, w.w, b.w));
  OUT* o = out + j * ld_out + c;
  if constexpr (std::is_same_v<OUT, float>) {
    if (accumulate) {
      const float4 r = *reinterpret_cast<const float4*>(o);
      v = make_float4(__fadd_rn(r.x, v.x), __fadd_rn(r.y, v.y), __fadd_rn(r.z, v.z), __fadd_rn(r.w, v.w));
    }
  }
  store4(o, v);
}

}  // namespace

cudaError_t w8a8QuantizeRows(DType codes, const void* x, DType x_dtype, int64_t ld_x, int64_t m, int64_t k,
                             uint8_t* q, float* scales, cudaStream_t stream) {
  if (m == 0) return cudaSuccess;
  if (m > INT32_MAX || k < 1 || (codes != DType::kF8E4M3 && codes != DType::kI8)) return cudaErrorInvalidValue;
  return withElementType(x_dtype, [&](auto tag) {
    using T = decltype(tag);
    if (codes == DType::kI8)
      return launchPdl(quantizeRowsKernel<T, Int8Codes>, dim3(static_cast<unsigned>(m)), dim3(kQuantThreads), 0,
                       stream, static_cast<const T*>(x), ld_x, k, q, scales);
    return launchPdl(quantizeRowsKernel<T, E4m3Codes>, dim3(static_cast<unsigned>(m)), dim3(kQuantThreads), 0, stream,
                     static_cast<const T*>(x), ld_x, k, q, scales);
  });
}

bool w8a8GemvSupported(int64_t m, int64_t k) { return m >= 1 && m <= kW8a8GemvMaxRows && k > 0 && k % kChunk == 0; }

cudaError_t w8a8Gemv(DType codes, const uint8_t* q, const float* sx, int64_t m, int64_t k, const uint8_t* w,
                     const float* sw, int64_t n, const float* bias, void* out, DType out_dtype,
                     int64_t ld_out, bool accumulate, cudaStream_t stream, int row_warp_rows) {
  if (!w8a8GemvSupported(m, k) || reinterpret_cast<uintptr_t>(q) % 16 != 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if ((accumulate && out_dtype != DType::kF32) || reinterpret_cast<uintptr_t>(w) % 16 != 0 ||
      (codes != DType::kF8E4M3 && codes != DType::kI8))
    return cudaErrorInvalidValue;
  if (m <= row_warp_rows && m <= 2) {
    const auto blocks = static_cast<unsigned>((n + kGemvWarps - 1) / kGemvWarps);
    return withElementType(out_dtype, [&](auto tag) {
      using T = decltype(tag);
      auto go = [&](auto codes_tag, auto rows_tag) {
        using C = decltype(codes_tag);
        constexpr int M = decltype(rows_tag)::value;
        return launchPdl(gemvRowKernel < T, C, M, M == 1 ? 8 : 4 >, dim3(blocks), dim3(kGemvWarps * 32), 0,
                         stream, q, sx, k, w, sw, n, bias, static_cast<T*>(out), ld_out, accumulate);
      };
      auto withRows = [&](auto codes_tag) {
        return m == 1 ? go(codes_tag, std::integral_constant<int, 1>{})
                      : go(codes_tag, std::integral_constant<int, 2>{});
      };
      return codes == DType::kI8 ? withRows(Int8Codes{}) : withRows(E4m3Codes{});
    });
  }
  const auto blocks = static_cast<unsigned>((n + kRowsPerBlock - 1) / kRowsPerBlock);
  return withElementType(out_dtype, [&](auto tag) {
    using T = decltype(tag);
    if (codes == DType::kI8)
      return launchPdl(gemvKernel<T, Int8Codes>, dim3(blocks), dim3(kGemvWarps * 32), 0, stream, q, sx,
                       static_cast<int>(m), k, w, sw, n, bias, static_cast<T*>(out), ld_out, accumulate);
    return launchPdl(gemvKernel<T, E4m3Codes>, dim3(blocks), dim3(kGemvWarps * 32), 0, stream, q, sx,
                     static_cast<int>(m), k, w, sw, n, bias, static_cast<T*>(out), ld_out, accumulate);
  });
}

cudaError_t w8a8ScaleOut(DType codes, const void* sums, int64_t ld_sums, int64_t m, int64_t n, const float* sx,
                         const float* sw, const float* bias, void* out, DType out_dtype, int64_t ld_out,
                         bool accumulate, cudaStream_t stream) {
  if (m * n == 0) return cudaSuccess;
  if ((accumulate && out_dtype != DType::kF32) || (codes != DType::kF8E4M3 && codes != DType::kI8))
    return cudaErrorInvalidValue;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (n % 4 == 0 && ld_sums % 4 == 0 && ld_out % 4 == 0 && m <= 65535 && aligned(sums) && aligned(sw) &&
      (bias == nullptr || aligned(bias)) && aligned(out)) {
    const dim3 grid(static_cast<unsigned>((n / 4 + 255) / 256), static_cast<unsigned>(m));
    return withElementType(out_dtype, [&](auto tag) {
      using T = decltype(tag);
      if (codes == DType::kI8)
        scaleOutVecKernel<T, int><<<grid, 256, 0, stream>>>(static_cast<const int*>(sums), ld_sums, n, sx, sw,
                                                            bias, static_cast<T*>(out), ld_out, accumulate);
      else
        scaleOutVecKernel<T, float><<<grid, 256, 0, stream>>>(static_cast<const float*>(sums), ld_sums, n, sx,
                                                              sw, bias, static_cast<T*>(out), ld_out,
                                                              accumulate);
      return cudaGetLastError();
    });
  }
  const auto blocks = static_cast<unsigned>((m * n + 255) / 256);
  return withElementType(out_dtype, [&](auto tag) {
    using T = decltype(tag);
    if (codes == DType::kI8)
      scaleOutKernel<T, int><<<blocks, 256, 0, stream>>>(static_cast<const int*>(sums), ld_sums, m, n, sx, sw, bias,
                                                         static_cast<T*>(out), ld_out, accumulate);
    else
      scaleOutKernel<T, float><<<blocks, 256, 0, stream>>>(static_cast<const float*>(sums), ld_sums, m, n, sx, sw,
                                                           bias, static_cast<T*>(out), ld_out, accumulate);
    return cudaGetLastError();
  });
}

}  // namespace llmrt::cuda
