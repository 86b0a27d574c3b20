#include "sampling/sequence_state.h"

#include <gtest/gtest.h>

#include <set>

namespace llmrt {
namespace {

TEST(SequenceSamplingState, NoTrackingWithoutPenalties) {
  SamplingParams p;
  const std::vector<int32_t> prompt = {1, 2, 3};
  SequenceSamplingState s(p, prompt, 99, 2);
  EXPECT_FALSE(s.tracksPrompt());
  EXPECT_FALSE(s.tracksOutput());
  EXPECT_EQ(s.seed(), 99u);
  EXPECT_EQ(s.sampleIndex(), 2u);
  s.accept(5);
  s.accept(5);
  EXPECT_EQ(s.numGenerated(), 2);
  EXPECT_TRUE(s.tokenStats().empty());
  EXPECT_EQ(s.generatedCount(5), 0);
}

TEST(SequenceSamplingState, OutputPenaltiesTrackOnlyGeneratedTokens) {
  SamplingParams p;
  p.frequency_penalty = 0.5f;
  const std::vector<int32_t> prompt = {1, 2, 3};
  SequenceSamplingState s(p, prompt, 0);
  EXPECT_FALSE(s.tracksPrompt());
  EXPECT_TRUE(s.tracksOutput());
  EXPECT_FALSE(s.seen(1));
  s.accept(7);
  s.accept(2);
  s.accept(7);
  EXPECT_EQ(s.generatedCount(7), 2);
  EXPECT_EQ(s.generatedCount(2), 1);
  EXPECT_EQ(s.generatedCount(1), 0);
  ASSERT_EQ(s.tokenStats().size(), 2u);
  EXPECT_EQ(s.tokenStats()[0].token, 7);
  EXPECT_FALSE(s.tokenStats()[1].in_prompt);
}

TEST(SequenceSamplingState, RepetitionPenaltyTracksPromptAndOutput) {
  SamplingParams p;
  p.repetition_penalty = 1.2f;
  const std::vector<int32_t> prompt = {4, 4, 9, 0};
  SequenceSamplingState s(p, prompt, 0);
  EXPECT_TRUE(s.tracksPrompt());
  EXPECT_TRUE(s.seen(4));
  EXPECT_TRUE(s.seen(0));
  EXPECT_FALSE(s.seen(5));
  EXPECT_EQ(s.tokenStats().size(), 3u);
  s.accept(9);
  s.accept(5);
  EXPECT_EQ(s.generatedCount(9), 1);
  EXPECT_EQ(s.tokenStats().size(), 4u);
  for (const auto& t : s.tokenStats()) EXPECT_EQ(t.in_prompt, t.token != 5) << t.token;
}

TEST(SequenceSamplingState, ManyDistinctTokensSurviveRehash) {
  SamplingParams p;
  p.repetition_penalty = 1.1f;
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 5000; ++i) prompt.push_back(i * 64);  // aligned ids stress the hash
  SequenceSamplingState s(p, prompt, 0);
  for (int32_t i = 0; i < 3000; ++i) s.accept(i * 3);
  for (int32_t i = 0; i < 5000; ++i) ASSERT_TRUE(s.seen(i * 64)) << i;
  EXPECT_FALSE(s.seen(65));
  // i*3 for i<3000 hits multiples of 3 below 9000; multiples of 192 are also prompt ids.
  EXPECT_EQ(s.generatedCount(192), 1);
  EXPECT_EQ(s.generatedCount(3), 1);
  EXPECT_EQ(s.generatedCount(9000), 0);
  size_t expected = 5000;
  for (int32_t i = 0; i < 3000; ++i) expected += (i * 3) % 64 != 0;
  EXPECT_EQ(s.tokenStats().size(), expected);
}

TEST(RequestSeed, UsesTheGivenSeedOrDrawsFreshOnes) {
  SamplingParams p;
  p.seed = 1234;
  EXPECT_EQ(requestSeed(p), 1234u);
  p.seed.reset();
  std::set<uint64_t> seeds;
  for (int i = 0; i < 100; ++i) seeds.insert(requestSeed(p));
  EXPECT_EQ(seeds.size(), 100u);
}

TEST(MakeSequenceStates, OneStatePerSampleSharingTheSeed) {
  SamplingParams p;
  p.n = 4;
  p.presence_penalty = 0.1f;
  const std::vector<int32_t> prompt = {1};
  auto states = makeSequenceStates(p, prompt);
  ASSERT_EQ(states.size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(states[i].sampleIndex(), i);
    EXPECT_EQ(states[i].seed(), states[0].seed());
    EXPECT_TRUE(states[i].tracksOutput());
  }
  p.seed = 77;
  EXPECT_EQ(makeSequenceStates(p, prompt)[3].seed(), 77u);
}

}  // namespace
}  // namespace llmrt
