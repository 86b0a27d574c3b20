// Time source for retention durations. Injectable so tests advance time by
// hand instead of sleeping.
#pragma once

#include <chrono>
#include <cstdint>

namespace llmrt {

class KvClock {
 public:
  virtual ~KvClock() = default;
  // Monotonic milliseconds since an arbitrary epoch.
  virtual int64_t nowMs() const = 0;
};

class SteadyKvClock final : public KvClock {
 public:
  int64_t nowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

// A clock that moves only when told to.
class ManualKvClock final : public KvClock {
 public:
  explicit ManualKvClock(int64_t start_ms = 0) : now_ms_(start_ms) {}
  int64_t nowMs() const override { return now_ms_; }
  void advanceMs(int64_t ms) { now_ms_ += ms; }
  void setMs(int64_t ms) { now_ms_ = ms; }

 private:
  int64_t now_ms_;
};

}  // namespace llmrt
