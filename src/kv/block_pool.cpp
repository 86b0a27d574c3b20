#include "kv/block_pool.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "kv/block_key.h"

namespace llmrt::detail {
namespace {
constexpr int kP = 0;  // primary
constexpr int kS = 1;  // secondary

// a + b clamped to [INT64_MIN, INT64_MAX].
int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? INT64_MAX : INT64_MIN;
  return r;
}
}  // namespace

BlockPool::BlockPool(const Params& params, const KvClock* clock, KvEventBuffer* events)
    : tpb_(params.tokens_per_block),
      num_blocks_{params.num_primary, params.num_secondary},
      offload_min_priority_(params.offload_min_priority),
      hash_mask_(params.hash_mask),
      root_(params.num_primary + params.num_secondary),
      clock_(clock),
      events_(events),
      blocks_(static_cast<size_t>(root_) + 1),
      keys_(static_cast<size_t>(root_) * static_cast<size_t>(params.tokens_per_block)),
      extras_(static_cast<size_t>(root_) + 1),
      heap_pos_(static_cast<size_t>(root_) + 1, -1),
      heap_primary_(&heap_pos_, static_cast<size_t>(params.num_primary)),
      heap_secondary_(&heap_pos_, static_cast<size_t>(params.num_secondary)),
      index_(static_cast<size_t>(root_)) {
  for (int p = 0; p < 2; ++p) {
    owner_[p].resize(num_blocks_[p]);
    empty_[p].reserve(num_blocks_[p]);
  }
  for (int32_t b = 0; b < root_; ++b) {
    PoolBlock& x = blocks_[b];
    const bool primary = b < num_blocks_[kP];
    x.pool = primary ? KvPool::kPrimary : KvPool::kSecondary;
    x.slot = primary ? b : b - num_blocks_[kP];
    owner_[primary ? kP : kS][x.slot] = b;
  }
  // Stacks pop from the back: slot 0 is handed out first.
  for (int32_t b = num_blocks_[kP] - 1; b >= 0; --b) empty_[kP].push_back(b);
  for (int32_t b = root_ - 1; b >= num_blocks_[kP]; --b) empty_[kS].push_back(b);
  PoolBlock& r = blocks_[root_];
  r.in_tree = true;
  r.slot = -1;
  r.hash = kRootBlockHash;
  if (events_ && events_->enabled())
    events_->push(KvCacheCreatedData{{num_blocks_[kP], num_blocks_[kS]}, tpb_});
}

// ---- allocation and references ---------------------------------------------

int32_t BlockPool::takeEmpty(KvPool p) {
  auto& stack = empty_[idx(p)];
  assert(!stack.empty());
  int32_t b = stack.back();
  stack.pop_back();
  return b;
}

void BlockPool::pushEmpty(int32_t b) {
  PoolBlock& x = blocks_[b];
  x.ref_count = 0;
  x.priority = kDefaultPriority;
  x.expiry_ms = kNoExpiry;
  empty_[idx(x.pool)].push_back(b);
}

int32_t BlockPool::takeEmptyPrimary() {
  if (empty_[kP].empty() && !evictPrimary()) return kNil;
  return takeEmpty(KvPool::kPrimary);
}

int32_t BlockPool::allocate() {
  int32_t b = takeEmptyPrimary();
  if (b == kNil) return kNil;
  blocks_[b].ref_count = 1;
  ++num_used_[kP];
  return b;
}

void BlockPool::pin(int32_t b) {
  PoolBlock& x = blocks_[b];
  assert(x.in_tree && b != root_);
  if (x.ref_count++ == 0) {
    --num_cached_[idx(x.pool)];
    ++num_used_[idx(x.pool)];
    refreshCandidate(b);
    refreshLock(b);
  }
}

void BlockPool::unpin(int32_t b) {
  PoolBlock& x = blocks_[b];
  assert(x.in_tree && x.ref_count > 0);
  if (--x.ref_count == 0) {
    --num_used_[idx(x.pool)];
    ++num_cached_[idx(x.pool)];
    refreshCandidate(b);
    refreshLock(b);
  }
}

void BlockPool::release(int32_t b, const RetentionUpdate* update) {
  PoolBlock& x = blocks_[b];
  assert(x.ref_count > 0);
  if (update && x.in_tree) setPriority(b, update->priority, update->duration_ms);
  if (--x.ref_count > 0) return;
  --num_used_[idx(x.pool)];
  if (!x.in_tree) {
    pushEmpty(b);
    return;
  }
  x.last_used = ++lru_clock_;
  ++num_cached_[idx(x.pool)];
  refreshCandidate(b);
  refreshLock(b);
}

