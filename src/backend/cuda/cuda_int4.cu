// W4A16 products of 4-bit weights (AWQ's asymmetric int4 groups; CudaBackend::loadInt4Weight):
// W[i][j] = (code - zero) * scale per group of `group` input features, times 16-bit (or float32)
// activations, float32 accumulation.
//
// Layout: codes packed 8 to a uint32 along k (nibble j of word p of a row holds feature 8p + j),
// rows of k / 8 words; scales [n, k / group] float32; zero terms [n, k / group] float32 holding
// 2^23 + zero. A code becomes a float with one OR into the mantissa of 2^23 (2^23 + code, exact),
// and subtracting the zero term gives code - zero exactly, so no integer-to-float conversion.
//
// int4Gemv (decode-sized products): with 16-bit activations, m <= 32 and groups of 128, the
// tensor-core kernel below; otherwise (float32 activations, m <= 4) the CUDA-core kernel: a warp
// per weight row, lanes taking 16-byte chunks (32 codes, inside one group since group % 32 == 0)
// in turn; each chunk's sum x * (code - zero) is scaled once by its group's scale and added to
// float32 accumulators (one per x row); the warp's sums meet by shuffles. Both read each code
// once (half a byte per weight) and, per group of 128, a float32 scale and zero term (docs/perf.md
// has their measured decode times against the floor).
//
// int4Dequantize (larger steps): the weight written out in the products' 16-bit (or float32)
// type, for the 16-bit GEMM to read.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_mma.h"
#include "backend/cuda/cuda_vec.h"

namespace llmrt::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kRowsPerWarp = 1;  // weight rows a warp of the CUDA-core kernel reads at once
constexpr uint32_t kMagic = 0x4B000000u;  // 2^23 as float bits

// 8 consecutive activations of row `r` at feature `k0` as floats.
template <typename X>
__device__ __forceinline__ void loadX8(const X* x, float (&v)[8]) {
  if constexpr (std::is_same_v<X, float>) {
    const float4 a = *reinterpret_cast<const float4*>(x), b = *reinterpret_cast<const float4*>(x + 4);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  } else {
    const uint4 u = *reinterpret_cast<const uint4*>(x);
    const X* h = reinterpret_cast<const X*>(&u);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = toFloat(h[j]);
  }
}

template <typename X, typename OUT, int M>
__global__ void __launch_bounds__(kWarps * 32)
    int4GemvKernel(const X* __restrict__ x, int64_t ld_x, const uint32_t* __restrict__ w,
                   const float* __restrict__ scales, const float* __restrict__ zeros, int64_t n, int64_t k,
                   int group, const float* __restrict__ bias, OUT* __restrict__ out, int64_t ld_out, bool accumulate) {
  constexpr int R = kRowsPerWarp;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * R;
  if (row0 >= n) return;
  const int64_t chunks = k / 32, groups = k / group;
  const uint4* wr[R];
  bool live[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    live[r] = row0 + r < n;
    wr[r] = reinterpret_cast<const uint4*>(w + min(row0 + r, n - 1) * (k / 8));
  }
  float acc[R][M];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < M; ++m) acc[r][m] = 0.0f;
  for (int64_t c = lane; c < chunks; c += 32) {
    uint4 q[R];
#pragma unroll
    for (int r = 0; r < R; ++r) q[r] = loadStreaming(wr[r] + c);
    const int64_t k0 = c * 32, g = k0 / group;
    float zf[R], s[R], p[R][M];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t at = min(row0 + r, n - 1) * groups + g;
      zf[r] = zeros[at];
      s[r] = scales[at];
#pragma unroll
      for (int m = 0; m < M; ++m) p[r][m] = 0.0f;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float v[M][8];
#pragma unroll
      for (int m = 0; m < M; ++m) loadX8(x + m * ld_x + k0 + i * 8, v[m]);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const uint32_t word = i == 0 ? q[r].x : i == 1 ? q[r].y : i == 2 ? q[r].z : q[r].w;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float d = __uint_as_float(((word >> (4 * j)) & 0xFu) | kMagic) - zf[r];  // code - zero
#pragma unroll
          for (int m = 0; m < M; ++m) p[r][m] = fmaf(v[m][j], d, p[r][m]);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int m = 0; m < M; ++m) acc[r][m] = fmaf(p[r][m], s[r], acc[r][m]);
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < M; ++m)
      for (int o = 16; o > 0; o >>= 1) acc[r][m] += __shfl_xor_sync(0xffffffffu, acc[r][m], o);
  if (lane != 0) return;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (!live[r]) continue;
    const int64_t row = row0 + r;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float v = acc[r][m] + (bias ? bias[row] : 0.0f);
      OUT* o = out + m * ld_out + row;
      if constexpr (std::is_same_v<OUT, float>) {
        *o = accumulate ? *o + v : v;
      } else {
        storeFloat(o, v);
      }
    }
  }
}

