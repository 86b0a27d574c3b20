// Eviction and retention: cached blocks stay until needed; leaf-only, lowest
// priority first, LRU within a priority; retention ranges, decode priority,
// durations (injected clock); host offload, onboarding, secondary eviction,
// cascade drops.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "kv/kv_cache_manager.h"
#include "kv_test_util.h"

namespace llmrt {
namespace {

using kvtest::concat;
using kvtest::iota;
using kvtest::runStep;
using kvtest::SimKvMemory;
using kvtest::SimSequence;

KvCacheRetentionConfig ranges(std::vector<TokenRangeRetentionConfig> r) {
  KvCacheRetentionConfig c;
  c.token_range_retention_configs = std::move(r);
  return c;
}
KvCacheRetentionConfig whole(int32_t priority, std::optional<int64_t> duration = std::nullopt) {
  return ranges({{0, std::nullopt, priority, duration}});
}

struct Env {
  Env(int32_t np, int32_t ns, KvCacheConfig c = {}) : mem(4, np, ns) {
    c.tokens_per_block = 4;
    c.event_buffer_max_size = 10000;
    if (ns > 0) c.host_cache_size = 1;  // informational here; pool sizes are explicit
    KvCacheManagerOptions o;
    o.copier = &mem;
    o.clock = &clock;
    auto r = KvCacheManager::create(c, np, ns, o);
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    m = std::move(r).value();
    m->setEvictionObserver([this](const detail::EvictionRecord& e) { evictions.push_back(e); });
  }
  // Adds, prefills, removes: leaves the prompt's full blocks cached. Returns their hashes.
  std::vector<uint64_t> cache(SequenceId id, std::vector<TokenId> tokens,
                              std::optional<KvCacheRetentionConfig> rc = std::nullopt) {
    SimSequence s{id, std::move(tokens), {}, {}};
    AddSequenceOptions o;
    o.retention = rc;
    auto r = m->addSequence(id, s.tokens, o);
    EXPECT_TRUE(r.isOk() && r->status == KvAllocStatus::kOk);
    EXPECT_EQ(runStep(*m, mem, s), "");
    std::vector<uint64_t> hashes;
    for (BlockId b : m->blockTable(id)) {
      KvBlockInfo info = m->blockInfo(KvPool::kPrimary, b);
      if (info.in_tree) hashes.push_back(info.hash);
    }
    EXPECT_TRUE(m->removeSequence(id).isOk());
    return hashes;
  }
  std::vector<uint64_t> evictedHashes() const {
    std::vector<uint64_t> h;
    for (const auto& e : evictions) h.push_back(e.hash);
    return h;
  }
  // Priority and pool of the cached block with this hash (searching both pools).
  std::optional<KvBlockInfo> find(uint64_t hash) const {
    for (KvPool p : {KvPool::kPrimary, KvPool::kSecondary}) {
      const int32_t n = p == KvPool::kPrimary ? m->stats().primary.total : m->stats().secondary.total;
      for (BlockId b = 0; b < n; ++b) {
        KvBlockInfo info = m->blockInfo(p, b);
        if (info.in_tree && info.hash == hash) return info;
      }
    }
    return std::nullopt;
  }
  ManualKvClock clock;
  SimKvMemory mem;
  std::unique_ptr<KvCacheManager> m;
  std::vector<detail::EvictionRecord> evictions;
};

TEST(KvEvictionTest, CachedBlocksStayUntilTheirMemoryIsNeeded) {
  Env e(8, 0);
  auto a = e.cache(1, iota(9));  // 2 cached blocks, 6 free
  ASSERT_EQ(a.size(), 2u);
  SimSequence b{2, iota(24, 100), {}, {}};  // 6 blocks: fits in the free ones
  ASSERT_EQ(e.m->addSequence(2, b.tokens)->status, KvAllocStatus::kOk);
  EXPECT_TRUE(e.evictions.empty());
  EXPECT_EQ(e.m->stats().primary.cached, 2);
  ASSERT_EQ(*e.m->appendToken(2, 5), KvAllocStatus::kOk);  // the 7th block evicts one
  ASSERT_EQ(e.evictions.size(), 1u);
  EXPECT_EQ(e.evictions[0].hash, a[1]);  // the leaf
  EXPECT_EQ(e.evictions[0].action, detail::EvictionAction::kDrop);
  EXPECT_EQ(e.m->stats().evicted_primary_blocks, 1u);
  EXPECT_EQ(e.m->lookupPrefix(iota(9)).num_full_blocks, 1);
}

TEST(KvEvictionTest, LowestPriorityFirstThenLeastRecentlyUsed) {
  Env e(8, 0);
  std::vector<uint64_t> h;
  const int prio[] = {50, 20, 50, 20};
  for (int i = 0; i < 4; ++i) h.push_back(e.cache(i + 1, iota(5, 100 * (i + 1)), whole(prio[i]))[0]);
  EXPECT_EQ(e.find(h[0])->priority, 50);
  EXPECT_EQ(e.find(h[1])->priority, 20);
  ASSERT_EQ(e.m->addSequence(9, iota(32, 5000))->status, KvAllocStatus::kOk);  // all 8 blocks
  EXPECT_EQ(e.evictedHashes(), (std::vector<uint64_t>{h[1], h[3], h[0], h[2]}));
}

TEST(KvEvictionTest, OnlyLeavesAreEvicted) {
  Env e(8, 0);
  // a0 has priority 10 but children with 90: it goes last, after its leaves.
  auto a = e.cache(1, iota(13), ranges({{0, 4, 10, std::nullopt}, {4, std::nullopt, 90, std::nullopt}}));
  auto b = e.cache(2, iota(9, 100));
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(e.find(a[0])->priority, 10);
  EXPECT_EQ(e.find(a[1])->priority, 90);
  EXPECT_EQ(e.find(a[2])->priority, 90);
  EXPECT_EQ(e.m->numReclaimableBlocks(), 5);
  ASSERT_EQ(e.m->addSequence(9, iota(32, 5000))->status, KvAllocStatus::kOk);
  EXPECT_EQ(e.evictedHashes(), (std::vector<uint64_t>{b[1], b[0], a[2], a[1], a[0]}));
  EXPECT_TRUE(e.m->checkInvariants().isOk());
}

TEST(KvEvictionTest, ReferencedPrefixesAreNotReclaimable) {
  Env e(8, 0);
  auto a = e.cache(1, iota(13));
  SimSequence b{2, concat(iota(8), {77, 78}), {}, {}};  // holds a0, a1
  ASSERT_EQ(e.m->addSequence(2, b.tokens)->num_reused_tokens, 8);
  // a2 is reclaimable; a0/a1 are referenced.
  EXPECT_EQ(e.m->numReclaimableBlocks(), 1);
  EXPECT_EQ(e.m->numFreeBlocks(), 8 - 3 - 1);
  KvCacheStats s = e.m->stats();
  EXPECT_EQ(s.primary.used, 3);
  EXPECT_EQ(s.primary.cached, 1);
  EXPECT_EQ(s.primary.free + s.primary.used + s.primary.cached, s.primary.total);
}

TEST(KvEvictionTest, RetentionRangesAndDecodePriority) {
  Env e(16, 0);
  auto rc = ranges({{0, 5, 80, std::nullopt}, {5, std::nullopt, 20, std::nullopt}});
  rc.decode_retention_priority = 60;
  SimSequence s{1, iota(13), {}, {}};
  AddSequenceOptions o;
  o.retention = rc;
  ASSERT_EQ(e.m->addSequence(1, s.tokens, o)->status, KvAllocStatus::kOk);
  ASSERT_EQ(runStep(*e.m, e.mem, s), "");
  for (int i = 0; i < 8; ++i) {  // 21 tokens: blocks 3 and 4 start with generated tokens
    s.tokens.push_back(900 + i);
    ASSERT_EQ(*e.m->appendToken(1, s.tokens.back()), KvAllocStatus::kOk);
    ASSERT_EQ(runStep(*e.m, e.mem, s), "");
  }
  std::vector<BlockId> t(e.m->blockTable(1).begin(), e.m->blockTable(1).end());
  ASSERT_TRUE(e.m->removeSequence(1).isOk());
  // A block takes the priority of the range covering its first token.
  EXPECT_EQ(e.m->blockInfo(KvPool::kPrimary, t[0]).priority, 80);  // token 0
  EXPECT_EQ(e.m->blockInfo(KvPool::kPrimary, t[1]).priority, 80);  // token 4 in [0, 5)
  EXPECT_EQ(e.m->blockInfo(KvPool::kPrimary, t[2]).priority, 20);  // token 8
  EXPECT_EQ(e.m->blockInfo(KvPool::kPrimary, t[3]).priority, 20);  // token 12: the last prompt token
  EXPECT_EQ(e.m->blockInfo(KvPool::kPrimary, t[4]).priority, 60);  // token 16: generated

  // A later request without a retention config leaves priorities alone...
  SimSequence r{2, concat(iota(13), {1}), {}, {}};
  ASSERT_EQ(e.m->addSequence(2, r.tokens)->num_reused_tokens, 13);
  ASSERT_TRUE(e.m->removeSequence(2).isOk());
  EXPECT_EQ(e.m->blockInfo(KvPool::kPrimary, t[0]).priority, 80);
  e.m->drainEvents();
  // ...one with a config sets them (and says so in an Updated event).
  AddSequenceOptions o3;
  o3.retention = whole(99);
  ASSERT_EQ(e.m->addSequence(3, r.tokens, o3)->num_reused_tokens, 13);
  ASSERT_TRUE(e.m->removeSequence(3).isOk());
  EXPECT_EQ(e.m->blockInfo(KvPool::kPrimary, t[0]).priority, 99);
  EXPECT_EQ(e.m->blockInfo(KvPool::kPrimary, t[2]).priority, 99);
  int updates = 0;
  for (const auto& ev : e.m->drainEvents())
    if (auto* u = std::get_if<KvCacheUpdatedData>(&ev.data); u && u->priority) {
      EXPECT_EQ(u->priority->new_value, 99);
      ++updates;
    }
  EXPECT_EQ(updates, 3);
}

TEST(KvEvictionTest, DurationExpiresToDefaultPriority) {
  for (int64_t when : {500, 1500}) {
    Env e(4, 0);
    auto a = e.cache(1, iota(5), whole(90, 1000));  // released at t=0, 90 until t=1000
    e.clock.setMs(10);
    auto b = e.cache(2, iota(5, 100));  // 35, released later
    e.clock.setMs(when);
    ASSERT_EQ(e.m->addSequence(3, iota(9, 500))->status, KvAllocStatus::kOk);  // needs one eviction
    ASSERT_EQ(e.evictions.size(), 1u);
    if (when < 1000) {
      EXPECT_EQ(e.evictions[0].hash, b[0]) << "at t=" << when << " a0 still has priority 90";
      EXPECT_EQ(e.find(a[0])->priority, 90);
    } else {
      EXPECT_EQ(e.evictions[0].hash, a[0]) << "at t=" << when << " a0 fell back to 35 and is older";
      bool saw = false;
      for (const auto& ev : e.m->drainEvents())
        if (auto* u = std::get_if<KvCacheUpdatedData>(&ev.data); u && u->priority && u->block_hash == a[0])
          saw = u->priority->old_value == 90 && u->priority->new_value == 35;
      EXPECT_TRUE(saw);
    }
  }
}

TEST(KvEvictionTest, OffloadToHostAndOnboardOnReuse) {
  Env e(4, 4);
  auto a = e.cache(1, iota(9));  // a0, a1 cached; 2 free
  SimSequence b{2, iota(16, 100), {}, {}};
  ASSERT_EQ(e.m->addSequence(2, b.tokens)->status, KvAllocStatus::kOk);  // needs all 4
  ASSERT_EQ(e.evictions.size(), 2u);
  EXPECT_EQ(e.evictions[0].hash, a[1]);
  EXPECT_EQ(e.evictions[0].action, detail::EvictionAction::kOffload);
  EXPECT_EQ(e.evictions[1].hash, a[0]);  // a primary leaf once a1 moved out
  EXPECT_EQ(e.evictions[1].action, detail::EvictionAction::kOffload);
  ASSERT_EQ(runStep(*e.m, e.mem, b), "");  // runs the offload copies before b's writes
  KvCacheStats s = e.m->stats();
  EXPECT_EQ(s.offloaded_blocks, 2u);
  EXPECT_EQ(s.secondary.cached, 2);
  EXPECT_EQ(s.secondary.free, 2);
  auto a1 = e.find(a[1]);
  ASSERT_TRUE(a1.has_value());
  EXPECT_EQ(a1->pool, KvPool::kSecondary);  // same hash, same place in the tree
  EXPECT_EQ(e.find(a[0])->pool, KvPool::kSecondary);
  int moved = 0;
  for (const auto& ev : e.m->drainEvents())
    if (auto* u = std::get_if<KvCacheUpdatedData>(&ev.data); u && u->cache_level) {
      EXPECT_EQ(u->cache_level->old_value, kKvCacheLevelPrimary);
      EXPECT_EQ(u->cache_level->new_value, kKvCacheLevelSecondary);
      ++moved;
    }
  EXPECT_EQ(moved, 2);
  ASSERT_TRUE(e.m->removeSequence(2).isOk());

  // Reuse: both blocks are onboarded (copied into primary) before the runner reads them.
  EXPECT_EQ(e.m->lookupPrefix(concat(iota(9), {1})).num_secondary_blocks, 2);
  SimSequence c{3, concat(iota(9), {1, 2}), {}, {}};
  auto r = e.m->addSequence(3, c.tokens);
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r->num_reused_tokens, 8);
  EXPECT_EQ(r->num_onboarded_blocks, 2);
  ASSERT_EQ(runStep(*e.m, e.mem, c), "");  // content check proves the onboard copies
  EXPECT_EQ(e.m->stats().onboarded_blocks, 2u);
  EXPECT_EQ(e.find(a[0])->pool, KvPool::kPrimary);
  EXPECT_TRUE(e.m->checkInvariants().isOk());
}

TEST(KvEvictionTest, LowPriorityBlocksAreDroppedNotOffloaded) {
  Env e(2, 4);
  auto a = e.cache(1, iota(5), whole(20));
  ASSERT_EQ(e.m->addSequence(2, iota(5, 100))->status, KvAllocStatus::kOk);
  ASSERT_EQ(e.evictions.size(), 1u);
  EXPECT_EQ(e.evictions[0].action, detail::EvictionAction::kDrop);
  EXPECT_TRUE(e.m->takePendingCopies().empty());
  EXPECT_EQ(e.m->stats().offloaded_blocks, 0u);
  EXPECT_FALSE(e.find(a[0]).has_value());
}

TEST(KvEvictionTest, SecondaryPoolEvictsByPriorityAndRefusesLowerNewcomers) {
  Env e(2, 2);
  auto p1 = e.cache(1, iota(5, 100), whole(50));
  auto p2 = e.cache(2, iota(5, 200), whole(40));  // evicts p1 → secondary
  auto p3 = e.cache(3, iota(5, 300), whole(45));  // evicts p2 → secondary (full now)
  auto p4 = e.cache(4, iota(5, 400), whole(38));  // evicts p3: drops p2 (40 <= 45) from secondary
  auto p5 = e.cache(5, iota(5, 500));             // evicts p4 (38): secondary min is 45 → p4 dropped
  KvCacheStats s = e.m->stats();
  EXPECT_EQ(s.offloaded_blocks, 3u);
  EXPECT_EQ(s.evicted_secondary_blocks, 1u);
  EXPECT_EQ(s.evicted_primary_blocks, 1u);
  EXPECT_EQ(e.find(p1[0])->pool, KvPool::kSecondary);
  EXPECT_FALSE(e.find(p2[0]).has_value());
  EXPECT_EQ(e.find(p3[0])->pool, KvPool::kSecondary);
  EXPECT_FALSE(e.find(p4[0]).has_value());
  EXPECT_EQ(e.find(p5[0])->pool, KvPool::kPrimary);
  ASSERT_GE(e.evictions.size(), 5u);
  // The secondary eviction names the newcomer's priority.
  bool saw = false;
  for (const auto& ev : e.evictions)
    if (ev.pool == KvPool::kSecondary) {
      EXPECT_EQ(ev.hash, p2[0]);
      EXPECT_EQ(ev.incoming_priority, 45);
      saw = true;
    }
  EXPECT_TRUE(saw);
  EXPECT_TRUE(e.m->checkInvariants().isOk());
}

TEST(KvEvictionTest, DroppingAParentDropsItsOffloadedChildren) {
  Env e(4, 4);
  auto a = e.cache(1, iota(13), ranges({{0, 4, 10, std::nullopt}, {4, std::nullopt, 90, std::nullopt}}));
  ASSERT_EQ(e.m->addSequence(2, iota(16, 100))->status, KvAllocStatus::kOk);
  ASSERT_EQ(e.evictions.size(), 5u);
  EXPECT_EQ(e.evictions[0].hash, a[2]);
  EXPECT_EQ(e.evictions[0].action, detail::EvictionAction::kOffload);
  EXPECT_EQ(e.evictions[1].hash, a[1]);
  EXPECT_EQ(e.evictions[1].action, detail::EvictionAction::kOffload);
  EXPECT_EQ(e.evictions[2].hash, a[0]);
  EXPECT_EQ(e.evictions[2].action, detail::EvictionAction::kDrop);
  EXPECT_EQ(e.evictions[3].action, detail::EvictionAction::kCascadeDrop);
  EXPECT_EQ(e.evictions[4].action, detail::EvictionAction::kCascadeDrop);
  KvCacheStats s = e.m->stats();
  EXPECT_EQ(s.secondary.free, 4);
  EXPECT_EQ(s.evicted_secondary_blocks, 2u);
  for (uint64_t h : a) EXPECT_FALSE(e.find(h).has_value());
  EXPECT_TRUE(e.m->checkInvariants().isOk());
}

TEST(KvEvictionTest, WithoutOnboardingSecondaryBlocksAreNotReused) {
  KvCacheConfig c;
  c.onboard_blocks = false;
  Env e(4, 4, c);
  auto a = e.cache(1, iota(9));
  ASSERT_EQ(e.m->addSequence(2, iota(16, 100))->status, KvAllocStatus::kOk);
  ASSERT_TRUE(e.m->removeSequence(2).isOk());
  EXPECT_EQ(e.find(a[0])->pool, KvPool::kSecondary);
  EXPECT_EQ(e.m->lookupPrefix(concat(iota(9), {1})).num_reusable_tokens, 0);
}

}  // namespace
}  // namespace llmrt
