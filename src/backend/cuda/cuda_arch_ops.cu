// Kernels of the ops only some architectures use: LayerNorm, the MLP activations (plain and
// gated), learned position embeddings, residual adds (plain and sigmoid-gated) and scaling with
// soft-capping. Float32
// arithmetic with the CPU reference's formulas (backend/cpu/cpu_arch_ops.cpp) and accurate libm
// functions (expf, erff, tanhf), not the fast intrinsics. Element-wise kernels take eight (four)
// features per thread with 16-byte accesses where sizes and alignment allow, as siluMul does.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "backend/cuda/cuda_activation.h"
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
bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
// A launch's result: its own error, else any error the launch left pending.
cudaError_t launched(cudaError_t e) { return e != cudaSuccess ? e : cudaGetLastError(); }
int threadsFor(int64_t cols) { return cols >= 1024 ? 1024 : (cols >= 256 ? 256 : 128); }

template <Act A>
__device__ __forceinline__ float4 activate4(const float4& x) {
  return make_float4(activate<A>(x.x), activate<A>(x.y), activate<A>(x.z), activate<A>(x.w));
}

// Calls f(std::integral_constant<Act, a>{}) for the activation `a`.
template <typename F>
cudaError_t withAct(Act a, F&& f) {
  switch (a) {
    case Act::kSilu:
      return f(std::integral_constant<Act, Act::kSilu>{});
    case Act::kGelu:
      return f(std::integral_constant<Act, Act::kGelu>{});
    case Act::kGeluTanh:
      return f(std::integral_constant<Act, Act::kGeluTanh>{});
    case Act::kRelu:
      return f(std::integral_constant<Act, Act::kRelu>{});
  }
  return cudaErrorInvalidValue;
}

// ---- LayerNorm ----------------------------------------------------------------------------

// The sum over row xr of f(feature) for every thread of the block: groupedLaneSum's order (8-feature
// groups, lane l of the first warp adding groups l, l + 32, ...), then the lanes by xor shuffles.
template <typename F>
__device__ __forceinline__ float groupedRowSum(const float* xr, int64_t cols, bool vec, F f, float* tile) {
  float s = groupedLaneSum(xr, cols, vec, f, tile);
  if (threadIdx.x < 32) {  // (lane 0 alone read tile[0], before its shuffles)
    for (int o = 16; o > 0; o >>= 1) s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, o));
    if (threadIdx.x == 0) tile[0] = s;
  }
  __syncthreads();
  const float total = tile[0];
  __syncthreads();  // (tile is reused by the next call)
  return total;
}

// One block per row (128-1024 threads): the mean, then the biased variance of the deviations
// (torch's layer_norm), each a groupedRowSum (an order that does not depend on the block size), then (x -
// mean) * inv and * w + b in one rounding; vec: 16-byte accesses (cols a multiple of 8, aligned rows).
template <typename TO>
__global__ void layerNormKernel(const float* x, int64_t ld_x, const float* w, const float* b, float eps,
                                int64_t cols, bool vec, TO* out, int64_t ld_out) {
  pdlWait();
  pdlLaunchDependents();
  __shared__ float tile[1024];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * ld_x;
  TO* o = out + static_cast<int64_t>(blockIdx.x) * ld_out;
  const float n = static_cast<float>(cols);
  const float sum = groupedRowSum(
      xr, cols, vec, [](float v) { return v; }, tile);
  const float mean = __fdiv_rn(sum, n);
  const float ss = groupedRowSum(
      xr, cols, vec,
      [mean](float v) {
        const float d = __fsub_rn(v, mean);
        return __fmul_rn(d, d);
      },
      tile);
  const float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, n), eps)));
  auto value = [&](float v, float g, float c) { return __fmaf_rn(__fmul_rn(__fsub_rn(v, mean), inv), g, c); };
  if (vec) {
    for (int64_t i = 4 * static_cast<int64_t>(threadIdx.x); i < cols;
         i += 4 * static_cast<int64_t>(blockDim.x)) {
      const float4 v = *reinterpret_cast<const float4*>(xr + i), g = *reinterpret_cast<const float4*>(w + i);
      const float4 c =
          b != nullptr ? *reinterpret_cast<const float4*>(b + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      store4(o + i, make_float4(value(v.x, g.x, c.x), value(v.y, g.y, c.y), value(v.z, g.z, c.z),
                                value(v.w, g.w, c.w)));
    }
    return;
  }
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x)
    storeFloat(o + i, value(xr[i], w[i], b != nullptr ? b[i] : 0.0f));
}

