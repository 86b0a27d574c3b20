// Owning handles of CUDA runtime and cuBLAS resources: streams, events, graph executables, the
// memory pool, device and pinned host memory, cuBLAS / cuBLASLt handles and descriptors. Each is
// move-only and releases what it holds in its destructor, so an owner tears down in the reverse
// order of its members' declarations. A handle does not wait for work in flight that uses what
// it holds: the owner synchronises the streams first (~CudaBackend); StreamPool alone waits for
// its stream itself, as its buffers' frees are enqueued on it during the owner's teardown.
// Errors of a release on the way out cannot be reported and are dropped; where one matters
// (finishWeights, allocateKvPools) the caller takes the raw pointer with release() and frees it
// itself, checked. Internal to src/backend/cuda.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "llmrt/status.h"

namespace llmrt {

// One handle of a pointer-like type T (null: none), released with Release.
template <typename T, auto Release>
class UniqueHandle {
 public:
  UniqueHandle() = default;
  explicit UniqueHandle(T h) : h_(h) {}
  UniqueHandle(UniqueHandle&& o) noexcept : h_(std::exchange(o.h_, T{})) {}
  UniqueHandle& operator=(UniqueHandle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, T{});
    }
    return *this;
  }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;
  ~UniqueHandle() { reset(); }

  T get() const { return h_; }
  explicit operator bool() const { return h_ != T{}; }
  // Releases what it holds and returns where a create call writes the new handle
  // (cudaEventCreate(e.out())).
  T* out() {
    reset();
    return &h_;
  }
  // Gives the handle up unreleased: the caller frees it (and checks that call's error).
  [[nodiscard]] T release() { return std::exchange(h_, T{}); }
  void reset() {
    if (h_) (void)Release(std::exchange(h_, T{}));
  }

 private:
  T h_{};
};

using CudaStream = UniqueHandle<cudaStream_t, cudaStreamDestroy>;
using CudaEvent = UniqueHandle<cudaEvent_t, cudaEventDestroy>;
using CudaGraphExec = UniqueHandle<cudaGraphExec_t, cudaGraphExecDestroy>;
using CudaMemPool = UniqueHandle<cudaMemPool_t, cudaMemPoolDestroy>;
using DeviceMemory = UniqueHandle<void*, cudaFree>;      // cudaMalloc
using PinnedMemory = UniqueHandle<void*, cudaFreeHost>;  // cudaHostAlloc, of a fixed size
using BlasHandle = UniqueHandle<cublasHandle_t, cublasDestroy>;
using LtHandle = UniqueHandle<cublasLtHandle_t, cublasLtDestroy>;
using LtMatmulDesc = UniqueHandle<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using LtMatrixLayout = UniqueHandle<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;

// Pinned host memory that grows on demand (the per-step uploads and the results' copies).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(PinnedBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer();

  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  // Grows to at least `bytes` (by half again, at least 64 KiB) once the work in flight on
  // `stream`, which may still read the old memory, has finished; its content is not kept.
  Status reserve(size_t bytes, cudaStream_t stream);

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Device memory from a StreamPool (which grows it), freed in the order of the pool's stream:
// work enqueued before the free still reads it, and the pool hands the memory to the next
// allocation, without waiting for the device.
class PoolBuffer {
 public:
  PoolBuffer() = default;
  PoolBuffer(PoolBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), stream_(o.stream_) {}
  PoolBuffer& operator=(PoolBuffer&& o) noexcept;
  PoolBuffer(const PoolBuffer&) = delete;
  PoolBuffer& operator=(const PoolBuffer&) = delete;
  ~PoolBuffer() { free(); }

  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  friend class StreamPool;
  void free();  // cudaFreeAsync on stream_
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  cudaStream_t stream_ = nullptr;
};

// A device memory pool whose allocations are made and freed in the order of one stream
// (cudaMallocFromPoolAsync / cudaFreeAsync). It keeps everything it reserved: the KV cache is
// sized from what is free after the workspace is reserved, so the pool must not hand memory back
// and need it again later. Outlives its buffers (declared before them) and the stream outlives it.
class StreamPool {
 public:
  StreamPool() = default;
  StreamPool(const StreamPool&) = delete;
  StreamPool& operator=(const StreamPool&) = delete;
  // Waits for the stream, on which the buffers' frees may still be pending, then destroys the pool.
  ~StreamPool();

  Status create(int device, cudaStream_t stream);
  // Grows `b` to at least `bytes`: exactly `bytes` the first time, later by half again at least.
  // Its old memory is freed (in stream order) first; on failure `b` holds nothing.
  Status grow(PoolBuffer& b, size_t bytes);
  cudaMemPool_t get() const { return pool_.get(); }

 private:
  CudaMemPool pool_;
  cudaStream_t stream_ = nullptr;
};

}  // namespace llmrt
