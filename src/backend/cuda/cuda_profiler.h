// Per-op GPU timing for diagnosis (LLMRT_CUDA_PROFILE=1): every op of the CUDA
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

namespace llmrt {

class OpProfiler {
 public:
  ~OpProfiler();
  void begin(cudaStream_t stream, std::string name);
  void end(cudaStream_t stream);
  // Adds up the finished ops; call after the stream was synchronised.
  void collect();
  // The table: op, calls, total ms, mean µs, share of the total.
  std::string report() const;

 private:
  struct Pending {
    std::string name;
    cudaEvent_t start = nullptr, stop = nullptr;
  };
  cudaEvent_t event();
  std::vector<Pending> pending_;
  std::vector<cudaEvent_t> free_;
  std::map<std::string, std::pair<double, int64_t>> totals_;  // ms, calls
};

}  // namespace llmrt
