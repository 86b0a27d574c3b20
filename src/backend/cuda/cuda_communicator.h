// The communicators of CUDA ranks (one thread per rank, each with its CudaBackend): besides the
// host collectives of Communicator, collectives enqueued on the rank's stream over float32 device
// buffers, which a step recorded into a CUDA graph replays. Made by makeCudaGroup
// (cuda_backend.h). All-reduce, per call by size: the custom kernels (cuda_collectives.h) up to
// kCustomAllReduceMaxBytes when custom_all_reduce is on; NCCL beyond (or always when off); the
// custom kernels in staging-sized pieces where NCCL cannot serve (ranks sharing a GPU, or no
// libnccl.so.2). All-gather (the logits' vocabulary shards, strided into their columns): the
// custom kernels, in pieces of whole rows. Both need peer access between the ranks' GPUs.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/comm/communicator.h"

namespace llmrt {

// The host collectives (Communicator's) run on a stream of their own but share the device
// collectives' staging buffers and counters: call them only when none of this rank's device
// collectives is still queued (after a sync of the stream they were enqueued on).
class CudaCommunicator : public Communicator {
 public:
  // The CUDA device of this rank.
  virtual int device() const = 0;
  // Enqueued on `stream` (this rank's device); the Status says whether the launch failed, and
  // fails once the group is aborted.
  virtual Status allReduceSumAsync(float* data, int64_t count, cudaStream_t stream) = 0;
  // out[i, p * cols + j] = rank p's in[i, j] (in [rows, cols] contiguous; out rows ld_out apart).
  virtual Status allGatherAsync(const float* in, int64_t rows, int64_t cols, float* out, int64_t ld_out,
                                cudaStream_t stream) = 0;
};

// Messages up to this size take the custom kernels when custom_all_reduce is on (NCCL's ring is
// faster beyond, where NVLink bandwidth rather than latency decides).
constexpr int64_t kCustomAllReduceMaxBytes = 8 << 20;

}  // namespace llmrt
