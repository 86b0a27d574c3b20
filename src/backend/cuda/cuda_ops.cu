// Element-wise and row-wise kernels of the CUDA backend. The residual stream is
// float32; the products' inputs (normed rows, SiLU·mul, attention output) may be
// bf16 or fp16 (see docs/cuda-backend.md); weights and KV may be bf16 or fp16. Arithmetic is float32. Math
// follows the CPU reference (backend/cpu/cpu_ops.cpp) and uses accurate libm functions (expf, sincosf), not
// the fast intrinsics.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <type_traits>

#include "backend/cuda/cuda_codes.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_pdl.h"
#include "backend/cuda/cuda_vec.h"

namespace llmrt::cuda {
namespace {

constexpr int kThreads = 256;

dim3 grid2(int64_t rows, int64_t cols) {
  return dim3(static_cast<unsigned>((cols + kThreads - 1) / kThreads),
              static_cast<unsigned>(rows < 65535 ? rows : 65535));  // rows beyond: grid-stride
}

template <typename T>
__global__ void embeddingKernel(const T* table, int64_t dim, const int32_t* ids, float* out, int64_t ld_out) {
  pdlWait();
  pdlLaunchDependents();
  const int64_t r = blockIdx.x;
  const T* src = table + static_cast<int64_t>(ids[r]) * dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) out[r * ld_out + i] = toFloat(src[i]);
}

// 1 / rms of row xr for every thread of the block, in the split products' order (cuda_kernels.h,
// GemvNormIn): groupedLaneSum of the squares (each rounded: no fused multiply-add), then
// warpInvRms. `tile` holds blockDim.x floats (a multiple of 32).
__device__ float groupedInvRms(const float* xr, int64_t cols, float eps, float* tile) {
  static_assert(kGemvNormGroup == kRowSumGroup, "the split products' groups are groupedLaneSum's");
  const float ss = groupedLaneSum(
      xr, cols, false, [](float v) { return __fmul_rn(v, v); }, tile);
  if (threadIdx.x < 32) {
    const float inv = warpInvRms(ss, cols, eps);  // after its shuffles the warp's reads of `tile` are done
    if (threadIdx.x == 0) tile[0] = inv;
  }
  __syncthreads();
  return tile[0];
}

// Up to 1024 threads per row.
template <typename TO>
__global__ void rmsNormKernel(const float* x, int64_t ld_x, const float* w, float eps, int64_t cols, TO* out,
                              int64_t ld_out) {
  pdlWait();
  pdlLaunchDependents();
  __shared__ float tile[1024];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * ld_x;
  const float inv = groupedInvRms(xr, cols, eps, tile);
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) storeFloat(out + r * ld_out + i, roundAs(w[i] * xr[i], out) * inv);
}

// The row's float4s v (thread t holds float4 t + j * blockDim.x, j < V, of the n4 = cols / 4) ->
// 1 / rms of the row for every thread, in groupedInvRms's order from the registers: a group of 8
// features is an even thread's float4 and the next thread's. `groups` holds V * blockDim.x / 2
// floats.
template <int V>
__device__ __forceinline__ float vecInvRms(const float4 (&v)[V], int n4, int cols, float eps, float* groups) {
  __shared__ float inv_rms;
  auto addSquares = [](float s, const float4& a) {  // in feature order, each square rounded
    s = __fadd_rn(s, __fmul_rn(a.x, a.x));
    s = __fadd_rn(s, __fmul_rn(a.y, a.y));
    s = __fadd_rn(s, __fmul_rn(a.z, a.z));
    return __fadd_rn(s, __fmul_rn(a.w, a.w));
  };
#pragma unroll
  for (int j = 0; j < V; ++j) {  // (blockDim.x is even: float4 i and i + 1 sit in adjacent lanes)
    const int i = threadIdx.x + j * blockDim.x;
    const bool even = i % 2 == 0;
    const float first = i < n4 && even ? addSquares(0.0f, v[j]) : 0.0f;
    const float from_left = __shfl_up_sync(0xffffffffu, first, 1);
    if (i < n4 && !even) groups[i / 2] = addSquares(from_left, v[j]);
    if (i < n4 && even && i + 1 >= n4) groups[i / 2] = first;  // a last group of 4 features
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    float ss = 0.0f;
    for (int q = threadIdx.x; q < (n4 + 1) / 2; q += 32) ss += groups[q];
    const float inv = warpInvRms(ss, cols, eps);
    if (threadIdx.x == 0) inv_rms = inv;
  }
  __syncthreads();
  return inv_rms;
}

// The row's float4s (as vecInvRms) from x's row r.
template <int V>
__device__ __forceinline__ void loadRow4(const float* x, int64_t ld_x, int n4, float4 (&v)[V]) {
  const float4* xr = reinterpret_cast<const float4*>(x + static_cast<int64_t>(blockIdx.x) * ld_x);
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i < n4) v[j] = xr[i];
  }
}

