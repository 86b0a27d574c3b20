// A warm Sampler does not allocate: counts global operator new calls around sample().
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <random>

#include "sampling/sampler.h"

namespace {
std::atomic<size_t> g_allocations{0};
}  // namespace

void* operator new(size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace llmrt {
namespace {

TEST(SamplerAllocations, WarmSamplerDoesNotAllocate) {
  const size_t v = 50000;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> w(v);
  for (float& x : w) x = normal(rng);
  std::vector<SamplingParams> configs(7);
  configs[0].temperature = 0.0f;
  configs[1].top_p = 0.9f;
  configs[2].top_k = 40;
  configs[3].top_k = 3000;
  configs[3].top_p = 0.8f;
  configs[4].top_k = 10000;
  configs[5].min_p = 0.1f;
  configs[5].logprobs = 5;
  configs[6].temperature = 2.0f;
  configs[6].top_p = 0.99f;
  configs[6].repetition_penalty = 1.2f;
  configs[6].min_tokens = 5;
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
  const std::vector<int32_t> eos = {7};
  std::vector<SequenceSamplingState> states;
  for (const SamplingParams& p : configs) states.emplace_back(p, prompt, 9);
  Sampler sampler;
  for (int pass = 0; pass < 2; ++pass) {
    const size_t before = g_allocations.load();
    for (size_t c = 0; c < configs.size(); ++c) {
      auto r = sampler.sample(w.data(), static_cast<int64_t>(v), configs[c], states[c], eos);
      ASSERT_TRUE(r.isOk()) << c;
    }
    if (pass == 0) EXPECT_GT(g_allocations.load() - before, 0u);  // the workspace is built: counting works
    if (pass == 1) EXPECT_EQ(g_allocations.load() - before, 0u);
  }
}

}  // namespace
}  // namespace llmrt
