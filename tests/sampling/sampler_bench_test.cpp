// Per-call time of Sampler::sample on LLM-sized vocabularies. Prints the
// numbers; asserts only that sampling works (no timing assertions).
#include <gtest/gtest.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <random>

#include "sampling/sampler.h"

namespace llmrt {
namespace {

// LLM-like logits: a broad normal body plus a few strong candidates.
std::vector<float> llmLogits(size_t v, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> w(v);
  for (float& x : w) x = normal(rng);
  for (int i = 0; i < 20; ++i) w[rng() % v] += 10.0f + static_cast<float>(i % 5);
  return w;
}

struct Config {
  const char* name;
  SamplingParams params;
};

std::vector<Config> configs() {
  std::vector<Config> c;
  SamplingParams p;
  p.temperature = 0.0f;
  c.push_back({"greedy", p});
  p = {};
  c.push_back({"temperature 1", p});
  p = {};
  p.temperature = 0.7f;
  p.top_p = 0.9f;
  c.push_back({"T 0.7 top_p 0.9", p});
  p = {};
  p.temperature = 1.5f;
  p.top_p = 0.95f;
  c.push_back({"T 1.5 top_p 0.95 (flat)", p});
  p = {};
  p.top_k = 50;
  c.push_back({"top_k 50", p});
  p = {};
  p.top_k = 2000;
  p.top_p = 0.9f;
  c.push_back({"top_k 2000 top_p 0.9", p});
  p = {};
  p.min_p = 0.05f;
  c.push_back({"min_p 0.05", p});
  p = {};
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.repetition_penalty = 1.1f;
  p.frequency_penalty = 0.2f;
  p.logprobs = 5;
  c.push_back({"penalties + top_k 40 + logprobs 5", p});
  return c;
}

// Nanoseconds per dependent double multiply (4 cycles on current x86 cores):
// lets the printed times be scaled on a shared or throttled machine.
double nsPerDependentMultiply() {
  volatile double seed = 1.0;
  double x = seed;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20000000; ++i) x *= 1.0000001;
  const double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / 2e7;
  seed = x;
  return ns;
}

TEST(SamplerBenchmark, PerCallTimeAtLlmVocabularies) {
  const double ns = nsPerDependentMultiply();
  std::printf("[sampler bench] calibration: %.2f ns per dependent multiply (about %.2f GHz effective)\n", ns,
              4.0 / ns);
  for (size_t vocab : {size_t{128256}, size_t{256000}}) {
    const auto w = llmLogits(vocab, 3);
    std::vector<int32_t> prompt;
    for (int i = 0; i < 2000; ++i) prompt.push_back(static_cast<int32_t>((i * 7919) % vocab));
    Sampler sampler;
    for (const Config& c : configs()) {
      SamplingParams p = c.params;
      p.seed = 1;
      SequenceSamplingState s(p, prompt, 1);
      auto warm = sampler.sample(w.data(), static_cast<int64_t>(vocab), p, s, {});
      ASSERT_TRUE(warm.isOk()) << c.name << ": " << warm.status().toString();
      const int iters = 50;
      timespec c0, c1;
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) {
        auto r = sampler.sample(w.data(), static_cast<int64_t>(vocab), p, s, {});
        ASSERT_TRUE(r.isOk());
        s.accept(r->token);
      }
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
      const double cpu_us = ((c1.tv_sec - c0.tv_sec) * 1e6 + (c1.tv_nsec - c0.tv_nsec) * 1e-3) / iters;
      std::printf("[sampler bench] vocab %zu  %-36s %8.1f us/call wall %8.1f us/call thread cpu\n", vocab,
                  c.name, us, cpu_us);
      RecordProperty(std::string("us_") + std::to_string(vocab) + "_" + c.name, std::to_string(us));
    }
  }
}

}  // namespace
}  // namespace llmrt
