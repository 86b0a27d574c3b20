// Retention across a pause (a resumed sequence's generated blocks keep the decode
// priority) and retention durations at the edge of the clock's range (no overflow).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv_test_util.h"

namespace llmrt {
namespace {

using kvtest::iota;
using kvtest::runStep;
using kvtest::SimKvMemory;
using kvtest::SimSequence;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

struct Env {
  explicit Env(int32_t np) : mem(4, np, 0) {
    KvCacheConfig c;
    c.tokens_per_block = 4;
    c.event_buffer_max_size = 10000;
    KvCacheManagerOptions o;
    o.copier = &mem;
    o.clock = &clock;
    auto r = KvCacheManager::create(c, np, 0, o);
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    m = std::move(r).value();
    m->setEvictionObserver([this](const detail::EvictionRecord& e) { evicted.push_back(e.hash); });
  }
  void decode(SimSequence& s, int32_t n, TokenId base) {
    for (int32_t i = 0; i < n; ++i) {
      s.tokens.push_back(base + i);
      ASSERT_EQ(*m->appendToken(s.id, s.tokens.back()), KvAllocStatus::kOk);
      ASSERT_EQ(runStep(*m, mem, s), "");
    }
  }
  int32_t priorityOf(BlockId b) const { return m->blockInfo(KvPool::kPrimary, b).priority; }
  ManualKvClock clock;
  SimKvMemory mem;
  std::unique_ptr<KvCacheManager> m;
  std::vector<uint64_t> evicted;
};

KvCacheRetentionConfig promptAndDecode(int32_t prompt_priority, int32_t decode_priority) {
  KvCacheRetentionConfig rc;
  rc.token_range_retention_configs = {{0, std::nullopt, prompt_priority, std::nullopt}};
  rc.decode_retention_priority = decode_priority;
  return rc;
}

TEST(KvRetentionTest, ResumedSequenceKeepsDecodePriorityOfGeneratedBlocks) {
  Env e(16);
  const KvCacheRetentionConfig rc = promptAndDecode(80, 20);
  SimSequence s{1, iota(6), {}, {}};
  AddSequenceOptions o;
  o.retention = rc;
  ASSERT_EQ(e.m->addSequence(1, s.tokens, o)->status, KvAllocStatus::kOk);
  ASSERT_EQ(runStep(*e.m, e.mem, s), "");
  e.decode(s, 7, 900);  // 13 tokens: blocks 0-1 start in the prompt, block 2 (8-11) is generated
  std::vector<BlockId> t(e.m->blockTable(1).begin(), e.m->blockTable(1).end());
  ASSERT_TRUE(e.m->removeSequence(1).isOk());  // paused
  EXPECT_EQ(e.priorityOf(t[0]), 80);
  EXPECT_EQ(e.priorityOf(t[1]), 80);
  EXPECT_EQ(e.priorityOf(t[2]), 20);

  // Resumed with all 13 tokens, as the scheduler re-adds it, and the prompt's length.
  o.num_prompt_tokens = 6;
  auto r = e.m->addSequence(1, s.tokens, o);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->num_reused_tokens, 12);
  ASSERT_EQ(runStep(*e.m, e.mem, s), "");
  e.m->drainEvents();
  e.decode(s, 3, 950);  // completes block 3 (12-15), stored now
  int stored = 0;
  for (const auto& ev : e.m->drainEvents())
    if (const auto* st = std::get_if<KvCacheStoredData>(&ev.data)) {
      ASSERT_EQ(st->blocks.size(), 1u);
      EXPECT_EQ(st->blocks[0].priority, 20)
          << "a block of generated tokens is stored with the decode priority";
      ++stored;
    }
  EXPECT_EQ(stored, 1);
  t.assign(e.m->blockTable(1).begin(), e.m->blockTable(1).end());
  ASSERT_TRUE(e.m->removeSequence(1).isOk());  // finished: the release sets every block's priority
  EXPECT_EQ(e.priorityOf(t[0]), 80);
  EXPECT_EQ(e.priorityOf(t[1]), 80);  // its first token (4) is a prompt token
  EXPECT_EQ(e.priorityOf(t[2]), 20);  // generated before the pause (was 80: "prompt" of the resume)
  EXPECT_EQ(e.priorityOf(t[3]), 20);  // generated
  EXPECT_TRUE(e.m->checkInvariants().isOk());

