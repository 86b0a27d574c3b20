#include "sampling/stop_criteria.h"

#include <gtest/gtest.h>

namespace llmrt {
namespace {

const std::vector<int32_t> kEos = {2, 7};

TEST(FinishReason, Names) {
  EXPECT_EQ(toString(FinishReason::kNone), "none");
  EXPECT_EQ(toString(FinishReason::kStop), "stop");
  EXPECT_EQ(toString(FinishReason::kLength), "length");
  EXPECT_EQ(toString(FinishReason::kCancelled), "cancelled");
  EXPECT_EQ(toString(FinishReason::kError), "error");
  EXPECT_FALSE(isFinished(FinishReason::kNone));
  EXPECT_TRUE(isFinished(FinishReason::kCancelled));
}

TEST(StopCriteria, AnyEosIdStops) {
  SamplingParams p;
  EXPECT_EQ(checkStopToken(2, 1, p, kEos), FinishReason::kStop);
  EXPECT_EQ(checkStopToken(7, 1, p, kEos), FinishReason::kStop);
  EXPECT_EQ(checkStopToken(3, 1, p, kEos), FinishReason::kNone);
}

TEST(StopCriteria, IgnoreEosKeepsStopTokenIds) {
  SamplingParams p;
  p.ignore_eos = true;
  p.stop_token_ids = {11};
  EXPECT_EQ(checkStopToken(2, 1, p, kEos), FinishReason::kNone);
  EXPECT_EQ(checkStopToken(11, 1, p, kEos), FinishReason::kStop);
}

TEST(StopCriteria, MinTokensDelaysStops) {
  SamplingParams p;
  p.min_tokens = 3;
  p.stop_token_ids = {11};
  EXPECT_EQ(checkStopToken(2, 2, p, kEos), FinishReason::kNone);
  EXPECT_EQ(checkStopToken(11, 2, p, kEos), FinishReason::kNone);
  EXPECT_EQ(checkStopToken(2, 3, p, kEos), FinishReason::kStop);
  EXPECT_EQ(checkStopToken(11, 3, p, kEos), FinishReason::kStop);
}

TEST(StopCriteria, LengthAndPrecedence) {
  SamplingParams p;
  p.max_tokens = 2;
  SequenceSamplingState s(p, {}, 0);
  s.accept(5);
  EXPECT_EQ(checkFinish(5, s, p, kEos), FinishReason::kNone);
  EXPECT_EQ(checkLength(1, p), FinishReason::kNone);
  s.accept(5);
  EXPECT_EQ(checkFinish(5, s, p, kEos), FinishReason::kLength);
  EXPECT_EQ(checkFinish(7, s, p, kEos), FinishReason::kStop);  // EOS on the last step reports stop
  EXPECT_EQ(checkLength(2, p), FinishReason::kLength);
}

}  // namespace
}  // namespace llmrt
