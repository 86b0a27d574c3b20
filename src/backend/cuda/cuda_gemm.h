// bf16 / fp16 matrix products through cuBLASLt with a plan per shape: the layouts, the
// operation descriptor and the algorithm (cuBLASLt's heuristic, asked once) are
// made the first time a shape is seen and reused, so a product costs one
// cublasLtMatmul call on the host (cublasGemmEx re-runs the choice every call).
// Choosing by timing candidates was tried and dropped: with batch sizes that
// change every step it cost more than it won (docs/perf.md). Internal to
// src/backend/cuda.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <map>

#include "backend/cuda/cuda_handles.h"

namespace llmrt {

class LtGemm {
 public:
  LtGemm() = default;
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  cublasStatus_t init();
  // out[m, n] (float32 or in_type per out_type, row stride ldc) = x[m, k] (in_type, row stride
  // ldx) W[n, k]^T (in_type, contiguous), fp32 accumulation; in_type CUDA_R_16BF or CUDA_R_16F.
  // With `accumulate`, out += x W^T instead. `workspace` must stay valid while the product runs.
  cublasStatus_t run(cudaDataType_t in_type, const void* w, const void* x, int64_t ldx, void* out,
                     cudaDataType_t out_type, int64_t m, int64_t n, int64_t k, int64_t ldc, void* workspace,
                     size_t workspace_bytes, cudaStream_t stream, bool accumulate = false);
  // 8-bit codes (code_type CUDA_R_8F_E4M3 or CUDA_R_8I): out[m, n] (row stride ldc) =
  // (x[m, k] W[n, k]^T) * (x_scale[m] * w_scale[n]), x and W contiguous. E4M3: fp32 accumulation,
  // out float32 / bf16 / fp16 per out_type, both scale vectors applied by cuBLASLt (outer-vector
  // scaling), or with null scales the plain sums of code products. INT8: int32 accumulation into
  // an int32 out (CUDA_R_32I), null scales only. CUBLAS_STATUS_NOT_SUPPORTED where cuBLASLt has
  // no algorithm for it.
  cublasStatus_t runW8a8(cudaDataType_t code_type, const void* w, const float* w_scale, const void* x, const float* x_scale, void* out,
                        cudaDataType_t out_type, int64_t m, int64_t n, int64_t k, int64_t ldc, void* workspace,
                        size_t workspace_bytes, cudaStream_t stream, bool accumulate);

 private:
  struct Plan {
    LtMatmulDesc op;
    LtMatrixLayout a, b, c;
    cublasLtMatmulAlgo_t algo{};
    size_t workspace = 0;
  };
  // m, n, k, ldc, ldx, input type, output type, workspace bytes, scaling (0 none, 1 outer vectors)
  using Shape = std::array<int64_t, 9>;
  // The plan of `shape` (made and kept the first time it is asked for), or null with the status.
  const Plan* plan(const Shape& shape, cublasStatus_t& status);
  LtHandle lt_;
  std::map<Shape, Plan> plans_;  // (destroyed before lt_)
};

}  // namespace llmrt
