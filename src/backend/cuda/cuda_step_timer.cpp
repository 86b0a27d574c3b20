#include "backend/cuda/cuda_step_timer.h"

#include <algorithm>
#include <iterator>

#include "backend/cuda/cuda_status.h"

namespace llmrt {

Status StepTimer::open(cudaStream_t stream) {
  LLMRT_RETURN_IF_ERROR(close(stream));                   // a step whose results never went back
  if (used_ >= 256) LLMRT_RETURN_IF_ERROR(sync(stream));  // (128 such steps in a row)
  while (events_.size() < used_ + 2) {
    CudaEvent e;
    LLMRT_CUDA_RETURN_IF_ERROR(cudaEventCreate(e.out()));
    events_.push_back(std::move(e));
  }
  LLMRT_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[used_].get(), stream));
  used_ += 2;
  open_ = true;
  return Status::ok();
}

Status StepTimer::close(cudaStream_t stream) {
  if (!open_) return Status::ok();
  open_ = false;
  LLMRT_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[used_ - 1].get(), stream));
  return Status::ok();
}

Status StepTimer::harvest(bool all) {
  size_t done = 0;  // events of the intervals read
  for (; done + 1 < used_; done += 2) {
    if (open_ && done + 2 == used_) break;  // its end is not recorded yet
    if (!all) {
      const cudaError_t q = cudaEventQuery(events_[done + 1].get());
      if (q == cudaErrorNotReady) break;
      LLMRT_CUDA_RETURN_IF_ERROR(q);
    }
    float ms = 0.0f;
    LLMRT_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, events_[done].get(), events_[done + 1].get()));
    seconds_ += ms * 1e-3;
  }
  // The read pairs' events go behind the unread ones, for reuse.
  std::rotate(events_.begin(), events_.begin() + static_cast<std::ptrdiff_t>(done),
              events_.begin() + static_cast<std::ptrdiff_t>(used_));
  used_ -= done;
  return Status::ok();
}

Status StepTimer::sync(cudaStream_t stream) {
  LLMRT_RETURN_IF_ERROR(close(stream));
  LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return harvest(true);
}

}  // namespace llmrt