// ---- element-wise -------------------------------------------------------------------------
// blockIdx.y is the row (grid-stride beyond 65535), blockIdx.x * blockDim.x + threadIdx.x the
// column (or the group of 8 / 4 columns of the vector kernels).

template <Act A, typename TI, typename TO>
__global__ void activationKernel(const TI* x, int64_t ld_x, int64_t rows, int64_t cols, TO* out,
                                 int64_t ld_out) {
  pdlWait();
  pdlLaunchDependents();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= cols) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y)
    storeFloat(out + r * ld_out + i, activate<A>(toFloat(x[r * ld_x + i])));
}

// Eight features per thread: cols, ld_x and ld_out multiples of 8, x and out 16-byte aligned.
template <Act A, typename TI, typename TO>
__global__ void activationVecKernel(const TI* x, int64_t ld_x, int64_t rows, int64_t cols, TO* out,
                                    int64_t ld_out) {
  pdlWait();
  pdlLaunchDependents();
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (i >= cols) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    float4 a, b;
    load8(x + r * ld_x + i, a, b);
    store8(out + r * ld_out + i, activate4<A>(a), activate4<A>(b));
  }
}

template <Act A, typename TI, typename TO>
__global__ void gatedKernel(const TI* gu, int64_t ld_gu, int64_t rows, int64_t inter, TO* out,
                            int64_t ld_out) {
  pdlWait();
  pdlLaunchDependents();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= inter) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float g = toFloat(gu[r * ld_gu + i]), u = toFloat(gu[r * ld_gu + inter + i]);
    storeFloat(out + r * ld_out + i, activate<A>(g) * u);
  }
}

// Eight features per thread: inter, ld_gu and ld_out multiples of 8, gu and out 16-byte aligned.
template <Act A, typename TI, typename TO>
__global__ void gatedVecKernel(const TI* gu, int64_t ld_gu, int64_t rows, int64_t inter, TO* out,
                               int64_t ld_out) {
  pdlWait();
  pdlLaunchDependents();
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (i >= inter) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    float4 g0, g1, u0, u1;
    load8(gu + r * ld_gu + i, g0, g1);
    load8(gu + r * ld_gu + inter + i, u0, u1);
    const float4 a0 = activate4<A>(g0), a1 = activate4<A>(g1);
    store8(out + r * ld_out + i, make_float4(a0.x * u0.x, a0.y * u0.y, a0.z * u0.z, a0.w * u0.w),
           make_float4(a1.x * u1.x, a1.y * u1.y, a1.z * u1.z, a1.w * u1.w));
  }
}

// One block per row: x[r, :] += table[positions[r], :].
template <typename T>
__global__ void addPositionKernel(const T* table, int64_t dim, const int32_t* positions, float* x,
                                  int64_t ld_x) {
  pdlWait();
  pdlLaunchDependents();
  const int64_t r = blockIdx.x;
  const T* src = table + static_cast<int64_t>(positions[r]) * dim;
  float* xr = x + r * ld_x;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) xr[i] += toFloat(src[i]);
}

template <typename T>
__global__ void addRowsKernel(const T* y, int64_t ld_y, int64_t rows, int64_t cols, float* res,
                              int64_t ld_res) {
  pdlWait();
  pdlLaunchDependents();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) res[r * ld_res + c] += toFloat(y[r * ld_y + c]);
}

