// A fixed pool of worker threads with a blocking parallelFor. Used by the CPU
// backend; one pool per backend instance.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace llmrt {

// The cores this process may run on (its CPU affinity mask, which taskset and
// container CPU sets narrow), at least 1.
int availableCores();

class ThreadPool {
 public:
  // num_threads <= 0: availableCores(). The calling thread also works, so a
  // pool of N threads starts N-1 workers.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int numThreads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint chunks covering [0, n), at most
  // numThreads() chunks, and returns when all are done. Not reentrant.
  void parallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk = 1);

 private:
  void workerLoop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_work_;
  std::condition_variable cv_done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int job_chunks_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace llmrt
