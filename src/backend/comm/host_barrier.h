// A reusable barrier of the threads of one process, with abort: what the ranks of an in-process
// group (CPU ranks, and the CUDA ranks of makeCudaGroup) meet at on the host. The ranks of a
// sharded step meet several times per layer (DecoderModel's enqueue fences), so a waiting thread
// first spins (up to kSpin: a condition variable's wake-up costs more than the wait for threads
// enqueueing the same ops) and only then sleeps on a condition variable.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "llmrt/status.h"

namespace llmrt {

class HostBarrier {
 public:
  explicit HostBarrier(int size) : size_(size) {}

  // Waits until `size` threads have arrived (generation counting, so the barrier is reusable);
  // fails at once, and releases every waiting thread, once the group is aborted.
  Status arriveAndWait() {
    if (aborted_flag_.load()) return aborted();
    // (This thread has not arrived, so the generation cannot end before its arrival below.)
    const uint64_t generation = generation_.load();
    if (arrived_.fetch_add(1) + 1 == size_) {
      arrived_.store(0);  // (before the new generation: nobody arrives at it before seeing it)
      {
        std::lock_guard<std::mutex> lock(mu_);
        generation_.store(generation + 1);
      }
      cv_.notify_all();
      return Status::ok();
    }
    const auto spin_until = std::chrono::steady_clock::now() + kSpin;
    for (uint32_t i = 0;; ++i) {
      if (generation_.load() != generation) return Status::ok();
      if (aborted_flag_.load()) return aborted();
      if ((i & 63u) == 63u) {
        if (std::chrono::steady_clock::now() > spin_until) break;
        std::this_thread::yield();
      }
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return generation_.load() != generation || !aborted_.isOk(); });
    return generation_.load() != generation ? Status::ok() : aborted_;
  }

  // Sets the group's error (the first one stays) and releases every waiting thread.
  void abort(const Status& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_.isOk()) aborted_ = why.isOk() ? internalError("communicator group aborted") : why;
    aborted_flag_.store(true);
    cv_.notify_all();
  }

  Status aborted() {
    std::lock_guard<std::mutex> lock(mu_);
    return aborted_;
  }

 private:
  static constexpr std::chrono::microseconds kSpin{50};
  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> arrived_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> aborted_flag_{false};
  Status aborted_;  // (under mu_)
};

}  // namespace llmrt