// rmsNormKernel for rows of up to 4 * V * blockDim.x features (blockDim.x <= 256) with cols, the
// row stride and the pointers multiples of 4 features (16 bytes): float4 accesses, the row kept in
// registers from one read for the sum of squares (vecInvRms) and the scaling.
template <typename TO, int V>
__global__ void rmsNormVecKernel(const float* x, int64_t ld_x, const float* w, float eps, int cols, TO* out,
                                 int64_t ld_out) {
  pdlWait();
  pdlLaunchDependents();
  __shared__ float groups[V * 256 / 2];  // each group's sum of squares
  const int64_t r = blockIdx.x;
  const int n4 = cols / 4;
  float4 v[V];
  loadRow4(x, ld_x, n4, v);
  const float inv = vecInvRms(v, n4, cols, eps, groups);
  const float4* w4 = reinterpret_cast<const float4*>(w);
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i >= n4) break;
    const float4 g = w4[i];
    float4 gx = make_float4(g.x * v[j].x, g.y * v[j].y, g.z * v[j].z, g.w * v[j].w);
    roundAs(gx, out);
    store4(out + r * ld_out + 4 * i, make_float4(gx.x * inv, gx.y * inv, gx.z * inv, gx.w * inv));
  }
}

// rmsNormVecKernel whose rows are an 8-bit product's input, quantized (C: cuda_codes.h): each
// value as rmsNormVecKernel stores it in R (the activation dtype), then the row's codes by the
// quantization kernel's rule (cuda_fp8.cu) into q (row stride ld_q) and its scale into scales[r]:
// the bits of rmsNorm into R followed by w8a8QuantizeRows.
template <typename R, typename C, int V>
__global__ void rmsNormQuantKernel(const float* x, int64_t ld_x, const float* w, float eps, int cols,
                                   uint8_t* q, int64_t ld_q, float* scales) {
  pdlWait();
  pdlLaunchDependents();
  __shared__ float groups[V * 256 / 2];
  __shared__ float warp_max[32];
  const int64_t r = blockIdx.x;
  const int n4 = cols / 4;
  float4 v[V];
  loadRow4(x, ld_x, n4, v);
  const float inv = vecInvRms(v, n4, cols, eps, groups);
  const R* tag = nullptr;
  const float4* w4 = reinterpret_cast<const float4*>(w);
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i >= n4) break;
    const float4 g = w4[i];
    float4 y = make_float4(g.x * v[j].x, g.y * v[j].y, g.z * v[j].z, g.w * v[j].w);
    roundAs(y, tag);
    y = make_float4(y.x * inv, y.y * inv, y.z * inv, y.w * inv);
    roundAs(y, tag);
    v[j] = y;
    amax = fmaxf(amax, absMax4(y));
  }
  const float2 si = rowScaleInverse<C>(blockMax(amax, warp_max));
  if (threadIdx.x == 0) scales[r] = si.x;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i >= n4) break;
    *reinterpret_cast<uint32_t*>(q + r * ld_q + 4 * i) = packCodes4<C>(v[j], si.y);
  }
}

// Element-wise kernels: blockIdx.y is the row, blockIdx.x * blockDim.x + threadIdx.x the column
// (no 64-bit divisions on the way).
template <typename T>
__global__ void addBiasKernel(T* out, int64_t ld_out, const float* bias, int64_t rows, int64_t cols) {
  pdlWait();
  pdlLaunchDependents();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c < cols)
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y)
      storeFloat(out + r * ld_out + c, toFloat(out[r * ld_out + c]) + bias[c]);
}

__global__ void gatherKernel(const float* src, int64_t ld_src, const int64_t* rows, int64_t cols, float* out,
                             int64_t ld_out) {
  pdlWait();
  pdlLaunchDependents();
  const int64_t r = blockIdx.x;
  const float* s = src + rows[r] * ld_src;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) out[r * ld_out + i] = s[i];
}

template <typename TI, typename TO>
__global__ void siluMulKernel(const TI* gu, int64_t ld_gu, int64_t rows, int64_t inter, TO* out,
                              int64_t ld_out) {
  pdlWait();
  pdlLaunchDependents();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= inter) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float g = toFloat(gu[r * ld_gu + i]), u = toFloat(gu[r * ld_gu + inter + i]);
    storeFloat(out + r * ld_out + i, (g / (1.0f + expf(-g))) * u);
  }
}

