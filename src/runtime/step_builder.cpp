#include "runtime/step_builder.h"

#include "model/rope.h"

namespace llmrt {

int64_t StepBuilder::decodeBucket(int64_t n) {
  static constexpr int64_t kBuckets[] = {1,  2,  3,   4,   6,   8,   12,  16,  24,  32,  48,  64,
                                         96, 128, 160, 192, 224, 256, 320, 384, 448, 512};
  for (int64_t b : kBuckets)
    if (n <= b) return b;
  return n;
}

Result<StepInputs> StepBuilder::build(const ForwardBatch& batch, const DecoderModel& model, const Backend& backend,
                                      StepLayout* layout) {
  const ModelConfig& c = model.config();
  const RopeTable& rope = model.ropeTable();
  const int64_t T = batch.numTokens();
  const int64_t tpb = backend.kvGeometry().tokens_per_block;
  if (T == 0) return invalidArgument("forward: empty batch");
  if (tpb <= 0) return failedPrecondition("forward: KV cache pools are not allocated");

  // A decode step (one token and its logits per sequence) is padded to its bucket and recorded
  // where the backend can: the padding rows attend to one key of block 0, write nothing and are
  // dropped.
  bool decode = backend.canRecord() && T <= kMaxRecordedBatch;
  for (const ForwardSeq& fs : batch.seqs) decode = decode && fs.num_new == 1 && fs.logits == LogitsMode::kLast;
  const int64_t padded = decode ? decodeBucket(T) : T;

  // Positions, cache slots, sequences and logits rows of the packed tokens.
  token_ids_.assign(batch.token_ids.begin(), batch.token_ids.end());
  positions_.resize(static_cast<size_t>(T));
  slots_.resize(static_cast<size_t>(T));
  seqs_.clear();
  logit_rows_.clear();
  // RoPE: the model's table, or (dynamic NTK) one table per sequence, table s for sequence s.
  const bool per_seq_rope = ropeDependsOnLength(c);
  if (per_seq_rope)
    inv_freq_.clear();
  else
    inv_freq_ = rope.inv_freq;
  int64_t row = 0;
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    const ForwardSeq& fs = batch.seqs[s];
    const int64_t kv_len = fs.num_cached + fs.num_new;
    if (static_cast<int64_t>(fs.block_table.size()) * tpb < kv_len)
      return invalidArgument("forward: sequence " + std::to_string(s) + " has " + std::to_string(fs.block_table.size()) +
                             " blocks for " + std::to_string(kv_len) + " tokens");
    if (per_seq_rope) {
      const RopeTable rt = computeRopeTable(c, kv_len);
      inv_freq_.insert(inv_freq_.end(), rt.inv_freq.begin(), rt.inv_freq.end());
    }
    seqs_.push_back(StepSeq{row, fs.num_new, kv_len, fs.block_table, per_seq_rope ? static_cast<int32_t>(s) : 0});
    for (int64_t i = 0; i < fs.num_new; ++i) {
      const int64_t pos = fs.num_cached + i;
      positions_[static_cast<size_t>(row + i)] = static_cast<int32_t>(pos);
      slots_[static_cast<size_t>(row + i)] =
          static_cast<int64_t>(fs.block_table[static_cast<size_t>(pos / tpb)]) * tpb + pos % tpb;
      if (fs.logits == LogitsMode::kAll || (fs.logits == LogitsMode::kLast && i == fs.num_new - 1))
        logit_rows_.push_back(row + i);
    }
    row += fs.num_new;
  }
  static const int32_t kPadTable[1] = {0};
  for (int64_t r = T; r < padded; ++r) {
    token_ids_.push_back(0);
    positions_.push_back(0);
    slots_.push_back(-1);
    if (per_seq_rope) inv_freq_.insert(inv_freq_.end(), rope.inv_freq.begin(), rope.inv_freq.end());
    seqs_.push_back(StepSeq{r, 1, 1, std::span<const int32_t>(kPadTable, 1),
                            per_seq_rope ? static_cast<int32_t>(seqs_.size()) : 0});
    logit_rows_.push_back(r);
  }
  const int64_t R = static_cast<int64_t>(logit_rows_.size());
  *layout = StepLayout{padded, R, R - (padded - T), decode};

  StepInputs in;
  in.token_ids = token_ids_;
  in.positions = positions_;
  in.slots = slots_;
  in.seqs = seqs_;
  in.logit_rows = logit_rows_;
  in.fed_tokens = batch.fed;
  in.rope_inv_freq = inv_freq_;
  in.rotary_dim = rope.rotary_dim;
  in.rope_attention_scaling = rope.attention_scaling;
  in.attention_window = model.stepAttentionWindow();
  return in;
}

}  // namespace llmrt
