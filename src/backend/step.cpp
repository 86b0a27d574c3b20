#include "backend/step.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace llmrt {
namespace {

Status stepError(const std::string& what) { return invalidArgument("beginStep: " + what); }

}  // namespace

Status checkKvCacheScales(std::span<const float> scales) {
  if (scales.size() % 2 != 0)
    return invalidArgument("setKvCacheScales: " + std::to_string(scales.size()) +
                           " scales; expected a K and a V scale per layer (an even count)");
  for (size_t i = 0; i < scales.size(); ++i)
    if (!std::isfinite(scales[i]) || !(scales[i] > 0.0f))
      return invalidArgument("setKvCacheScales: layer " + std::to_string(i / 2) + (i % 2 ? " V" : " K") +
                             " scale " + std::to_string(scales[i]) + "; expected a positive finite number");
  return Status::ok();
}

Status copyStepInputs(const StepInputs& in, const KvPoolGeometry& g, HostStep& out) {
  const size_t T = in.token_ids.size();
  if (g.tokens_per_block <= 0) return failedPrecondition("beginStep: KV cache pools are not allocated");
  if (in.positions.size() != T || in.slots.size() != T)
    return stepError("token_ids, positions and slots have " + std::to_string(T) + ", " +
                     std::to_string(in.positions.size()) + " and " + std::to_string(in.slots.size()) +
                     " entries; expected the same count");
  if (in.attention_window < 0)
    return stepError("attention_window " + std::to_string(in.attention_window) + "; expected >= 0 (0 = full)");
  if (in.rotary_dim < 0 || in.rotary_dim % 2 != 0 || in.rotary_dim > g.head_dim)
    return stepError("rotary_dim " + std::to_string(in.rotary_dim) + " must be even and in [0, " +
                     std::to_string(g.head_dim) + "]");
  const int64_t half = in.rotary_dim / 2;
  if (half > 0 && (in.rope_inv_freq.empty() || in.rope_inv_freq.size() % static_cast<size_t>(half) != 0))
    return stepError("rope_inv_freq has " + std::to_string(in.rope_inv_freq.size()) +
                     " values; expected a positive multiple of rotary_dim / 2 = " + std::to_string(half));
  const int64_t num_tables = half > 0 ? static_cast<int64_t>(in.rope_inv_freq.size()) / half : 0;
  const int64_t tpb = g.tokens_per_block;
  const int64_t num_slots = g.num_blocks * tpb;

  out.token_ids.assign(in.token_ids.begin(), in.token_ids.end());
  out.positions.assign(in.positions.begin(), in.positions.end());
  out.slots.assign(in.slots.begin(), in.slots.end());
  out.logit_rows.assign(in.logit_rows.begin(), in.logit_rows.end());
  out.inv_freq.assign(in.rope_inv_freq.begin(), in.rope_inv_freq.end());
  out.rotary_dim = in.rotary_dim;
  out.num_tables = num_tables;
  out.rope_scaling = in.rope_attention_scaling;
  out.row_rope_table.assign(T, 0);
  out.seqs.clear();
  out.tables.clear();
  out.max_kv_len = 0;
  out.max_q_len = 0;
  out.attention_window = in.attention_window;
  out.has_released = false;

  for (size_t i = 0; i < T; ++i)
    if (out.slots[i] >= num_slots)
      return stepError("row " + std::to_string(i) + " has slot " + std::to_string(out.slots[i]) +
                       " outside the pool of " + std::to_string(num_slots) + " token slots");
  int64_t next_row = 0;
  for (size_t s = 0; s < in.seqs.size(); ++s) {
    const StepSeq& q = in.seqs[s];
    const std::string name = "sequence " + std::to_string(s);
    if (q.q_start != next_row)
      return stepError(name + " starts at row " + std::to_string(q.q_start) + "; expected " +
                       std::to_string(next_row) + " (sequences cover the rows in order)");
    if (q.q_len < 0 || q.kv_len < q.q_len || next_row + q.q_len > static_cast<int64_t>(T))
      return stepError(name + " has q_len " + std::to_string(q.q_len) + " and kv_len " + std::to_string(q.kv_len) +
                       "; expected 0 <= q_len <= kv_len and rows inside the step's " + std::to_string(T));
    const int64_t blocks = (q.kv_len + tpb - 1) / tpb;
    if (static_cast<int64_t>(q.block_table.size()) < blocks)
      return stepError(name + " has " + std::to_string(q.block_table.size()) + " blocks for " +
                       std::to_string(q.kv_len) + " tokens");
    if (q.rope_table < 0 || (num_tables > 0 && q.rope_table >= num_tables))
      return stepError(name + " uses RoPE table " + std::to_string(q.rope_table) + " of " +
                       std::to_string(num_tables));
    HostStep::Seq hs{q.q_start, q.q_len, q.kv_len, static_cast<int64_t>(out.tables.size()), blocks, q.rope_table};
    // The lowest key any row may read: the window of the first row (later rows see less).
    // Blocks wholly below it may have been released by the KV cache manager.
    const int64_t read_lo =
        in.attention_window > 0 ? std::max<int64_t>(0, q.kv_len - q.q_len - in.attention_window + 1) : 0;
    for (int64_t b = 0; b < blocks; ++b) {
      const int32_t id = q.block_table[static_cast<size_t>(b)];
      if (id == kNoKvBlock && (b + 1) * tpb <= read_lo) {
        hs.min_key = (b + 1) * tpb;
        out.has_released = true;
      } else if (id < 0 || id >= g.num_blocks) {
        if (id == kNoKvBlock)
          return stepError(name + " has a released block (kNoKvBlock) at block " + std::to_string(b) +
                           " (positions " + std::to_string(b * tpb) + ".." + std::to_string((b + 1) * tpb - 1) +
                           ") that its rows read: they see keys from position " + std::to_string(read_lo) +
                           " (attention_window " + std::to_string(in.attention_window) + ", 0 = full)");
        return stepError(name + " has block id " + std::to_string(id) + " outside the pool of " +
                         std::to_string(g.num_blocks) + " blocks");
      }
      out.tables.push_back(id);
    }
    for (int64_t r = q.q_start; r < q.q_start + q.q_len; ++r) out.row_rope_table[static_cast<size_t>(r)] = q.rope_table;
    out.seqs.push_back(hs);
    out.max_kv_len = std::max(out.max_kv_len, q.kv_len);
    out.max_q_len = std::max(out.max_q_len, q.q_len);
    next_row += q.q_len;
  }
  if (next_row != static_cast<int64_t>(T))
    return stepError("the sequences cover " + std::to_string(next_row) + " of the step's " + std::to_string(T) +
                     " rows");
  for (int64_t r : out.logit_rows)
    if (r < 0 || r >= static_cast<int64_t>(T))
      return stepError("logits row " + std::to_string(r) + " outside the step's " + std::to_string(T) + " rows");
  out.fed.assign(in.fed_tokens.begin(), in.fed_tokens.end());
  for (const FedToken& f : out.fed)
    if (f.row < 0 || f.row >= static_cast<int64_t>(T) || f.src < 0)
      return stepError("fed token (row " + std::to_string(f.row) + ", source " + std::to_string(f.src) +
                       ") outside the step's " + std::to_string(T) + " rows or with a negative source");
  return Status::ok();
}

}  // namespace llmrt
