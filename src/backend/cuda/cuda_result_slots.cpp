#include "backend/cuda/cuda_result_slots.h"

#include <cstddef>
#include <string>

#include "backend/cuda/cuda_status.h"
#include "backend/row_sampling.h"
#include "core/logging.h"

namespace llmrt {

Status ResultSlots::init() {
  for (Slot& s : slots_)
    LLMRT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(s.ready.out(), cudaEventDisableTiming));
  return Status::ok();
}

Result<uint64_t> ResultSlots::publish(int slot, int64_t rows, bool samples, cudaStream_t stream) {
  Slot& s = slots_[slot];
  LLMRT_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.ready.get(), stream));
  s.rows = rows;
  s.samples = samples;
  return tickets_++;
}

Result<int> ResultSlots::find(uint64_t ticket, bool samples) const {
  if (ticket >= tickets_ || ticket + 2 < tickets_)
    return invalidArgument("waiting for result " + std::to_string(ticket) +
                           ": not one of the two most recent");
  const int slot = static_cast<int>(ticket % 2);
  if (slots_[slot].samples != samples)
    return invalidArgument("waiting for result " + std::to_string(ticket) + ": it holds " +
                           (slots_[slot].samples ? "samples" : "argmax ids"));
  return slot;
}

Result<cuda::ResultTokens> ResultSlots::latestTokens(int64_t max_src, const char* who) const {
  if (tickets_ == 0)
    return failedPrecondition(std::string(who) + ": tokens of an earlier step, but it has none");
  const Slot& s = slots_[(tickets_ - 1) % 2];
  if (max_src >= s.rows)
    return invalidArgument(strprintf("%s: token source row %lld lies outside the previous step's %lld rows",
                                     who, static_cast<long long>(max_src), static_cast<long long>(s.rows)));
  static_assert(offsetof(RowSample, token) == 0 && sizeof(RowSample) % 4 == 0);
  if (!s.samples) return cuda::ResultTokens{static_cast<const int32_t*>(s.argmax.get()), 1};
  return cuda::ResultTokens{static_cast<const int32_t*>(s.sample_out.get()),
                            static_cast<int64_t>(sizeof(RowSample) / sizeof(int32_t))};
}

}  // namespace llmrt
