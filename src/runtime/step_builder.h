// StepBuilder: the per-step bookkeeping every architecture shares, out of the model. It turns
// a ForwardBatch (the runner's packed, unpadded rows of the planned sequences) into the
// backend's StepInputs: each row's position and KV cache slot, the sequences' row ranges and
// block tables, the logits rows, the RoPE tables (one per sequence where the scaling depends
// on the length: dynamic NTK) and, for decode steps a backend records (CUDA graphs), padding
// to a bucket size. The model then only composes ops over the rows (DecoderModel::forward).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/decoder_model.h"
#include "runtime/forward_batch.h"

namespace llmrt {

class StepBuilder {
 public:
  // Decode steps (one new token per sequence, last logits only) of up to this many sequences
  // are padded to a bucket size and recorded per bucket on backends that can record.
  static constexpr int64_t kMaxRecordedBatch = 512;
  // The padded size of a decode step of `n` sequences (n <= kMaxRecordedBatch).
  static int64_t decodeBucket(int64_t n);

  // Lays out `batch` for `model` on `backend` (its pools' tokens_per_block, whether it records).
  // The returned StepInputs view this builder's buffers: valid until the next build().
  // Errors: an empty batch, no KV pools, a block table too short for its sequence.
  Result<StepInputs> build(const ForwardBatch& batch, const DecoderModel& model, const Backend& backend,
                           StepLayout* layout);

 private:
  std::vector<int32_t> token_ids_, positions_;
  std::vector<int64_t> slots_, logit_rows_;
  std::vector<StepSeq> seqs_;
  std::vector<float> inv_freq_;
};

}  // namespace llmrt
