// Context chunking policies: chunk sizes and order.
#include <gtest/gtest.h>

#include <vector>

#include "sched/chunking_policy.h"

namespace llmrt {
namespace {

std::vector<int32_t> chunks(ContextChunkingPolicy p, std::vector<ChunkCandidate> c, int32_t budget, bool on = true,
                            int32_t tpb = 16, int32_t max_num_tokens = 64) {
  ChunkingOptions o;
  o.policy = p;
  o.enable_chunking = on;
  o.tokens_per_block = tpb;
  o.max_num_tokens = max_num_tokens;
  assignChunks(o, c, budget);
  std::vector<int32_t> out;
  for (const auto& x : c) out.push_back(x.chunk);
  return out;
}

TEST(Chunking, FirstComeFirstServedGivesTheEarliestEverything) {
  auto c = chunks(ContextChunkingPolicy::kFirstComeFirstServed, {{0, 100}, {0, 100}}, 64);
  EXPECT_EQ(c, (std::vector<int32_t>{64, 0}));
  c = chunks(ContextChunkingPolicy::kFirstComeFirstServed, {{64, 100}, {0, 100}}, 64);
  EXPECT_EQ(c, (std::vector<int32_t>{36, 16}));  // the last chunk of the first, then whole blocks
}

TEST(Chunking, EqualProgressGivesOneBlockToEachPerRound) {
  auto c = chunks(ContextChunkingPolicy::kEqualProgress, {{0, 100}, {0, 100}, {0, 100}}, 64);
  EXPECT_EQ(c, (std::vector<int32_t>{32, 16, 16}));
  c = chunks(ContextChunkingPolicy::kEqualProgress, {{0, 10}, {0, 100}}, 64);
  EXPECT_EQ(c, (std::vector<int32_t>{10, 48}));
}

TEST(Chunking, ChunksEndOnBlockBoundariesExceptTheLast) {
  auto c = chunks(ContextChunkingPolicy::kFirstComeFirstServed, {{5, 200}}, 50);
  EXPECT_EQ(c[0], 43);  // 5 + 43 = 48, a multiple of 16
  c = chunks(ContextChunkingPolicy::kFirstComeFirstServed, {{0, 200}, {0, 200}}, 40);
  EXPECT_EQ(c, (std::vector<int32_t>{32, 0}));  // the 8 left are less than a block: the second waits
  c = chunks(ContextChunkingPolicy::kFirstComeFirstServed, {{0, 10}}, 15);
  EXPECT_EQ(c[0], 10);
}

TEST(Chunking, StepsSmallerThanABlockCutChunksAnywhere) {
  // max_num_tokens 3 < 16 tokens per block: aligned chunks would all be empty and the prompts
  // would never start (this hung `llmrt generate --max-num-tokens 3`).
  for (auto p : {ContextChunkingPolicy::kFirstComeFirstServed, ContextChunkingPolicy::kEqualProgress}) {
    EXPECT_EQ(chunks(p, {{0, 5}}, 3, true, 16, 3), (std::vector<int32_t>{3}));
    EXPECT_EQ(chunks(p, {{3, 5}}, 3, true, 16, 3), (std::vector<int32_t>{2}));
    const auto two = chunks(p, {{0, 5}, {0, 5}}, 3, true, 16, 3);
    EXPECT_EQ(two[0] + two[1], 3);
    // Without chunking a context longer than the step (a resumed one) is chunked the same way.
    EXPECT_EQ(chunks(p, {{0, 5}}, 3, false, 16, 3)[0], 3);
  }
}

TEST(Chunking, ContextBudgetsSmallerThanABlockCutChunksAnywhere) {
  // max_num_tokens 32 = tokens_per_block, one generation token already taken: 31 tokens for
  // contexts. Aligned chunks would all be empty until nothing generates (item 8 of the bug
  // issue: 88 steps instead of 29 for 4 prompts of 66 tokens, see the scheduler test).
  for (auto p : {ContextChunkingPolicy::kFirstComeFirstServed, ContextChunkingPolicy::kEqualProgress}) {
    EXPECT_EQ(chunks(p, {{0, 66}}, 31, true, 32, 32), (std::vector<int32_t>{31}));
    EXPECT_EQ(chunks(p, {{31, 66}}, 30, true, 32, 32), (std::vector<int32_t>{30}));  // no realignment
    EXPECT_EQ(chunks(p, {{61, 66}}, 30, true, 32, 32), (std::vector<int32_t>{5}));   // the last chunk
    // Earlier candidates came first (EQUAL_PROGRESS shares the budget a token at a time).
    const auto two = chunks(p, {{0, 66}, {0, 66}}, 31, true, 32, 32);
    EXPECT_EQ(two[0] + two[1], 31);
    EXPECT_EQ(two[0], p == ContextChunkingPolicy::kFirstComeFirstServed ? 31 : 16);
  }
  // A context budget of a block or more keeps the alignment.
  EXPECT_EQ(chunks(ContextChunkingPolicy::kFirstComeFirstServed, {{0, 66}}, 32, true, 32, 32)[0], 32);
  EXPECT_EQ(chunks(ContextChunkingPolicy::kFirstComeFirstServed, {{31, 200}}, 40, true, 32, 64)[0], 33);
}

TEST(Chunking, WithoutChunkingContextsRunWholeInOrder) {
  auto c = chunks(ContextChunkingPolicy::kFirstComeFirstServed, {{0, 40}, {0, 10}, {0, 5}}, 50, false);
  EXPECT_EQ(c, (std::vector<int32_t>{40, 10, 0}));
  c = chunks(ContextChunkingPolicy::kEqualProgress, {{0, 60}, {0, 10}}, 50, false);
  EXPECT_EQ(c, (std::vector<int32_t>{0, 0}));  // the first waits for a full budget; no overtaking
  // A context longer than max_num_tokens (a resumed one) is chunked anyway.
  c = chunks(ContextChunkingPolicy::kFirstComeFirstServed, {{0, 100}}, 64, false);
  EXPECT_EQ(c[0], 64);
}

}  // namespace
}  // namespace llmrt