// siluMulKernel with eight features per thread and 16-byte loads and stores (the scalar kernel
// reached about a third of the copy bandwidth on prefill-sized rows). Requires inter, ld_gu and
// ld_out to be multiples of 8 and 16-byte aligned gu and out.
template <typename TI, typename TO>
__global__ void siluMulVecKernel(const TI* gu, int64_t ld_gu, int64_t rows, int64_t inter, TO* out,
                                 int64_t ld_out) {
  pdlWait();
  pdlLaunchDependents();
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (i >= inter) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    float4 g0, g1, u0, u1;
    load8(gu + r * ld_gu + i, g0, g1);
    load8(gu + r * ld_gu + inter + i, u0, u1);
    auto f = [](float g, float u) { return (g / (1.0f + expf(-g))) * u; };
    store8(out + r * ld_out + i, make_float4(f(g0.x, u0.x), f(g0.y, u0.y), f(g0.z, u0.z), f(g0.w, u0.w)),
           make_float4(f(g1.x, u1.x), f(g1.y, u1.y), f(g1.z, u1.z), f(g1.w, u1.w)));
  }
}

// siluMulVecKernel whose rows are an 8-bit product's input, quantized (C: cuda_codes.h), one block
// of 256 threads per row of up to 8 * V * 256 features: each value as siluMulVecKernel stores it
// in R (the activation dtype), kept in registers, then the row's codes by the quantization
// kernel's rule into q (row stride ld_q) and its scale into scales[r]: the bits of siluMul into R
// followed by w8a8QuantizeRows.
template <typename TI, typename R, typename C, int V>
__global__ void __launch_bounds__(256)
    siluMulQuantKernel(const TI* gu, int64_t ld_gu, int64_t inter, uint8_t* q, int64_t ld_q, float* scales) {
  pdlWait();
  pdlLaunchDependents();
  __shared__ float warp_max[32];
  const int64_t r = blockIdx.x;
  const int n8 = static_cast<int>(inter / 8);
  const R* tag = nullptr;
  float4 y[V][2];
  float amax = 0.0f;
  auto f = [](float g, float u) { return (g / (1.0f + expf(-g))) * u; };
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int i = threadIdx.x + j * 256;
    if (i >= n8) break;
    float4 g0, g1, u0, u1;
    load8(gu + r * ld_gu + 8 * i, g0, g1);
    load8(gu + r * ld_gu + inter + 8 * i, u0, u1);
    y[j][0] = make_float4(f(g0.x, u0.x), f(g0.y, u0.y), f(g0.z, u0.z), f(g0.w, u0.w));
    y[j][1] = make_float4(f(g1.x, u1.x), f(g1.y, u1.y), f(g1.z, u1.z), f(g1.w, u1.w));
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      roundAs(y[j][h], tag);
      amax = fmaxf(amax, absMax4(y[j][h]));
    }
  }
  const float2 si = rowScaleInverse<C>(blockMax(amax, warp_max));
  if (threadIdx.x == 0) scales[r] = si.x;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int i = threadIdx.x + j * 256;
    if (i >= n8) break;
    *reinterpret_cast<uint2*>(q + r * ld_q + 8 * i) =
        make_uint2(packCodes4<C>(y[j][0], si.y), packCodes4<C>(y[j][1], si.y));
  }
}

// hi = H(x), lo = H(x - hi) (the difference is exact in float32): hi + lo carries ~16
// (bf16) significant bits of x.
template <typename H>
__global__ void splitHalfKernel(const float* x, int64_t ld_x, int64_t rows, int64_t cols, H* hi, H* lo) {
  pdlWait();
  pdlLaunchDependents();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c < cols)
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
      const float v = x[r * ld_x + c];
      storeFloat(hi + r * cols + c, v);
      storeFloat(lo + r * cols + c, v - toFloat(hi[r * cols + c]));
    }
}

template <typename H>
__global__ void toHalfKernel(const float* x, int64_t ld_x, int64_t rows, int64_t cols, H* out) {
  pdlWait();
  pdlLaunchDependents();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c < cols)
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) storeFloat(out + r * cols + c, x[r * ld_x + c]);
}

// The start of both RoPE kernels for row blockIdx.x: cos and sin of its angles (times the attention
// scaling) into cs[0, half) and cs[half, 2 half), and where its k and v go in the cache (null when
// the row is not written).
template <typename T>
struct RopeRow {
  T* k_dst = nullptr;
  T* v_dst = nullptr;
};
template <typename T>
__device__ RopeRow<T> ropeRowStart(T* pool, const KvLayout& g, const RopeKvArgs& a, float* cs) {
  const int64_t r = blockIdx.x, half = a.half;
  const float pos = static_cast<float>(a.positions[r]);
  const float* inv = a.inv_freq + static_cast<int64_t>(a.row_table[r]) * half;
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    const float2 c = ropeCosSin(pos, inv[i], a.scaling);
    cs[i] = c.x;
    cs[half + i] = c.y;
  }
  __syncthreads();
  RopeRow<T> out;
  const int64_t slot = a.slots[r];
  if (slot >= 0) {
    const int64_t head_stride = g.tokens_per_block * g.head_dim;
    T* base = pool + (slot / g.tokens_per_block) * g.elems_per_block + (slot % g.tokens_per_block) * g.head_dim;
    out.k_dst = base + (a.layer * 2 + 0) * g.num_kv_heads * head_stride;
    out.v_dst = base + (a.layer * 2 + 1) * g.num_kv_heads * head_stride;
  }
  return out;
}

