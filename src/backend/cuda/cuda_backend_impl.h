// CudaBackend: the Backend interface on one CUDA device. Internal to
// src/backend/cuda (it includes CUDA headers); others use cuda_backend.h.
//
// Everything runs in order on one stream. Host metadata (token ids, slots,
// positions, block tables) is uploaded per op with cudaMemcpyAsync from
// pageable memory, which copies it out before returning, so callers' spans
// may die right after the call. Ops return void (the Backend interface): the
// first CUDA error is kept in `error_` (with file and line), later ops are
// skipped, and the next call that returns a Status (copyToHost, copyKvBlocks,
// ...) reports it.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_kernels.h"

namespace llmrt {

// Keeps the first failure of a CUDA runtime call in `status`: "cudaMalloc(...) at file:line: <error>".
Status cudaStatus(cudaError_t err, const char* expr, const char* file, int line);
Status cublasStatus(cublasStatus_t err, const char* expr, const char* file, int line);

#define LLMRT_CUDA_RETURN_IF_ERROR(expr)                                      \
  do {                                                                        \
    const cudaError_t llmrt_cuda_err_ = (expr);                               \
    if (llmrt_cuda_err_ != cudaSuccess)                                       \
      return ::llmrt::cudaStatus(llmrt_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// In void ops: records the first error in error_ and leaves the op.
#define LLMRT_CUDA_OP_CHECK(expr)                                            \
  do {                                                                       \
    const cudaError_t llmrt_cuda_err_ = (expr);                              \
    if (llmrt_cuda_err_ != cudaSuccess) {                                    \
      fail(::llmrt::cudaStatus(llmrt_cuda_err_, #expr, __FILE__, __LINE__)); \
      return;                                                                \
    }                                                                        \
  } while (0)

#define LLMRT_CUBLAS_OP_CHECK(expr)                                              \
  do {                                                                           \
    const cublasStatus_t llmrt_cublas_err_ = (expr);                             \
    if (llmrt_cublas_err_ != CUBLAS_STATUS_SUCCESS) {                            \
      fail(::llmrt::cublasStatus(llmrt_cublas_err_, #expr, __FILE__, __LINE__)); \
      return;                                                                    \
    }                                                                            \
  } while (0)

class CudaBackend final : public Backend {
 public:
  ~CudaBackend() override;
  // Sets up the device, stream and cuBLAS handle.
  static Result<std::unique_ptr<CudaBackend>> create(const CudaBackendOptions& options);

  std::string name() const override { return "cuda"; }
  Device device() const override { return Device::kCuda; }
  int numThreads() const override { return 1; }

  uint64_t freeMemoryBytes() const override;
  uint64_t totalMemoryBytes() const override;

  Result<TensorView> loadWeight(std::span<const TensorView> parts, const std::string& name) override;
  uint64_t weightBytes() const override { return weight_bytes_; }
  TensorView scratch(int slot, int64_t rows, int64_t cols) override;
  Status copyToHost(const TensorView& src, float* dst) override;
  Status copyFromHost(const float* src, TensorView dst) override;

  Status allocateKvPools(const KvPoolGeometry& primary, int64_t secondary_blocks) override;
  const KvPoolGeometry& kvGeometry() const override { return geometry_; }
  Status copyKvBlocks(std::span<const KvBlockCopy> copies) override;
  DType preferredKvDtype() const override { return options_.kv_dtype; }
  Status readKvBlock(KvPoolKind pool, int32_t block, float* dst) override;

  void embedding(const TensorView& table, std::span<const int32_t> ids, TensorView out) override;
  void rmsNorm(const TensorView& x, const TensorView& weight, float eps, TensorView out) override;
  void addRmsNorm(TensorView residual, const TensorView& x, const TensorView& weight, float eps,
                  TensorView out) override;
  void linear(const TensorView& x, const TensorView& weight, const TensorView* bias, TensorView out) override;
  void add(TensorView x, const TensorView& y) override;
  void gatherRows(const TensorView& src, std::span<const int64_t> rows, TensorView out) override;
  void siluMul(const TensorView& gate_up, TensorView out) override;
  void rope(TensorView q, TensorView k, int64_t head_dim, std::span<const int32_t> positions,
            int64_t row_begin, int64_t row_end, const RopeParams& params) override;
  void writeKv(int64_t layer, const TensorView& k, const TensorView& v,
               std::span<const int64_t> slots) override;
  void attention(int64_t layer, const TensorView& q, int64_t num_heads, std::span<const AttentionSeq> seqs,
                 float scale, TensorView out) override;

  // The first CUDA error seen by an op (OK when none).
  const Status& error() const { return error_; }

 private:
  // A device (or pinned host) allocation that grows on demand.
  struct Buffer {
    void* ptr = nullptr;
    size_t bytes = 0;
  };

  explicit CudaBackend(const CudaBackendOptions& options) : options_(options) {}
  void fail(Status s);
  bool failed() const { return !error_.isOk(); }
  // Grows `b` (device memory) to at least `bytes`; false (and error_ set) on failure.
  bool reserve(Buffer& b, size_t bytes);
  // Uploads `bytes` of host data into the metadata buffer `slot`; null on failure.
  void* upload(int slot, const void* src, size_t bytes);
  cuda::KvLayout kvLayout() const;

  CudaBackendOptions options_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  Status error_;
  std::vector<void*> weights_;  // owned device allocations
  uint64_t weight_bytes_ = 0;
  std::vector<Buffer> scratch_;
  std::vector<Buffer> meta_;  // per-op metadata uploads (slot 0: main, 1: secondary)
  Buffer bf16_x_;             // bf16 copy of a linear's input
  KvPoolGeometry geometry_;
  int64_t secondary_blocks_ = 0;
  void* primary_ = nullptr;    // device
  void* secondary_ = nullptr;  // pinned host
};

}  // namespace llmrt
