#include "backend/cuda/cuda_handles.h"

#include <algorithm>
#include <cstdint>

#include "backend/cuda/cuda_status.h"
#include "core/logging.h"

namespace llmrt {

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) (void)cudaFreeHost(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (ptr_) (void)cudaFreeHost(ptr_);
}

Status PinnedBuffer::reserve(size_t bytes, cudaStream_t stream) {
  if (bytes_ >= bytes) return Status::ok();
  LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));  // nothing reads the old one any more
  bytes_ = 0;
  LLMRT_CUDA_RETURN_IF_ERROR(cudaFreeHost(std::exchange(ptr_, nullptr)));
  const size_t want = std::max(bytes + bytes / 2, size_t{1} << 16);
  LLMRT_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&ptr_, want, cudaHostAllocDefault));
  bytes_ = want;
  return Status::ok();
}

PoolBuffer& PoolBuffer::operator=(PoolBuffer&& o) noexcept {
  if (this != &o) {
    free();
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    stream_ = o.stream_;
  }
  return *this;
}

void PoolBuffer::free() {
  if (ptr_) (void)cudaFreeAsync(ptr_, stream_);
  ptr_ = nullptr;
  bytes_ = 0;
}

StreamPool::~StreamPool() {
  if (pool_) (void)cudaStreamSynchronize(stream_);
}

Status StreamPool::create(int device, cudaStream_t stream) {
  stream_ = stream;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  LLMRT_CUDA_RETURN_IF_ERROR(cudaMemPoolCreate(pool_.out(), &props));
  uint64_t keep = UINT64_MAX;  // (see the class comment)
  LLMRT_CUDA_RETURN_IF_ERROR(cudaMemPoolSetAttribute(pool_.get(), cudaMemPoolAttrReleaseThreshold, &keep));
  return Status::ok();
}

Status StreamPool::grow(PoolBuffer& b, size_t bytes) {
  const size_t want = b.bytes_ == 0 ? bytes : std::max(bytes, b.bytes_ + b.bytes_ / 2);
  // Stream-ordered: work already enqueued still reads the old buffer; its memory is reused
  // only by work enqueued after it.
  b.free();
  b.stream_ = stream_;
  if (cudaError_t e = cudaMallocFromPoolAsync(&b.ptr_, want, pool_.get(), stream_); e != cudaSuccess) {
    b.ptr_ = nullptr;
    return cudaStatus(e, strprintf("cudaMallocFromPoolAsync(%zu bytes)", want).c_str(), __FILE__, __LINE__);
  }
  b.bytes_ = want;
  return Status::ok();
}

}  // namespace llmrt