// One block per row: cos/sin of the row's angles into shared memory, then the q heads
// rotated in place, the k heads rotated in place and written to the cache with the
// non-rotary features, and v written to the cache.
template <typename T>
__global__ void ropeWriteKvKernel(T* pool, KvLayout g, RopeKvArgs a) {
  pdlWait();
  pdlLaunchDependents();
  extern __shared__ float cs[];  // [2 * half]: cos, then sin
  const int64_t r = blockIdx.x, half = a.half, hd = g.head_dim, kvh = g.num_kv_heads;
  const int64_t head_stride = g.tokens_per_block * hd;
  const RopeRow<T> dst = ropeRowStart(pool, g, a, cs);
  T* k_dst = dst.k_dst;
  T* v_dst = dst.v_dst;
  float* qr = a.q + r * a.ld_q;
  for (int64_t e = threadIdx.x; e < a.q_heads * half; e += blockDim.x) {
    const int64_t h = e / half, i = e % half;
    float* x = qr + h * hd;
    const float2 y = ropeRotate(x[i], x[i + half], cs[i], cs[half + i]);
    x[i] = y.x;
    x[i + half] = y.y;
  }
  float* kr = a.k + r * a.ld_k;
  for (int64_t e = threadIdx.x; e < kvh * half; e += blockDim.x) {
    const int64_t h = e / half, i = e % half;
    float* x = kr + h * hd;
    const float2 y = ropeRotate(x[i], x[i + half], cs[i], cs[half + i]);
    x[i] = y.x;
    x[i + half] = y.y;
    if (k_dst) {
      storeFloat(k_dst + h * head_stride + i, y.x * a.k_inverse);
      storeFloat(k_dst + h * head_stride + i + half, y.y * a.k_inverse);
    }
  }
  if (!k_dst) return;
  const float* vr = a.v + r * a.ld_v;
  for (int64_t e = threadIdx.x; e < kvh * hd; e += blockDim.x) {
    const int64_t h = e / hd, d = e % hd;
    if (d >= 2 * half) storeFloat(k_dst + h * head_stride + d, kr[e] * a.k_inverse);  // not rotated above
    storeFloat(v_dst + h * head_stride + d, vr[e] * a.v_inverse);
  }
}

__device__ __forceinline__ float4 scaled(float4 v, float s) { return make_float4(v.x * s, v.y * s, v.z * s, v.w * s); }

// ropeWriteKvKernel four features at a time (float4 reads of q, k, v; 4-, 8- or 16-byte cache
// writes) with 32-bit index arithmetic. Requires half and head_dim multiples of 4, the row
// strides multiples of 4 and q, k, v 16-byte aligned.
template <typename T>
__global__ void ropeWriteKvVecKernel(T* pool, KvLayout g, RopeKvArgs a) {
  pdlWait();
  pdlLaunchDependents();
  extern __shared__ float4 cs4[];  // [2 * half / 4]: cos, then sin
  const int64_t r = blockIdx.x;
  const int half = static_cast<int>(a.half), hd = static_cast<int>(g.head_dim), kvh = static_cast<int>(g.num_kv_heads);
  const int64_t head_stride = g.tokens_per_block * hd;
  const RopeRow<T> dst = ropeRowStart(pool, g, a, reinterpret_cast<float*>(cs4));
  T* k_dst = dst.k_dst;
  T* v_dst = dst.v_dst;
  const int quads = half / 4;
  auto rotate = [&](float* x, int i, float4& y1, float4& y2) {
    const float4 x1 = *reinterpret_cast<const float4*>(x + i), x2 = *reinterpret_cast<const float4*>(x + i + half);
    const float4 c = cs4[i / 4], s = cs4[(half + i) / 4];
    const float2 r0 = ropeRotate(x1.x, x2.x, c.x, s.x), r1 = ropeRotate(x1.y, x2.y, c.y, s.y);
    const float2 r2 = ropeRotate(x1.z, x2.z, c.z, s.z), r3 = ropeRotate(x1.w, x2.w, c.w, s.w);
    y1 = make_float4(r0.x, r1.x, r2.x, r3.x);
    y2 = make_float4(r0.y, r1.y, r2.y, r3.y);
    *reinterpret_cast<float4*>(x + i) = y1;
    *reinterpret_cast<float4*>(x + i + half) = y2;
  };
  float* qr = a.q + r * a.ld_q;
  const int q_quads = static_cast<int>(a.q_heads) * quads;
  for (int e = threadIdx.x; e < q_quads; e += blockDim.x) {
    const int h = e / quads, i = (e - h * quads) * 4;
    float4 y1, y2;
    rotate(qr + h * hd, i, y1, y2);
  }
  float* kr = a.k + r * a.ld_k;
  for (int e = threadIdx.x; e < kvh * quads; e += blockDim.x) {
    const int h = e / quads, i = (e - h * quads) * 4;
    float4 y1, y2;
    rotate(kr + h * hd, i, y1, y2);
    if (k_dst) {
      store4(k_dst + h * head_stride + i, scaled(y1, a.k_inverse));
      store4(k_dst + h * head_stride + i + half, scaled(y2, a.k_inverse));
    }
  }
  if (!k_dst) return;
  const float* vr = a.v + r * a.ld_v;
  const int hd4 = hd / 4;
  for (int e = threadIdx.x; e < kvh * hd4; e += blockDim.x) {
    const int h = e / hd4, d = (e - h * hd4) * 4;
    if (d >= 2 * half)  // untouched by the rotation above
      store4(k_dst + h * head_stride + d, scaled(*reinterpret_cast<const float4*>(kr + h * hd + d), a.k_inverse));
    store4(v_dst + h * head_stride + d, scaled(*reinterpret_cast<const float4*>(vr + h * hd + d), a.v_inverse));
  }
}

