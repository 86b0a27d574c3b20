// Element-wise and row-wise kernels of the CUDA backend. Activations are
// float32 (see docs/cuda-backend.md); weights and KV may be bf16. Math follows
// the CPU reference (backend/cpu/cpu_ops.cpp) and uses accurate libm
// functions (expf, sincosf), not the fast intrinsics.
#include <cuda_bf16.h>

#include "backend/cuda/cuda_kernels.h"

namespace llmrt::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }

int gridFor(int64_t n, int threads = kThreads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<int>(blocks < 65535 * 16 ? blocks : 65535 * 16);
}

template <typename T>
__global__ void embeddingKernel(const T* table, int64_t dim, const int32_t* ids, float* out, int64_t ld_out) {
  const int64_t r = blockIdx.x;
  const T* src = table + static_cast<int64_t>(ids[r]) * dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) out[r * ld_out + i] = load(src, i);
}

// Block-wide sum; every thread gets the result. `red` holds one float per warp.
__device__ float blockSum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();  // `red` may still be read from a previous call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float s = 0.0f;
  for (int w = 0; w < warps; ++w) s += red[w];
  return s;
}

__global__ void rmsNormKernel(const float* x, int64_t ld_x, float* residual, int64_t ld_res, const float* w,
                              float eps, int64_t cols, float* out, int64_t ld_out) {
  __shared__ float red[32];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * ld_x;
  float* res = residual ? residual + r * ld_res : nullptr;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    float v = xr[i];
    if (res) {
      v += res[i];
      res[i] = v;
    }
    ss += v * v;
  }
  ss = blockSum(ss, red);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(cols) + eps);
  const float* src = res ? res : xr;  // each thread re-reads only what it wrote
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) out[r * ld_out + i] = w[i] * (src[i] * inv);
}

__global__ void addKernel(float* x, int64_t ld_x, const float* y, int64_t ld_y, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / cols, c = e % cols;
    x[r * ld_x + c] += y[r * ld_y + c];
  }
}

__global__ void addBiasKernel(float* out, int64_t ld_out, const float* bias, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / cols, c = e % cols;
    out[r * ld_out + c] += bias[c];
  }
}

__global__ void gatherKernel(const float* src, int64_t ld_src, const int64_t* rows, int64_t cols, float* out,
                             int64_t ld_out) {
  const int64_t r = blockIdx.x;
  const float* s = src + rows[r] * ld_src;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) out[r * ld_out + i] = s[i];
}

__global__ void siluMulKernel(const float* gu, int64_t ld_gu, int64_t rows, int64_t inter, float* out,
                              int64_t ld_out) {
  const int64_t n = rows * inter;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / inter, i = e % inter;
    const float g = gu[r * ld_gu + i], u = gu[r * ld_gu + inter + i];
    out[r * ld_out + i] = (g / (1.0f + expf(-g))) * u;
  }
}

// One block per row; threads over (head, i < rotary_dim / 2) of q then k.
__global__ void ropeKernel(float* q, int64_t ld_q, int64_t q_heads, float* k, int64_t ld_k, int64_t k_heads,
                           int64_t head_dim, const int32_t* positions, const float* inv_freq, int64_t half,
                           float scaling) {
  const int64_t r = blockIdx.x;
  const float pos = static_cast<float>(positions[r]);
  const int64_t n = (q_heads + k_heads) * half;
  for (int64_t e = threadIdx.x; e < n; e += blockDim.x) {
    const int64_t h = e / half, i = e % half;
    float s, c;
    sincosf(pos * inv_freq[i], &s, &c);  // float32 angle, as HF's inv_freq @ position_ids
    c *= scaling;
    s *= scaling;
    float* x = h < q_heads ? q + r * ld_q + h * head_dim : k + r * ld_k + (h - q_heads) * head_dim;
    const float x1 = x[i], x2 = x[i + half];
    x[i] = x1 * c - x2 * s;
    x[i + half] = x2 * c + x1 * s;
  }
}

__global__ void toBf16Kernel(const float* x, int64_t ld_x, int64_t rows, int64_t cols, __nv_bfloat16* out) {
  const int64_t n = rows * cols;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / cols, c = e % cols;
    out[e] = __float2bfloat16_rn(x[r * ld_x + c]);
  }
}