bool BlockPool::onboard(int32_t b) {
  assert(blocks_[b].in_tree && blocks_[b].pool == KvPool::kSecondary && blocks_[b].ref_count > 0);
  int32_t c = takeEmptyPrimary();
  if (c == kNil) return false;
  PoolBlock& x = blocks_[b];
  addCopy({KvPool::kSecondary, x.slot, KvPool::kPrimary, blocks_[c].slot, KvBlockCopy::kWholeBlock});
  swapPlacement(b, c);
  --num_used_[kS];
  ++num_used_[kP];
  pushEmpty(c);
  PoolBlock& p = blocks_[x.parent];
  ++p.num_primary_children;
  refreshCandidate(x.parent);
  refreshLock(b);
  ++counters_.onboarded;
  if (events_ && events_->enabled())
    events_->push(KvCacheUpdatedData{
        x.hash, KvCacheEventDiff<int32_t>{kKvCacheLevelSecondary, kKvCacheLevelPrimary}, std::nullopt});
  return true;
}

// ---- eviction --------------------------------------------------------------

bool BlockPool::evictPrimary() {
  processExpirations();
  if (heap_primary_.empty()) return false;
  const int32_t v = heap_primary_.top();
  const PoolBlock& x = blocks_[v];
  if (num_blocks_[kS] > 0 && x.priority >= offload_min_priority_) {
    int32_t s = obtainSecondary(x.priority);
    if (s != kNil) {
      notify(v, EvictionAction::kOffload, -1);
      offload(v, s);
      return true;
    }
  }
  notify(v, EvictionAction::kDrop, -1);
  dropSubtree(v, EvictionAction::kDrop);
  return true;
}

int32_t BlockPool::obtainSecondary(int32_t incoming_priority) {
  if (!empty_[kS].empty()) return takeEmpty(KvPool::kSecondary);
  if (heap_secondary_.empty()) return kNil;
  const int32_t w = heap_secondary_.top();
  // A block already offloaded keeps its place against a lower-priority newcomer.
  if (blocks_[w].priority > incoming_priority) return kNil;
  notify(w, EvictionAction::kDrop, incoming_priority);
  dropSubtree(w, EvictionAction::kDrop);
  return takeEmpty(KvPool::kSecondary);
}

void BlockPool::offload(int32_t v, int32_t s) {
  PoolBlock& x = blocks_[v];
  heap_primary_.remove(v);
  x.heap = -1;
  addCopy({KvPool::kPrimary, x.slot, KvPool::kSecondary, blocks_[s].slot, KvBlockCopy::kWholeBlock});
  swapPlacement(v, s);
  --num_cached_[kP];
  ++num_cached_[kS];
  refreshLock(v);
  PoolBlock& p = blocks_[x.parent];
  --p.num_primary_children;
  refreshCandidate(x.parent);
  refreshCandidate(v);
  pushEmpty(s);
  ++counters_.offloaded;
  if (events_ && events_->enabled())
    events_->push(KvCacheUpdatedData{
        x.hash, KvCacheEventDiff<int32_t>{kKvCacheLevelPrimary, kKvCacheLevelSecondary}, std::nullopt});
}

void BlockPool::dropSubtree(int32_t v, EvictionAction action) {
  // Post-order without a stack: descend to a leaf, remove it, climb one level.
  int32_t cur = v;
  for (;;) {
    while (blocks_[cur].first_child != kNil) cur = blocks_[cur].first_child;
    const int32_t up = blocks_[cur].parent;
    if (cur != v) notify(cur, EvictionAction::kCascadeDrop, -1);
    removeFromTree(cur);
    if (cur == v) break;
    cur = up;
  }
  (void)action;
}

