// Per-op GPU timing for diagnosis (CudaTuning::profile): every op of the CUDA
// backend is bracketed by two CUDA events; after each host synchronisation the
// elapsed times are added up per op name (e.g. "linear gemv m=1 n=6144 k=4096"),
// and the backend logs the table when it is destroyed. Recording graphs is off
// while profiling (events around each op). Costs a few µs per op: for finding
// where the time goes, not for timing runs.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <string>
#include <vector>

#include "backend/cuda/cuda_handles.h"

namespace llmrt {

class OpProfiler {
 public:
  void begin(cudaStream_t stream, std::string name);
  void end(cudaStream_t stream);
  // Adds up the finished ops; call after the stream was synchronised.
  void collect();
  // The table: op, calls, total ms, mean µs, share of the total.
  std::string report() const;

 private:
  struct Pending {
    std::string name;
    CudaEvent start, stop;
  };
  CudaEvent event();
  std::vector<Pending> pending_;
  std::vector<CudaEvent> free_;
  std::map<std::string, std::pair<double, int64_t>> totals_;  // ms, calls
};

}  // namespace llmrt
