// CUDA and cuBLAS errors as Status: what the backend's units (cuda_backend_impl.h and the
// resources it is split into) return when a runtime call fails. Internal to src/backend/cuda.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "llmrt/status.h"

namespace llmrt {

// "<expr> failed at file:line: <error name> (<error text>)"; kResourceExhausted for an
// allocation that failed, else kInternal.
Status cudaStatus(cudaError_t err, const char* expr, const char* file, int line);
Status cublasStatus(cublasStatus_t err, const char* expr, const char* file, int line);

}  // namespace llmrt

#define LLMRT_CUDA_RETURN_IF_ERROR(expr)                                      \
  do {                                                                        \
    const cudaError_t llmrt_cuda_err_ = (expr);                               \
    if (llmrt_cuda_err_ != cudaSuccess)                                       \
      return ::llmrt::cudaStatus(llmrt_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)