void BlockPool::removeFromTree(int32_t b) {
  PoolBlock& x = blocks_[b];
  assert(x.in_tree && x.ref_count == 0 && x.first_child == kNil && b != root_);
  if (x.heap >= 0) {
    (x.heap == kP ? heap_primary_ : heap_secondary_).remove(b);
    x.heap = -1;
  }
  bool erased = index_.erase(x.hash, b);
  assert(erased);
  (void)erased;
  const int32_t q = x.parent;
  PoolBlock& p = blocks_[q];
  if (x.prev_sibling != kNil)
    blocks_[x.prev_sibling].next_sibling = x.next_sibling;
  else
    p.first_child = x.next_sibling;
  if (x.next_sibling != kNil) blocks_[x.next_sibling].prev_sibling = x.prev_sibling;
  --p.num_children;
  if (x.pool == KvPool::kPrimary) --p.num_primary_children;
  x.parent = x.next_sibling = x.prev_sibling = kNil;
  x.in_tree = false;
  ++x.generation;
  --num_cached_[idx(x.pool)];
  refreshLock(b);
  extras_[b].clear();
  if (x.pool == KvPool::kPrimary)
    ++counters_.evicted_primary;
  else
    ++counters_.evicted_secondary;
  if (events_ && events_->enabled()) events_->push(KvCacheRemovedData{{x.hash}});
  pushEmpty(b);
  refreshCandidate(q);
}

void BlockPool::swapPlacement(int32_t a, int32_t b) {
  PoolBlock& x = blocks_[a];
  PoolBlock& y = blocks_[b];
  std::swap(x.slot, y.slot);
  std::swap(x.pool, y.pool);
  owner_[idx(x.pool)][x.slot] = a;
  owner_[idx(y.pool)][y.slot] = b;
}

void BlockPool::notify(int32_t b, EvictionAction action, int32_t incoming_priority) {
  if (!observer_) return;
  const PoolBlock& x = blocks_[b];
  observer_(EvictionRecord{x.pool, x.slot, x.priority, x.last_used, x.hash, action, incoming_priority});
}

// ---- radix tree ------------------------------------------------------------

uint64_t BlockPool::hashKey(uint64_t parent_hash, std::span<const TokenId> tokens,
                            std::span<const uint64_t> extras) const {
  return hashBlockKey(parent_hash, tokens, extras) & hash_mask_;
}

int32_t BlockPool::findChild(int32_t parent, uint64_t hash, std::span<const TokenId> tokens,
                             std::span<const uint64_t> extras) const {
  assert(static_cast<int32_t>(tokens.size()) == tpb_);
  return index_.find(hash, [&](int32_t c) {
    const PoolBlock& x = blocks_[c];
    if (x.parent != parent) return false;
    if (std::memcmp(&keys_[size_t(c) * tpb_], tokens.data(), sizeof(TokenId) * tpb_) != 0) return false;
    const auto& e = extras_[c];
    return e.size() == extras.size() && std::equal(e.begin(), e.end(), extras.begin());
  });
}

PartialMatch BlockPool::findPartial(int32_t parent, std::span<const TokenId> tokens,
                                    std::span<const uint64_t> extras, bool allow_secondary) const {
  PartialMatch best;
  const size_t n = std::min(tokens.size(), static_cast<size_t>(tpb_));
  for (int32_t c = blocks_[parent].first_child; c != kNil; c = blocks_[c].next_sibling) {
    if (!allow_secondary && blocks_[c].pool == KvPool::kSecondary) continue;
    const auto& e = extras_[c];
    if (e.size() != extras.size() || !std::equal(e.begin(), e.end(), extras.begin())) continue;
    const TokenId* k = &keys_[size_t(c) * tpb_];
    size_t m = 0;
    while (m < n && k[m] == tokens[m]) ++m;
    if (m == 0) continue;
    const int32_t mm = static_cast<int32_t>(m);
    bool better = false;
    if (best.block == kNil || mm > best.num_tokens) {
      better = true;
    } else if (mm == best.num_tokens) {
      const PoolBlock& x = blocks_[c];
      const PoolBlock& y = blocks_[best.block];
      if (x.pool != y.pool)
        better = x.pool == KvPool::kPrimary;
      else
        better = x.last_used > y.last_used;
    }
    if (better) best = {c, mm};
  }
  return best;
}

