// Where a step's results (argmaxRowsAsync ids or sampleRowsAsync rows) go, by ticket parity: two
// slots, each with the results on the device (what the next step's fed tokens and pending penalty
// tokens read), pinned copies on their way to the caller, an event recorded after the copy to the
// host, and the row count and kind it holds. A slot is reused two results later, after its caller
// waited for it, so a step can be in flight while the one before it is collected. Internal to
// src/backend/cuda.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_handles.h"
#include "backend/cuda/cuda_kernels.h"
#include "llmrt/status.h"

namespace llmrt {

class ResultSlots {
 public:
  struct Slot {
    PoolBuffer argmax;             // device: the ids, then (16-byte aligned) the split argmax's work
    PinnedBuffer argmax_host;      // the ids on their way to the caller
    PinnedBuffer sample_in_host;   // sampleRows: rows, penalty tokens and masked ids, packed
    PoolBuffer sample_out;         // device: one RowSample per row
    PinnedBuffer sample_out_host;  // the same on their way to the caller
    CudaEvent ready;               // recorded after the copy to the host
    int64_t rows = 0;
    bool samples = false;  // the slot holds RowSamples (else argmax ids)
  };

  // Creates the slots' events.
  Status init();
  // The slot of the next result: last used two results ago, which its caller has waited for, so
  // its pinned buffers are free (the other slot's may still be read by a step in flight).
  int next() const { return static_cast<int>(tickets_ % 2); }
  Slot& slot(int i) { return slots_[i]; }
  const Slot& slot(int i) const { return slots_[i]; }
  // Ends a result in `slot` (its copy to the host enqueued on `stream`): records the slot's event
  // and returns the ticket.
  Result<uint64_t> publish(int slot, int64_t rows, bool samples, cudaStream_t stream);
  // The slot of `ticket`: one of the two most recent results, of kind `samples`.
  Result<int> find(uint64_t ticket, bool samples) const;
  // The latest result's token ids on the device, refused when there is none or row `max_src` lies
  // outside it (`who` names the caller).
  Result<cuda::ResultTokens> latestTokens(int64_t max_src, const char* who) const;

 private:
  Slot slots_[2];
  uint64_t tickets_ = 0;  // results so far (the latest ticket is this - 1)
};

}  // namespace llmrt
