// Sampler against a brute-force reference (full sort of the vocabulary) on
// random logits, covering the heap / nth_element / quickselect / cut paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "sampling/kernels.h"
#include "core/philox.h"
#include "sampling/sampler.h"

namespace llmrt {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct RefKept {
  std::vector<int32_t> ids;   // ascending
  std::vector<float> weight;  // unnormalised, as the sampler computes them
};

// The semantics of llmrt/sampling_params.h, written the slow obvious way. Sums
// here are sequential doubles, the sampler's are blocked, so when top_p * mass
// falls within 1e-6 (relative) of a prefix boundary either side is accepted:
// returns every acceptable kept set (usually one).
std::vector<RefKept> reference(const std::vector<float>& w, const SamplingParams& p) {
  const size_t v = w.size();
  const float m = *std::max_element(w.begin(), w.end());
  const float inv_t = 1.0f / p.temperature;
  std::vector<int32_t> order(v);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return w[static_cast<size_t>(a)] > w[static_cast<size_t>(b)] ||
           (w[static_cast<size_t>(a)] == w[static_cast<size_t>(b)] && a < b);
  });
  auto weight = [&](int32_t id) { return detail::fastExp((w[static_cast<size_t>(id)] - m) * inv_t); };
  const size_t nk = (p.top_k > 0 && static_cast<size_t>(p.top_k) < v) ? static_cast<size_t>(p.top_k) : v;
  size_t n_lo = nk, n_hi = nk;
  if (p.top_p < 1.0f) {
    double mass = 0.0;
    for (size_t j = 0; j < nk; ++j) mass += weight(order[j]);
    auto prefixFor = [&](double target) {
      double cum = 0.0;
      for (size_t j = 0; j < nk; ++j) {
        cum += weight(order[j]);
        if (cum >= target) return j + 1;
      }
      return nk;
    };
    const double target = static_cast<double>(p.top_p) * mass;
    n_lo = prefixFor(target * (1 - 1e-6));
    n_hi = prefixFor(target * (1 + 1e-6));
  }
  std::vector<RefKept> sets;
  for (size_t n = n_lo; n <= n_hi; ++n) {
    std::vector<int32_t> kept;
    for (size_t j = 0; j < n; ++j) {
      if (weight(order[j]) >= p.min_p && weight(order[j]) > 0.0f) kept.push_back(order[j]);
    }
    std::sort(kept.begin(), kept.end());
    RefKept out;
    out.ids = kept;
    for (int32_t id : kept) out.weight.push_back(weight(id));
    sets.push_back(std::move(out));
  }
  return sets;
}

// Inverse CDF over a kept set in ascending id order.
int32_t referencePick(const RefKept& k, double u) {
  double total = 0.0;
  for (float x : k.weight) total += x;
  double cum = 0.0;
  for (size_t j = 0; j < k.ids.size(); ++j) {
    cum += k.weight[j];
    if (cum > u * total) return k.ids[j];
  }
  return k.ids.back();
}

enum class Shape { kPeaky, kFlat, kTies, kMasked, kLongTail, kTinyTail };

std::vector<float> makeLogits(Shape shape, size_t v, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(v);
  for (float& x : w) x = normal(rng);
  switch (shape) {
    case Shape::kPeaky:
      for (float& x : w) x *= 1.5f;
      for (int i = 0; i < 5; ++i) w[rng() % v] += 8.0f + static_cast<float>(i);
      break;
    case Shape::kFlat:
      for (float& x : w) x *= 0.1f;
      break;
    case Shape::kTies:
      for (float& x : w) x = std::round(x * 2.0f) / 2.0f;
      break;
    case Shape::kMasked:
      for (size_t i = 0; i < v; ++i)
        if (rng() % 3 == 0) w[i] = kNegInf;
      break;
    case Shape::kLongTail:  // the top token against a tail of e^-8 each: floor 2^-20 needed
      std::fill(w.begin(), w.end(), 0.0f);
      w[v / 2] = 8.0f;
      break;
    case Shape::kTinyTail:  // tail of e^-15 each (< 2^-20): floor 0 needed
      std::fill(w.begin(), w.end(), 0.0f);
      w[v / 3] = 15.0f;
      break;
  }
  return w;
}