__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// One block per row; threads over (K|V, head, dim).
template <typename T>
__global__ void writeKvKernel(T* pool, KvLayout g, int64_t layer, const float* k, int64_t ld_k,
                              const float* v, int64_t ld_v, const int64_t* slots) {
  const int64_t r = blockIdx.x;
  const int64_t block = slots[r] / g.tokens_per_block, off = slots[r] % g.tokens_per_block;
  const int64_t per_kv = g.num_kv_heads * g.head_dim;
  for (int64_t e = threadIdx.x; e < 2 * per_kv; e += blockDim.x) {
    const int kv = e >= per_kv ? 1 : 0;
    const int64_t hd = e - kv * per_kv, h = hd / g.head_dim, d = hd % g.head_dim;
    const float val = kv == 0 ? k[r * ld_k + hd] : v[r * ld_v + hd];
    T* dst = pool + block * g.elems_per_block +
             ((layer * 2 + kv) * g.num_kv_heads + h) * g.tokens_per_block * g.head_dim + off * g.head_dim + d;
    store(dst, val);
  }
}

int threadsFor(int64_t cols) { return cols >= 1024 ? 1024 : (cols >= 256 ? 256 : 128); }

}  // namespace

cudaError_t embedding(const void* table, DType table_dtype, int64_t dim, const int32_t* ids, int64_t n,
                      float* out, int64_t ld_out, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const int t = threadsFor(dim);
  if (table_dtype == DType::kBF16)
    embeddingKernel<<<n, t, 0, stream>>>(static_cast<const __nv_bfloat16*>(table), dim, ids, out, ld_out);
  else
    embeddingKernel<<<n, t, 0, stream>>>(static_cast<const float*>(table), dim, ids, out, ld_out);
  return cudaGetLastError();
}

cudaError_t rmsNorm(const float* x, int64_t ld_x, float* residual, int64_t ld_res, const float* w, float eps,
                    int64_t rows, int64_t cols, float* out, int64_t ld_out, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  rmsNormKernel<<<rows, threadsFor(cols), 0, stream>>>(x, ld_x, residual, ld_res, w, eps, cols, out, ld_out);
  return cudaGetLastError();
}

cudaError_t add(float* x, int64_t ld_x, const float* y, int64_t ld_y, int64_t rows, int64_t cols,
                cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  addKernel<<<gridFor(rows * cols), kThreads, 0, stream>>>(x, ld_x, y, ld_y, rows, cols);
  return cudaGetLastError();
}

cudaError_t addBias(float* out, int64_t ld_out, const float* bias, int64_t rows, int64_t cols,
                    cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  addBiasKernel<<<gridFor(rows * cols), kThreads, 0, stream>>>(out, ld_out, bias, rows, cols);
  return cudaGetLastError();
}

cudaError_t gatherRows(const float* src, int64_t ld_src, const int64_t* rows, int64_t n, int64_t cols,
                       float* out, int64_t ld_out, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  gatherKernel<<<n, threadsFor(cols), 0, stream>>>(src, ld_src, rows, cols, out, ld_out);
  return cudaGetLastError();
}

cudaError_t siluMul(const float* gu, int64_t ld_gu, int64_t rows, int64_t inter, float* out, int64_t ld_out,
                    cudaStream_t stream) {
  if (rows * inter == 0) return cudaSuccess;
  siluMulKernel<<<gridFor(rows * inter), kThreads, 0, stream>>>(gu, ld_gu, rows, inter, out, ld_out);
  return cudaGetLastError();
}

cudaError_t rope(float* q, int64_t ld_q, int64_t q_heads, float* k, int64_t ld_k, int64_t k_heads,
                 int64_t head_dim, const int32_t* positions, int64_t rows, const float* inv_freq,
                 int64_t rotary_dim, float scaling, cudaStream_t stream) {
  const int64_t half = rotary_dim / 2;
  if (rows == 0 || half == 0) return cudaSuccess;
  ropeKernel<<<rows, threadsFor((q_heads + k_heads) * half), 0, stream>>>(
      q, ld_q, q_heads, k, ld_k, k_heads, head_dim, positions, inv_freq, half, scaling);
  return cudaGetLastError();
}

cudaError_t toBf16(const float* x, int64_t ld_x, int64_t rows, int64_t cols, void* out, cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  toBf16Kernel<<<gridFor(rows * cols), kThreads, 0, stream>>>(x, ld_x, rows, cols,
                                                              static_cast<__nv_bfloat16*>(out));
  return cudaGetLastError();
}

cudaError_t writeKv(void* pool, DType kv_dtype, const KvLayout& g, int64_t layer, const float* k,
                    int64_t ld_k, const float* v, int64_t ld_v, const int64_t* slots, int64_t rows,
                    cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const int t = threadsFor(2 * g.num_kv_heads * g.head_dim);
  if (kv_dtype == DType::kBF16)
    writeKvKernel<<<rows, t, 0, stream>>>(static_cast<__nv_bfloat16*>(pool), g, layer, k, ld_k, v, ld_v,
                                          slots);
  else
    writeKvKernel<<<rows, t, 0, stream>>>(static_cast<float*>(pool), g, layer, k, ld_k, v, ld_v, slots);
  return cudaGetLastError();
}

}  // namespace llmrt::cuda
