// Sequences and block tables: add / extend / remove, chunked context, decode,
// out-of-blocks as a value, admission queries, the copy hand-off, errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "kv/kv_cache_manager.h"
#include "kv_test_util.h"

namespace llmrt {
namespace {

using kvtest::iota;
using ::testing::HasSubstr;

std::unique_ptr<KvCacheManager> make(KvCacheConfig c, int32_t np, int32_t ns = 0,
                                     KvCacheManagerOptions o = {}) {
  auto m = KvCacheManager::create(c, np, ns, o);
  EXPECT_TRUE(m.isOk()) << m.status().toString();
  return std::move(m).value();
}

KvCacheConfig tiny(int32_t tpb = 4) {
  KvCacheConfig c;
  c.tokens_per_block = tpb;
  return c;
}

TEST(KvManagerTest, AddAllocatesWholePromptByDefault) {
  auto m = make(tiny(), 16);
  auto r = m->addSequence(7, iota(10));
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->status, KvAllocStatus::kOk);
  EXPECT_EQ(r->num_reused_tokens, 0);
  EXPECT_EQ(r->num_allocated_tokens, 10);
  auto table = m->blockTable(7);
  ASSERT_EQ(table.size(), 3u);
  std::set<BlockId> ids(table.begin(), table.end());
  EXPECT_EQ(ids.size(), 3u);
  for (BlockId b : table) EXPECT_TRUE(b >= 0 && b < 16);
  EXPECT_EQ(m->numTokens(7), 10);
  EXPECT_EQ(m->numAllocatedTokens(7), 10);
  EXPECT_EQ(m->numComputedTokens(7), 0);
  KvCacheStats s = m->stats();
  EXPECT_EQ(s.primary.used, 3);
  EXPECT_EQ(s.primary.free, 13);
  EXPECT_EQ(s.primary.cached, 0);
  EXPECT_EQ(s.num_sequences, 1);
  EXPECT_TRUE(m->checkInvariants().isOk());
}

TEST(KvManagerTest, DecodeAllocatesAtBlockBoundariesOnly) {
  auto m = make(tiny(), 16);
  ASSERT_TRUE(m->addSequence(1, iota(6)).isOk());
  ASSERT_TRUE(m->markComputed(1, 6).isOk());
  std::vector<BlockId> before(m->blockTable(1).begin(), m->blockTable(1).end());
  ASSERT_EQ(before.size(), 2u);
  // Tokens 7 and 8 fit in block 1; token 9 needs a third block.
  for (TokenId t : {100, 101}) {
    auto st = m->appendToken(1, t);
    ASSERT_TRUE(st.isOk());
    EXPECT_EQ(*st, KvAllocStatus::kOk);
    EXPECT_EQ(m->blockTable(1).size(), 2u);
    ASSERT_TRUE(m->markComputed(1, 1).isOk());
  }
  ASSERT_EQ(*m->appendToken(1, 102), KvAllocStatus::kOk);
  auto after = m->blockTable(1);
  ASSERT_EQ(after.size(), 3u);
  EXPECT_EQ(after[0], before[0]);
  EXPECT_EQ(after[1], before[1]);
  EXPECT_EQ(m->numTokens(1), 9);
  EXPECT_EQ(m->numAllocatedTokens(1), 9);
  EXPECT_EQ(m->numComputedTokens(1), 8);
  EXPECT_TRUE(m->checkInvariants().isOk());
}

TEST(KvManagerTest, ChunkedContext) {
  auto m = make(tiny(), 16);
  AddSequenceOptions o;
  o.num_tokens_to_allocate = 4;
  auto r = m->addSequence(1, iota(10), o);
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r->num_allocated_tokens, 4);
  EXPECT_EQ(m->blockTable(1).size(), 1u);
  // Decode tokens cannot be appended before the prompt is allocated.
  auto early = m->appendToken(1, 5);
  ASSERT_FALSE(early.isOk());
  EXPECT_EQ(early.status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(m->markComputed(1, 4).isOk());
  ASSERT_EQ(*m->allocatePromptTokens(1, 5), KvAllocStatus::kOk);
  EXPECT_EQ(m->blockTable(1).size(), 3u);
  EXPECT_EQ(m->numAllocatedTokens(1), 9);
  auto beyond = m->allocatePromptTokens(1, 2);
  ASSERT_FALSE(beyond.isOk());
  EXPECT_THAT(beyond.status().message(), HasSubstr("0..1"));
  ASSERT_EQ(*m->allocatePromptTokens(1, 1), KvAllocStatus::kOk);
  ASSERT_TRUE(m->markComputed(1, 6).isOk());
  ASSERT_EQ(*m->appendToken(1, 77), KvAllocStatus::kOk);
  EXPECT_EQ(m->numTokens(1), 11);
  EXPECT_TRUE(m->checkInvariants().isOk());
}

TEST(KvManagerTest, ChunkedContextDrivenBySimulatedRunner) {
  auto m = make(tiny(), 16, 0);
  kvtest::SimKvMemory mem(4, 16, 0);
  kvtest::SimSequence s{1, iota(23), {}, {}};
  AddSequenceOptions o;
  o.num_tokens_to_allocate = 5;
  ASSERT_EQ(m->addSequence(1, s.tokens, o)->status, KvAllocStatus::kOk);
  while (m->numAllocatedTokens(1) < 23) {
    auto take = m->takePendingCopies();
    EXPECT_TRUE(take.empty());
    ASSERT_EQ(kvtest::runStep(*m, mem, s), "");
    ASSERT_EQ(*m->allocatePromptTokens(1, std::min(5, 23 - m->numAllocatedTokens(1))), KvAllocStatus::kOk);
  }
  ASSERT_EQ(kvtest::runStep(*m, mem, s), "");
  EXPECT_EQ(m->numComputedTokens(1), 23);
}

TEST(KvManagerTest, OutOfBlocksIsAValueAndChangesNothing) {
  auto m = make(tiny(), 4);
  ASSERT_EQ(m->addSequence(1, iota(12))->status, KvAllocStatus::kOk);  // 3 of 4 blocks
  const KvCacheStats before = m->stats();
  auto r = m->addSequence(2, iota(8, 100));
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r->status, KvAllocStatus::kNoFreeBlocks);
  EXPECT_FALSE(m->hasSequence(2));
  EXPECT_EQ(kvAllocStatusMessage(r->status), "Can't allocate new blocks. No free blocks left");
  Status as_status = toStatus(r->status);
  EXPECT_EQ(as_status.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(as_status.message(), "Can't allocate new blocks. No free blocks left");
  KvCacheStats after = m->stats();
  EXPECT_EQ(after.primary.free, before.primary.free);
  EXPECT_EQ(after.primary.used, before.primary.used);
  EXPECT_EQ(after.allocation_failures, 1u);

  // Decode: token 13 needs a 4th block (ok), token 17 a 5th (none).
  ASSERT_TRUE(m->markComputed(1, 12).isOk());
  ASSERT_EQ(*m->appendToken(1, 50), KvAllocStatus::kOk);
  ASSERT_TRUE(m->markComputed(1, 1).isOk());
  for (TokenId t : {51, 52, 53}) {
    ASSERT_EQ(*m->appendToken(1, t), KvAllocStatus::kOk);
    ASSERT_TRUE(m->markComputed(1, 1).isOk());
  }
  auto full = m->appendToken(1, 54);
  ASSERT_TRUE(full.isOk());
  EXPECT_EQ(*full, KvAllocStatus::kNoFreeBlocks);
  EXPECT_EQ(m->numTokens(1), 16);  // the token was not appended
  EXPECT_EQ(m->numAllocatedTokens(1), 16);
  EXPECT_EQ(m->stats().allocation_failures, 2u);
  EXPECT_TRUE(m->checkInvariants().isOk());
  ASSERT_TRUE(m->removeSequence(1).isOk());
  EXPECT_EQ(m->addSequence(2, iota(8, 100))->status, KvAllocStatus::kOk);
}

TEST(KvManagerTest, NothingLeaksWithoutReuse) {
  KvCacheConfig c = tiny();
  c.enable_block_reuse = false;
  auto m = make(c, 32);
  for (SequenceId id = 0; id < 5; ++id) {
    ASSERT_EQ(m->addSequence(id, iota(9))->status, KvAllocStatus::kOk);
    ASSERT_TRUE(m->markComputed(id, 9).isOk());
  }
  // No reuse: identical prompts get distinct blocks.
  std::set<BlockId> all;
  for (SequenceId id = 0; id < 5; ++id)
    for (BlockId b : m->blockTable(id)) EXPECT_TRUE(all.insert(b).second);
  for (SequenceId id = 0; id < 5; ++id) ASSERT_TRUE(m->removeSequence(id).isOk());
  KvCacheStats s = m->stats();
  EXPECT_EQ(s.primary.free, 32);
  EXPECT_EQ(s.primary.cached, 0);
  EXPECT_EQ(s.primary.used, 0);
  EXPECT_EQ(s.reused_tokens, 0u);
  EXPECT_TRUE(m->checkInvariants().isOk());
}

TEST(KvManagerTest, ErrorsAreStatusesNotAborts) {
  auto m = make(tiny(), 8);
  EXPECT_EQ(m->addSequence(1, std::vector<TokenId>{}).status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(m->addSequence(1, iota(3)).isOk());
  auto dup = m->addSequence(1, iota(3));
  ASSERT_FALSE(dup.isOk());
  EXPECT_THAT(dup.status().message(), HasSubstr("already exists"));
  EXPECT_EQ(m->allocatePromptTokens(9, 1).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(m->appendToken(9, 1).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(m->markComputed(9, 1).code(), StatusCode::kNotFound);
  EXPECT_EQ(m->removeSequence(9).code(), StatusCode::kNotFound);
  EXPECT_TRUE(m->blockTable(9).empty());
  EXPECT_EQ(m->numComputedTokens(9), -1);
  Status st = m->markComputed(1, 4);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("0..3"));
  AddSequenceOptions bad;
  bad.retention = KvCacheRetentionConfig{};
  bad.retention->token_range_retention_configs = {{0, 10, 50, std::nullopt}, {5, 12, 60, std::nullopt}};
  // Overlapping ranges: refused by KvCacheRetentionConfig::validate, which the executor runs once
  // per request before any KV call (addSequence takes validated configs).
  const Status v = bad.retention->validate();
  ASSERT_FALSE(v.isOk());
  EXPECT_THAT(v.message(), HasSubstr("overlap"));
  AddSequenceOptions mm;
  mm.extras.multimodal = {MultimodalInput{{1, 2, 3, 4}, 10, 5}};
  EXPECT_THAT(m->addSequence(3, iota(12), mm).status().message(), HasSubstr("multimodal"));
  EXPECT_FALSE(m->hasSequence(2));
  EXPECT_FALSE(m->hasSequence(3));
  EXPECT_TRUE(m->checkInvariants().isOk());
}

TEST(KvManagerTest, MaxSequenceLength) {
  KvCacheManagerOptions o;
  o.max_sequence_length = 10;
  auto m = make(tiny(), 16, 0, o);
  EXPECT_EQ(m->maxBlocksPerSequence(), 3);
  EXPECT_EQ(m->addSequence(1, iota(11)).status().code(), StatusCode::kOutOfRange);
  ASSERT_TRUE(m->addSequence(1, iota(9)).isOk());
  ASSERT_TRUE(m->markComputed(1, 9).isOk());
  ASSERT_EQ(*m->appendToken(1, 5), KvAllocStatus::kOk);
  EXPECT_EQ(m->appendToken(1, 6).status().code(), StatusCode::kOutOfRange);
}

TEST(KvManagerTest, AdmissionQueries) {
  auto m = make(tiny(), 16);
  EXPECT_EQ(m->numBlocksNeeded(10, 10), 5);
  EXPECT_EQ(m->numBlocksNeeded(8, 0), 2);
  AddSequenceOptions o;
  o.max_new_tokens = 10;
  ASSERT_TRUE(m->addSequence(1, iota(10), o).isOk());
  EXPECT_EQ(m->numBlocksNeededToComplete(1), 2);  // 5 in all, 3 held
  ASSERT_TRUE(m->markComputed(1, 10).isOk());
  ASSERT_EQ(*m->appendToken(1, 1), KvAllocStatus::kOk);
  ASSERT_EQ(*m->appendToken(1, 1), KvAllocStatus::kOk);
  ASSERT_EQ(*m->appendToken(1, 1), KvAllocStatus::kOk);  // 13 tokens: 4 blocks
  EXPECT_EQ(m->numBlocksNeededToComplete(1), 1);
  EXPECT_EQ(m->numFreeBlocks(), 12);
  EXPECT_EQ(m->numReclaimableBlocks(), 0);
  // Cached blocks count as reclaimable once unreferenced.
  ASSERT_TRUE(m->markComputed(1, 3).isOk());
  ASSERT_TRUE(m->removeSequence(1).isOk());
  EXPECT_EQ(m->numFreeBlocks(), 13);        // the partial last block went back
  EXPECT_EQ(m->numReclaimableBlocks(), 3);  // 12 computed tokens = 3 full cached blocks
  EXPECT_EQ(m->numAvailableBlocks(), 16);
}

TEST(KvManagerTest, CopyHandOff) {
  KvCacheConfig c = tiny();
  RecordingBlockCopier rec;
  KvCacheManagerOptions o;
  o.copier = &rec;
  auto m = make(c, 16, 0, o);
  ASSERT_TRUE(m->addSequence(1, iota(8)).isOk());
  ASSERT_TRUE(m->markComputed(1, 8).isOk());
  // A second request matching 6 tokens: block 0 shared, 2 tokens of block 1 copied.
  auto prompt = kvtest::concat(iota(6), {500, 501, 502});
  auto r = m->addSequence(2, prompt);
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r->num_reused_tokens, 6);
  EXPECT_EQ(r->num_partial_tokens, 2);
  ASSERT_TRUE(m->hasPendingCopies());
  ASSERT_TRUE(m->flushCopies().isOk());
  EXPECT_FALSE(m->hasPendingCopies());
  ASSERT_EQ(rec.batches().size(), 1u);
  ASSERT_EQ(rec.batches()[0].size(), 1u);
  const KvBlockCopy& cp = rec.batches()[0][0];
  EXPECT_EQ(cp.src_pool, KvPool::kPrimary);
  EXPECT_EQ(cp.src_block, m->blockTable(1)[1]);
  EXPECT_EQ(cp.dst_pool, KvPool::kPrimary);
  EXPECT_EQ(cp.dst_block, m->blockTable(2)[1]);
  EXPECT_EQ(cp.num_tokens, 2);
  EXPECT_TRUE(m->flushCopies().isOk());  // nothing pending: no empty batch
  EXPECT_EQ(rec.batches().size(), 1u);

  auto m2 = make(c, 16);  // no copier
  ASSERT_TRUE(m2->addSequence(1, iota(8)).isOk());
  ASSERT_TRUE(m2->markComputed(1, 8).isOk());
  ASSERT_TRUE(m2->addSequence(2, prompt).isOk());
  Status st = m2->flushCopies();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  auto taken = m2->takePendingCopies();
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].num_tokens, 2);
  EXPECT_FALSE(m2->hasPendingCopies());
}

