// Step timing (Backend::deviceStepSeconds): an event pair per step, [began, done], recorded after
// beginStep's upload and where the results go back (or, for a step with no results, when the
// next step begins); read once complete, so the host never waits for it (a step may be in
// flight while the one before it is collected). Internal to src/backend/cuda.
#pragma once

#include <cstddef>
#include <vector>

#include "backend/cuda/cuda_handles.h"
#include "llmrt/status.h"

namespace llmrt {

class StepTimer {
 public:
  // The device time of the steps read so far.
  double seconds() const { return seconds_; }
  // Starts a step's interval on `stream` (closing one whose results never went back).
  Status open(cudaStream_t stream);
  // Ends the open interval, if any, on `stream`.
  Status close(cudaStream_t stream);
  // Adds the device times of the intervals that have completed (`all`: every closed one, after a
  // stream synchronisation), oldest first, and recycles their events.
  Status harvest(bool all);
  // Waits for `stream` after a step's results were enqueued for the host (faults of the step
  // surface here) and adds the steps' device times.
  Status sync(cudaStream_t stream);

 private:
  std::vector<CudaEvent> events_;
  size_t used_ = 0;  // 2 per interval not yet read, oldest first
  bool open_ = false;
  double seconds_ = 0.0;
};

}  // namespace llmrt
