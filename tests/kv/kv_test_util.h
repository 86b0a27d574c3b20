// Test helpers for the KV cache manager: a simulated KV memory that applies
// block copies, and a simulated runner that checks, before every step, that
// every position a sequence attends to holds exactly the KV that sequence's
// tokens would have produced (token, position and whole-prefix identity), and
// writes only into blocks nobody shares. Wrong reuse, a lost copy or an
// overwritten shared block all show up as a mismatch.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/logging.h"
#include "kv/kv_backend.h"
#include "kv/kv_cache_manager.h"

namespace llmrt::kvtest {

struct Cell {
  int32_t token = -1;
  int32_t pos = -1;
  uint64_t ctx = 0;  // identity of the whole prefix up to and including this token
  bool operator==(const Cell&) const = default;
};

inline uint64_t mixHash(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
  h *= 0xBF58476D1CE4E5B9ULL;
  return h ^ (h >> 31);
}

// Per-position identities of a token sequence under given key extras.
inline std::vector<uint64_t> prefixIdentities(const std::vector<TokenId>& tokens,
                                              const SequenceKeyExtras& extras) {
  uint64_t h = 0x1234;
  if (extras.lora_id) h = mixHash(h, *extras.lora_id + 1);
  if (extras.cache_salt)
    for (char c : *extras.cache_salt) h = mixHash(h, static_cast<uint8_t>(c) + 7);
  std::vector<uint64_t> out(tokens.size());
  for (size_t p = 0; p < tokens.size(); ++p) {
    h = mixHash(h, static_cast<uint32_t>(tokens[p]));
    for (const auto& mm : extras.multimodal)
      if (static_cast<int32_t>(p) >= mm.start && static_cast<int32_t>(p) < mm.start + mm.length)
        h = mixHash(h, mm.hash[0] ^ mm.hash[3]);
    out[p] = h;
  }
  return out;
}

class SimKvMemory final : public KvBlockCopier {
 public:
  SimKvMemory(int32_t tokens_per_block, int32_t num_primary, int32_t num_secondary) : tpb_(tokens_per_block) {
    mem_[0].assign(static_cast<size_t>(num_primary) * tpb_, Cell{});
    mem_[1].assign(static_cast<size_t>(num_secondary) * tpb_, Cell{});
  }
  Status copyBlocks(std::span<const KvBlockCopy> copies) override {
    for (const KvBlockCopy& c : copies) {
      const int32_t n = c.numTokens(tpb_);
      for (int32_t t = 0; t < n; ++t) cell(c.dst_pool, c.dst_block, t) = cell(c.src_pool, c.src_block, t);
      ++num_copies_;
    }
    return Status::ok();
  }
  Cell& cell(KvPool pool, BlockId block, int32_t offset) {
    return mem_[static_cast<int>(pool)][static_cast<size_t>(block) * tpb_ + offset];
  }
  uint64_t numCopies() const { return num_copies_; }

 private:
  int32_t tpb_;
  std::vector<Cell> mem_[2];
  uint64_t num_copies_ = 0;
};

// A sequence as the test drives it.
struct SimSequence {
  SequenceId id = 0;
  std::vector<TokenId> tokens;  // prompt + appended
  SequenceKeyExtras extras;
  std::vector<uint64_t> ids;  // prefixIdentities(tokens, extras), grown as tokens are appended
  void refreshIds() { ids = prefixIdentities(tokens, extras); }
};

// Runs one simulated step for `seq`: flushes pending copies, checks every
// position the step's tokens attend to, writes the new positions' KV and marks
// them computed. Returns a non-empty string describing the first problem.
inline std::string runStep(KvCacheManager& m, SimKvMemory& mem, SimSequence& seq,
                           std::optional<int32_t> window = std::nullopt) {
  Status st = m.flushCopies();
  if (!st.isOk()) return st.toString();
  const int32_t T = m.tokensPerBlock();
  const int32_t c = m.numComputedTokens(seq.id);
  const int32_t a = m.numAllocatedTokens(seq.id);
  if (seq.ids.size() != seq.tokens.size()) seq.refreshIds();
  auto table = m.blockTable(seq.id);
  const int32_t first = window ? std::max(0, c - *window + 1) : 0;
  for (int32_t p = first; p < c; ++p) {
    const BlockId b = table[p / T];
    if (b == kNoBlock)
      return strprintf("seq %llu: position %d (needed) has no block", (unsigned long long)seq.id, p);
    const Cell got = mem.cell(KvPool::kPrimary, b, p % T);
    const Cell want{seq.tokens[p], p, seq.ids[p]};
    if (!(got == want))
      return strprintf("seq %llu: position %d in block %d holds token %d pos %d (want token %d pos %d)%s",
                       (unsigned long long)seq.id, p, b, got.token, got.pos, want.token, want.pos,
                       got.ctx != want.ctx ? " with a different prefix" : "");
  }
  for (int32_t p = c; p < a; ++p) {
    const BlockId b = table[p / T];
    if (b == kNoBlock)
      return strprintf("seq %llu: position %d to write has no block", (unsigned long long)seq.id, p);
    const KvBlockInfo info = m.blockInfo(KvPool::kPrimary, b);
    if (info.in_tree || info.ref_count != 1)
      return strprintf("seq %llu: writes position %d into shared/cached block %d (ref %d, in tree %d)",
                       (unsigned long long)seq.id, p, b, info.ref_count, info.in_tree);
    mem.cell(KvPool::kPrimary, b, p % T) = Cell{seq.tokens[p], p, seq.ids[p]};
  }
  st = m.markComputed(seq.id, a - c);
  if (!st.isOk()) return st.toString();
  return {};
}

inline std::vector<TokenId> iota(int32_t n, TokenId start = 1) {
  std::vector<TokenId> v(n);
  for (int32_t i = 0; i < n; ++i) v[i] = start + i;
  return v;
}

inline std::vector<TokenId> concat(std::vector<TokenId> a, const std::vector<TokenId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace llmrt::kvtest
