// ForwardBatch: the packed, unpadded input of one model step. Several
// sequences' new tokens sit back to back; each sequence says how many of its
// tokens are already in the KV cache and which blocks hold them. Context
// chunks and decode tokens of different sequences mix freely.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace llmrt {

enum class LogitsMode : uint8_t {
  kNone,     // a context chunk that is not the last: no logits needed
  kLast,     // logits of the last new token only
  kAll,      // logits of every new token (context logits)
};

struct ForwardSeq {
  int64_t num_cached = 0;            // tokens of this sequence already in the cache
  int64_t num_new = 0;               // tokens computed in this step
  std::vector<int32_t> block_table;  // covers positions [0, num_cached + num_new)
  LogitsMode logits = LogitsMode::kLast;
};

struct ForwardBatch {
  std::vector<int32_t> token_ids;  // packed new tokens of all sequences, in sequence order
  std::vector<ForwardSeq> seqs;
  // Overlapped steps: packed rows whose id the previous step's result (argmax or sampled) holds
  // on the backend (their token_ids entry is a placeholder).
  std::vector<FedToken> fed;

  // Appends a sequence's new tokens.
  void add(const int32_t* ids, int64_t n, int64_t num_cached, std::vector<int32_t> block_table, LogitsMode mode) {
    token_ids.insert(token_ids.end(), ids, ids + n);
    seqs.push_back(ForwardSeq{num_cached, n, std::move(block_table), mode});
  }
  int64_t numTokens() const { return static_cast<int64_t>(token_ids.size()); }
};

}  // namespace llmrt