// A (value, id) maximum of some logits.
struct ArgmaxPart {
  float v;
  int32_t i;  // -2: a NaN or +inf was seen
};
// The id a row's maximum gives: -1 for a NaN / +inf seen or nothing above -inf.
__device__ __forceinline__ int32_t argmaxId(const ArgmaxPart& p) { return p.i == -2 || p.v == -INFINITY ? -1 : p.i; }
// The block's (value, id) maximum over row[lo, hi) (ties: the lowest id) and whether any value
// there is NaN or +inf; every thread gets the result. Per thread, then per warp, then across warps.
__device__ ArgmaxPart blockArgmax(const float* row, int64_t lo, int64_t hi) {
  __shared__ float best_v[32];
  __shared__ int32_t best_i[32];
  __syncthreads();  // best_v / best_i may still be read by a previous call
  float bv = -INFINITY;
  int32_t bi = 0x7fffffff;
  int bad = 0;
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    const float v = row[i];
    if (isnan(v) || v == INFINITY) bad = 1;
    keepBest(v, static_cast<int32_t>(i), bv, bi);  // strided ascending: the first of equal values wins
  }
  warpArgmax(bv, bi);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  if (lane == 0) {
    best_v[warp] = bv;
    best_i[warp] = bi;
  }
  bad = __syncthreads_or(bad);
  for (int w = 0; w < warps; ++w) keepBest(best_v[w], best_i[w], bv, bi);
  return ArgmaxPart{bv, bad ? -2 : bi};
}

// One block per row.
__global__ void argmaxKernel(const float* logits, int64_t ld, int64_t vocab, int32_t* out) {
  pdlWait();
  pdlLaunchDependents();
  const ArgmaxPart p = blockArgmax(logits + blockIdx.x * ld, 0, vocab);
  if (threadIdx.x == 0) out[blockIdx.x] = argmaxId(p);
}

