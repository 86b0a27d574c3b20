// Sampler against hand-computed expectations on tiny vocabularies.
#include "sampling/sampler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/philox.h"

namespace llmrt {
namespace {

using ::testing::HasSubstr;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::vector<float> logOf(std::vector<double> probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

// The kept ids of the distribution sample() draws from.
std::vector<int32_t> keptIds(const std::vector<float>& logits, const SamplingParams& p,
                             std::span<const int32_t> eos = {}) {
  Sampler sampler;
  SequenceSamplingState state(p, {}, 0);
  auto d = sampler.distribution(logits.data(), static_cast<int64_t>(logits.size()), p, state, eos);
  EXPECT_TRUE(d.isOk()) << d.status().toString();
  std::vector<int32_t> ids;
  if (d.isOk())
    for (const TokenProb& t : *d) ids.push_back(t.token);
  return ids;
}

std::vector<double> keptProbs(const std::vector<float>& logits, const SamplingParams& p) {
  Sampler sampler;
  SequenceSamplingState state(p, {}, 0);
  auto d = sampler.distribution(logits.data(), static_cast<int64_t>(logits.size()), p, state, {});
  EXPECT_TRUE(d.isOk());
  std::vector<double> probs;
  if (d.isOk())
    for (const TokenProb& t : *d) probs.push_back(t.prob);
  return probs;
}

int32_t sampleOnce(const std::vector<float>& logits, const SamplingParams& p, const SequenceSamplingState& s,
                   std::span<const int32_t> eos = {}) {
  Sampler sampler;
  auto r = sampler.sample(logits.data(), static_cast<int64_t>(logits.size()), p, s, eos);
  EXPECT_TRUE(r.isOk()) << r.status().toString();
  return r.isOk() ? r->token : -1;
}

TEST(Greedy, ArgmaxWithTiesToTheLowestId) {
  SamplingParams p;
  p.temperature = 0.0f;
  SequenceSamplingState s(p, {}, 0);
  EXPECT_EQ(sampleOnce({0.1f, 0.9f, 0.3f}, p, s), 1);
  EXPECT_EQ(sampleOnce({0.1f, 2.0f, 0.3f, 2.0f}, p, s), 1);
  EXPECT_EQ(sampleOnce({kNegInf, -5.0f, kNegInf}, p, s), 1);
  // Truncation does not matter for greedy.
  p.top_k = 1;
  p.top_p = 0.1f;
  EXPECT_EQ(sampleOnce({3.0f, 3.0f, 3.0f}, p, s), 0);
  EXPECT_EQ(keptIds({1.0f, 3.0f, 3.0f}, p), (std::vector<int32_t>{1}));
}

TEST(Greedy, PenaltiesChangeTheArgmax) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 2.0f;
  const std::vector<int32_t> prompt = {0};
  SequenceSamplingState s(p, prompt, 0);
  EXPECT_EQ(sampleOnce({3.0f, 2.0f}, p, s), 1);  // 3 / 2 = 1.5 < 2
}

TEST(LogitBias, AddsAfterThePenaltiesAndCanBanOrForce) {
  SamplingParams p;
  p.temperature = 0.0f;
  SequenceSamplingState s(p, {}, 0);
  p.logit_bias = {{2, 5.0f}};
  EXPECT_EQ(sampleOnce({3.0f, 2.0f, 0.5f}, p, s), 2);  // 0.5 + 5 > 3
  p.logit_bias = {{0, -100.0f}};
  EXPECT_EQ(sampleOnce({3.0f, 2.0f, 0.5f}, p, s), 1);
  // After the repetition penalty: (3 / 2) + 1 = 2.5 > 2.
  p.repetition_penalty = 2.0f;
  p.logit_bias = {{0, 1.0f}};
  const std::vector<int32_t> prompt = {0};
  SequenceSamplingState sp(p, prompt, 0);
  EXPECT_EQ(sampleOnce({3.0f, 2.0f}, p, sp), 0);
  p.logit_bias = {{0, 0.4f}};
  EXPECT_EQ(sampleOnce({3.0f, 2.0f}, p, sp), 1);  // 1.5 + 0.4 < 2
  // Sampled: a banned token is never drawn; logprobs see the bias.
  SamplingParams q;
  q.temperature = 1.0f;
  q.logit_bias = {{1, -100.0f}};
  q.logprobs = 0;
  EXPECT_EQ(keptIds({0.0f, 5.0f, 0.0f}, q), (std::vector<int32_t>{0, 2}));  // e^-95 underflows: never drawn
  Sampler sampler;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    SequenceSamplingState st(q, {}, seed);
    auto r = sampler.sample(std::vector<float>{0.0f, 5.0f, 0.0f}.data(), 3, q, st, {});
    ASSERT_TRUE(r.isOk());
    EXPECT_NE(r->token, 1);
    EXPECT_NEAR(r->logprob, std::log(0.5), 1e-4);
  }
}

TEST(LogitBias, Validation) {
  SamplingParams p;
  p.logit_bias = {{5, 1.0f}};
  EXPECT_TRUE(p.validate(10).isOk());
  EXPECT_THAT(p.validate(5).message(), HasSubstr("logit_bias[0]"));
  p.logit_bias = {{1, 100.5f}};
  EXPECT_THAT(p.validate(10).message(), HasSubstr("a bias in [-100, 100]"));
  p.logit_bias = {{1, 1.0f}, {1, 2.0f}};
  EXPECT_THAT(p.validate(10).message(), HasSubstr("not listed before"));
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_FALSE(p.validate().isOk());
}

TEST(TopK, KeepsTheKLargestWithTiesToLowerIds) {
  SamplingParams p;
  p.top_k = 2;
  EXPECT_EQ(keptIds({1.0f, 3.0f, 2.0f, 3.0f, 0.0f}, p), (std::vector<int32_t>{1, 3}));
  p.top_k = 1;
  EXPECT_EQ(keptIds({1.0f, 3.0f, 2.0f, 3.0f, 0.0f}, p), (std::vector<int32_t>{1}));
  p.top_k = 2;
  EXPECT_EQ(keptIds({5.0f, 4.0f, 4.0f, 4.0f, 1.0f}, p), (std::vector<int32_t>{0, 1}));
  p.top_k = 3;
  EXPECT_EQ(keptIds({4.0f, 4.0f, 5.0f, 4.0f, 1.0f}, p), (std::vector<int32_t>{0, 1, 2}));
  p.top_k = 5;  // == vocab: disabled
  EXPECT_EQ(keptIds({4.0f, 4.0f, 5.0f, 4.0f, 1.0f}, p), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  p.top_k = 0;
  EXPECT_EQ(keptIds({4.0f, 4.0f, 5.0f, 4.0f, 1.0f}, p).size(), 5u);
}

TEST(TopK, RenormalisesOverTheKeptSet) {
  SamplingParams p;
  p.top_k = 2;
  const auto probs = keptProbs(logOf({0.1, 0.4, 0.3, 0.2}), p);
  ASSERT_EQ(probs.size(), 2u);
  EXPECT_NEAR(probs[0], 0.4 / 0.7, 1e-6);
  EXPECT_NEAR(probs[1], 0.3 / 0.7, 1e-6);
}

TEST(TopP, SmallestPrefixReachingTheMass) {
  SamplingParams p;
  const auto logits = logOf({0.15, 0.5, 0.1, 0.25});
  p.top_p = 0.7f;  // 0.5 + 0.25 = 0.75 >= 0.7
  EXPECT_EQ(keptIds(logits, p), (std::vector<int32_t>{1, 3}));
  p.top_p = 0.76f;  // needs 0.15 as well
  EXPECT_EQ(keptIds(logits, p), (std::vector<int32_t>{0, 1, 3}));
  p.top_p = 0.4f;  // the top token alone is enough
  EXPECT_EQ(keptIds(logits, p), (std::vector<int32_t>{1}));
  p.top_p = 1e-6f;  // always at least one token
  EXPECT_EQ(keptIds(logits, p), (std::vector<int32_t>{1}));
  p.top_p = 0.95f;
  EXPECT_EQ(keptIds(logits, p), (std::vector<int32_t>{0, 1, 2, 3}));
  const auto probs = keptProbs(logits, SamplingParams{.top_p = 0.7f});
  ASSERT_EQ(probs.size(), 2u);
  EXPECT_NEAR(probs[0], 0.5 / 0.75, 1e-6);
  EXPECT_NEAR(probs[1], 0.25 / 0.75, 1e-6);
}

TEST(TopP, TiesGoToTheLowerId) {
  SamplingParams p;
  const auto logits = logOf({0.2, 0.3, 0.2, 0.3});
  p.top_p = 0.25f;
  EXPECT_EQ(keptIds(logits, p), (std::vector<int32_t>{1}));
  p.top_p = 0.5f;
  EXPECT_EQ(keptIds(logits, p), (std::vector<int32_t>{1, 3}));
  p.top_p = 0.7f;
  EXPECT_EQ(keptIds(logits, p), (std::vector<int32_t>{0, 1, 3}));
}

TEST(TopP, AppliesAfterTemperature) {
  SamplingParams p;
  const auto logits = logOf({0.5, 0.25, 0.15, 0.1});
  p.top_p = 0.7f;
  EXPECT_EQ(keptIds(logits, p), (std::vector<int32_t>{0, 1}));
  p.temperature = 0.5f;  // probs ∝ p^2: 0.7246, 0.1812, 0.0652, 0.0290
  EXPECT_EQ(keptIds(logits, p), (std::vector<int32_t>{0}));
  p.temperature = 4.0f;  // flatter: ∝ p^0.25 -> 0.3077, 0.2588, 0.2277, 0.2058 -> needs three
  EXPECT_EQ(keptIds(logits, p), (std::vector<int32_t>{0, 1, 2}));
}

TEST(TopP, RenormalisesAfterTopK) {
  SamplingParams p;
  const auto logits = logOf({0.4, 0.3, 0.2, 0.1});
  p.top_p = 0.55f;
  EXPECT_EQ(keptIds(logits, p), (std::vector<int32_t>{0, 1}));  // 0.4 < 0.55 <= 0.7
  p.top_k = 2;  // renormalised: 0.571, 0.429 -> the first alone reaches 0.55
  EXPECT_EQ(keptIds(logits, p), (std::vector<int32_t>{0}));
}

TEST(MinP, KeepsTokensAboveAFractionOfTheMax) {
  SamplingParams p;
  const auto logits = logOf({0.5, 0.25, 0.15, 0.1});
  p.min_p = 0.25f;  // threshold 0.125
  EXPECT_EQ(keptIds(logits, p), (std::vector<int32_t>{0, 1, 2}));
  p.min_p = 0.35f;  // threshold 0.175
  EXPECT_EQ(keptIds(logits, p), (std::vector<int32_t>{0, 1}));
  p.min_p = 1.0f;  // only the max, but every tied max
  EXPECT_EQ(keptIds({2.0f, 1.0f, 2.0f}, p), (std::vector<int32_t>{0, 2}));
  const auto probs = keptProbs(logits, SamplingParams{.min_p = 0.35f});
  ASSERT_EQ(probs.size(), 2u);
  EXPECT_NEAR(probs[0], 2.0 / 3.0, 1e-6);
}

TEST(MinP, IsRelativeToTheTemperedDistribution) {
  SamplingParams p;
  const auto logits = logOf({0.5, 0.25, 0.15, 0.1});
  p.min_p = 0.22f;  // ratios to the max: 0.5, 0.3, 0.2
  EXPECT_EQ(keptIds(logits, p), (std::vector<int32_t>{0, 1, 2}));
  p.temperature = 0.5f;  // ratios squared: 0.25, 0.09, 0.04
  EXPECT_EQ(keptIds(logits, p), (std::vector<int32_t>{0, 1}));
}

TEST(MinP, AfterTopP) {
  SamplingParams p;
  const auto logits = logOf({0.4, 0.3, 0.2, 0.1});
  p.top_p = 0.75f;  // 0.4 + 0.3 < 0.75: keeps 0, 1, 2
  p.min_p = 0.4f;   // then p >= 0.16 keeps 0, 1, 2 too. (min-p first would renormalise to
                    // 0.444, 0.333, 0.222 and top-p would then keep only 0, 1.)
  EXPECT_EQ(keptIds(logits, p), (std::vector<int32_t>{0, 1, 2}));
  p.min_p = 0.6f;  // p >= 0.24
  EXPECT_EQ(keptIds(logits, p), (std::vector<int32_t>{0, 1}));
}

TEST(Sampling, MaskedTokensAreNeverKept) {
  SamplingParams p;
  EXPECT_EQ(keptIds({0.0f, kNegInf, 0.0f}, p), (std::vector<int32_t>{0, 2}));
  p.top_k = 2;  // the second slot would be a -inf token: zero probability, not reported
  EXPECT_EQ(keptIds({kNegInf, 1.0f, kNegInf}, p), (std::vector<int32_t>{1}));
}

TEST(Sampling, DrawIsTheInverseCdfOfThePhiloxUniform) {
  SamplingParams p;
  p.seed = 5;
  const std::vector<float> logits = logOf({0.1, 0.2, 0.3, 0.25, 0.15});
  const double cdf[] = {0.1, 0.3, 0.6, 0.85, 1.0};
  SequenceSamplingState s(p, {}, 5, 1);
  Sampler sampler;
  for (int step = 0; step < 50; ++step) {
    const double u = philoxUniform(5, static_cast<uint64_t>(step), 1);
    int32_t expected = 0;
    while (cdf[expected] <= u) ++expected;
    auto r = sampler.sample(logits.data(), 5, p, s, {});
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r->token, expected) << "step " << step << " u " << u;
    s.accept(r->token);
  }
}

TEST(MinTokens, EosIsMaskedUntilMinTokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.min_tokens = 3;
  p.stop_token_ids = {1};
  const std::vector<int32_t> eos = {0};
  const std::vector<float> logits = {10.0f, 9.0f, 1.0f, 2.0f};
  SequenceSamplingState s(p, {}, 0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(sampleOnce(logits, p, s, eos), 3);
    s.accept(3);
  }
  EXPECT_EQ(sampleOnce(logits, p, s, eos), 0);
  // Random sampling never draws a masked id either.
  SamplingParams q = p;
  q.temperature = 1.0f;
  q.seed = 3;
  Sampler sampler;
  for (uint32_t idx = 0; idx < 50; ++idx) {
    auto r = sampler.sample(logits.data(), 4, q, SequenceSamplingState(q, {}, 3, idx), eos);
    ASSERT_TRUE(r.isOk());
    EXPECT_GE(r->token, 2);
  }
}

TEST(Logprobs, AreLogSoftmaxOfPenalisedLogitsBeforeTemperature) {
  const std::vector<float> logits = {1.0f, 2.5f, -0.5f, 2.5f, 0.0f};
  double z = 0.0;
  for (float x : logits) z += std::exp(static_cast<double>(x));
  auto lp = [&](int i) { return static_cast<double>(logits[static_cast<size_t>(i)]) - std::log(z); };
  for (float temperature : {0.0f, 0.5f, 1.0f, 3.0f}) {
    SamplingParams p;
    p.temperature = temperature;
    p.top_k = 3;
    p.logprobs = 3;
    SequenceSamplingState s(p, {}, 11);
    Sampler sampler;
    auto r = sampler.sample(logits.data(), 5, p, s, {});
    ASSERT_TRUE(r.isOk());
    EXPECT_NEAR(r->logprob, lp(r->token), 1e-5) << temperature;
    ASSERT_EQ(r->num_top, 3);
    const auto top = r->topLogprobs();
    EXPECT_EQ(top[0].token, 1);
    EXPECT_EQ(top[1].token, 3);
    EXPECT_EQ(top[2].token, 0);
    EXPECT_NEAR(top[0].logprob, lp(1), 1e-5);
    EXPECT_NEAR(top[2].logprob, lp(0), 1e-5);
    EXPECT_EQ(r->rank, r->token == 0 ? 3 : 1);
  }
}

TEST(Logprobs, ZeroMeansChosenTokenOnlyAndPenaltiesShowUp) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = 0;
  p.frequency_penalty = 1.0f;
  SequenceSamplingState s(p, {}, 0);
  s.accept(0);
  const std::vector<float> logits = {2.0f, 1.5f, 0.0f};
  Sampler sampler;
  auto r = sampler.sample(logits.data(), 3, p, s, {});
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r->token, 1);
  EXPECT_EQ(r->num_top, 0);
  const double z = std::exp(1.0) + std::exp(1.5) + 1.0;  // token 0 penalised to 1.0
  EXPECT_NEAR(r->logprob, 1.5 - std::log(z), 1e-6);
  EXPECT_EQ(r->rank, 1);
}

