// KV cache events through the executor (Executor / LLM::getKvCacheEvents): replaying them
// must give what the KV cache really holds — every request's computed blocks stored, evicted
// blocks removed, the prefix a later request reuses exactly the one the events predict — and
// the stats' evictions (primary and host pool) must equal the Removed events of each level.
#include <map>
#include <optional>
#include <thread>

#include "executor_test_util.h"
#include "llmrt/kv_cache_events.h"

namespace llmrt {
namespace {

using namespace extest;

constexpr int32_t kT = 16;  // tokens per block (baseConfig)

// The reuse tree as the events describe it.
struct EventMirror {
  struct Block {
    std::optional<uint64_t> parent;
    std::vector<TokenId> tokens;
    int32_t level = 0;
  };
  std::map<uint64_t, Block> blocks;
  std::optional<KvCacheCreatedData> created;
  uint64_t next_id = 0, stored = 0, removed[2] = {0, 0}, moved_to[2] = {0, 0};

  void apply(const std::vector<KvCacheEvent>& events) {
    for (const KvCacheEvent& e : events) {
      ASSERT_EQ(e.event_id, next_id) << "no event may be lost here";
      ++next_id;
      if (const auto* c = std::get_if<KvCacheCreatedData>(&e.data)) {
        created = *c;
      } else if (const auto* s = std::get_if<KvCacheStoredData>(&e.data)) {
        std::optional<uint64_t> parent = s->parent_hash;
        for (const KvCacheStoredBlockData& b : s->blocks) {
          ASSERT_TRUE(!parent || blocks.count(*parent)) << "stored under an unknown parent";
          ASSERT_FALSE(blocks.count(b.block_hash)) << "stored twice";
          ASSERT_EQ(b.tokens.size(), static_cast<size_t>(kT));
          blocks[b.block_hash] = Block{parent, b.tokens, b.cache_level};
          ++stored;
          parent = b.block_hash;
        }
      } else if (const auto* r = std::get_if<KvCacheRemovedData>(&e.data)) {
        for (uint64_t h : r->block_hashes) {
          auto it = blocks.find(h);
          ASSERT_NE(it, blocks.end()) << "removed an unknown block";
          ++removed[it->second.level];
          blocks.erase(it);
        }
      } else {
        const auto& u = std::get<KvCacheUpdatedData>(e.data);
        auto it = blocks.find(u.block_hash);
        ASSERT_NE(it, blocks.end()) << "updated an unknown block";
        if (u.cache_level) {
          ASSERT_EQ(u.cache_level->old_value, it->second.level);
          it->second.level = u.cache_level->new_value;
          ++moved_to[it->second.level];
        }
      }
    }
  }
  // The chain of cached blocks holding tokens[0, n * kT), walked from the root.
  std::vector<uint64_t> chain(const std::vector<TokenId>& tokens, size_t max_blocks) const {
    std::vector<uint64_t> out;
    std::optional<uint64_t> parent;
    for (size_t i = 0; i < max_blocks && (i + 1) * kT <= tokens.size(); ++i) {
      std::optional<uint64_t> found;
      for (const auto& [h, b] : blocks)
        if (b.parent == parent &&
            std::equal(b.tokens.begin(), b.tokens.end(), tokens.begin() + static_cast<ptrdiff_t>(i * kT)))
          found = h;
      if (!found) break;
      out.push_back(*found);
      parent = found;
    }
    return out;
  }
  size_t numAtLevel(int32_t level) const {
    size_t n = 0;
    for (const auto& [h, b] : blocks) n += b.level == level ? 1 : 0;
    return n;
  }
};

std::vector<TokenId> withTail(std::vector<TokenId> p, int n, int base) {
  for (int i = 0; i < n; ++i) p.push_back(static_cast<TokenId>(base + i));
  return p;
}

void runMirroredWorkload(uint64_t host_cache_size) {
  auto c = baseConfig(128);                        // 8 blocks of 16 tokens
  c.kv_cache_config.enable_partial_reuse = false;  // reuse is whole blocks: exactly predictable
  c.kv_cache_config.event_buffer_max_size = 100000;
  c.kv_cache_config.host_cache_size = host_cache_size;
  auto llm = makeLlm(c);
  ASSERT_TRUE(llm);
  EventMirror mirror;
  mirror.apply(llm->getKvCacheEvents(std::chrono::milliseconds(0)));
  ASSERT_TRUE(mirror.created.has_value());
  ASSERT_EQ(mirror.created->num_blocks_per_cache_level.size(), 2u);
  EXPECT_EQ(mirror.created->num_blocks_per_cache_level[0], 8);
  EXPECT_EQ(mirror.created->tokens_per_block, kT);
  const int32_t secondary_blocks = mirror.created->num_blocks_per_cache_level[1];
  EXPECT_EQ(secondary_blocks > 0, host_cache_size > 0);

  // A 32-token system prompt with different questions, between prompts that need 7 of the 8
  // blocks and push cached blocks out (to the host pool where there is one).
  const std::vector<TokenId> sys = prompt(32, 5);
  std::vector<std::vector<TokenId>> workload;
  for (int k = 0; k < 6; ++k) {
    workload.push_back(withTail(sys, 10 + k, 300 + 20 * k));
    workload.push_back(prompt(100, 60 + k % 3));  // repeats: reused from either pool
  }
  int reused_requests = 0;
  for (size_t i = 0; i < workload.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    const std::vector<TokenId>& p = workload[i];
    // What the events say the cache will hand this prompt: whole blocks before its last token.
    const size_t predicted = mirror.chain(p, (p.size() - 1) / kT).size() * kT;
    auto out = llm->generate({Prompt::fromIds(p)}, {greedy(8)});
    ASSERT_TRUE(out.isOk());
    const RequestOutput& o = (*out)[0];
    ASSERT_TRUE(o.status.isOk()) << o.status.toString();
    EXPECT_EQ(static_cast<size_t>(o.cached_tokens), predicted);
    reused_requests += o.cached_tokens > 0 ? 1 : 0;
    mirror.apply(llm->getKvCacheEvents(std::chrono::milliseconds(0)));
    // Every full block the request computed (all but the last sampled token) is cached now.
    std::vector<TokenId> all = p;
    all.insert(all.end(), o.outputs[0].token_ids.begin(), o.outputs[0].token_ids.end());
    const size_t computed_blocks = (all.size() - 1) / kT;
    EXPECT_EQ(mirror.chain(all, computed_blocks).size(), computed_blocks);
    // And nothing else holds memory: the primary pool's cached blocks are the mirror's.
    const ExecutorStats st = llm->executor().stats();
    EXPECT_EQ(st.kv_used_blocks, 0);
    EXPECT_EQ(mirror.numAtLevel(kKvCacheLevelPrimary),
              static_cast<size_t>(st.kv_total_blocks - st.kv_free_blocks));
    EXPECT_LE(mirror.numAtLevel(kKvCacheLevelSecondary), static_cast<size_t>(secondary_blocks));
  }
  EXPECT_GE(reused_requests, 5);  // every later system-prompt request reuses at least its first block

  const LlmStats s = llm->stats();
  EXPECT_GT(s.evicted_blocks + s.offloaded_blocks, 0u);
  EXPECT_EQ(s.evicted_blocks, mirror.removed[kKvCacheLevelPrimary]);
  EXPECT_EQ(s.evicted_secondary_blocks, mirror.removed[kKvCacheLevelSecondary]);
  EXPECT_EQ(s.offloaded_blocks, mirror.moved_to[kKvCacheLevelSecondary]);
  EXPECT_EQ(s.onboarded_blocks, mirror.moved_to[kKvCacheLevelPrimary]);
  if (host_cache_size > 0) {
    EXPECT_GT(s.offloaded_blocks, 0u);
    EXPECT_GT(s.onboarded_blocks, 0u);
    EXPECT_GT(s.evicted_secondary_blocks, 0u);  // the small host pool overflows too
    EXPECT_EQ(llm->executor().stats().kv_evicted_secondary_blocks, s.evicted_secondary_blocks);
  } else {
    EXPECT_EQ(s.evicted_secondary_blocks, 0u);
  }
}

TEST(ExecutorKvEvents, EventsMirrorWhatWasCachedAndEvicted) {
  LLMRT_REQUIRE_MODEL();
  runMirroredWorkload(0);
}

TEST(ExecutorKvEvents, HostPoolEvictionsAreCountedAndReported) {
  LLMRT_REQUIRE_MODEL();
  // 3 blocks of the float32 cache (layers x 2 x kv heads x head_dim x 4 bytes x 16), 6 of a 16-bit one.
  runMirroredWorkload(3 * model()->kvBlockBytes(kT));
}

TEST(ExecutorKvEvents, WaitingForEventsTimesOutWakesAndEnds) {
  LLMRT_REQUIRE_MODEL();
  auto c = baseConfig(512);
  c.kv_cache_config.event_buffer_max_size = 4;  // a small buffer drops the oldest
  auto llm = makeLlm(c);
  ASSERT_TRUE(llm);
  auto first = llm->getKvCacheEvents(std::chrono::milliseconds(0));
  ASSERT_EQ(first.size(), 1u);  // Created
  EXPECT_TRUE(std::holds_alternative<KvCacheCreatedData>(first[0].data));
  EXPECT_TRUE(llm->getKvCacheEvents(std::chrono::milliseconds(20)).empty());  // nothing new: times out

  // A waiter without a timeout wakes when a request stores blocks.
  std::vector<KvCacheEvent> got;
  std::thread waiter([&] { got = llm->getKvCacheEvents(); });
  auto out = llm->generate({Prompt::fromIds(prompt(100, 3))}, {greedy(4)});  // 6 blocks stored
  ASSERT_TRUE(out.isOk());
  waiter.join();
  ASSERT_FALSE(got.empty());
  auto rest = llm->getKvCacheEvents(std::chrono::milliseconds(0));
  got.insert(got.end(), rest.begin(), rest.end());
  EXPECT_LE(got.size(), 4u + 4u);  // at most one buffer's worth in each queue
  int stored = 0;
  for (const auto& e : got) stored += std::holds_alternative<KvCacheStoredData>(e.data) ? 1 : 0;
  EXPECT_GT(stored, 0);
  EXPECT_GT(got.back().event_id, 4u);  // 7 events (Created + 6 Stored): the oldest were dropped

  // Shutdown ends a waiter; without events enabled nothing ever waits.
  std::thread waiter2([&] { got = llm->getKvCacheEvents(); });
  llm->executor().shutdown();
  waiter2.join();
  EXPECT_TRUE(got.empty());
  auto off = makeLlm(baseConfig(512));
  ASSERT_TRUE(off);
  EXPECT_TRUE(off->getKvCacheEvents().empty());
}

}  // namespace
}  // namespace llmrt