// Few rows: blockIdx.y is the row, blockIdx.x a slice of slice_len ids; argmaxMergeKernel (one
// warp per row) combines the slices' parts in id order.
__global__ void argmaxSliceKernel(const float* logits, int64_t ld, int64_t vocab, int64_t slice_len,
                                  ArgmaxPart* parts) {
  pdlWait();
  pdlLaunchDependents();
  const int64_t lo = blockIdx.x * slice_len, hi = lo + slice_len < vocab ? lo + slice_len : vocab;
  const ArgmaxPart p = blockArgmax(logits + blockIdx.y * ld, lo, hi);
  if (threadIdx.x == 0) parts[blockIdx.y * gridDim.x + blockIdx.x] = p;
}
__global__ void argmaxMergeKernel(const ArgmaxPart* parts, int slices, int32_t* out) {
  pdlWait();
  pdlLaunchDependents();
  float bv = -INFINITY;
  int32_t bi = 0x7fffffff;
  int bad = 0;
  for (int s = threadIdx.x; s < slices; s += 32) {
    const ArgmaxPart p = parts[blockIdx.x * slices + s];
    if (p.i == -2)
      bad = 1;
    else
      keepBest(p.v, p.i, bv, bi);
  }
  warpArgmax(bv, bi);
  bad = __any_sync(0xffffffffu, bad);
  if (threadIdx.x == 0) out[blockIdx.x] = argmaxId(ArgmaxPart{bv, bad ? -2 : bi});
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <typename TI>
cudaError_t launchSiluMul(const TI* gu, int64_t ld_gu, int64_t rows, int64_t inter, void* out,
                          DType out_dtype, int64_t ld_out, cudaStream_t stream) {
  const bool vec = inter % 8 == 0 && ld_gu % 8 == 0 && ld_out % 8 == 0 &&
                   aligned16(gu) && aligned16(out);
  return withElementType(out_dtype, [&](auto tag) {
    using TO = decltype(tag);
    if (vec)
      return launchPdl(siluMulVecKernel<TI, TO>, grid2(rows, (inter + 7) / 8), kThreads, 0, stream, gu, ld_gu,
                       rows, inter, static_cast<TO*>(out), ld_out);
    return launchPdl(siluMulKernel<TI, TO>, grid2(rows, inter), kThreads, 0, stream, gu, ld_gu, rows, inter,
                     static_cast<TO*>(out), ld_out);
  });
}

// A launch's result: its own error, else any error the launch left pending.
cudaError_t launched(cudaError_t e) { return e != cudaSuccess ? e : cudaGetLastError(); }

// `body` with std::integral_constant<int, V> for the smallest V of 1, 2, 4, 8, 16 that holds
// `per_thread` items (1 <= per_thread <= 16): the register tile of a row-per-block kernel.
template <typename F>
cudaError_t withPerThread(int64_t per_thread, F&& body) {
  if (per_thread <= 1) return body(std::integral_constant<int, 1>{});
  if (per_thread <= 2) return body(std::integral_constant<int, 2>{});
  if (per_thread <= 4) return body(std::integral_constant<int, 4>{});
  if (per_thread <= 8) return body(std::integral_constant<int, 8>{});
  return body(std::integral_constant<int, 16>{});
}

// The float4 row kernels' block: up to 256 threads (a multiple of 32) over cols / 4 float4s, and
// the float4s each thread holds.
struct Float4Rows {
  int threads;
  int64_t per_thread;
};
Float4Rows float4Rows(int64_t cols) {
  const int64_t n4 = cols / 4;
  const int threads = n4 >= 256 ? 256 : static_cast<int>((n4 + 31) / 32 * 32);
  return {threads, threads > 0 ? (n4 + threads - 1) / threads : 0};
}

int threadsFor(int64_t cols) { return cols >= 1024 ? 1024 : (cols >= 256 ? 256 : 128); }

}  // namespace

namespace {
std::atomic<bool> g_pdl{false};
std::atomic<bool> g_vector_ops{true};
}  // namespace
void setPdlEnabled(bool on) { g_pdl.store(on, std::memory_order_relaxed); }
void setVectorOpsEnabled(bool on) { g_vector_ops.store(on, std::memory_order_relaxed); }
bool pdlEnabled() { return g_pdl.load(std::memory_order_relaxed); }

cudaError_t embedding(const void* table, DType table_dtype, int64_t dim, const int32_t* ids, int64_t n,
                      float* out, int64_t ld_out, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const int t = threadsFor(dim);
  return launched(withElementType(table_dtype, [&](auto tag) {
    using T = decltype(tag);
    return launchPdl(embeddingKernel<T>, n, t, 0, stream, static_cast<const T*>(table), dim, ids, out,
                     ld_out);
  }));
}

cudaError_t rmsNorm(const float* x, int64_t ld_x, const float* w, float eps, int64_t rows, int64_t cols, void* out,
                    DType out_dtype, int64_t ld_out, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  // The vector kernel: 4 features per float4, up to 8 float4 per thread of up to 256.
  const Float4Rows tile = float4Rows(cols);
  const int threads = tile.threads;
  const int64_t per_thread = tile.per_thread;
  const bool vec = g_vector_ops.load(std::memory_order_relaxed) && cols % 4 == 0 && per_thread >= 1 &&
                   per_thread <= 8 && ld_x % 4 == 0 && ld_out % 4 == 0 && aligned16(x) && aligned16(w) &&
                   reinterpret_cast<uintptr_t>(out) % 8 == 0 && (out_dtype != DType::kF32 || aligned16(out));
  return launched(withElementType(out_dtype, [&](auto tag) {
    using TO = decltype(tag);
    TO* o = static_cast<TO*>(out);
    const int c = static_cast<int>(cols);
    if (vec)
      return withPerThread(per_thread, [&](auto v) {
        return launchPdl(rmsNormVecKernel<TO, decltype(v)::value>, rows, threads, 0, stream, x, ld_x, w, eps,
                         c, o, ld_out);
      });
    return launchPdl(rmsNormKernel<TO>, rows, threadsFor(cols), 0, stream, x, ld_x, w, eps, cols, o, ld_out);
  }));
}