  // A closed range is cut at the prompt's end too; the prompt length must lie in the prompt.
  AddSequenceOptions bad;
  bad.num_prompt_tokens = 0;
  EXPECT_EQ(e.m->addSequence(2, iota(5, 300), bad).status().code(), StatusCode::kInvalidArgument);
  bad.num_prompt_tokens = 6;
  EXPECT_EQ(e.m->addSequence(2, iota(5, 300), bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(e.m->hasSequence(2));
}

TEST(KvRetentionTest, ClosedRangeEndsAtThePromptOfAResumedSequence) {
  Env e(16);
  KvCacheRetentionConfig rc;
  rc.token_range_retention_configs = {{0, 100, 70, std::nullopt}};  // beyond the 6-token prompt
  rc.decode_retention_priority = 15;
  SimSequence s{1, iota(6), {}, {}};
  s.tokens.insert(s.tokens.end(), {900, 901, 902, 903, 904, 905, 906});  // generated before a pause
  AddSequenceOptions o;
  o.retention = rc;
  o.num_prompt_tokens = 6;
  ASSERT_EQ(e.m->addSequence(1, s.tokens, o)->status, KvAllocStatus::kOk);
  ASSERT_EQ(runStep(*e.m, e.mem, s), "");
  std::vector<BlockId> t(e.m->blockTable(1).begin(), e.m->blockTable(1).end());
  ASSERT_TRUE(e.m->removeSequence(1).isOk());
  EXPECT_EQ(e.priorityOf(t[0]), 70);
  EXPECT_EQ(e.priorityOf(t[1]), 70);
  EXPECT_EQ(e.priorityOf(t[2]), 15);
}

TEST(KvRetentionTest, DurationsNearInt64MaxNeverExpire) {
  // now + duration used to overflow (undefined behaviour; in practice a deadline in the past):
  // the priority fell back to 35 at the first eviction decision. It saturates now.
  for (int64_t duration : {kMax, kMax - 1, kMax / 2 + 1}) {
    SCOPED_TRACE(duration);
    Env e(4);
    e.clock.setMs(1000);
    KvCacheRetentionConfig rc = promptAndDecode(90, 90);
    rc.token_range_retention_configs[0].duration_ms = duration;
    rc.decode_duration_ms = duration;
    SimSequence a{1, iota(4), {}, {}};
    AddSequenceOptions o;
    o.retention = rc;
    ASSERT_EQ(e.m->addSequence(1, a.tokens, o)->status, KvAllocStatus::kOk);
    ASSERT_EQ(runStep(*e.m, e.mem, a), "");
    e.decode(a, 4, 900);  // block 1 (4-7): generated, decode_duration_ms
    std::vector<BlockId> ta(e.m->blockTable(1).begin(), e.m->blockTable(1).end());
    ASSERT_TRUE(e.m->removeSequence(1).isOk());
    e.clock.setMs(kMax / 2);
    SimSequence b{2, iota(5, 100), {}, {}};  // default priority, released later
    ASSERT_EQ(e.m->addSequence(2, b.tokens)->status, KvAllocStatus::kOk);
    ASSERT_EQ(runStep(*e.m, e.mem, b), "");
    const uint64_t b0 = e.m->blockInfo(KvPool::kPrimary, e.m->blockTable(2)[0]).hash;
    ASSERT_TRUE(e.m->removeSequence(2).isOk());
    e.m->drainEvents();
    // Needs 2 blocks, 1 is free: one eviction, and it must take b's 35 block, not a's 90 ones.
    ASSERT_EQ(e.m->addSequence(3, iota(5, 500))->status, KvAllocStatus::kOk);
    ASSERT_EQ(e.evicted.size(), 1u);
    EXPECT_EQ(e.evicted[0], b0);
    EXPECT_EQ(e.priorityOf(ta[0]), 90);
    EXPECT_EQ(e.priorityOf(ta[1]), 90);
    for (const auto& ev : e.m->drainEvents())
      EXPECT_FALSE(std::holds_alternative<KvCacheUpdatedData>(ev.data)) << "no priority fell back";
  }
}

}  // namespace
}  // namespace llmrt
