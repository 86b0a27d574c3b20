// KV cache events as a consumer sees them (llmrt/kv_cache_events.h): replaying every
// event of a run full of reuse, eviction, host offload, onboarding, retention
// priorities and expiring durations must give exactly the manager's reuse tree
// (hash, parent, tokens, cache level, priority of every block), and the stats'
// eviction counts must match the Removed events of each cache level.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv_test_util.h"

namespace llmrt {
namespace {

using kvtest::iota;
using kvtest::runStep;
using kvtest::SimKvMemory;
using kvtest::SimSequence;

struct MirrorBlock {
  std::optional<uint64_t> parent;
  std::vector<TokenId> tokens;
  int32_t cache_level = 0;
  int32_t priority = 35;
  bool operator==(const MirrorBlock&) const = default;
};

// The reuse tree as rebuilt from events alone.
class Mirror {
 public:
  // Applies one event; a non-empty string names the first inconsistency.
  std::string apply(const KvCacheEvent& e) {
    if (e.event_id != next_id_)
      return "event id " + std::to_string(e.event_id) + ", expected " + std::to_string(next_id_);
    ++next_id_;
    if (const auto* c = std::get_if<KvCacheCreatedData>(&e.data)) {
      created_ = *c;
      return {};
    }
    if (const auto* s = std::get_if<KvCacheStoredData>(&e.data)) {
      std::optional<uint64_t> parent = s->parent_hash;
      for (const KvCacheStoredBlockData& b : s->blocks) {
        if (parent && !blocks_.count(*parent)) return "stored under an unknown parent";
        if (blocks_.count(b.block_hash)) return "stored twice";
        blocks_[b.block_hash] = MirrorBlock{parent, b.tokens, b.cache_level, b.priority};
        ++stored_;
        parent = b.block_hash;
      }
      return {};
    }
    if (const auto* r = std::get_if<KvCacheRemovedData>(&e.data)) {
      for (uint64_t h : r->block_hashes) {
        auto it = blocks_.find(h);
        if (it == blocks_.end()) return "removed an unknown block";
        for (const auto& [other, b] : blocks_)
          if (b.parent == h) return "removed a block that still has children";
        ++removed_[it->second.cache_level];
        blocks_.erase(it);
      }
      return {};
    }
    const auto& u = std::get<KvCacheUpdatedData>(e.data);
    auto it = blocks_.find(u.block_hash);
    if (it == blocks_.end()) return "updated an unknown block";
    if (u.cache_level) {
      if (u.cache_level->old_value != it->second.cache_level) return "cache level diff from the wrong level";
      it->second.cache_level = u.cache_level->new_value;
      ++moves_[u.cache_level->new_value];
    }
    if (u.priority) {
      if (u.priority->old_value != it->second.priority) return "priority diff from the wrong priority";
      it->second.priority = u.priority->new_value;
      ++priority_updates_;
    }
    return {};
  }

  const std::map<uint64_t, MirrorBlock>& blocks() const { return blocks_; }
  const std::optional<KvCacheCreatedData>& created() const { return created_; }
  uint64_t stored() const { return stored_; }
  uint64_t removed(int32_t level) const { return removed_[level]; }
  uint64_t movedTo(int32_t level) const { return moves_[level]; }
  uint64_t priorityUpdates() const { return priority_updates_; }

