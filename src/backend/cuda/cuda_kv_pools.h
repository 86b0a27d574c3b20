// The CUDA backend's KV cache: the primary pool in device memory (one cudaMalloc, zeroed), the
// secondary pool in pinned host memory, and the block copies between them. Copies that touch the
// host pool (offload / onboard) run on their own stream, after the compute stream's work so far
// (copies_ready_); the compute stream's later work waits for them (copies_done_); the host never
// blocks. Internal to src/backend/cuda.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_handles.h"
#include "backend/cuda/cuda_kernels.h"

namespace llmrt {

// The kernels' view of a pool's block layout.
cuda::KvLayout kvLayout(const KvPoolGeometry& g);

class KvPools {
 public:
  // Creates the copy stream and its two events.
  Status init();

  const KvPoolGeometry& geometry() const { return geometry_; }
  cuda::KvLayout layout() const { return kvLayout(geometry_); }
  void* primary() const { return primary_.get(); }
  uint64_t primaryBytes() const;
  uint64_t secondaryBytes() const;

  // An FP8 pool's K / V scales (Backend::setKvCacheScales); the scale of (layer, kv): 1 but for an
  // FP8 pool.
  Status setScales(std::span<const float> scales);
  float scale(int64_t layer, int kv) const;

  // OK when the backend can hold pools of `g` (F32 / BF16 / F16 / F8_E4M3, positive sizes, head_dim <= 256)
  // and `secondary_blocks` host blocks.
  static Status check(const KvPoolGeometry& g, int64_t secondary_blocks);
  // Waits for the block copies in flight on the copy stream.
  Status waitCopies() const;
  // Frees the pools and allocates zeroed ones for `g` (geometry() is empty until commit()).
  // Nothing may use the old pools: waitCopies() and the compute stream `stream` synchronised.
  Status reallocate(const KvPoolGeometry& g, int64_t secondary_blocks, cudaStream_t stream);
  // The new pools are in use (and logged).
  void commit(const KvPoolGeometry& g, int64_t secondary_blocks);

  // Backend::copyKvBlocks on the compute stream `stream` (see the file comment): every block id
  // is checked before any copy is enqueued.
  Status copyBlocks(std::span<const KvBlockCopy> copies, cudaStream_t stream);
  // Backend::readKvBlock: the block as float32, after `stream`'s work so far.
  Status readBlock(KvPool pool, int32_t block, float* dst, cudaStream_t stream) const;

 private:
  CudaStream copy_stream_;
  CudaEvent copies_ready_;
  CudaEvent copies_done_;
  KvPoolGeometry geometry_;
  std::vector<float> scales_;
  int64_t secondary_blocks_ = 0;
  DeviceMemory primary_;
  PinnedMemory secondary_;
};

}  // namespace llmrt
