// Introspection and the full invariant audit of KvCacheManager (tests, debugging).
#include <vector>

#include "core/logging.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_cache_manager_internal.h"

namespace llmrt {

using detail::kNil;

KvBlockInfo KvCacheManager::blockInfo(KvPool pool, BlockId block) const {
  KvBlockInfo info;
  info.pool = pool;
  info.block = block;
  if (block < 0 || block >= pool_.numBlocks(pool)) {
    info.ref_count = -1;
    return info;
  }
  const int32_t b = pool_.ownerOf(pool, block);
  const detail::PoolBlock& x = pool_.at(b);
  info.in_tree = x.in_tree;
  info.evictable = x.heap >= 0;
  info.ref_count = x.ref_count;
  info.priority = x.priority;
  info.last_used = x.last_used;
  if (x.in_tree) {
    info.hash = x.hash;
    if (x.parent != pool_.root()) info.parent_hash = pool_.at(x.parent).hash;
    info.num_children = x.num_children;
    info.num_primary_children = x.num_primary_children;
    auto toks = pool_.keyTokens(b);
    info.tokens.assign(toks.begin(), toks.end());
  }
  return info;
}

Status KvCacheManager::checkInvariants() const {
  LLMRT_RETURN_IF_ERROR(pool_.checkInvariants());
  const int32_t n = pool_.root();
  std::vector<int32_t> holders(n, 0);
  for (const auto& entry : sequences_) {
    const SequenceId id = entry.first;  // (a structured binding cannot be captured under clang 14)
    const Sequence& s = *entry.second;
    auto bad = [&](const std::string& what) {
      return internalError(
          strprintf("KV cache sequence %llu: %s", static_cast<unsigned long long>(id), what.c_str()));
    };
    if (!(0 <= s.num_computed && s.num_computed <= s.num_allocated &&
          s.num_allocated <= static_cast<int32_t>(s.tokens.size())))
      return bad(strprintf("computed %d / allocated %d / tokens %zu out of order", s.num_computed,
                           s.num_allocated, s.tokens.size()));
    const int64_t want_blocks = (static_cast<int64_t>(s.num_allocated) + tpb_ - 1) / tpb_;
    if (static_cast<int64_t>(s.blocks.size()) != want_blocks || s.table.size() != s.blocks.size())
      return bad(strprintf("%zu blocks / %zu table entries for %d allocated tokens", s.blocks.size(),
                           s.table.size(), s.num_allocated));
    for (size_t i = 0; i < s.blocks.size(); ++i) {
      const int32_t b = s.blocks[i];
      if (static_cast<int32_t>(i) < s.first_held) {
        if (b != kNil || s.table[i] != kNoBlock) return bad(strprintf("released block %zu still listed", i));
        continue;
      }
      if (b < 0 || b >= n) return bad(strprintf("block %zu has id %d", i, b));
      const detail::PoolBlock& x = pool_.at(b);
      if (x.pool != KvPool::kPrimary || x.slot != s.table[i])
        return bad(strprintf("block %zu: table says %d, block sits at %s %d", i, s.table[i],
                             std::string(kvPoolName(x.pool)).c_str(), x.slot));
      ++holders[b];
      // A held tree block hangs under the block this sequence holds just before
      // it (or the root), so it never locks a block without a holder. Only the
      // first block kept by a sliding window may hang under a released one.
      if (x.in_tree) {
        const int32_t want_parent = i == 0 ? pool_.root()
                                    : static_cast<int32_t>(i) > s.first_held ? s.blocks[i - 1]
                                                                             : kNil;
        if (want_parent != kNil && x.parent != want_parent)
          return bad(strprintf("tree block %zu (object %d) hangs under object %d, not under the sequence's "
                               "block %zu (object %d)",
                               i, b, x.parent, i - (i > 0 ? 1 : 0), want_parent));
      }
      if (static_cast<int32_t>(i) < s.num_stored && !x.in_tree)
        return bad(strprintf("block %zu is below num_stored %d but not in the tree", i, s.num_stored));
    }
    if (s.storing && s.num_stored > 0 &&
        (s.num_stored > static_cast<int32_t>(s.blocks.size()) || s.store_parent != s.blocks[s.num_stored - 1]))
      return bad(strprintf("store_parent %d is not the sequence's block %d", s.store_parent, s.num_stored - 1));
    if (s.storing && s.num_stored == 0 && s.store_parent != pool_.root())
      return bad(strprintf("store_parent %d is not the root before the first stored block", s.store_parent));
  }
  for (int32_t b = 0; b < n; ++b) {
    const detail::PoolBlock& x = pool_.at(b);
    if (x.ref_count != holders[b])
      return internalError(strprintf("KV cache block object %d (%s %d): ref_count %d but %d sequence holds",
                                     b, std::string(kvPoolName(x.pool)).c_str(), x.slot, x.ref_count,
                                     holders[b]));
    if (!x.in_tree && holders[b] > 1)
      return internalError(strprintf("KV cache private block %d held by %d sequences", b, holders[b]));
  }
  return Status::ok();
}

}  // namespace llmrt