 private:
  uint64_t next_id_ = 0;
  std::optional<KvCacheCreatedData> created_;
  std::map<uint64_t, MirrorBlock> blocks_;
  uint64_t stored_ = 0, removed_[2] = {0, 0}, moves_[2] = {0, 0}, priority_updates_ = 0;
};

// The manager's reuse tree, read through blockInfo.
std::map<uint64_t, MirrorBlock> treeOf(const KvCacheManager& m) {
  std::map<uint64_t, MirrorBlock> out;
  const KvCacheStats s = m.stats();
  for (KvPool pool : {KvPool::kPrimary, KvPool::kSecondary}) {
    const int32_t n = pool == KvPool::kPrimary ? s.primary.total : s.secondary.total;
    for (BlockId b = 0; b < n; ++b) {
      const KvBlockInfo info = m.blockInfo(pool, b);
      if (info.in_tree)
        out[info.hash] = MirrorBlock{info.parent_hash, info.tokens, kvCacheLevel(pool), info.priority};
    }
  }
  return out;
}

TEST(KvEventsTest, ReplayingEventsRebuildsTheReuseTree) {
  constexpr int32_t kT = 4, kPrimary = 6, kSecondary = 3;
  SimKvMemory mem(kT, kPrimary, kSecondary);
  ManualKvClock clock;
  KvCacheConfig c;
  c.tokens_per_block = kT;
  c.event_buffer_max_size = 100000;
  c.secondary_offload_min_priority = 40;
  KvCacheManagerOptions o;
  o.copier = &mem;
  o.clock = &clock;
  o.max_sequence_length = 64;
  auto made = KvCacheManager::create(c, kPrimary, kSecondary, o);
  ASSERT_TRUE(made.isOk()) << made.status().toString();
  KvCacheManager& m = **made;

  Mirror mirror;
  auto sync = [&](const std::string& where) {
    for (const KvCacheEvent& e : m.drainEvents()) {
      EXPECT_EQ(e.window_size, 64);
      const std::string err = mirror.apply(e);
      ASSERT_EQ(err, "") << where;
    }
    ASSERT_EQ(mirror.blocks(), treeOf(m)) << where;
  };
  sync("created");
  ASSERT_TRUE(mirror.created().has_value());
  EXPECT_EQ(mirror.created()->num_blocks_per_cache_level, (std::vector<int32_t>{kPrimary, kSecondary}));
  EXPECT_EQ(mirror.created()->tokens_per_block, kT);

  // Prompts from three shared prefixes with varying tails; priorities 20 (dropped when
  // evicted), 35, 60 and 90 (offloaded), some with durations that expire.
  const std::vector<std::vector<TokenId>> prefixes = {iota(8, 1), iota(8, 100), iota(4, 200)};
  uint64_t rng = 12345;
  auto next = [&](uint32_t n) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int32_t>((rng >> 33) % n);
  };
  SequenceId id = 1;
  for (int op = 0; op < 400; ++op) {
    const std::string where = "op " + std::to_string(op);
    std::vector<TokenId> prompt = prefixes[next(3)];
    const int32_t tail = next(6);
    for (int32_t i = 0; i < tail; ++i) prompt.push_back(300 + next(3));
    SimSequence s{id++, prompt, {}, {}};
    AddSequenceOptions ao;
    const int32_t prio[] = {20, 35, 60, 90};
    if (next(4) != 0) {
      KvCacheRetentionConfig rc;
      std::optional<int64_t> dur;
      if (next(3) == 0) dur = 1 + next(50);
      rc.token_range_retention_configs = {{0, std::nullopt, prio[next(4)], dur}};
      rc.decode_retention_priority = prio[next(4)];
      ao.retention = rc;
    }
    auto r = m.addSequence(s.id, s.tokens, ao);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    ASSERT_EQ(r->status, KvAllocStatus::kOk) << where;
    ASSERT_EQ(runStep(m, mem, s), "") << where;
    sync(where + " prefill");
    const int32_t decode = next(5);
    for (int32_t i = 0; i < decode; ++i) {
      s.tokens.push_back(400 + next(2));
      ASSERT_EQ(*m.appendToken(s.id, s.tokens.back()), KvAllocStatus::kOk) << where;
      ASSERT_EQ(runStep(m, mem, s), "") << where;
    }
    sync(where + " decode");
    ASSERT_TRUE(m.removeSequence(s.id).isOk());
    clock.advanceMs(next(20));
    sync(where + " remove");
  }
  ASSERT_TRUE(m.checkInvariants().isOk());

  // Every kind of event happened, and the stats count what the events say.
  const KvCacheStats st = m.stats();
  EXPECT_GT(mirror.stored(), 20u);
  EXPECT_GT(mirror.movedTo(kKvCacheLevelSecondary), 0u);  // offloads
  EXPECT_GT(mirror.movedTo(kKvCacheLevelPrimary), 0u);    // onboards
  EXPECT_GT(mirror.priorityUpdates(), 0u);
  EXPECT_GT(mirror.removed(kKvCacheLevelSecondary), 0u);
  EXPECT_EQ(st.evicted_primary_blocks, mirror.removed(kKvCacheLevelPrimary));
  EXPECT_EQ(st.evicted_secondary_blocks, mirror.removed(kKvCacheLevelSecondary));
  EXPECT_EQ(st.offloaded_blocks, mirror.movedTo(kKvCacheLevelSecondary));
  EXPECT_EQ(st.onboarded_blocks, mirror.movedTo(kKvCacheLevelPrimary));
  EXPECT_EQ(st.events_dropped, 0u);
}

TEST(KvEventsTest, NoEventsWhenDisabledAndWindowSizeOfASlidingWindow) {
  SimKvMemory mem(4, 8, 0);
  KvCacheConfig c;
  c.tokens_per_block = 4;
  KvCacheManagerOptions o;
  o.copier = &mem;
  o.attention_window = 6;
  auto off = KvCacheManager::create(c, 8, 0, o);
  ASSERT_TRUE(off.isOk());
  SimSequence s{1, iota(9), {}, {}};
  ASSERT_EQ((*off)->addSequence(1, s.tokens)->status, KvAllocStatus::kOk);
  ASSERT_EQ(runStep(**off, mem, s, 6), "");
  EXPECT_TRUE((*off)->drainEvents().empty());

  c.event_buffer_max_size = 10;
  auto on = KvCacheManager::create(c, 8, 0, o);
  ASSERT_TRUE(on.isOk());
  const auto ev = (*on)->drainEvents();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].window_size, 6);
  EXPECT_TRUE(std::holds_alternative<KvCacheCreatedData>(ev[0].data));
}

}  // namespace
}  // namespace llmrt
