#include "sampling/logits_processors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace llmrt {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

TEST(Penalties, RepetitionPenaltyOverPromptAndOutputHfStyle) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  const std::vector<int32_t> prompt = {0, 1};
  SequenceSamplingState s(p, prompt, 0);
  s.accept(2);
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f};
  ASSERT_TRUE(penaltiesApply(p, s));
  applyPenalties(logits, p, s);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -2.0f, 0.25f, 3.0f, 0.0f}));
}

TEST(Penalties, RepetitionPenaltyBelowOneBoosts) {
  SamplingParams p;
  p.repetition_penalty = 0.5f;
  const std::vector<int32_t> prompt = {0, 1, 1};
  SequenceSamplingState s(p, prompt, 0);
  std::vector<float> logits = {2.0f, -1.0f, 4.0f};
  applyPenalties(logits, p, s);
  EXPECT_EQ(logits, (std::vector<float>{4.0f, -0.5f, 4.0f}));
}

TEST(Penalties, PresenceAndFrequencyOverGeneratedTokensOnly) {
  SamplingParams p;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  const std::vector<int32_t> prompt = {3};
  SequenceSamplingState s(p, prompt, 0);
  for (int32_t t : {1, 1, 1, 2}) s.accept(t);
  std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f};
  applyPenalties(logits, p, s);
  // token 1: 1 - (0.25*3 + 0.5); token 2: 1 - (0.25 + 0.5); prompt token 3 untouched.
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -0.25f, 0.25f, 1.0f}));
}

TEST(Penalties, NegativeOutputPenaltiesEncourage) {
  SamplingParams p;
  p.presence_penalty = -1.0f;
  p.frequency_penalty = -0.5f;
  SequenceSamplingState s(p, {}, 0);
  s.accept(0);
  s.accept(0);
  std::vector<float> logits = {0.0f, 0.0f};
  applyPenalties(logits, p, s);
  EXPECT_EQ(logits, (std::vector<float>{2.0f, 0.0f}));
}

TEST(Penalties, RepetitionThenFrequency) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 1.0f;
  SequenceSamplingState s(p, {}, 0);
  s.accept(0);
  s.accept(1);
  s.accept(1);
  std::vector<float> logits = {4.0f, -4.0f, 4.0f};
  applyPenalties(logits, p, s);
  // token 0: 4/2 - 1 = 1; token 1: -4*2 - 2 = -10.
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -10.0f, 4.0f}));
}

TEST(Penalties, IdsOutsideTheLogitsAreIgnored) {
  SamplingParams p;
  p.frequency_penalty = 1.0f;
  SequenceSamplingState s(p, {}, 0);
  s.accept(10);
  std::vector<float> logits = {1.0f, 2.0f};
  applyPenalties(logits, p, s);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, 2.0f}));
}

TEST(MinTokensMask, MasksStopAndEosIdsUntilMinTokens) {
  SamplingParams p;
  p.min_tokens = 2;
  p.stop_token_ids = {1};
  const std::vector<int32_t> eos = {3, 4, 99};  // 99 is outside the vocabulary: ignored
  SequenceSamplingState s(p, {}, 0);
  std::vector<float> logits = {0.0f, 1.0f, 2.0f, 3.0f, 4.0f};
  ASSERT_TRUE(minTokensMaskApplies(p, s, eos));
  applyMinTokensMask(logits, p, s, eos);
  EXPECT_EQ(logits, (std::vector<float>{0.0f, kNegInf, 2.0f, kNegInf, kNegInf}));

  s.accept(0);
  s.accept(0);
  EXPECT_FALSE(minTokensMaskApplies(p, s, eos));
  std::vector<float> after = {0.0f, 1.0f, 2.0f, 3.0f, 4.0f};
  applyMinTokensMask(after, p, s, eos);
  EXPECT_EQ(after, (std::vector<float>{0.0f, 1.0f, 2.0f, 3.0f, 4.0f}));
}

TEST(MinTokensMask, IgnoreEosLeavesEosAlone) {
  SamplingParams p;
  p.min_tokens = 1;
  p.ignore_eos = true;
  const std::vector<int32_t> eos = {0};
  SequenceSamplingState s(p, {}, 0);
  EXPECT_FALSE(minTokensMaskApplies(p, s, eos));
  p.stop_token_ids = {1};
  std::vector<float> logits = {5.0f, 5.0f};
  applyMinTokensMask(logits, p, s, eos);
  EXPECT_EQ(logits, (std::vector<float>{5.0f, kNegInf}));
}

}  // namespace
}  // namespace llmrt