// ---- the tensor-core matrix-vector kernel (16-bit activations, group % 128 == 0) ----------
// x's rows in tiles of 8 (T of them: m <= 8 T), the weights dequantized once for all tiles.
// A block owns 16 weight rows; its 8 warps take interleaved chunks of 128 features (one group).
// Lane (g, t) = (lane / 4, lane % 4) reads 16 bytes (32 codes) of rows g and g + 8 at features
// chunk * 128 + t * 32 and the same 32 features of x's row g (zeros past m). Each code word
// becomes four H pairs of code - zero, exact (a shift and a lop3 of the nibbles into the mantissa
// of 128 (bf16) or 1024 (fp16), then a subtraction): pairs (n0, n4), (n1, n5), (n2, n6),
// (n3, n7); x's 8 values are paired the same way with byte permutes, and two
// mma.m16n8k16 take them as A (rows g, g + 8) and B (x row g) — a sum over k does not care which
// slot holds which k. The chunk's 8 MMAs sum into a zeroed fragment, scaled by the rows' group
// scales into float32 accumulators; the warps' 16 x 8 sums meet in shared memory.
template <typename H>
struct Int4Magic;
template <>
struct Int4Magic<__nv_bfloat16> {
  static constexpr uint32_t kBase = 0x43004300u;  // (128, 128): 128 + n for n < 128 in the mantissa
  static constexpr float kValue = 128.0f;
};
template <>
struct Int4Magic<__half> {
  static constexpr uint32_t kBase = 0x64006400u;  // (1024, 1024)
  static constexpr float kValue = 1024.0f;
};

__device__ __forceinline__ uint32_t lop3Or(uint32_t a, uint32_t mask, uint32_t base) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(a), "r"(mask), "r"(base));  // (a & mask) | base
  return r;
}

template <typename H>
__device__ __forceinline__ uint32_t subPair(uint32_t v, uint32_t z) {
  using H2 = std::conditional_t<std::is_same_v<H, __half>, __half2, __nv_bfloat162>;
  H2 r = __hsub2(*reinterpret_cast<const H2*>(&v), *reinterpret_cast<const H2*>(&z));
  return *reinterpret_cast<uint32_t*>(&r);
}
template <typename H>
__device__ __forceinline__ uint32_t splat(float v) {
  using H2 = std::conditional_t<std::is_same_v<H, __half>, __half2, __nv_bfloat162>;
  H2 r;
  if constexpr (std::is_same_v<H, __half>) r = __float2half2_rn(v); else r = __float2bfloat162_rn(v);
  return *reinterpret_cast<uint32_t*>(&r);
}

// The four (code - zero) pairs of one word, exact: nibble pairs (n0, n4), (n1, n5), (n2, n6),
// (n3, n7) ORed into the mantissa of the magic value, minus (magic + zero) pairs `mz`.
template <typename H>
__device__ __forceinline__ void dequantWord(uint32_t w, uint32_t mz, uint32_t (&p)[4]) {
  const uint32_t base = Int4Magic<H>::kBase;
#pragma unroll
  for (int i = 0; i < 4; ++i) p[i] = subPair<H>(lop3Or(w >> (4 * i), 0x000F000Fu, base), mz);
}

constexpr int kMmaRows = 16;

template <typename H, typename OUT, int T>
__global__ void __launch_bounds__(kWarps * 32)
    int4GemvMmaKernel(const H* __restrict__ x, int64_t ld_x, int m, const uint32_t* __restrict__ w,
                      const float* __restrict__ scales, const float* __restrict__ zeros, int64_t n, int64_t k,
                      int group, const float* __restrict__ bias, OUT* __restrict__ out, int64_t ld_out,
                      bool accumulate) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kMmaRows;
  const int64_t ra = min(n0 + g, n - 1), rb = min(n0 + g + 8, n - 1);
  const int64_t words = k / 8, groups = k / group, chunks = k / 128;
  const uint4* wa = reinterpret_cast<const uint4*>(w + ra * words) + t;  // + chunk * 4 (a uint4: 32 codes)
  const uint4* wb = reinterpret_cast<const uint4*>(w + rb * words) + t;
  // x rows of tile i: 8 i + g (the MMA's column g); zeros past m.
  bool has_x[T];
  const uint4* xr[T];
#pragma unroll
  for (int i = 0; i < T; ++i) {
    has_x[i] = i * 8 + g < m;
    xr[i] = reinterpret_cast<const uint4*>(x + min(i * 8 + g, m - 1) * ld_x) + t * 4;  // + chunk * 16 (8 values each)
  }
  float acc[T][4];