// Eight features per thread: cols and both row strides multiples of 8, y and res 16-byte aligned.
template <typename T>
__global__ void addRowsVecKernel(const T* y, int64_t ld_y, int64_t rows, int64_t cols, float* res,
                                 int64_t ld_res) {
  pdlWait();
  pdlLaunchDependents();
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (c >= cols) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    float4 y0, y1, r0, r1;
    load8(y + r * ld_y + c, y0, y1);
    load8(res + r * ld_res + c, r0, r1);
    store8(res + r * ld_res + c, make_float4(r0.x + y0.x, r0.y + y0.y, r0.z + y0.z, r0.w + y0.w),
           make_float4(r1.x + y1.x, r1.y + y1.y, r1.z + y1.z, r1.w + y1.w));
  }
}

// residual[r, c] += sigmoid(gate[r]) * y[r, c]: the product rounded, then added (the CPU's order).
template <typename T>
__global__ void sigmoidGatedAddKernel(const T* y, int64_t ld_y, const float* gate, int64_t ld_gate,
                                      int64_t rows, int64_t cols, float* res, int64_t ld_res) {
  pdlWait();
  pdlLaunchDependents();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float g = 1.0f / (1.0f + expf(-gate[r * ld_gate]));
    float* o = res + r * ld_res + c;
    *o = __fadd_rn(*o, __fmul_rn(g, toFloat(y[r * ld_y + c])));
  }
}

__device__ __forceinline__ float scaleCap(float v, float scale, float cap) {
  v *= scale;
  return cap > 0.0f ? cap * tanhf(v / cap) : v;
}

__global__ void scaleSoftcapKernel(float* x, int64_t ld_x, int64_t rows, int64_t cols, float scale,
                                   float cap) {
  pdlWait();
  pdlLaunchDependents();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y)
    x[r * ld_x + c] = scaleCap(x[r * ld_x + c], scale, cap);
}

// Four features per thread: cols and ld_x multiples of 4, x 16-byte aligned.
__global__ void scaleSoftcapVecKernel(float* x, int64_t ld_x, int64_t rows, int64_t cols, float scale,
                                      float cap) {
  pdlWait();
  pdlLaunchDependents();
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
  if (c >= cols) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    float4* p = reinterpret_cast<float4*>(x + r * ld_x + c);
    const float4 v = *p;
    *p = make_float4(scaleCap(v.x, scale, cap), scaleCap(v.y, scale, cap), scaleCap(v.z, scale, cap),
                     scaleCap(v.w, scale, cap));
  }
}

}  // namespace

cudaError_t layerNorm(const float* x, int64_t ld_x, const float* w, const float* b, float eps, int64_t rows,
                      int64_t cols, void* out, DType out_dtype, int64_t ld_out, cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  // 16-byte loads of 8 features (statistics) and 4 (values) where sizes and alignment allow.
  const bool vec = cols % 8 == 0 && ld_x % 4 == 0 && ld_out % 4 == 0 && aligned16(x) && aligned16(w) &&
                   (b == nullptr || aligned16(b)) && reinterpret_cast<uintptr_t>(out) % 8 == 0 &&
                   (out_dtype != DType::kF32 || aligned16(out));
  return launched(withElementType(out_dtype, [&](auto tag) {
    using TO = decltype(tag);
    return launchPdl(layerNormKernel<TO>, rows, threadsFor(cols), 0, stream, x, ld_x, w, b, eps, cols, vec,
                     static_cast<TO*>(out), ld_out);
  }));
}

cudaError_t activation(Act act, const void* x, DType x_dtype, int64_t ld_x, int64_t rows, int64_t cols,
                       void* out, DType out_dtype, int64_t ld_out, cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  const bool vec = cols % 8 == 0 && ld_x % 8 == 0 && ld_out % 8 == 0 && aligned16(x) && aligned16(out);
  return launched(withAct(act, [&](auto act_tag) {
    constexpr Act A = decltype(act_tag)::value;
    return withElementType(x_dtype, [&](auto in_tag) {
      using TI = decltype(in_tag);
      return withElementType(out_dtype, [&](auto out_tag) {
        using TO = decltype(out_tag);
        const TI* xi = static_cast<const TI*>(x);
        TO* o = static_cast<TO*>(out);
        if (vec)
          return launchPdl(activationVecKernel<A, TI, TO>, grid2(rows, (cols + 7) / 8), kThreads, 0, stream,
                           xi, ld_x, rows, cols, o, ld_out);
        return launchPdl(activationKernel<A, TI, TO>, grid2(rows, cols), kThreads, 0, stream, xi, ld_x, rows,
                         cols, o, ld_out);
      });
    });
  }));
}

