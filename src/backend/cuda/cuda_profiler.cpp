#include "backend/cuda/cuda_profiler.h"

#include <algorithm>
#include <utility>

#include "core/logging.h"

namespace llmrt {

CudaEvent OpProfiler::event() {
  if (!free_.empty()) {
    CudaEvent e = std::move(free_.back());
    free_.pop_back();
    return e;
  }
  CudaEvent e;
  (void)cudaEventCreate(e.out());
  return e;
}

void OpProfiler::begin(cudaStream_t stream, std::string name) {
  Pending p{std::move(name), event(), event()};
  (void)cudaEventRecord(p.start.get(), stream);
  pending_.push_back(std::move(p));
}

void OpProfiler::end(cudaStream_t stream) {
  if (!pending_.empty()) (void)cudaEventRecord(pending_.back().stop.get(), stream);
}

void OpProfiler::collect() {
  for (Pending& p : pending_) {
    float ms = 0.0f;
    if (cudaEventElapsedTime(&ms, p.start.get(), p.stop.get()) == cudaSuccess) {
      auto& t = totals_[p.name];
      t.first += ms;
      t.second += 1;
    }
    free_.push_back(std::move(p.start));
    free_.push_back(std::move(p.stop));
  }
  pending_.clear();
  (void)cudaGetLastError();
}

std::string OpProfiler::report() const {
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> rows(totals_.begin(), totals_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  double total = 0.0;
  for (const auto& r : rows) total += r.second.first;
  std::string out = strprintf("GPU time per op (cuda tuning profile=on): %.3f ms in all\n", total);
  out += strprintf("%-48s %10s %12s %10s %7s\n", "op", "calls", "total ms", "mean us", "share");
  for (const auto& [name, t] : rows)
    out += strprintf("%-48s %10lld %12.3f %10.2f %6.1f%%\n", name.c_str(), static_cast<long long>(t.second), t.first,
                     1000.0 * t.first / static_cast<double>(std::max<int64_t>(t.second, 1)),
                     total > 0 ? 100.0 * t.first / total : 0.0);
  return out;
}

}  // namespace llmrt