cudaError_t rmsNormQuantize(const float* x, int64_t ld_x, const float* w, float eps, int64_t rows,
                            int64_t cols, DType round, DType codes, uint8_t* q, int64_t ld_q, float* scales,
                            cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const Float4Rows tile = float4Rows(cols);
  const int threads = tile.threads;
  const int64_t per_thread = tile.per_thread;
  // (A float4 kernel: with vector_ops off, the plain kernels and the quantization kernel run instead.)
  if (!g_vector_ops.load(std::memory_order_relaxed) || cols % 4 != 0 || per_thread < 1 || per_thread > 16 ||
      ld_x % 4 != 0 || ld_q % 4 != 0 || !aligned16(x) || !aligned16(w) ||
      reinterpret_cast<uintptr_t>(q) % 4 != 0 || (codes != DType::kF8E4M3 && codes != DType::kI8))
    return cudaErrorNotSupported;
  const int c = static_cast<int>(cols);
  return launched(withElementType(round, [&](auto rtag) {
    using R = decltype(rtag);
    return withCodes(codes == DType::kI8, [&](auto ctag) {
      using C = decltype(ctag);
      return withPerThread(per_thread, [&](auto v) {
        return launchPdl(rmsNormQuantKernel<R, C, decltype(v)::value>, rows, threads, 0, stream, x, ld_x, w,
                         eps, c, q, ld_q, scales);
      });
    });
  }));
}

cudaError_t siluMulQuantize(const void* gu, DType gu_dtype, int64_t ld_gu, int64_t rows, int64_t inter,
                            DType round, DType codes, uint8_t* q, int64_t ld_q, float* scales,
                            cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const int64_t n8 = inter / 8, per_thread = (n8 + 255) / 256;
  if (inter % 8 != 0 || per_thread < 1 || per_thread > 8 || ld_gu % 8 != 0 || ld_q % 8 != 0 ||
      !aligned16(gu) || reinterpret_cast<uintptr_t>(q) % 8 != 0 ||
      (codes != DType::kF8E4M3 && codes != DType::kI8))
    return cudaErrorNotSupported;
  return launched(withElementType(gu_dtype, [&](auto itag) {
    using TI = decltype(itag);
    const TI* g = static_cast<const TI*>(gu);
    return withElementType(round, [&](auto rtag) {
      using R = decltype(rtag);
      return withCodes(codes == DType::kI8, [&](auto ctag) {
        using C = decltype(ctag);
        return withPerThread(per_thread, [&](auto v) {
          return launchPdl(siluMulQuantKernel<TI, R, C, decltype(v)::value>, rows, 256, 0, stream, g, ld_gu,
                           inter, q, ld_q, scales);
        });
      });
    });
  }));
}

cudaError_t addBias(void* out, DType out_dtype, int64_t ld_out, const float* bias, int64_t rows, int64_t cols,
                    cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  return launched(withElementType(out_dtype, [&](auto tag) {
    using TO = decltype(tag);
    return launchPdl(addBiasKernel<TO>, grid2(rows, cols), kThreads, 0, stream, static_cast<TO*>(out), ld_out,
                     bias, rows, cols);
  }));
}

cudaError_t gatherRows(const float* src, int64_t ld_src, const int64_t* rows, int64_t n, int64_t cols,
                       float* out, int64_t ld_out, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  launchPdl(gatherKernel, n, threadsFor(cols), 0, stream, src, ld_src, rows, cols, out, ld_out);
  return cudaGetLastError();
}

cudaError_t siluMul(const void* gu, DType gu_dtype, int64_t ld_gu, int64_t rows, int64_t inter, void* out,
                    DType out_dtype, int64_t ld_out, cudaStream_t stream) {
  if (rows * inter == 0) return cudaSuccess;
  return launched(withElementType(gu_dtype, [&](auto tag) {
    using TI = decltype(tag);
    return launchSiluMul(static_cast<const TI*>(gu), ld_gu, rows, inter, out, out_dtype, ld_out, stream);
  }));
}

cudaError_t splitToHalf(const float* x, int64_t ld_x, int64_t rows, int64_t cols, void* hi, void* lo,
                        DType dtype, cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  return launched(withHalfType(dtype, [&](auto tag) {
    using H = decltype(tag);
    return launchPdl(splitHalfKernel<H>, grid2(rows, cols), kThreads, 0, stream, x, ld_x, rows, cols,
                     static_cast<H*>(hi), static_cast<H*>(lo));
  }));
}

cudaError_t toHalf(const float* x, int64_t ld_x, int64_t rows, int64_t cols, void* out, DType dtype,
                   cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  return launched(withHalfType(dtype, [&](auto tag) {
    using H = decltype(tag);
    return launchPdl(toHalfKernel<H>, grid2(rows, cols), kThreads, 0, stream, x, ld_x, rows, cols,
                     static_cast<H*>(out));
  }));
}

