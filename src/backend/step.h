// HostStep: a backend's own copy of one step's inputs (StepInputs), checked
// against the KV pool geometry and flattened (block tables back to back, the
// RoPE table of every row). Both backends keep one; the CUDA backend packs it
// into its single per-step upload.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace llmrt {

struct HostStep {
  struct Seq {
    int64_t q_start = 0;
    int64_t q_len = 0;
    int64_t kv_len = 0;
    int64_t table_offset = 0;  // into `tables`
    int64_t table_len = 0;     // blocks covering [0, kv_len)
    int32_t rope_table = 0;
    // Keys below this position sit in released blocks (kNoKvBlock entries: no row of the step
    // reads them); 0 when the table holds none.
    int64_t min_key = 0;
  };
  std::vector<int32_t> token_ids;       // [T]
  std::vector<int32_t> positions;       // [T]
  std::vector<int32_t> row_rope_table;  // [T] RoPE table of each row's sequence
  std::vector<int64_t> slots;           // [T] (< 0: not written)
  std::vector<int64_t> logit_rows;
  std::vector<FedToken> fed;            // rows whose id comes from the previous step's result
  std::vector<Seq> seqs;
  std::vector<int32_t> tables;          // every sequence's block table, back to back
  std::vector<float> inv_freq;          // [num_tables][rotary_dim / 2]
  int64_t rotary_dim = 0;
  int64_t num_tables = 0;
  float rope_scaling = 1.0f;
  int64_t max_kv_len = 0;
  int64_t max_q_len = 0;
  int64_t attention_window = 0;  // StepInputs::attention_window
  bool has_released = false;     // some table holds kNoKvBlock

  int64_t numTokens() const { return static_cast<int64_t>(token_ids.size()); }
  // Whether an attention op with this window (0 = full) reads only blocks the tables hold:
  // always without released blocks; else a window in [1, attention_window].
  bool windowCovered(int64_t window) const {
    return !has_released || (window > 0 && attention_window > 0 && window <= attention_window);
  }
  const int32_t* table(const Seq& s) const { return tables.data() + s.table_offset; }
};

// Backend::setKvCacheScales's input rule: pairs (K, V) of positive finite scales; the scale of
// (layer, kv) from such a list (1 where the list is shorter).
Status checkKvCacheScales(std::span<const float> scales);
inline float kvCacheScale(std::span<const float> scales, int64_t layer, int kv) {
  const size_t i = static_cast<size_t>(layer * 2 + kv);
  return i < scales.size() ? scales[i] : 1.0f;
}

// Checks `in` (row counts agree, sequences cover the rows in order, block tables
// cover kv_len with ids inside the pool — or kNoKvBlock for blocks wholly below the
// window of the sequence's first row, given in.attention_window —, slots inside the
// pool, logits rows and RoPE tables in range) and copies it into `out`, reusing out's memory.
Status copyStepInputs(const StepInputs& in, const KvPoolGeometry& geometry, HostStep& out);

}  // namespace llmrt
