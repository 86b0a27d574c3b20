// The MLP activations on the device: transformers' ACT2FN functions in float32 (the CPU
// reference's formulas), one definition for every kernel that applies one (the activation kernels
// of cuda_arch_ops.cu and the matrix-vector product's epilogue in cuda_gemv.cu), so a fused
// activation gives the separate kernel's bits.
#pragma once

#include "backend/cuda/cuda_kernels.h"

namespace llmrt::cuda {

#ifdef __CUDACC__
template <Act A>
__device__ __forceinline__ float activate(float x) {
  if constexpr (A == Act::kSilu) {
    return x / (1.0f + expf(-x));
  } else if constexpr (A == Act::kGelu) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  } else if constexpr (A == Act::kGeluTanh) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  } else {
    return x > 0.0f ? x : 0.0f;
  }
}
// The activation chosen at run time (`a`).
__device__ __forceinline__ float activate(Act a, float x) {
  switch (a) {
    case Act::kSilu:
      return activate<Act::kSilu>(x);
    case Act::kGelu:
      return activate<Act::kGelu>(x);
    case Act::kGeluTanh:
      return activate<Act::kGeluTanh>(x);
    default:
      return activate<Act::kRelu>(x);
  }
}
#endif

}  // namespace llmrt::cuda
