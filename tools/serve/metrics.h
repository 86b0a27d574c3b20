// The server's Prometheus metrics (GET /metrics, text format 0.0.4), named `llmrt:*` after
// vLLM's `vllm:*` (docs/serving.md maps each to its vLLM / TensorRT-LLM equivalent). Request
// metrics are recorded when a request ends; step metrics by polling the executor's iteration
// statistics; gauges are read from ExecutorStats at scrape time. Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "llmrt/executor.h"

namespace llmrt::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v);
  // "# TYPE name histogram" and its _bucket / _sum / _count lines.
  void render(std::string& out, const std::string& name, const std::string& help) const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); the last is +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

struct RequestRecord {
  FinishReason finish = FinishReason::kNone;  // the request's overall reason (error if any failed)
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t generated_tokens = 0;
  double queue_s = 0.0;
  double ttft_s = -1.0;  // < 0: no token came
  double e2e_s = 0.0;
};

class Metrics {
 public:
  Metrics();
  void recordRequest(const RequestRecord& r);
  void recordIterations(const std::vector<IterationStats>& its);
  void recordHttp(int status);
  // The exposition text, with the gauges from `stats`.
  std::string render(const ExecutorStats& stats, const std::string& model_name) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> finished_;  // by finish reason
  std::map<int, uint64_t> http_;              // responses by status
  uint64_t prompt_tokens_ = 0, generation_tokens_ = 0, prefix_queries_ = 0, prefix_hits_ = 0;
  Histogram ttft_, tpot_, e2e_, queue_, prompt_len_, gen_len_, iter_tokens_, step_time_;
};

}  // namespace llmrt::serve
