// DeviceSamplingBatch: the bridge between the sampling layer's per-sequence
// controls (SamplingParams + SequenceSamplingState) and Backend::sampleRows,
// which samples every logits row where the logits are. It resolves each
// sequence's penalties (distinct prompt / output tokens with counts) and
// min_tokens mask into the flat lists the backend reads, and turns the
// backend's RowSample back into the SampleResult (or error) the host Sampler
// would have produced.
#pragma once

#include <span>
#include <vector>

#include "backend/backend.h"
#include "llmrt/sampling_params.h"
#include "sampling/sampler.h"
#include "sampling/sequence_state.h"

namespace llmrt {

class DeviceSamplingBatch {
 public:
  void clear();
  // Appends the row of one sequence (its logits are the next row of the step's logits).
  // pending_src >= 0: the state counts one generated token it has not recorded yet
  // (acceptPending), still on the backend as row pending_src of the previous step's result;
  // the penalties count it there (RowSampling::pending_src).
  void add(const SamplingParams& params, const SequenceSamplingState& state, std::span<const int32_t> eos_ids,
           int32_t pending_src = -1);

  std::span<const RowSampling> rows() const { return rows_; }
  std::span<const PenaltyToken> penalties() const { return penalties_; }
  std::span<const int32_t> masked() const { return masked_; }
  std::span<RowSample> results() { return results_; }

  // Samples every row on `backend` (logits [rows, vocab], changed in place).
  Status run(Backend& backend, const TensorView& logits);
  // The same in two halves (overlapped steps): start returns the backend's ticket, wait
  // collects the rows for result().
  Result<uint64_t> start(Backend& backend, const TensorView& logits);
  Status wait(Backend& backend, uint64_t ticket);
  // Row i's outcome as the host Sampler reports it.
  Result<SampleResult> result(size_t i, int64_t vocab) const;

 private:
  std::vector<RowSampling> rows_;
  std::vector<PenaltyToken> penalties_;
  std::vector<int32_t> masked_;
  std::vector<RowSample> results_;
};

}  // namespace llmrt