void compareOne(Sampler& sampler, const std::vector<float>& w, const SamplingParams& p,
                const std::string& what) {
  const std::vector<RefKept> refs = reference(w, p);
  SequenceSamplingState state(p, {}, 1234, 0);
  auto d = sampler.distribution(w.data(), static_cast<int64_t>(w.size()), p, state, {});
  ASSERT_TRUE(d.isOk()) << what;
  std::vector<int32_t> ids;
  for (const TokenProb& t : *d) ids.push_back(t.token);
  const RefKept* ref = nullptr;
  for (const RefKept& r : refs) {
    if (r.ids == ids) ref = &r;
  }
  ASSERT_NE(ref, nullptr) << what << ": kept " << ids.size() << " tokens; reference keeps "
                          << refs.front().ids.size() << (refs.size() > 1 ? " (or more)" : "");
  double total = 0.0;
  for (float x : ref->weight) total += x;
  for (size_t j = 0; j < ids.size(); ++j) ASSERT_NEAR((*d)[j].prob, ref->weight[j] / total, 1e-9) << what;
  for (uint64_t step = 0; step < 4; ++step) {
    while (state.numGenerated() < static_cast<int64_t>(step)) state.accept(0);
    auto r = sampler.sample(w.data(), static_cast<int64_t>(w.size()), p, state, {});
    ASSERT_TRUE(r.isOk()) << what;
    ASSERT_EQ(r->token, referencePick(*ref, philoxUniform(1234, step, 0))) << what << " step " << step;
  }
}

TEST(SamplerReference, SmallVocabularyParameterGrid) {
  Sampler sampler;
  const size_t v = 3000;
  int cases = 0;
  for (Shape shape : {Shape::kPeaky, Shape::kFlat, Shape::kTies, Shape::kMasked}) {
    const auto w = makeLogits(shape, v, 17u + static_cast<uint32_t>(shape));
    for (float t : {0.3f, 1.0f, 1.7f})
      for (int k : {0, 1, 7, 100, 400, 2500})
        for (float top_p : {1.0f, 0.5f, 0.9f, 0.999f})
          for (float min_p : {0.0f, 0.05f}) {
            SamplingParams p;
            p.temperature = t;
            p.top_k = k;
            p.top_p = top_p;
            p.min_p = min_p;
            compareOne(sampler, w, p,
                       "shape " + std::to_string(static_cast<int>(shape)) + " T " + std::to_string(t) +
                           " k " + std::to_string(k) + " p " + std::to_string(top_p) + " min_p " +
                           std::to_string(min_p));
            ++cases;
          }
  }
  EXPECT_EQ(cases, 4 * 3 * 6 * 4 * 2);
}

TEST(SamplerReference, LargeVocabularyTails) {
  Sampler sampler;
  const size_t v = 40000;
  for (Shape shape : {Shape::kPeaky, Shape::kFlat, Shape::kLongTail, Shape::kTinyTail, Shape::kTies}) {
    const auto w = makeLogits(shape, v, 99u + static_cast<uint32_t>(shape));
    for (float top_p : {0.3f, 0.9f, 0.999f}) {
      for (int k : {0, 50, 5000}) {
        SamplingParams p;
        p.top_p = top_p;
        p.top_k = k;
        compareOne(sampler, w, p,
                   "shape " + std::to_string(static_cast<int>(shape)) + " p " + std::to_string(top_p) +
                       " k " + std::to_string(k));
      }
    }
  }
}

TEST(SamplerReference, TopPOnLongTailKeepsMuchOfTheTail) {
  // Sanity check that the tail cases reach the lower floors: most of the mass is in the tail.
  const auto w = makeLogits(Shape::kLongTail, 40000, 1);
  SamplingParams p;
  p.top_p = 0.9f;
  EXPECT_GT(reference(w, p).front().ids.size(), 30000u);
  const auto tiny = makeLogits(Shape::kTinyTail, 40000, 1);
  p.top_p = 0.999f;
  EXPECT_GT(reference(tiny, p).front().ids.size(), 1000u);
}

}  // namespace
}  // namespace llmrt
