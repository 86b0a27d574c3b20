// Capacity scheduler policies as small objects: whether a waiting (or paused)
// request may be admitted this step, and whether a running request that finds
// no free block pauses another one. See llmrt/scheduler_config.h.
#pragma once

#include <cstdint>
#include <memory>

#include "llmrt/scheduler_config.h"

namespace llmrt {

// What the scheduler knows when it considers admitting one request.
struct AdmissionQuery {
  bool nothing_in_flight_at_start = false;  // no request held KV when this step began
  int32_t reserved_blocks = 0;   // blocks the admitted requests may still need to complete
  int32_t needed_blocks = 0;     // blocks this request needs for its whole remaining length
  int32_t available_blocks = 0;  // free + reclaimable blocks now
  int32_t min_chunk_blocks = 0;  // blocks its smallest first chunk needs
  int32_t budget_left = 0;       // tokens left in this step (after generation and earlier admissions)
  int32_t min_chunk_tokens = 0;  // its smallest first chunk
};

class CapacityPolicy {
 public:
  virtual ~CapacityPolicy() = default;
  virtual bool mayAdmit(const AdmissionQuery& q) const = 0;
  // True: running out of blocks for a running request pauses the most recently started one.
  virtual bool pausesOnShortage() const = 0;
  // True: mayAdmit needs AdmissionQuery::reserved_blocks.
  virtual bool needsReservation() const = 0;
};

// GUARANTEED_NO_EVICT: the whole remaining length is guaranteed next to what is admitted.
class GuaranteedNoEvictPolicy final : public CapacityPolicy {
 public:
  bool mayAdmit(const AdmissionQuery& q) const override {
    return q.budget_left >= q.min_chunk_tokens && q.reserved_blocks + q.needed_blocks <= q.available_blocks;
  }
  bool pausesOnShortage() const override { return false; }
  bool needsReservation() const override { return true; }
};

// MAX_UTILIZATION: admit whatever has blocks for its next chunk; pause on shortage.
class MaxUtilizationPolicy final : public CapacityPolicy {
 public:
  bool mayAdmit(const AdmissionQuery& q) const override {
    return q.budget_left >= q.min_chunk_tokens && q.min_chunk_blocks <= q.available_blocks;
  }
  bool pausesOnShortage() const override { return true; }
  bool needsReservation() const override { return false; }
};

// STATIC_BATCH: a batch forms only when nothing is in flight, with the same
// guarantee as GUARANTEED_NO_EVICT; the token budget does not limit the batch
// (its prompts are then computed over as many steps as needed).
class StaticBatchPolicy final : public CapacityPolicy {
 public:
  bool mayAdmit(const AdmissionQuery& q) const override {
    return q.nothing_in_flight_at_start && q.reserved_blocks + q.needed_blocks <= q.available_blocks;
  }
  bool pausesOnShortage() const override { return false; }
  bool needsReservation() const override { return true; }
};

inline std::unique_ptr<CapacityPolicy> makeCapacityPolicy(CapacitySchedulerPolicy p) {
  switch (p) {
    case CapacitySchedulerPolicy::kMaxUtilization:
      return std::make_unique<MaxUtilizationPolicy>();
    case CapacitySchedulerPolicy::kStaticBatch:
      return std::make_unique<StaticBatchPolicy>();
    case CapacitySchedulerPolicy::kGuaranteedNoEvict:
      break;
  }
  return std::make_unique<GuaranteedNoEvictPolicy>();
}

}  // namespace llmrt