#pragma unroll
  for (int i = 0; i < T; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[i][e] = 0.0f;
  const uint4 zero4 = make_uint4(0, 0, 0, 0);
  for (int64_t c = warp; c < chunks; c += kWarps) {
    const uint4 qa = loadStreaming(wa + c * 4), qb = loadStreaming(wb + c * 4);
    uint4 xv[T][4];
#pragma unroll
    for (int i = 0; i < T; ++i)
#pragma unroll
      for (int q = 0; q < 4; ++q) xv[i][q] = has_x[i] ? xr[i][c * 16 + q] : zero4;
    const int64_t gi = (c * 128) / group;
    const float za = zeros[ra * groups + gi] - 8388608.0f, zb = zeros[rb * groups + gi] - 8388608.0f;  // the zero points
    const float sa = scales[ra * groups + gi], sb = scales[rb * groups + gi];
    const uint32_t mz_a = splat<H>(Int4Magic<H>::kValue + za), mz_b = splat<H>(Int4Magic<H>::kValue + zb);
    float d[T][4];
#pragma unroll
    for (int i = 0; i < T; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) d[i][e] = 0.0f;
    const uint32_t wa4[4] = {qa.x, qa.y, qa.z, qa.w}, wb4[4] = {qb.x, qb.y, qb.z, qb.w};
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      uint32_t pa[4], pb[4];
      dequantWord<H>(wa4[q], mz_a, pa);
      dequantWord<H>(wb4[q], mz_b, pb);
      const uint32_t a0[4] = {pa[0], pb[0], pa[1], pb[1]}, a1[4] = {pa[2], pb[2], pa[3], pb[3]};
#pragma unroll
      for (int i = 0; i < T; ++i) {
        const uint4 u = xv[i][q];
        const uint32_t x04 = __byte_perm(u.x, u.z, 0x5410), x15 = __byte_perm(u.x, u.z, 0x7632);
        const uint32_t x26 = __byte_perm(u.y, u.w, 0x5410), x37 = __byte_perm(u.y, u.w, 0x7632);
        mma16816<H>(d[i], a0, x04, x15);
        mma16816<H>(d[i], a1, x26, x37);
      }
    }
#pragma unroll
    for (int i = 0; i < T; ++i) {
      acc[i][0] = fmaf(d[i][0], sa, acc[i][0]);
      acc[i][1] = fmaf(d[i][1], sa, acc[i][1]);
      acc[i][2] = fmaf(d[i][2], sb, acc[i][2]);
      acc[i][3] = fmaf(d[i][3], sb, acc[i][3]);
    }
  }
  // acc[i]: (row g, x rows 8 i + 2t, + 1), (row g + 8, the same x rows).
  __shared__ float sums[kWarps][kMmaRows][8 * T];
#pragma unroll
  for (int i = 0; i < T; ++i) {
    sums[warp][g][8 * i + 2 * t] = acc[i][0];
    sums[warp][g][8 * i + 2 * t + 1] = acc[i][1];
    sums[warp][g + 8][8 * i + 2 * t] = acc[i][2];
    sums[warp][g + 8][8 * i + 2 * t + 1] = acc[i][3];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < kMmaRows * 8 * T; e += kWarps * 32) {
    const int r = e % kMmaRows, j = e / kMmaRows;
    if (j >= m || n0 + r >= n) continue;
    float v = 0.0f;
#pragma unroll
    for (int i = 0; i < kWarps; ++i) v += sums[i][r][j];
    v += bias ? bias[n0 + r] : 0.0f;
    OUT* o = out + j * ld_out + n0 + r;
    if constexpr (std::is_same_v<OUT, float>) {
      *o = accumulate ? *o + v : v;
    } else {
      storeFloat(o, v);
    }
  }
}

template <typename OUT>
__global__ void int4DequantizeKernel(const uint32_t* __restrict__ w, const float* __restrict__ scales,
                                     const float* __restrict__ zeros, int64_t n, int64_t k, int group,
                                     OUT* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // word index
  const int64_t words = k / 8;
  if (i >= n * words) return;
  const int64_t row = i / words, k0 = (i % words) * 8;
  const int64_t g = row * (k / group) + k0 / group;
  const float zf = zeros[g], s = scales[g];
  const uint32_t q = w[i];
  OUT* o = out + row * k + k0;
#pragma unroll
  for (int j = 0; j < 8; ++j) storeFloat(o + j, (__uint_as_float(((q >> (4 * j)) & 0xFu) | kMagic) - zf) * s);
}