cudaError_t gatedActivation(Act act, const void* gu, DType gu_dtype, int64_t ld_gu, int64_t rows,
                            int64_t inter, void* out, DType out_dtype, int64_t ld_out, cudaStream_t stream) {
  if (rows * inter == 0) return cudaSuccess;
  if (act == Act::kSilu) return siluMul(gu, gu_dtype, ld_gu, rows, inter, out, out_dtype, ld_out, stream);
  const bool vec = inter % 8 == 0 && ld_gu % 8 == 0 && ld_out % 8 == 0 && aligned16(gu) && aligned16(out);
  return launched(withAct(act, [&](auto act_tag) {
    constexpr Act A = decltype(act_tag)::value;
    return withElementType(gu_dtype, [&](auto in_tag) {
      using TI = decltype(in_tag);
      return withElementType(out_dtype, [&](auto out_tag) {
        using TO = decltype(out_tag);
        const TI* g = static_cast<const TI*>(gu);
        TO* o = static_cast<TO*>(out);
        if (vec)
          return launchPdl(gatedVecKernel<A, TI, TO>, grid2(rows, (inter + 7) / 8), kThreads, 0, stream, g,
                           ld_gu, rows, inter, o, ld_out);
        return launchPdl(gatedKernel<A, TI, TO>, grid2(rows, inter), kThreads, 0, stream, g, ld_gu, rows,
                         inter, o, ld_out);
      });
    });
  }));
}

cudaError_t addPositionEmbedding(const void* table, DType table_dtype, int64_t dim, const int32_t* positions,
                                 int64_t n, float* x, int64_t ld_x, cudaStream_t stream) {
  if (n * dim == 0) return cudaSuccess;
  return launched(withElementType(table_dtype, [&](auto tag) {
    using T = decltype(tag);
    return launchPdl(addPositionKernel<T>, n, threadsFor(dim), 0, stream, static_cast<const T*>(table), dim,
                     positions, x, ld_x);
  }));
}

cudaError_t addRows(const void* y, DType y_dtype, int64_t ld_y, int64_t rows, int64_t cols, float* residual,
                    int64_t ld_res, cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  const bool vec = cols % 8 == 0 && ld_y % 8 == 0 && ld_res % 8 == 0 && aligned16(y) && aligned16(residual);
  return launched(withElementType(y_dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* yt = static_cast<const T*>(y);
    if (vec)
      return launchPdl(addRowsVecKernel<T>, grid2(rows, (cols + 7) / 8), kThreads, 0, stream, yt, ld_y, rows,
                       cols, residual, ld_res);
    return launchPdl(addRowsKernel<T>, grid2(rows, cols), kThreads, 0, stream, yt, ld_y, rows, cols, residual,
                     ld_res);
  }));
}

cudaError_t sigmoidGatedAdd(const void* y, DType y_dtype, int64_t ld_y, const float* gate, int64_t ld_gate,
                            int64_t rows, int64_t cols, float* residual, int64_t ld_res,
                            cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  return launched(withElementType(y_dtype, [&](auto tag) {
    using T = decltype(tag);
    return launchPdl(sigmoidGatedAddKernel<T>, grid2(rows, cols), kThreads, 0, stream,
                     static_cast<const T*>(y), ld_y, gate, ld_gate, rows, cols, residual, ld_res);
  }));
}

cudaError_t scaleSoftcap(float* x, int64_t ld_x, int64_t rows, int64_t cols, float scale, float cap,
                         cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  const bool vec = cols % 4 == 0 && ld_x % 4 == 0 && aligned16(x);
  if (vec)
    return launched(launchPdl(scaleSoftcapVecKernel, grid2(rows, (cols + 3) / 4), kThreads, 0, stream, x,
                              ld_x, rows, cols, scale, cap));
  return launched(
      launchPdl(scaleSoftcapKernel, grid2(rows, cols), kThreads, 0, stream, x, ld_x, rows, cols, scale, cap));
}

}  // namespace llmrt::cuda