cudaError_t ropeWriteKv(void* pool, DType kv_dtype, const KvLayout& g, const RopeKvArgs& a,
                        cudaStream_t stream) {
  if (a.rows == 0) return cudaSuccess;
  const int t = threadsFor(g.num_kv_heads * g.head_dim > a.q_heads * a.half ? g.num_kv_heads * g.head_dim
                                                                            : a.q_heads * a.half);
  const size_t smem = static_cast<size_t>(2 * a.half) * sizeof(float);
  const bool vec = g_vector_ops.load(std::memory_order_relaxed) && a.half % 4 == 0 && g.head_dim % 4 == 0 &&
                   a.ld_q % 4 == 0 && a.ld_k % 4 == 0 && a.ld_v % 4 == 0 && aligned16(a.q) && aligned16(a.k) &&
                   aligned16(a.v) && aligned16(pool) && g.elems_per_block % 4 == 0;
  if (vec) {
    const int64_t items = std::max(a.q_heads * a.half, g.num_kv_heads * g.head_dim) / 4;
    const int tv = items > 128 ? 256 : 128;
    return launched(withKvType(kv_dtype, [&](auto tag) {
      using T = decltype(tag);
      return launchPdl(ropeWriteKvVecKernel<T>, a.rows, tv, smem, stream, static_cast<T*>(pool), g, a);
    }));
  }
  return launched(withKvType(kv_dtype, [&](auto tag) {
    using T = decltype(tag);
    return launchPdl(ropeWriteKvKernel<T>, a.rows, t, smem, stream, static_cast<T*>(pool), g, a);
  }));
}

namespace {
// Slices per row for the split argmax: min(32, vocab / 4K) for steps of at most 128 rows (split
// when that is 2 or more); one CTA per row otherwise (more rows fill the GPU by themselves).
int64_t argmaxSlices(int64_t rows, int64_t vocab) {
  if (rows > 128) return 1;
  return std::min<int64_t>(32, (vocab + 4095) / 4096);
}
}  // namespace

size_t argmaxWorkBytes(int64_t rows, int64_t vocab) {
  const int64_t slices = argmaxSlices(rows, vocab);
  return slices < 2 ? 0 : static_cast<size_t>(rows * slices) * sizeof(ArgmaxPart);
}

cudaError_t argmaxRows(const float* logits, int64_t ld, int64_t rows, int64_t vocab, int32_t* out, void* work,
                       cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const int64_t slices = argmaxSlices(rows, vocab);
  if (slices < 2 || work == nullptr) {
    launchPdl(argmaxKernel, rows, 1024, 0, stream, logits, ld, vocab, out);
    return cudaGetLastError();
  }
  auto* parts = static_cast<ArgmaxPart*>(work);
  const int64_t slice_len = (vocab + slices - 1) / slices;
  launchPdl(argmaxSliceKernel, dim3(static_cast<unsigned>(slices), static_cast<unsigned>(rows)), 256, 0, stream,
            logits, ld, vocab, slice_len, parts);
  launchPdl(argmaxMergeKernel, rows, 32, 0, stream, static_cast<const ArgmaxPart*>(parts),
            static_cast<int>(slices), out);
  return cudaGetLastError();
}

namespace {

template <typename TS, typename TD>
__global__ void convertKernel(const TS* src, TD* dst, int64_t n, int32_t tag, int32_t* first_bad) {
  bool bad = false;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = toFloat(src[i]);
    TD r;
    storeFloat(&r, v);
    dst[i] = r;
    bad |= isfinite(v) && !isfinite(toFloat(r));
  }
  if (bad) atomicMin(first_bad, tag);
}

}  // namespace

cudaError_t convertElements(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n,
                            int32_t tag, int32_t* first_bad, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 4096));
  return launched(withElementType(src_dtype, [&](auto s_tag) {
    using TS = decltype(s_tag);
    return withElementType(dst_dtype, [&](auto d_tag) {
      using TD = decltype(d_tag);
      convertKernel<TS, TD>
          <<<blocks, 256, 0, stream>>>(static_cast<const TS*>(src), static_cast<TD*>(dst), n, tag, first_bad);
      return cudaSuccess;
    });
  }));
}

namespace {

__global__ void feedTokensKernel(int32_t* ids, const int2* fed, int32_t n, ResultTokens src) {
  const int32_t i = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) ids[fed[i].x] = max(0, src.ids[static_cast<int64_t>(fed[i].y) * src.stride]);
}

}  // namespace

cudaError_t feedTokens(int32_t* ids, const int2* fed, int32_t n, ResultTokens src, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  feedTokensKernel<<<(n + 255) / 256, 256, 0, stream>>>(ids, fed, n, src);
  return cudaGetLastError();
}

}  // namespace llmrt::cuda
