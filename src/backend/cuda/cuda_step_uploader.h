// The per-step upload (Backend::beginStep): a step's metadata — token ids, positions, per-row
// RoPE tables, slots, sequences, logits rows, the attention work lists, the RoPE frequency tables,
// the block tables and the fed rows — is packed into one pinned host buffer and copied with one
// asynchronous copy into one device buffer that the ops read (no op uploads anything). An event
// says the copy has read the pinned buffer, so the next step waits for it before packing. The
// sizes fix the offsets and the block tables (whose total length varies from step to step) come
// last, so a hash of the sizes (layout()) covers every kernel argument of a recorded graph.
// Internal to src/backend/cuda.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_handles.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/step.h"
#include "llmrt/status.h"

namespace llmrt {

// Device pointers into the step's uploaded metadata.
struct DeviceStep {
  const int32_t* token_ids = nullptr;
  const int32_t* positions = nullptr;
  const int32_t* row_table = nullptr;
  const int64_t* slots = nullptr;
  const cuda::AttnSeqDev* seqs = nullptr;
  const int64_t* logit_rows = nullptr;
  const int2* items = nullptr;  // rows for the decode attention kernel
  int32_t num_items = 0;
  const int2* tiles = nullptr;  // query tiles for the context attention kernel
  int32_t num_tiles = 0;
  const float* inv_freq = nullptr;
  const int32_t* tables = nullptr;
  int32_t splits = 1;  // key splits of the decode attention kernel
};

class StepUploader {
 public:
  // Creates the event.
  Status init();

  // beginStep, in this order: plan(); the backend grows deviceBuffer() to deviceBytes() (its
  // graphs read it); upload(); finish().
  //
  // Checks and copies `inputs` (copyStepInputs), splits the attention rows into the decode
  // kernel's items and the context kernel's tiles (`use_flash`: tuning flash, where the cache and
  // heads suit that kernel), picks the decode kernel's key splits (for about `split_target` CTAs)
  // and lays the upload out. Nothing is enqueued.
  Status plan(const StepInputs& inputs, const KvPoolGeometry& geometry, bool use_flash, int64_t split_target,
              int64_t split_keys);
  // The highest result row the step's fed rows read (-1 when none).
  int32_t maxFedSource() const;
  PoolBuffer& deviceBuffer() { return meta_; }
  size_t deviceBytes() const;
  // Packs the step into the pinned buffer (grown after the work in flight; once the previous
  // upload has read it) and enqueues its copy into deviceBuffer() on `stream`, then the kernel
  // that copies the fed rows' tokens from `fed_src`.
  Status upload(const cuda::ResultTokens& fed_src, cudaStream_t stream);
  // Records the upload's event on `stream` and points dev() into the device buffer.
  Status finish(cudaStream_t stream);

  const HostStep& host() const { return step_; }
  const DeviceStep& dev() const { return dev_; }
  // Whether the step's every sequence has at most one new row.
  bool singleTokenRows() const { return single_token_rows_; }
  // Hash of what fixes the ops' arguments for a step shape.
  uint64_t layout() const { return layout_; }

 private:
  // Offsets of the upload's sections, each 16-byte aligned.
  struct Offsets {
    size_t ids = 0, pos = 0, row_table = 0, slots = 0, seqs = 0, logit = 0, items = 0, tiles = 0, inv = 0,
           tables = 0, fed = 0;
    size_t bytes = 0;
  };

  HostStep step_;
  std::vector<int2> items_, tiles_;
  int32_t splits_ = 1;
  bool single_token_rows_ = false;
  Offsets at_;
  PoolBuffer meta_;
  PinnedBuffer pinned_meta_;  // the packed step on its way to meta_
  CudaEvent meta_copied_;     // the last upload has read pinned_meta_
  DeviceStep dev_;
  uint64_t layout_ = 0;
};

}  // namespace llmrt
