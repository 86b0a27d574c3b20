#include "llmrt/sampling_params.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

namespace llmrt {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kVocab = 1000;

TEST(SamplingParams, DefaultsMatchVllm) {
  SamplingParams p;
  EXPECT_EQ(p.n, 1);
  EXPECT_EQ(p.temperature, 1.0f);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_EQ(p.top_p, 1.0f);
  EXPECT_EQ(p.min_p, 0.0f);
  EXPECT_EQ(p.repetition_penalty, 1.0f);
  EXPECT_EQ(p.presence_penalty, 0.0f);
  EXPECT_EQ(p.frequency_penalty, 0.0f);
  EXPECT_FALSE(p.seed.has_value());
  EXPECT_EQ(p.max_tokens, 16);
  EXPECT_EQ(p.min_tokens, 0);
  EXPECT_FALSE(p.ignore_eos);
  EXPECT_TRUE(p.stop_token_ids.empty());
  EXPECT_TRUE(p.stop.empty());
  EXPECT_FALSE(p.include_stop_str_in_output);
  EXPECT_FALSE(p.logprobs.has_value());
  EXPECT_TRUE(p.skip_special_tokens);
  EXPECT_TRUE(p.validate(kVocab).isOk());
  EXPECT_FALSE(p.isGreedy());
  EXPECT_FALSE(p.usesRepetitionPenalty());
  EXPECT_FALSE(p.usesOutputPenalties());
}

TEST(SamplingParams, ExactMessageForTopP) {
  SamplingParams p;
  p.top_p = 1.5f;
  const Status s = p.validate(kVocab);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "SamplingParams: field 'top_p' has value 1.5; expected a number in (0, 1]");
}

struct BadCase {
  const char* name;
  std::function<void(SamplingParams&)> mutate;
  const char* field;
  const char* value;
  const char* expected;
};

TEST(SamplingParams, RejectsEveryBadFieldWithNameValueAndRange) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<BadCase> cases = {
      {"n0", [](SamplingParams& p) { p.n = 0; }, "n", "0", "[1, 128]"},
      {"n big", [](SamplingParams& p) { p.n = 129; }, "n", "129", "[1, 128]"},
      {"temp<0", [](SamplingParams& p) { p.temperature = -0.5f; }, "temperature", "-0.5", ">= 0"},
      {"temp nan", [=](SamplingParams& p) { p.temperature = nan; }, "temperature", "nan", ">= 0"},
      {"temp inf", [=](SamplingParams& p) { p.temperature = inf; }, "temperature", "inf", ">= 0"},
      {"top_k<0", [](SamplingParams& p) { p.top_k = -1; }, "top_k", "-1", ">= 0 (0 = disabled)"},
      {"top_p 0", [](SamplingParams& p) { p.top_p = 0.0f; }, "top_p", "0", "(0, 1]"},
      {"top_p neg", [](SamplingParams& p) { p.top_p = -0.1f; }, "top_p", "-0.1", "(0, 1]"},
      {"top_p nan", [=](SamplingParams& p) { p.top_p = nan; }, "top_p", "nan", "(0, 1]"},
      {"min_p<0", [](SamplingParams& p) { p.min_p = -0.25f; }, "min_p", "-0.25", "[0, 1]"},
      {"min_p>1", [](SamplingParams& p) { p.min_p = 1.5f; }, "min_p", "1.5", "[0, 1]"},
      {"rep 0", [](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty", "0", "> 0"},
      {"rep neg", [](SamplingParams& p) { p.repetition_penalty = -1.0f; }, "repetition_penalty", "-1", "> 0"},
      {"rep inf", [=](SamplingParams& p) { p.repetition_penalty = inf; }, "repetition_penalty", "inf", "> 0"},
      {"presence", [](SamplingParams& p) { p.presence_penalty = 2.5f; }, "presence_penalty", "2.5",
       "[-2, 2]"},
      {"presence nan", [=](SamplingParams& p) { p.presence_penalty = nan; }, "presence_penalty", "nan",
       "[-2, 2]"},
      {"frequency", [](SamplingParams& p) { p.frequency_penalty = -3.0f; }, "frequency_penalty", "-3",
       "[-2, 2]"},
      {"max_tokens", [](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens", "0", ">= 1"},
      {"min_tokens<0", [](SamplingParams& p) { p.min_tokens = -1; }, "min_tokens", "-1",
       "[0, max_tokens = 16]"},
      {"min>max", [](SamplingParams& p) { p.min_tokens = 17; }, "min_tokens", "17", "[0, max_tokens = 16]"},
      {"stop id neg",
       [](SamplingParams& p) {
         p.stop_token_ids = {5, -1};
       },
       "stop_token_ids[1]", "-1", "[0, 1000)"},
      {"stop id big", [](SamplingParams& p) { p.stop_token_ids = {1000}; }, "stop_token_ids[0]", "1000",
       "[0, 1000)"},
      {"empty stop",
       [](SamplingParams& p) {
         p.stop = {"a", ""};
       },
       "stop[1]", "\"\"", "non-empty"},
      {"logprobs<0", [](SamplingParams& p) { p.logprobs = -1; }, "logprobs", "-1", "[0, 20]"},
      {"logprobs big", [](SamplingParams& p) { p.logprobs = 21; }, "logprobs", "21", "[0, 20]"},
  };
  for (const BadCase& c : cases) {
    SamplingParams p;
    c.mutate(p);
    const Status s = p.validate(kVocab);
    ASSERT_FALSE(s.isOk()) << c.name;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(s.message(), HasSubstr(std::string("field '") + c.field + "' has value " + c.value + ";"))
        << c.name;
    EXPECT_THAT(s.message(), HasSubstr(c.expected)) << c.name;
    EXPECT_THAT(s.message(), HasSubstr("SamplingParams")) << c.name;
  }
}

TEST(SamplingParams, AcceptsBoundaryValues) {
  SamplingParams p;
  p.n = 128;
  p.temperature = 0.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.repetition_penalty = 1e-3f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.max_tokens = 1;
  p.min_tokens = 1;
  p.stop_token_ids = {0, 999};
  p.stop = {"\n\n"};
  p.logprobs = 20;
  p.seed = 0;
  EXPECT_TRUE(p.validate(kVocab).isOk()) << p.validate(kVocab).toString();
  p.logprobs = 0;
  p.top_k = 5000;  // larger than the vocabulary: keeps everything
  p.top_p = 1e-6f;
  p.min_p = 0.0f;
  EXPECT_TRUE(p.validate(kVocab).isOk());
  EXPECT_TRUE(p.isGreedy());
}

TEST(SamplingParams, RejectsNonPositiveVocab) {
  SamplingParams p;
  const Status s = p.validate(0);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("vocab_size"));
}

TEST(SamplingParams, GreedyBelowEpsilon) {
  SamplingParams p;
  p.temperature = 1e-6f;
  EXPECT_TRUE(p.isGreedy());
  p.temperature = 1e-4f;
  EXPECT_FALSE(p.isGreedy());
}

}  // namespace
}  // namespace llmrt
