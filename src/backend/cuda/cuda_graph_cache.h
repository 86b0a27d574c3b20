// The CUDA graphs recordOrReplay keeps: one executable graph per (caller's key, step layout),
// recorded the first time and replayed afterwards. A graph holds the device pointers its kernels
// were launched with, so any reallocation of a buffer the ops read (scratch, step metadata,
// workspaces, the KV pool) makes every record stale: the owner calls invalidate(), and the records
// are dropped before the next lookup. Internal to src/backend/cuda.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "backend/cuda/cuda_handles.h"

namespace llmrt {

class GraphCache {
 public:
  // Whether steps are recorded at all (tuning graphs=on, not profiling; off for good once a
  // recording failed).
  bool enabled() const { return enabled_; }
  void setEnabled(bool on) { enabled_ = on; }
  // Whether a step is being recorded now: nothing may allocate or synchronise then.
  bool recording() const { return recording_; }
  void setRecording(bool on) { recording_ = on; }
  // A buffer that recorded graphs may read has moved.
  void invalidate() { ++alloc_epoch_; }
  // The graph recorded under `key`, or null. Drops every record first when a buffer moved since
  // they were made.
  cudaGraphExec_t find(uint64_t key);
  cudaGraphExec_t insert(uint64_t key, CudaGraphExec exec);
  size_t size() const { return graphs_.size(); }

 private:
  bool enabled_ = true;
  bool recording_ = false;
  uint64_t alloc_epoch_ = 0;  // bumped by every (re)allocation of a buffer ops read
  uint64_t graph_epoch_ = 0;  // alloc_epoch_ when the records were made
  std::unordered_map<uint64_t, CudaGraphExec> graphs_;
};

}  // namespace llmrt
