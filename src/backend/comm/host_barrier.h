// A reusable barrier of the threads of one process, with abort: what the ranks of an in-process
// group (CPU ranks, and the CUDA ranks of makeCudaGroup) meet at on the host.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "llmrt/status.h"

namespace llmrt {

class HostBarrier {
 public:
  explicit HostBarrier(int size) : size_(size) {}

  // Waits until `size` threads have arrived (generation counting, so the barrier is reusable);
  // fails at once, and releases every waiting thread, once the group is aborted.
  Status arriveAndWait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!aborted_.isOk()) return aborted_;
    const uint64_t generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return Status::ok();
    }
    cv_.wait(lock, [&] { return generation_ != generation || !aborted_.isOk(); });
    return generation_ != generation ? Status::ok() : aborted_;
  }

  // Sets the group's error (the first one stays) and releases every waiting thread.
  void abort(const Status& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_.isOk()) aborted_ = why.isOk() ? internalError("communicator group aborted") : why;
    cv_.notify_all();
  }

  Status aborted() {
    std::lock_guard<std::mutex> lock(mu_);
    return aborted_;
  }

 private:
  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  Status aborted_;
};

}  // namespace llmrt
