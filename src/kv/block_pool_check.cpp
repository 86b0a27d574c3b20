// BlockPool::checkInvariants: an O(n) audit used by tests (and available to
// debug builds of the engine). Recomputes every derived quantity from scratch.
#include <string>
#include <vector>

#include "core/logging.h"
#include "kv/block_pool.h"

namespace llmrt::detail {
namespace {
Status broken(const std::string& what) { return internalError("KV block pool invariant broken: " + what); }
}  // namespace

Status BlockPool::checkInvariants() const {
  const int32_t n = root_;
  // Placement: owner_ and (pool, slot) are inverse bijections.
  for (int p = 0; p < 2; ++p) {
    for (int32_t s = 0; s < num_blocks_[p]; ++s) {
      const int32_t o = owner_[p][s];
      if (o < 0 || o >= n) return broken(strprintf("pool %d slot %d has owner %d", p, s, o));
      if (idx(blocks_[o].pool) != p || blocks_[o].slot != s)
        return broken(strprintf("pool %d slot %d owner %d sits at pool %d slot %d", p, s, o,
                                idx(blocks_[o].pool), blocks_[o].slot));
    }
  }
  // Empty stacks: each empty block exactly once, in its own pool's stack.
  std::vector<uint8_t> in_stack(n, 0);
  for (int p = 0; p < 2; ++p) {
    for (int32_t b : empty_[p]) {
      const PoolBlock& x = blocks_[b];
      if (in_stack[b]++) return broken(strprintf("block %d twice in free stacks", b));
      if (idx(x.pool) != p || x.in_tree || x.ref_count != 0)
        return broken(
            strprintf("free block %d: pool %d in_tree %d ref %d", b, idx(x.pool), x.in_tree, x.ref_count));
    }
  }
  // Tree walk from the root: structure, counts, locks (children before parents).
  std::vector<int32_t> order;
  order.reserve(n + 1);
  order.push_back(root_);
  std::vector<uint8_t> visited(n + 1, 0);
  visited[root_] = 1;
  for (size_t i = 0; i < order.size(); ++i) {
    const int32_t q = order[i];
    int32_t prev = kNil;
    int32_t nch = 0, npch = 0;
    for (int32_t c = blocks_[q].first_child; c != kNil; c = blocks_[c].next_sibling) {
      if (c < 0 || c >= n) return broken(strprintf("block %d has child id %d", q, c));
      if (visited[c]++) return broken(strprintf("block %d reached twice in the tree", c));
      const PoolBlock& x = blocks_[c];
      if (!x.in_tree || x.parent != q || x.prev_sibling != prev)
        return broken(strprintf("child %d of %d: in_tree %d parent %d prev %d (want %d)", c, q, x.in_tree,
                                x.parent, x.prev_sibling, prev));
      if (x.pool == KvPool::kPrimary && q != root_ && blocks_[q].pool != KvPool::kPrimary)
        return broken(strprintf("primary block %d under secondary block %d", c, q));
      ++nch;
      if (x.pool == KvPool::kPrimary) ++npch;
      prev = c;
      order.push_back(c);
    }
    if (nch != blocks_[q].num_children || npch != blocks_[q].num_primary_children)
      return broken(strprintf("block %d counts %d/%d children, found %d/%d", q, blocks_[q].num_children,
                              blocks_[q].num_primary_children, nch, npch));
  }
  std::vector<uint8_t> locked(n + 1, 0);
  std::vector<int32_t> locked_children(n + 1, 0);
  int32_t reclaimable = 0;
  for (size_t i = order.size(); i-- > 1;) {
    const int32_t b = order[i];
    const PoolBlock& x = blocks_[b];
    const bool primary = x.pool == KvPool::kPrimary;
    locked[b] = primary && (x.ref_count > 0 || locked_children[b] > 0);
    if (locked[b] != x.locked || locked_children[b] != x.num_locked_children)
      return broken(strprintf("block %d lock %d/%d children, expected %d/%d", b, x.locked,
                              x.num_locked_children, locked[b], locked_children[b]));
    if (locked[b] && x.parent != root_) ++locked_children[x.parent];
    const bool recl = primary && !locked[b];
    if (recl != x.reclaimable) return broken(strprintf("block %d reclaimable flag %d", b, x.reclaimable));
    reclaimable += recl;
  }
  if (reclaimable != reclaimable_)
    return broken(strprintf("reclaimable counter %d, recount %d", reclaimable_, reclaimable));

  // Per block: state classification, keys, index, candidacy.
  int32_t free_count[2] = {0, 0}, cached[2] = {0, 0}, used[2] = {0, 0};
  size_t tree_nodes = 0;
  std::vector<uint64_t> scratch;
  for (int32_t b = 0; b < n; ++b) {
    const PoolBlock& x = blocks_[b];
    const int p = idx(x.pool);
    if (x.ref_count < 0) return broken(strprintf("block %d ref %d", b, x.ref_count));
    if (!x.in_tree) {
      if (visited[b]) return broken(strprintf("block %d reachable but not in tree", b));
      if (x.ref_count == 0) {
        if (!in_stack[b]) return broken(strprintf("block %d is free but in no free stack", b));
        ++free_count[p];
      } else {
        if (in_stack[b]) return broken(strprintf("held block %d in a free stack", b));
        if (x.pool != KvPool::kPrimary) return broken(strprintf("private block %d in the secondary pool", b));
        ++used[p];
      }
      if (x.heap != -1 || heap_pos_[b] != -1)
        return broken(strprintf("non-tree block %d in an eviction heap", b));
      if (x.locked || x.reclaimable)
        return broken(strprintf("non-tree block %d flagged locked/reclaimable", b));
      continue;
    }
    ++tree_nodes;
    if (!visited[b]) return broken(strprintf("tree block %d unreachable from the root", b));
    if (in_stack[b]) return broken(strprintf("tree block %d in a free stack", b));
    (x.ref_count == 0 ? cached : used)[p]++;
    const uint64_t parent_hash = blocks_[x.parent].hash;
    const uint64_t h = hashKey(parent_hash, keyTokens(b), extras_[b]);
    if (h != x.hash)
      return broken(strprintf("block %d hash %016llx, recomputed %016llx", b, (unsigned long long)x.hash,
                              (unsigned long long)h));
    const int32_t found = findChild(x.parent, x.hash, keyTokens(b), extras_[b]);
    if (found != b) return broken(strprintf("block %d: index lookup of its own key gives %d", b, found));
    int want = -1;
    if (x.ref_count == 0) {
      if (x.pool == KvPool::kPrimary && x.num_primary_children == 0) want = 0;
      if (x.pool == KvPool::kSecondary && x.num_children == 0) want = 1;
    }
    if (x.heap != want) return broken(strprintf("block %d in heap %d, expected %d", b, x.heap, want));
    if (want >= 0) {
      const EvictionHeap& hp = want == 0 ? heap_primary_ : heap_secondary_;
      const int32_t pos = heap_pos_[b];
      if (pos < 0 || static_cast<size_t>(pos) >= hp.size() || hp.entries()[pos].block != b ||
          hp.entries()[pos].key != heapKey(x))
        return broken(strprintf("block %d heap position/key wrong", b));
    }
    if (x.priority < 1 || x.priority > 100) return broken(strprintf("block %d priority %d", b, x.priority));
  }
  if (index_.size() != tree_nodes)
    return broken(strprintf("child index holds %zu entries for %zu tree blocks", index_.size(), tree_nodes));
  if (!heap_primary_.isHeap() || !heap_secondary_.isHeap()) return broken("eviction heap order");
  for (int p = 0; p < 2; ++p) {
    const EvictionHeap& hp = p == 0 ? heap_primary_ : heap_secondary_;
    for (const auto& e : hp.entries())
      if (blocks_[e.block].heap != p)
        return broken(strprintf("heap %d holds block %d of heap %d", p, e.block, blocks_[e.block].heap));
    if (free_count[p] != numFree(p == 0 ? KvPool::kPrimary : KvPool::kSecondary) ||
        cached[p] != num_cached_[p] || used[p] != num_used_[p])
      return broken(strprintf("pool %d counters free/cached/used %d/%d/%d, recount %d/%d/%d", p,
                              static_cast<int>(empty_[p].size()), num_cached_[p], num_used_[p], free_count[p],
                              cached[p], used[p]));
    if (free_count[p] + cached[p] + used[p] != num_blocks_[p])
      return broken(strprintf("pool %d: free %d + cached %d + used %d != total %d", p, free_count[p],
                              cached[p], used[p], num_blocks_[p]));
  }
  return Status::ok();
}

}  // namespace llmrt::detail