template <typename X, typename OUT, int M>
cudaError_t launchGemv(const void* x, int64_t ld_x, const uint32_t* w, const float* scales, const float* zeros,
                       int64_t n, int64_t k, int group, const float* bias, void* out, int64_t ld_out, bool accumulate,
                       cudaStream_t stream) {
  const int64_t rows_per_block = kWarps * kRowsPerWarp;
  const auto blocks = static_cast<unsigned>((n + rows_per_block - 1) / rows_per_block);
  int4GemvKernel<X, OUT, M><<<blocks, kWarps * 32, 0, stream>>>(static_cast<const X*>(x), ld_x, w, scales, zeros, n,
                                                                 k, group, bias, static_cast<OUT*>(out), ld_out,
                                                                 accumulate);
  return cudaGetLastError();
}

}  // namespace

namespace {
bool mmaPath(int64_t m, int64_t k, int64_t group, DType x_dtype) {
  return x_dtype != DType::kF32 && m <= kInt4GemvMmaRows && k % 128 == 0 && group % 128 == 0;
}
}  // namespace

bool int4GemvSupported(int64_t m, int64_t k, int64_t group, const void* x, DType x_dtype, int64_t ld_x) {
  const size_t esz = x_dtype == DType::kF32 ? 4 : 2;
  const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && (static_cast<size_t>(ld_x) * esz) % 16 == 0;
  if (!aligned || m < 1 || k <= 0 || k % 32 != 0 || group % 32 != 0) return false;
  return mmaPath(m, k, group, x_dtype) || m <= kInt4GemvCudaCoreRows;
}

cudaError_t int4Gemv(const void* x, DType x_dtype, int64_t ld_x, int64_t m, const uint32_t* w, const float* scales,
                     const float* zeros, int64_t n, int64_t k, int64_t group, const float* bias, void* out,
                     DType out_dtype, int64_t ld_out, bool accumulate, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (!int4GemvSupported(m, k, group, x, x_dtype, ld_x) || (accumulate && out_dtype != DType::kF32))
    return cudaErrorInvalidValue;
  const int g = static_cast<int>(group);
  if (mmaPath(m, k, group, x_dtype)) {
    const auto blocks = static_cast<unsigned>((n + kMmaRows - 1) / kMmaRows);
    return withElementType(x_dtype, [&](auto xt) {
      using X = decltype(xt);
      if constexpr (std::is_same_v<X, float>) {
        return cudaErrorInvalidValue;
      } else {
        return withElementType(out_dtype, [&](auto ot) {
          using O = decltype(ot);
          auto launch = [&](auto kernel) {
            kernel<<<blocks, kWarps * 32, 0, stream>>>(static_cast<const X*>(x), ld_x, static_cast<int>(m), w, scales,
                                                       zeros, n, k, g, bias, static_cast<O*>(out), ld_out, accumulate);
            return cudaGetLastError();
          };
          if (m <= 8) return launch(int4GemvMmaKernel<X, O, 1>);
          if (m <= 16) return launch(int4GemvMmaKernel<X, O, 2>);
          return launch(int4GemvMmaKernel<X, O, 4>);
        });
      }
    });
  }
  return withElementType(x_dtype, [&](auto xt) {
    using X = decltype(xt);
    return withElementType(out_dtype, [&](auto ot) {
      using O = decltype(ot);
      switch (m) {
        case 1: return launchGemv<X, O, 1>(x, ld_x, w, scales, zeros, n, k, g, bias, out, ld_out, accumulate, stream);
        case 2: return launchGemv<X, O, 2>(x, ld_x, w, scales, zeros, n, k, g, bias, out, ld_out, accumulate, stream);
        case 3: return launchGemv<X, O, 3>(x, ld_x, w, scales, zeros, n, k, g, bias, out, ld_out, accumulate, stream);
        default: return launchGemv<X, O, 4>(x, ld_x, w, scales, zeros, n, k, g, bias, out, ld_out, accumulate, stream);
      }
    });
  });
}

cudaError_t int4Dequantize(const uint32_t* w, const float* scales, const float* zeros, int64_t n, int64_t k,
                           int64_t group, void* out, DType out_dtype, cudaStream_t stream) {
  if (n * k == 0) return cudaSuccess;
  if (k % 8 != 0 || group < 1 || k % group != 0) return cudaErrorInvalidValue;
  const auto blocks = static_cast<unsigned>((n * (k / 8) + 255) / 256);
  return withElementType(out_dtype, [&](auto ot) {
    using O = decltype(ot);
    int4DequantizeKernel<O><<<blocks, 256, 0, stream>>>(w, scales, zeros, n, k, static_cast<int>(group),
                                                        static_cast<O*>(out));
    return cudaGetLastError();
  });
}

}  // namespace llmrt::cuda
