// Helpers for the executor tests on a real trained model: stories260K (../shared/testdata) when
// present, else the bundled llmrt-tiny (tests/test_models.h; LLMRT_TEST_MODEL=shared|bundled picks).
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "llmrt/executor.h"
#include "llmrt/llm.h"
#include "test_models.h"

namespace llmrt::extest {

using testmodels::TrainedModel;

// The model the proofs run on; null (modelAbsent() says why) only where LLMRT_TEST_MODEL=shared
// asks for ../shared/testdata and it is absent.
inline std::string& modelAbsent() {
  static std::string why;
  return why;
}
inline const TrainedModel* model() {
  static const std::optional<TrainedModel> m = testmodels::proofModel(&modelAbsent());
  return m ? &*m : nullptr;
}
// The model's reference continuation (a greedy one, EOS ignored) of its first reference prompt.
inline const testmodels::ReferenceCase& reference() { return model()->first(); }

#define LLMRT_REQUIRE_MODEL() \
  if (!::llmrt::extest::model()) GTEST_SKIP() << ::llmrt::extest::modelAbsent()

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

inline EngineConfig baseConfig(int64_t kv_tokens = 4096) {
  EngineConfig c;
  c.model = model() ? model()->dir : std::string();
  const std::string backend = testBackend(), dtype = testDtype(), overlap = testOverlap();
  c.backend = parseBackendKind(backend).value_or(BackendKind::kCpu);
  c.dtype = parseComputeDtype(dtype).value_or(ComputeDtype::kAuto);
  c.overlap = parseOverlapMode(overlap).value_or(OverlapMode::kAuto);
  static const bool said = [&] {  // once per run, so a log shows where the proofs ran
    std::fprintf(stderr, "executor tests on backend %s, dtype %s, overlap %s, model %s\n", backend.c_str(),
                 dtype.c_str(), overlap.c_str(), c.model.c_str());
    return true;
  }();
  (void)said;
  c.num_threads = 1;
  c.kv_cache_config.tokens_per_block = 16;
  c.kv_cache_config.max_tokens = kv_tokens;
  return c;
}

inline std::unique_ptr<LLM> makeLlm(const EngineConfig& c) {
  auto llm = LLM::create(c);
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

// The model's BOS id.
inline TokenId bos() { return model() ? model()->bos : 1; }

// A deterministic pseudo-random prompt of `len` ids (BOS first).
inline std::vector<TokenId> prompt(int len, int salt) {
  std::vector<TokenId> p{bos()};
  for (int i = 1; i < len; ++i) p.push_back(3 + (salt * 977 + i * 131 + (i * i) % 89) % 500);
  return p;
}

inline std::vector<Prompt> prompts(const std::vector<std::vector<TokenId>>& ids) {
  std::vector<Prompt> out;
  for (const auto& p : ids) out.push_back(Prompt::fromIds(p));
  return out;
}

}  // namespace llmrt::extest