void BlockPool::insert(int32_t b, int32_t parent, uint64_t hash, std::span<const TokenId> tokens,
                       std::span<const uint64_t> extras, int32_t priority, std::optional<uint64_t> lora_id) {
  PoolBlock& x = blocks_[b];
  PoolBlock& p = blocks_[parent];
  assert(!x.in_tree && x.ref_count > 0 && x.pool == KvPool::kPrimary);
  assert(parent == root_ || (p.in_tree && p.pool == KvPool::kPrimary));
  assert(static_cast<int32_t>(tokens.size()) == tpb_);
  std::memcpy(&keys_[size_t(b) * tpb_], tokens.data(), sizeof(TokenId) * tpb_);
  extras_[b].assign(extras.begin(), extras.end());
  x.in_tree = true;
  x.parent = parent;
  x.hash = hash;
  x.priority = priority;
  x.expiry_ms = kNoExpiry;
  x.last_used = ++lru_clock_;
  x.prev_sibling = kNil;
  x.next_sibling = p.first_child;
  if (p.first_child != kNil) blocks_[p.first_child].prev_sibling = b;
  p.first_child = b;
  ++p.num_children;
  ++p.num_primary_children;
  index_.insert(hash, b);
  refreshLock(b);
  refreshCandidate(parent);
  if (events_ && events_->enabled()) {
    // One block per event: its parent is the block stored before it (or none).
    KvCacheStoredData ev;
    if (parent != root_) ev.parent_hash = p.hash;
    KvCacheStoredBlockData& blk = ev.blocks.emplace_back();
    blk.block_hash = hash;
    blk.tokens.assign(tokens.begin(), tokens.end());
    blk.lora_id = lora_id;
    blk.cache_level = kKvCacheLevelPrimary;
    blk.priority = priority;
    events_->push(std::move(ev));
  }
}

// ---- priorities ------------------------------------------------------------

void BlockPool::setPriority(int32_t b, int32_t priority, std::optional<int64_t> duration_ms) {
  PoolBlock& x = blocks_[b];
  const int32_t old = x.priority;
  x.priority = priority;
  // A deadline beyond the clock's range (a duration near INT64_MAX) saturates to "never":
  // now + duration must not overflow (that would be undefined and wrap to the past).
  const int64_t expiry = duration_ms ? saturatingAdd(clock_->nowMs(), *duration_ms) : kNoExpiry;
  if (expiry != kNoExpiry) {
    x.expiry_ms = expiry;
    expiries_.push_back({x.expiry_ms, b, x.generation});
    std::push_heap(expiries_.begin(), expiries_.end(), std::greater<>());
  } else {
    x.expiry_ms = kNoExpiry;
  }
  if (old != priority) {
    if (events_ && events_->enabled())
      events_->push(KvCacheUpdatedData{x.hash, std::nullopt, KvCacheEventDiff<int32_t>{old, priority}});
    refreshCandidate(b);
  }
}

void BlockPool::processExpirations() {
  if (expiries_.empty()) return;
  const int64_t now = clock_->nowMs();
  while (!expiries_.empty() && expiries_.front().when <= now) {
    std::pop_heap(expiries_.begin(), expiries_.end(), std::greater<>());
    const Expiry e = expiries_.back();
    expiries_.pop_back();
    const PoolBlock& x = blocks_[e.block];
    if (!x.in_tree || x.generation != e.generation || x.expiry_ms != e.when) continue;  // stale
    setPriority(e.block, kDefaultPriority, std::nullopt);
  }
}

// ---- derived state ---------------------------------------------------------

void BlockPool::refreshCandidate(int32_t b) {
  if (b == root_) return;
  PoolBlock& x = blocks_[b];
  int want = -1;
  if (x.in_tree && x.ref_count == 0) {
    if (x.pool == KvPool::kPrimary) {
      if (x.num_primary_children == 0) want = kP;
    } else if (x.num_children == 0) {
      want = kS;
    }
  }
  if (x.heap != want) {
    if (x.heap >= 0) (x.heap == kP ? heap_primary_ : heap_secondary_).remove(b);
    if (want >= 0) (want == kP ? heap_primary_ : heap_secondary_).push(b, heapKey(x));
    x.heap = static_cast<int8_t>(want);
  } else if (want >= 0) {
    (want == kP ? heap_primary_ : heap_secondary_).update(b, heapKey(x));
  }
}

void BlockPool::refreshLock(int32_t b) {
  while (b != root_) {
    PoolBlock& x = blocks_[b];
    const bool in_primary_tree = x.in_tree && x.pool == KvPool::kPrimary;
    const bool locked = in_primary_tree && (x.ref_count > 0 || x.num_locked_children > 0);
    const bool reclaimable = in_primary_tree && !locked;
    if (reclaimable != x.reclaimable) {
      reclaimable_ += reclaimable ? 1 : -1;
      x.reclaimable = reclaimable;
    }
    if (locked == x.locked) break;
    x.locked = locked;
    const int32_t q = x.parent;
    if (q == kNil || q == root_) break;
    blocks_[q].num_locked_children += locked ? 1 : -1;
    b = q;
  }
}

}  // namespace llmrt::detail
