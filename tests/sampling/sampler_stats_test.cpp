// Seeded reproducibility and distributional correctness of Sampler::sample.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>

#include "sampling/sampler.h"

namespace llmrt {
namespace {

const std::vector<double> kProbs = {0.1, 0.2, 0.3, 0.25, 0.15};

std::vector<float> logOf(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

// Chi-square statistic of observed counts against expected probabilities.
double chiSquare(const std::vector<int>& counts, const std::vector<double>& expected, int n) {
  double chi = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = expected[i] * n;
    chi += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi;
}

// 20k draws of one sequence, stepping through the seed stream.
std::vector<int> drawCounts(const SamplingParams& p, const std::vector<float>& logits, int n) {
  Sampler sampler;
  SequenceSamplingState s(p, {}, requestSeed(p));
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) {
    auto r = sampler.sample(logits.data(), static_cast<int64_t>(logits.size()), p, s, {});
    EXPECT_TRUE(r.isOk());
    if (!r.isOk()) break;
    ++counts[static_cast<size_t>(r->token)];
    s.accept(r->token);
  }
  return counts;
}

// 99.9% quantile of chi-square with 4 and 2 degrees of freedom.
constexpr double kChi2Df4 = 18.47;
constexpr double kChi2Df2 = 13.82;

TEST(SamplerStats, FollowsTheDistribution) {
  SamplingParams p;
  p.seed = 20240601;
  const int n = 20000;
  const auto counts = drawCounts(p, logOf(kProbs), n);
  const double chi = chiSquare(counts, kProbs, n);
  std::printf("chi-square (df 4) over %d draws: %.3f\n", n, chi);
  EXPECT_LT(chi, kChi2Df4);
  // A wrong distribution (uniform) must be rejected by the same statistic.
  EXPECT_GT(chiSquare(counts, {0.2, 0.2, 0.2, 0.2, 0.2}, n), 100.0);
}

TEST(SamplerStats, FollowsTheTemperedDistribution) {
  SamplingParams p;
  p.seed = 7;
  p.temperature = 2.0f;
  std::vector<double> expected;
  double z = 0.0;
  for (double q : kProbs) z += std::sqrt(q);
  for (double q : kProbs) expected.push_back(std::sqrt(q) / z);
  const int n = 20000;
  const auto counts = drawCounts(p, logOf(kProbs), n);
  EXPECT_LT(chiSquare(counts, expected, n), kChi2Df4);
  EXPECT_GT(chiSquare(counts, kProbs, n), 50.0);
}

TEST(SamplerStats, FollowsTheTruncatedDistribution) {
  SamplingParams p;
  p.seed = 8;
  p.top_k = 3;
  const int n = 20000;
  const auto counts = drawCounts(p, logOf(kProbs), n);
  EXPECT_EQ(counts[0], 0);
  EXPECT_EQ(counts[4], 0);
  const std::vector<int> kept = {counts[1], counts[2], counts[3]};
  EXPECT_LT(chiSquare(kept, {0.2 / 0.75, 0.3 / 0.75, 0.25 / 0.75}, n), kChi2Df2);
}

TEST(SamplerStats, SampleIndexStreamsAreIndependentDraws) {
  // n > 1: at one step, sequences 0..N-1 of one request draw from the distribution too.
  SamplingParams p;
  p.seed = 99;
  const auto logits = logOf(kProbs);
  Sampler sampler;
  std::vector<int> counts(5, 0);
  const int n = 20000;
  for (uint32_t i = 0; i < static_cast<uint32_t>(n); ++i) {
    auto r = sampler.sample(logits.data(), 5, p, SequenceSamplingState(p, {}, 99, i), {});
    ASSERT_TRUE(r.isOk());
    ++counts[static_cast<size_t>(r->token)];
  }
  EXPECT_LT(chiSquare(counts, kProbs, n), kChi2Df4);
}

std::vector<float> flatLogits(size_t v) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<float> w(v);
  for (float& x : w) x = normal(rng);
  return w;
}

std::vector<int32_t> generate(Sampler& sampler, const std::vector<float>& w, const SamplingParams& p,
                              SequenceSamplingState& s, int steps) {
  std::vector<int32_t> out;
  for (int i = 0; i < steps; ++i) {
    auto r = sampler.sample(w.data(), static_cast<int64_t>(w.size()), p, s, {});
    EXPECT_TRUE(r.isOk());
    if (!r.isOk()) break;
    out.push_back(r->token);
    s.accept(r->token);
  }
  return out;
}

TEST(SamplerSeeds, SameSeedSameTokensDifferentSeedDifferentTokens) {
  const auto w = flatLogits(1000);
  SamplingParams p;
  p.top_p = 0.95f;
  p.frequency_penalty = 0.3f;
  Sampler a, b;
  p.seed = 1;
  SequenceSamplingState s1(p, {}, requestSeed(p)), s1b(p, {}, requestSeed(p));
  const auto x = generate(a, w, p, s1, 64);
  const auto y = generate(b, w, p, s1b, 64);
  EXPECT_EQ(x, y);
  p.seed = 2;
  SequenceSamplingState s2(p, {}, requestSeed(p));
  EXPECT_NE(generate(a, w, p, s2, 64), x);
  // Another sample index of the same request is another stream.
  p.seed = 1;
  SequenceSamplingState s1i(p, {}, requestSeed(p), 1);
  EXPECT_NE(generate(a, w, p, s1i, 64), x);
}

TEST(SamplerSeeds, IndependentOfCallOrderAndBatchComposition) {
  const auto w = flatLogits(1000);
  SamplingParams p;
  p.top_k = 100;
  p.repetition_penalty = 1.2f;
  const std::vector<int32_t> prompt = {3, 4, 5};
  // Alone, each in its own sampler.
  std::vector<std::vector<int32_t>> alone;
  for (uint64_t seed : {10u, 11u, 12u}) {
    Sampler sampler;
    SequenceSamplingState s(p, prompt, seed);
    alone.push_back(generate(sampler, w, p, s, 32));
  }
  // Interleaved in one sampler, visiting the sequences in a changing order, with
  // an unrelated greedy sequence mixed in.
  Sampler shared;
  std::vector<SequenceSamplingState> states;
  for (uint64_t seed : {10u, 11u, 12u}) states.emplace_back(p, prompt, seed);
  std::vector<std::vector<int32_t>> mixed(3);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  SequenceSamplingState other(greedy, {}, 0);
  std::array<size_t, 3> order = {0, 1, 2};
  for (int step = 0; step < 32; ++step) {
    std::next_permutation(order.begin(), order.end());  // a different visiting order each step
    for (size_t i : order) {
      auto r = shared.sample(w.data(), 1000, p, states[i], {});
      ASSERT_TRUE(r.isOk());
      mixed[i].push_back(r->token);
      states[i].accept(r->token);
      ASSERT_TRUE(shared.sample(w.data(), 1000, greedy, other, {}).isOk());
    }
  }
  EXPECT_EQ(mixed, alone);
}

TEST(SamplerSeeds, GreedyWithNGreaterThanOneIsIdentical) {
  const auto w = flatLogits(500);
  SamplingParams p;
  p.temperature = 0.0f;
  p.n = 3;
  auto states = makeSequenceStates(p, {});
  Sampler sampler;
  const auto first = generate(sampler, w, p, states[0], 8);
  EXPECT_EQ(generate(sampler, w, p, states[1], 8), first);
  EXPECT_EQ(generate(sampler, w, p, states[2], 8), first);
}

TEST(SamplerSeeds, UnseededRequestsDiffer) {
  const auto w = flatLogits(1000);
  SamplingParams p;  // no seed
  Sampler sampler;
  auto s1 = makeSequenceStates(p, {});
  auto s2 = makeSequenceStates(p, {});
  EXPECT_NE(generate(sampler, w, p, s1[0], 32), generate(sampler, w, p, s2[0], 32));
}

}  // namespace
}  // namespace llmrt