TEST(KvManagerTest, BlockCopiesUseTheBackendsConvention) {
  // One KvBlockCopy type for the manager, the runner and the backends (core/kv_block_copy.h):
  // whole-block copies (offload, onboard) carry kWholeBlock (-1), partial-reuse copies the
  // slot count. (The manager used 0 for "whole block", the backend -1; the runner converted.)
  KvCacheConfig c = tiny();
  c.enable_partial_reuse = false;
  RecordingBlockCopier rec;
  KvCacheManagerOptions o;
  o.copier = &rec;
  auto m = make(c, 2, 2, o);
  ASSERT_TRUE(m->addSequence(1, iota(5)).isOk());
  ASSERT_TRUE(m->markComputed(1, 5).isOk());
  ASSERT_TRUE(m->removeSequence(1).isOk());             // block 0 cached
  ASSERT_TRUE(m->addSequence(2, iota(8, 100)).isOk());  // both blocks: block 0 is offloaded
  ASSERT_TRUE(m->removeSequence(2).isOk());
  ASSERT_TRUE(m->addSequence(3, iota(5)).isOk());  // reuses it: onboarded
  ASSERT_TRUE(m->flushCopies().isOk());
  const std::vector<KvBlockCopy> copies = rec.allCopies();
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].src_pool, KvPool::kPrimary);
  EXPECT_EQ(copies[0].dst_pool, KvPool::kSecondary);
  EXPECT_EQ(copies[1].src_pool, KvPool::kSecondary);
  EXPECT_EQ(copies[1].dst_pool, KvPool::kPrimary);
  for (const KvBlockCopy& cp : copies) {
    EXPECT_EQ(cp.num_tokens, KvBlockCopy::kWholeBlock);
    EXPECT_TRUE(cp.wholeBlock(4));
    EXPECT_EQ(cp.numTokens(4), 4);
  }
  const KvBlockCopy partial{KvPool::kPrimary, 0, KvPool::kPrimary, 1, 3};
  EXPECT_EQ(partial.numTokens(4), 3);
  EXPECT_FALSE(partial.wholeBlock(4));
  const KvBlockCopy full_count{KvPool::kPrimary, 0, KvPool::kPrimary, 1, 4};
  EXPECT_TRUE(full_count.wholeBlock(4));  // a count of every slot is the whole block
}

}  // namespace
}  // namespace llmrt
