// Sliding window: blocks wholly outside the window are released (never
// overwritten in place while shared), and reuse stays correct for windowed
// models (TensorRT-LLM issue #2912: reuse + sliding window returned garbage).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kv/kv_cache_manager.h"
#include "kv_test_util.h"

namespace llmrt {
namespace {

using kvtest::concat;
using kvtest::iota;
using kvtest::runStep;
using kvtest::SimKvMemory;
using kvtest::SimSequence;

constexpr int32_t kT = 4;
constexpr int32_t kW = 8;

struct WinEnv {
  explicit WinEnv(int32_t np) : mem(kT, np, 0) {
    KvCacheConfig c;
    c.tokens_per_block = kT;
    KvCacheManagerOptions o;
    o.copier = &mem;
    o.attention_window = kW;
    auto r = KvCacheManager::create(c, np, 0, o);
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    m = std::move(r).value();
  }
  std::string step(SimSequence& s) { return runStep(*m, mem, s, kW); }
  std::string decode(SimSequence& s, TokenId t) {
    s.tokens.push_back(t);
    s.refreshIds();
    auto st = m->appendToken(s.id, t);
    if (!st.isOk() || *st != KvAllocStatus::kOk) return "append failed";
    return step(s);
  }
  int32_t held(SequenceId id) const {
    int32_t n = 0;
    for (BlockId b : m->blockTable(id)) n += b != kNoBlock;
    return n;
  }
  SimKvMemory mem;
  std::unique_ptr<KvCacheManager> m;
};

TEST(KvWindowTest, ReleasesBlocksOutsideTheWindow) {
  WinEnv e(16);
  SimSequence s{1, iota(6), {}, {}};
  ASSERT_TRUE(e.m->addSequence(1, s.tokens).isOk());
  ASSERT_EQ(e.step(s), "");
  // Admission bound: the window behind a 6-token chunk plus that chunk, ceil(13 / 4) + 1.
  EXPECT_EQ(e.m->numBlocksNeeded(6, 100), 5);
  const int32_t bound = 3;  // decode holds at most ceil(W / T) + 1 blocks
  for (int i = 0; i < 40; ++i) {
    ASSERT_EQ(e.decode(s, 100 + i), "") << "step " << i;
    const int32_t computed = e.m->numComputedTokens(1);
    auto table = e.m->blockTable(1);
    // Entry j is released exactly when all its positions are < computed - W + 1.
    for (int32_t j = 0; j < static_cast<int32_t>(table.size()); ++j) {
      const bool out = (j + 1) * kT <= computed - kW + 1;
      EXPECT_EQ(table[j] == kNoBlock, out) << "block " << j << " at " << computed << " computed tokens";
    }
    EXPECT_LE(e.held(1), bound);
    EXPECT_EQ(e.m->stats().primary.used, e.held(1));
  }
  EXPECT_TRUE(e.m->checkInvariants().isOk());
  ASSERT_TRUE(e.m->removeSequence(1).isOk());
  KvCacheStats st = e.m->stats();
  EXPECT_EQ(st.primary.used, 0);
  // Only blocks full before the first release were stored: tokens 0..7.
  EXPECT_EQ(st.primary.cached, 2);
  EXPECT_EQ(st.primary.free, 14);
}

// Issue #2912: with reuse and a sliding window, a request must never be handed
// a prefix whose blocks were released and overwritten.
TEST(KvWindowTest, ReuseNeverHandsOutReleasedBlocks) {
  WinEnv e(16);
  SimSequence a{1, iota(10), {}, {}};
  ASSERT_TRUE(e.m->addSequence(1, a.tokens).isOk());
  ASSERT_EQ(e.step(a), "");
  // a decodes far past its window while another sequence churns through the
  // blocks a released, overwriting them.
  SimSequence churn{2, iota(3, 7000), {}, {}};
  ASSERT_TRUE(e.m->addSequence(2, churn.tokens).isOk());
  ASSERT_EQ(e.step(churn), "");
  for (int i = 0; i < 30; ++i) {
    ASSERT_EQ(e.decode(a, 100 + i), "");
    ASSERT_EQ(e.decode(churn, 8000 + i), "");
  }
  // A continuation of a's whole history: only blocks stored before a's first
  // release (tokens 0..7) may be reused, and their content must be intact.
  SimSequence b{3, concat(std::vector<TokenId>(a.tokens.begin(), a.tokens.begin() + 30), {1, 2, 3}), {}, {}};
  ASSERT_TRUE(e.m->removeSequence(2).isOk());
  auto r = e.m->addSequence(3, b.tokens);
  ASSERT_TRUE(r.isOk());
  ASSERT_EQ(r->status, KvAllocStatus::kOk);
  EXPECT_EQ(r->num_reused_tokens, 8);
  ASSERT_EQ(e.step(b), "");  // checks every position in b's window
  for (int i = 0; i < 10; ++i) ASSERT_EQ(e.decode(b, 9000 + i), "");
  // The same prompt again: 8 tokens from a's stored blocks plus token 8 copied from
  // the block b stored under them (b stored before its first release).
  SimSequence c{4, iota(10), {}, {}};
  ASSERT_TRUE(e.m->removeSequence(1).isOk());
  auto rc = e.m->addSequence(4, c.tokens);
  ASSERT_TRUE(rc.isOk());
  EXPECT_EQ(rc->num_reused_tokens, 9);
  EXPECT_EQ(rc->num_partial_tokens, 1);
  ASSERT_EQ(e.step(c), "");
  EXPECT_TRUE(e.m->checkInvariants().isOk());
}

TEST(KvWindowTest, LongPromptReuseReleasesWhatTheWindowDoesNotNeed) {
  WinEnv e(16);
  SimSequence a{1, iota(20), {}, {}};  // one chunk longer than the window: all 5 blocks stored
  ASSERT_TRUE(e.m->addSequence(1, a.tokens).isOk());
  ASSERT_EQ(e.step(a), "");
  for (int i = 0; i < 12; ++i) ASSERT_EQ(e.decode(a, 100 + i), "");
  ASSERT_TRUE(e.m->removeSequence(1).isOk());
  EXPECT_EQ(e.m->stats().primary.cached, 5);
  SimSequence d{2, iota(20), {}, {}};
  auto r = e.m->addSequence(2, d.tokens);
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r->num_reused_tokens, 19);
  // Positions < 19 - 8 + 1 = 12 are outside the window of token 19: blocks 0-2 released.
  auto table = e.m->blockTable(2);
  ASSERT_EQ(table.size(), 5u);
  EXPECT_EQ(table[0], kNoBlock);
  EXPECT_EQ(table[2], kNoBlock);
  EXPECT_NE(table[3], kNoBlock);
  ASSERT_EQ(e.step(d), "");
  for (int i = 0; i < 6; ++i) ASSERT_EQ(e.decode(d, 500 + i), "");
  EXPECT_TRUE(e.m->checkInvariants().isOk());
}

TEST(KvWindowTest, ReleasedCachedBlocksBecomeReclaimable) {
  WinEnv e(16);
  SimSequence a{1, iota(20), {}, {}};
  ASSERT_TRUE(e.m->addSequence(1, a.tokens).isOk());
  ASSERT_EQ(e.step(a), "");
  ASSERT_EQ(e.decode(a, 100), "");
  // Blocks 0-2 are released but cached; block 3's child (block 4) is still held,
  // so the chain is locked: nothing is reclaimable yet.
  EXPECT_EQ(e.m->stats().primary.cached, 3);
  EXPECT_EQ(e.m->numReclaimableBlocks(), 0);
  for (int i = 1; i < 12; ++i) ASSERT_EQ(e.decode(a, 100 + i), "");
  // The window passed block 4: the whole stored chain is released and reclaimable.
  EXPECT_EQ(e.m->numReclaimableBlocks(), 5);
  EXPECT_TRUE(e.m->checkInvariants().isOk());
}

// The manager releases by the window the engine resolved (KvCacheManagerOptions::attention_window:
// the largest of the layers' windows, 0 when a layer attends fully), never by the config's
// per-layer list, which it does not interpret.
TEST(KvWindowTest, ReleasesByTheResolvedWindowOnly) {
  auto run = [](int32_t window, std::vector<int32_t> config_list) {
    SimKvMemory mem(kT, 32, 0);
    KvCacheConfig c;
    c.tokens_per_block = kT;
    c.max_attention_window = std::move(config_list);
    KvCacheManagerOptions o;
    o.copier = &mem;
    o.attention_window = window;
    auto r = KvCacheManager::create(c, 32, 0, o);
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    std::unique_ptr<KvCacheManager> m = std::move(r).value();
    EXPECT_EQ(m->attentionWindow(), window);
    SimSequence s{1, iota(13), {}, {}};
    EXPECT_TRUE(m->addSequence(1, s.tokens).isOk());
    EXPECT_EQ(runStep(*m, mem, s, window > 0 ? std::optional<int32_t>(window) : std::nullopt), "");
    for (int i = 0; i < 30; ++i) {
      s.tokens.push_back(100 + i);
      s.refreshIds();
      auto st = m->appendToken(1, 100 + i);
      EXPECT_TRUE(st.isOk() && *st == KvAllocStatus::kOk);
      EXPECT_EQ(runStep(*m, mem, s, window > 0 ? std::optional<int32_t>(window) : std::nullopt), "");
    }
    std::vector<BlockId> table(m->blockTable(1).begin(), m->blockTable(1).end());
    EXPECT_TRUE(m->checkInvariants().isOk());
    return table;
  };
  // A full-attention layer among windowed ones (resolved window 0): nothing is released.
  std::vector<BlockId> full = run(0, {kW, 4096});
  ASSERT_EQ(full.size(), 11u);  // 43 tokens in blocks of 4
  for (BlockId b : full) EXPECT_NE(b, kNoBlock);
  // The resolved window releases every block wholly below (43 - W + 1 = 36): blocks 0-8.
  for (std::vector<int32_t> list : {std::vector<int32_t>{}, std::vector<int32_t>{2, kW}}) {
    std::vector<BlockId> t = run(kW, list);
    ASSERT_EQ(t.size(), 11u);
    for (int32_t j = 0; j < 11; ++j) EXPECT_EQ(t[static_cast<size_t>(j)] == kNoBlock, j < 9) << "block " << j;
  }
  KvCacheManagerOptions bad;
  bad.attention_window = -1;
  auto r = KvCacheManager::create(KvCacheConfig{}, 8, 0, bad);
  ASSERT_FALSE(r.isOk());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("attention_window"));
}

}  // namespace
}  // namespace llmrt
