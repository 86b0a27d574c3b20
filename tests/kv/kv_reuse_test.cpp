// Block reuse: full-block prefix matching through the radix tree, the last
// prompt token rule, early reuse vs reuse after termination, partial reuse by
// copy, key extras, hash collisions, stats and events of reuse.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "kv/block_key.h"
#include "kv/kv_cache_manager.h"
#include "kv_test_util.h"

namespace llmrt {
namespace {

using kvtest::concat;
using kvtest::iota;
using kvtest::runStep;
using kvtest::SimKvMemory;
using kvtest::SimSequence;

struct Fixture {
  explicit Fixture(KvCacheConfig c, int32_t np = 32, int32_t ns = 0, uint64_t mask = ~uint64_t{0})
      : mem(c.tokens_per_block, np, ns) {
    KvCacheManagerOptions o;
    o.copier = &mem;
    o.debug_hash_mask = mask;
    auto r = KvCacheManager::create(c, np, ns, o);
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    m = std::move(r).value();
  }
  // Adds, runs the prompt through the simulated runner, returns the add result.
  AddSequenceResult addAndPrefill(SimSequence& s, AddSequenceOptions o = {}) {
    o.extras = s.extras;
    auto r = m->addSequence(s.id, s.tokens, o);
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    if (r->status == KvAllocStatus::kOk) {
      std::string err = runStep(*m, mem, s);
      EXPECT_EQ(err, "");
    }
    return *r;
  }
  void decode(SimSequence& s, int32_t n, TokenId base = 1000) {
    for (int32_t i = 0; i < n; ++i) {
      s.tokens.push_back(base + i);
      ASSERT_EQ(*m->appendToken(s.id, s.tokens.back()), KvAllocStatus::kOk);
      s.refreshIds();
      ASSERT_EQ(runStep(*m, mem, s), "");
    }
  }
  SimKvMemory mem;
  std::unique_ptr<KvCacheManager> m;
};

KvCacheConfig cfg(int32_t tpb = 4) {
  KvCacheConfig c;
  c.tokens_per_block = tpb;
  c.event_buffer_max_size = 1000;
  return c;
}

TEST(KvReuseTest, ReuseAfterTermination) {
  Fixture f(cfg());
  SimSequence a{1, iota(12), {}, {}};
  EXPECT_EQ(f.addAndPrefill(a).num_reused_tokens, 0);
  std::vector<BlockId> a_table(f.m->blockTable(1).begin(), f.m->blockTable(1).end());
  ASSERT_TRUE(f.m->removeSequence(1).isOk());
  EXPECT_EQ(f.m->stats().primary.cached, 3);

  SimSequence b{2, concat(iota(12), {90, 91, 92, 93}), {}, {}};
  AddSequenceResult r = f.addAndPrefill(b);
  EXPECT_EQ(r.num_reused_tokens, 12);
  EXPECT_EQ(r.num_reused_blocks, 3);
  EXPECT_EQ(r.num_partial_tokens, 0);
  EXPECT_EQ(f.m->numReusedTokens(2), 12);
  auto bt = f.m->blockTable(2);
  ASSERT_EQ(bt.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(bt[i], a_table[i]);
  EXPECT_TRUE(f.m->checkInvariants().isOk());
}

TEST(KvReuseTest, LastPromptTokenIsAlwaysRecomputed) {
  Fixture f(cfg());
  SimSequence a{1, iota(12), {}, {}};
  f.addAndPrefill(a);
  ASSERT_TRUE(f.m->removeSequence(1).isOk());
  // Same 12 tokens: blocks 0-1 shared, block 2's first 3 tokens copied, token 12 recomputed.
  SimSequence b{2, iota(12), {}, {}};
  AddSequenceResult r = f.addAndPrefill(b);
  EXPECT_EQ(r.num_reused_tokens, 11);
  EXPECT_EQ(r.num_reused_blocks, 2);
  EXPECT_EQ(r.num_partial_tokens, 3);
  EXPECT_EQ(f.m->numComputedTokens(2), 12);

  KvCacheConfig no_partial = cfg();
  no_partial.enable_partial_reuse = false;
  Fixture g(no_partial);
  SimSequence a2{1, iota(12), {}, {}};
  g.addAndPrefill(a2);
  ASSERT_TRUE(g.m->removeSequence(1).isOk());
  SimSequence b2{2, iota(12), {}, {}};
  EXPECT_EQ(g.addAndPrefill(b2).num_reused_tokens, 8);
  // A prompt of exactly one block can reuse at most T-1 tokens, and only by copy.
  SimSequence c2{3, iota(4), {}, {}};
  EXPECT_EQ(g.addAndPrefill(c2).num_reused_tokens, 0);
  SimSequence c3{4, iota(4), {}, {}};
  EXPECT_EQ(f.addAndPrefill(c3).num_reused_tokens, 3);
}

TEST(KvReuseTest, EarlyReuseWhileTheFirstRequestRuns) {
  Fixture f(cfg());
  SimSequence sys{1, concat(iota(16), {500, 501}), {}, {}};  // shared 16-token system prompt
  f.addAndPrefill(sys);
  // The first request is still decoding; a second one with the same system prompt reuses it now.
  SimSequence other{2, concat(iota(16), {700, 701, 702}), {}, {}};
  AddSequenceResult r = f.addAndPrefill(other);
  EXPECT_EQ(r.num_reused_tokens, 16);
  EXPECT_EQ(r.num_reused_blocks, 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(f.m->blockTable(1)[i], f.m->blockTable(2)[i]);
    KvBlockInfo info = f.m->blockInfo(KvPool::kPrimary, f.m->blockTable(1)[i]);
    EXPECT_EQ(info.ref_count, 2);
    EXPECT_TRUE(info.in_tree);
  }
  // Both keep decoding; the runner check proves nobody writes a shared block.
  f.decode(sys, 10, 2000);
  f.decode(other, 7, 3000);
  EXPECT_TRUE(f.m->checkInvariants().isOk());
  // Generated tokens become reusable too (multi-turn): sys's 28 tokens are 7 full blocks.
  SimSequence turn2{
      3, concat(std::vector<TokenId>(sys.tokens.begin(), sys.tokens.begin() + 26), {9}), {}, {}};
  EXPECT_EQ(f.addAndPrefill(turn2).num_reused_tokens, 26);  // 6 full blocks + 2 copied
}

TEST(KvReuseTest, NothingReusableBeforeItIsComputed) {
  Fixture f(cfg());
  ASSERT_TRUE(f.m->addSequence(1, iota(16)).isOk());  // allocated, not computed
  auto r = f.m->addSequence(2, iota(16));
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r->num_reused_tokens, 0);
  // After computing half of it (chunked), exactly those blocks become reusable.
  ASSERT_TRUE(f.m->markComputed(1, 9).isOk());
  EXPECT_EQ(f.m->lookupPrefix(iota(16)).num_full_blocks, 2);
  EXPECT_EQ(f.m->lookupPrefix(iota(16)).num_reusable_tokens, 8);
}

TEST(KvReuseTest, ConcurrentDuplicatesShareTheCachedTwinAndTheChainGoesOn) {
  Fixture f(cfg());
  SimSequence a{1, iota(8), {}, {}};
  SimSequence b{2, concat(iota(8), iota(8, 100)), {}, {}};
  // Both are added before either computes: both compute the shared 8 tokens.
  ASSERT_EQ(f.m->addSequence(1, a.tokens)->num_reused_tokens, 0);
  ASSERT_EQ(f.m->addSequence(2, b.tokens)->num_reused_tokens, 0);
  EXPECT_EQ(f.m->numFreeBlocks(), 32 - 2 - 4);
  const BlockId b0_private = f.m->blockTable(2)[0];
  ASSERT_EQ(runStep(*f.m, f.mem, a), "");
  f.m->drainEvents();
  ASSERT_EQ(runStep(*f.m, f.mem, b), "");
  // b's first two blocks duplicate a's: b now references a's blocks and its
  // private copies went back to the free list; its last two hang under them.
  EXPECT_EQ(f.m->blockTable(2)[0], f.m->blockTable(1)[0]);
  EXPECT_EQ(f.m->blockTable(2)[1], f.m->blockTable(1)[1]);
  EXPECT_NE(f.m->blockTable(2)[0], b0_private);
  EXPECT_EQ(f.m->blockInfo(KvPool::kPrimary, f.m->blockTable(2)[0]).ref_count, 2);
  EXPECT_EQ(f.m->blockInfo(KvPool::kPrimary, b0_private).ref_count, 0);
  EXPECT_FALSE(f.m->blockInfo(KvPool::kPrimary, b0_private).in_tree);
  EXPECT_TRUE(f.m->blockInfo(KvPool::kPrimary, f.m->blockTable(2)[2]).in_tree);
  EXPECT_EQ(f.m->blockInfo(KvPool::kPrimary, f.m->blockTable(2)[2]).parent_hash,
            f.m->blockInfo(KvPool::kPrimary, f.m->blockTable(1)[1]).hash);
  EXPECT_EQ(f.m->numFreeBlocks(), 32 - 2 - 2);
  // Only b's two new blocks were stored (no second Stored for the twins, no Removed).
  int stored = 0, removed = 0;
  for (const auto& e : f.m->drainEvents()) {
    stored += std::holds_alternative<KvCacheStoredData>(e.data);
    removed += std::holds_alternative<KvCacheRemovedData>(e.data);
  }
  EXPECT_EQ(stored, 2);
  EXPECT_EQ(removed, 0);
  EXPECT_TRUE(f.m->checkInvariants().isOk()) << f.m->checkInvariants().toString();
  SimSequence c{3, concat(b.tokens, {7}), {}, {}};
  AddSequenceResult r = f.addAndPrefill(c);
  EXPECT_EQ(r.num_reused_tokens, 16);
  EXPECT_EQ(f.m->blockTable(3)[0], f.m->blockTable(1)[0]);
  EXPECT_EQ(f.m->blockTable(3)[3], f.m->blockTable(2)[3]);
  // a leaves first: the blocks b shares stay referenced (used), nothing is locked without a holder.
  ASSERT_TRUE(f.m->removeSequence(1).isOk());
  KvCacheStats s = f.m->stats();
  EXPECT_EQ(s.primary.cached, s.primary.reclaimable);
  ASSERT_TRUE(f.m->removeSequence(2).isOk());
  ASSERT_TRUE(f.m->removeSequence(3).isOk());
  s = f.m->stats();
  EXPECT_EQ(s.primary.cached, 4);
  EXPECT_EQ(s.primary.reclaimable, 4);
  EXPECT_EQ(s.primary.free, 28);
  EXPECT_TRUE(f.m->checkInvariants().isOk());
}

// The leak the executor hit: identical prompts admitted together, greedy (equal)
// continuations. A GUARANTEED_NO_EVICT-style reservation (available >= sum of
// numBlocksNeededToComplete) must hold after every call, and every allocation
// made within it must succeed.
TEST(KvReuseTest, IdenticalConcurrentPromptsNeverBreakTheReservation) {
  Fixture f(cfg(), /*np=*/8);
  std::map<SequenceId, SimSequence*> running;
  auto reserved = [&] {
    int32_t n = 0;
    for (auto& [id, s] : running) n += f.m->numBlocksNeededToComplete(id);
    return n;
  };
  auto audit = [&](const char* where) {
    SCOPED_TRACE(where);
    const KvCacheStats s = f.m->stats();
    EXPECT_EQ(s.primary.free + s.primary.used + s.primary.cached, s.primary.total);
    EXPECT_EQ(s.primary.cached, s.primary.reclaimable) << "a cached block is locked without a holder";
    EXPECT_GE(f.m->numAvailableBlocks(), reserved()) << "reservation exceeded";
    Status st = f.m->checkInvariants();
    EXPECT_TRUE(st.isOk()) << st.toString();
  };
  auto admit = [&](SimSequence& s, int32_t max_new, std::optional<int32_t> first_chunk = std::nullopt) {
    ASSERT_LE(f.m->numBlocksNeeded(static_cast<int32_t>(s.tokens.size()), max_new),
              f.m->numAvailableBlocks() - reserved());
    AddSequenceOptions o;
    o.max_new_tokens = max_new;
    o.num_tokens_to_allocate = first_chunk;
    auto r = f.m->addSequence(s.id, s.tokens, o);
    ASSERT_TRUE(r.isOk());
    ASSERT_EQ(r->status, KvAllocStatus::kOk);
    running[s.id] = &s;
    audit("admit");
  };
  auto step = [&](SimSequence& s) {
    ASSERT_EQ(runStep(*f.m, f.mem, s), "");
    audit("step");
  };
  auto decode = [&](SimSequence& s, TokenId t) {
    s.tokens.push_back(t);
    s.refreshIds();
    auto st = f.m->appendToken(s.id, t);
    ASSERT_TRUE(st.isOk());
    ASSERT_EQ(*st, KvAllocStatus::kOk) << "allocation within the reservation failed";
    audit("append");
    step(s);
  };
  // a: 6 + 6 tokens (3 blocks), b: the same 6 + 14 (5 blocks): 8 blocks, the whole pool.
  SimSequence a{1, iota(6), {}, {}};
  SimSequence b{2, iota(6), {}, {}};
  admit(a, 6);
  admit(b, 14);
  step(a);
  step(b);
  for (int i = 0; i < 6; ++i) {  // greedy: both generate the same tokens
    decode(a, 50 + i);
    decode(b, 50 + i);
  }
  EXPECT_EQ(f.m->blockTable(1)[2], f.m->blockTable(2)[2]);
  ASSERT_TRUE(f.m->removeSequence(1).isOk());
  running.erase(1);
  audit("remove a");
  // b still holds the 3 blocks it shares with a: 5 blocks are free for c and b's rest.
  EXPECT_EQ(f.m->numAvailableBlocks(), 5);
  // c (3 blocks) is admitted with its first context chunk still to come.
  SimSequence c{3, iota(8, 200), {}, {}};
  admit(c, 4, /*first_chunk=*/0);
  // b fills and stores its block 3 before c allocates. It must hang under a
  // block b holds: hung under a's unreferenced cached block, it would lock a's
  // three blocks and leave c's reserved blocks short.
  for (int i = 0; i < 4; ++i) decode(b, 60 + i);
  {
    auto st = f.m->allocatePromptTokens(3, 8);
    ASSERT_TRUE(st.isOk());
    ASSERT_EQ(*st, KvAllocStatus::kOk) << "c's reserved prompt blocks are gone";
    audit("c's prompt");
  }
  step(c);
  for (int i = 0; i < 4; ++i) decode(c, 70 + i);
  for (int i = 0; i < 4; ++i) decode(b, 80 + i);
  ASSERT_TRUE(f.m->removeSequence(2).isOk());
  ASSERT_TRUE(f.m->removeSequence(3).isOk());
  running.clear();
  audit("end");
  EXPECT_EQ(f.m->numAvailableBlocks(), 8);
  EXPECT_EQ(f.m->stats().primary.used, 0);
}

// A twin that was offloaded meanwhile: the sequence keeps its private copy and
// stops storing (nothing is onboarded, nothing is locked on anyone's behalf).
TEST(KvReuseTest, DuplicateOfAnOffloadedBlockStaysPrivate) {
  Fixture f(cfg(), /*np=*/3, /*ns=*/4);
  SimSequence a{1, iota(4), {}, {}};
  SimSequence b{2, iota(4), {}, {}};
  ASSERT_EQ(f.m->addSequence(1, a.tokens)->status, KvAllocStatus::kOk);
  ASSERT_EQ(f.m->addSequence(2, b.tokens)->status, KvAllocStatus::kOk);
  ASSERT_EQ(runStep(*f.m, f.mem, a), "");
  ASSERT_TRUE(f.m->removeSequence(1).isOk());
  SimSequence c{3, iota(8, 300), {}, {}};  // 2 blocks: a's cached block goes to the secondary pool
  ASSERT_EQ(f.m->addSequence(3, c.tokens)->status, KvAllocStatus::kOk);
  EXPECT_EQ(f.m->stats().offloaded_blocks, 1u);
  EXPECT_EQ(f.m->stats().secondary.cached, 1);
  f.m->drainEvents();
  ASSERT_EQ(runStep(*f.m, f.mem, b), "");
  const KvBlockInfo info = f.m->blockInfo(KvPool::kPrimary, f.m->blockTable(2)[0]);
  EXPECT_FALSE(info.in_tree);
  EXPECT_EQ(info.ref_count, 1);
  for (const auto& e : f.m->drainEvents()) EXPECT_FALSE(std::holds_alternative<KvCacheStoredData>(e.data));
  const KvCacheStats s = f.m->stats();
  EXPECT_EQ(s.primary.used, 3);  // b's private block and c's two
  EXPECT_EQ(s.secondary.cached, 1);
  EXPECT_TRUE(f.m->checkInvariants().isOk()) << f.m->checkInvariants().toString();
}

TEST(KvReuseTest, PartialReuseCopiesTheMatchingTokens) {
  Fixture f(cfg());
  SimSequence a{1, iota(8), {}, {}};
  f.addAndPrefill(a);
  ASSERT_TRUE(f.m->removeSequence(1).isOk());
  SimSequence b{2, {1, 2, 3, 4, 5, 6, 99, 100, 101}, {}, {}};
  AddSequenceResult r = f.addAndPrefill(b);  // the runner check validates the copied KV
  EXPECT_EQ(r.num_reused_tokens, 6);
  EXPECT_EQ(r.num_partial_tokens, 2);
  EXPECT_EQ(f.m->numComputedTokens(2), 9);
  KvCacheStats s = f.m->stats();
  EXPECT_EQ(s.partial_reused_blocks, 1u);
  EXPECT_EQ(s.reused_tokens, 6u);
  EXPECT_EQ(s.missed_tokens, 8u + 3u);
  // The source block was not taken: a's full second block is still reusable.
  EXPECT_EQ(f.m->lookupPrefix(iota(9)).num_full_blocks, 2);
}

TEST(KvReuseTest, ExtrasSeparatePrefixes) {
  Fixture f(cfg());
  auto prompt = iota(13);
  SimSequence base{1, prompt, {}, {}};
  base.extras.lora_id = 7;
  base.extras.cache_salt = "tenant-a";
  f.addAndPrefill(base);
  ASSERT_TRUE(f.m->removeSequence(1).isOk());

  SequenceKeyExtras same = base.extras;
  EXPECT_EQ(f.m->lookupPrefix(prompt, same).num_reusable_tokens, 12);
  SequenceKeyExtras lora = same;
  lora.lora_id = 8;
  EXPECT_EQ(f.m->lookupPrefix(prompt, lora).num_reusable_tokens, 0);
  SequenceKeyExtras salt = same;
  salt.cache_salt = "tenant-b";
  EXPECT_EQ(f.m->lookupPrefix(prompt, salt).num_reusable_tokens, 0);
  EXPECT_EQ(f.m->lookupPrefix(prompt, {}).num_reusable_tokens, 0);

  // Multimodal: an image at positions 5..7 (block 1). Another image with the same
  // placeholder ids shares only block 0.
  SimSequence img{2, prompt, {}, {}};
  img.extras.multimodal = {MultimodalInput{{11, 12, 13, 14}, 5, 3}};
  f.addAndPrefill(img);
  ASSERT_TRUE(f.m->removeSequence(2).isOk());
  SimSequence img2{3, prompt, {}, {}};
  img2.extras.multimodal = {MultimodalInput{{21, 22, 23, 24}, 5, 3}};
  AddSequenceResult r = f.addAndPrefill(img2);
  EXPECT_EQ(r.num_reused_tokens, 4);
  ASSERT_TRUE(f.m->removeSequence(3).isOk());
  SimSequence img3{4, prompt, {}, {}};
  img3.extras.multimodal = {MultimodalInput{{11, 12, 13, 14}, 5, 3}};
  EXPECT_EQ(f.addAndPrefill(img3).num_reused_tokens, 12);
  EXPECT_TRUE(f.m->checkInvariants().isOk());
}

TEST(KvReuseTest, HashCollisionsNeverHandOutWrongKv) {
  // Mask every hash to 0: every block of every prompt collides.
  Fixture f(cfg(), 64, 0, /*mask=*/0);
  for (SequenceId id = 1; id <= 6; ++id) {
    SimSequence s{id, iota(13, static_cast<TokenId>(id * 100)), {}, {}};
    EXPECT_EQ(f.addAndPrefill(s).num_reused_tokens, 0) << id;
    ASSERT_TRUE(f.m->removeSequence(id).isOk());
  }
  // Same tokens, distinct salts: still separate under total collision.
  SimSequence a{10, iota(13), {}, {}};
  a.extras.cache_salt = "x";
  f.addAndPrefill(a);
  SimSequence b{11, iota(13), {}, {}};
  b.extras.cache_salt = "y";
  EXPECT_EQ(f.addAndPrefill(b).num_reused_tokens, 0);
  SimSequence c{12, iota(13, 300), {}, {}};
  EXPECT_EQ(f.addAndPrefill(c).num_reused_tokens, 12);  // seq 3's prompt, found among colliders
  EXPECT_TRUE(f.m->checkInvariants().isOk());
}

TEST(KvReuseTest, StatsAndHitRate) {
  Fixture f(cfg());
  SimSequence a{1, iota(16), {}, {}};
  f.addAndPrefill(a);
  SimSequence b{2, concat(iota(8), iota(8, 50)), {}, {}};
  f.addAndPrefill(b);
  KvCacheStats s = f.m->stats();
  EXPECT_EQ(s.reused_blocks, 2u);
  EXPECT_EQ(s.missed_blocks, 4u + 2u);
  EXPECT_EQ(s.reused_tokens, 8u);
  EXPECT_EQ(s.missed_tokens, 16u + 8u);
  EXPECT_DOUBLE_EQ(s.block_hit_rate, 2.0 / 8.0);
  EXPECT_DOUBLE_EQ(s.token_hit_rate, 8.0 / 32.0);
}

TEST(KvReuseTest, StoredEventsCarryChainedHashes) {
  Fixture f(cfg());
  SimSequence a{1, iota(9), {}, {}};
  a.extras.lora_id = 3;
  f.addAndPrefill(a);
  auto events = f.m->drainEvents();
  ASSERT_GE(events.size(), 3u);
  ASSERT_TRUE(std::holds_alternative<KvCacheCreatedData>(events[0].data));
  EXPECT_EQ(std::get<KvCacheCreatedData>(events[0].data).num_blocks_per_cache_level,
            (std::vector<int32_t>{32, 0}));
  EXPECT_EQ(std::get<KvCacheCreatedData>(events[0].data).tokens_per_block, 4);
  // One block per Stored event; the flat view below is what a router sees.
  struct Stored {
    std::optional<uint64_t> parent_hash;
    uint64_t block_hash;
    std::vector<TokenId> tokens;
    std::optional<uint64_t> lora_id;
    int32_t priority;
  };
  std::vector<Stored> stored;
  for (auto& e : events)
    if (auto* s = std::get_if<KvCacheStoredData>(&e.data)) {
      ASSERT_EQ(s->blocks.size(), 1u);
      const KvCacheStoredBlockData& b = s->blocks[0];
      EXPECT_EQ(b.cache_level, kKvCacheLevelPrimary);
      stored.push_back({s->parent_hash, b.block_hash, b.tokens, b.lora_id, b.priority});
    }
  ASSERT_EQ(stored.size(), 2u);
  std::vector<uint64_t> extras;
  buildBlockExtras(a.extras, 0, 4, extras);
  EXPECT_FALSE(stored[0].parent_hash.has_value());
  EXPECT_EQ(stored[0].block_hash, hashBlockKey(kRootBlockHash, std::vector<TokenId>{1, 2, 3, 4}, extras));
  EXPECT_EQ(stored[0].tokens, (std::vector<TokenId>{1, 2, 3, 4}));
  EXPECT_EQ(stored[0].lora_id, std::optional<uint64_t>(3));
  EXPECT_EQ(stored[0].priority, 35);
  ASSERT_TRUE(stored[1].parent_hash.has_value());
  EXPECT_EQ(*stored[1].parent_hash, stored[0].block_hash);
  EXPECT_EQ(stored[1].block_hash,
            hashBlockKey(stored[0].block_hash, std::vector<TokenId>{5, 6, 7, 8}, std::vector<uint64_t>{}));
  for (size_t i = 1; i < events.size(); ++i) EXPECT_EQ(events[i].event_id, events[i - 1].event_id + 1);
  EXPECT_TRUE(f.m->drainEvents().empty());
  // The info view agrees.
  KvBlockInfo info = f.m->blockInfo(KvPool::kPrimary, f.m->blockTable(1)[1]);
  EXPECT_EQ(info.hash, stored[1].block_hash);
  EXPECT_EQ(info.parent_hash, stored[1].parent_hash);
}

TEST(KvReuseTest, EventBufferDropsOldest) {
  KvCacheConfig c = cfg();
  c.event_buffer_max_size = 3;
  Fixture f(c);
  SimSequence a{1, iota(21), {}, {}};  // Created + 5 Stored
  f.addAndPrefill(a);
  auto ev = f.m->drainEvents();
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].event_id, 3u);
  EXPECT_EQ(f.m->stats().events_dropped, 3u);
  KvCacheConfig off = cfg();
  off.event_buffer_max_size = 0;
  Fixture g(off);
  SimSequence b{1, iota(21), {}, {}};
  g.addAndPrefill(b);
  EXPECT_TRUE(g.m->drainEvents().empty());
}

}  // namespace
}  // namespace llmrt