TEST(Logprobs, MinTokensMaskedTokensHaveMinusInfinity) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = 3;
  p.min_tokens = 1;
  const std::vector<int32_t> eos = {0};
  SequenceSamplingState s(p, {}, 0);
  const std::vector<float> logits = {5.0f, 1.0f, 1.0f};
  Sampler sampler;
  auto r = sampler.sample(logits.data(), 3, p, s, eos);
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r->token, 1);
  EXPECT_NEAR(r->logprob, std::log(0.5), 1e-6);
  EXPECT_EQ(r->top[2].token, 0);
  EXPECT_EQ(r->top[2].logprob, kNegInf);
}

TEST(Errors, BadLogitsAndMismatchedStateAreReported) {
  Sampler sampler;
  SamplingParams p;
  SequenceSamplingState s(p, {}, 0);
  const std::vector<float> with_nan = {0.0f, std::numeric_limits<float>::quiet_NaN(), 1.0f};
  auto r = sampler.sample(with_nan.data(), 3, p, s, {});
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("logits[1] is nan"));

  const std::vector<float> with_inf = {0.0f, 1.0f, std::numeric_limits<float>::infinity()};
  EXPECT_THAT(sampler.sample(with_inf.data(), 3, p, s, {}).status().message(), HasSubstr("logits[2] is inf"));

  const std::vector<float> masked = {kNegInf, kNegInf};
  EXPECT_THAT(sampler.sample(masked.data(), 2, p, s, {}).status().message(),
              HasSubstr("every token is masked"));
  EXPECT_FALSE(sampler.sample(nullptr, 2, p, s, {}).isOk());
  EXPECT_FALSE(sampler.sample(masked.data(), 0, p, s, {}).isOk());

  SamplingParams pen = p;
  pen.repetition_penalty = 1.3f;
  auto mismatch = sampler.sample(with_inf.data(), 2, pen, s, {});
  EXPECT_EQ(mismatch.status().code(), StatusCode::kFailedPrecondition);

  // The sampler still works after errors.
  const std::vector<float> ok = {0.0f, 9.0f};
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  auto good = sampler.sample(ok.data(), 2, greedy, s, {});
  ASSERT_TRUE(good.isOk());
  EXPECT_EQ(good->token, 1);
}

}  // namespace
}  // namespace llmrt
