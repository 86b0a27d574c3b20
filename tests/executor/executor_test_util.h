// Helpers for the executor tests on the staged 260K-parameter TinyStories model.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "llmrt/executor.h"
#include "llmrt/llm.h"

namespace llmrt::extest {

// The environment's LLMRT_SHARED_TESTDATA (a GPU machine's copy) overrides the build's path.
inline std::string storiesDir() {
  const char* env = std::getenv("LLMRT_SHARED_TESTDATA");
  return std::string(env && *env ? env : LLMRT_SHARED_TESTDATA) + "/models/stories260K-hf";
}
inline bool haveStories() { return std::ifstream(storiesDir() + "/config.json").good(); }

#define LLMRT_REQUIRE_STORIES() \
  if (!::llmrt::extest::haveStories()) GTEST_SKIP() << "shared test data absent: " << ::llmrt::extest::storiesDir()

// The backend and dtype every test runs on: the CPU unless LLMRT_TEST_BACKEND names another
// ("cuda": the same proofs on the GPU, scripts/cuda/device_check.sh) and LLMRT_TEST_DTYPE a dtype.
inline std::string envOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : std::string(fallback);
}
inline std::string testBackend() { return envOr("LLMRT_TEST_BACKEND", "cpu"); }
inline std::string testDtype() { return envOr("LLMRT_TEST_DTYPE", "auto"); }
// LLMRT_TEST_OVERLAP=on|off|auto: the overlap scheduling the tests run with (CTest runs them with "on" too).
inline std::string testOverlap() { return envOr("LLMRT_TEST_OVERLAP", "auto"); }

inline ExecutorConfig baseConfig(int64_t kv_tokens = 4096) {
  ExecutorConfig c;
  c.model = storiesDir();
  c.backend = testBackend();
  c.dtype = testDtype();
  c.overlap = testOverlap();
  static const bool said = [&] {  // once per run, so a log shows where the proofs ran
    std::fprintf(stderr, "executor tests on backend %s, dtype %s, overlap %s\n", c.backend.c_str(), c.dtype.c_str(),
                 c.overlap.c_str());
    return true;
  }();
  (void)said;
  c.num_threads = 1;
  c.kv_cache_config.tokens_per_block = 16;
  c.kv_cache_config.max_tokens = kv_tokens;
  return c;
}

inline LlmArgs toArgs(const ExecutorConfig& c) {
  LlmArgs a;
  a.model = c.model;
  a.kv_cache_config = c.kv_cache_config;
  a.scheduler_config = c.scheduler_config;
  a.max_batch_size = c.max_batch_size;
  a.max_num_tokens = c.max_num_tokens;
  a.max_input_len = c.max_input_len;
  a.max_seq_len = c.max_seq_len;
  a.num_threads = c.num_threads;
  a.backend = c.backend;
  a.dtype = c.dtype;
  a.overlap = c.overlap;
  return a;
}

inline std::unique_ptr<LLM> makeLlm(const ExecutorConfig& c) {
  auto llm = LLM::create(toArgs(c));
  EXPECT_TRUE(llm.isOk()) << llm.status().toString();
  return llm.isOk() ? std::move(*llm) : nullptr;
}

inline SamplingParams greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

// A deterministic pseudo-random prompt of `len` ids (BOS first).
inline std::vector<TokenId> prompt(int len, int salt) {
  std::vector<TokenId> p{1};
  for (int i = 1; i < len; ++i) p.push_back(3 + (salt * 977 + i * 131 + (i * i) % 89) % 500);
  return p;
}

inline std::vector<Prompt> prompts(const std::vector<std::vector<TokenId>>& ids) {
  std::vector<Prompt> out;
  for (const auto& p : ids) out.push_back(Prompt::fromIds(p));
  return out;
}

}  // namespace llmrt::extest
