// Helpers for model tests: load a HF model directory on the CPU backend and run
// prompts through it with simple contiguous block tables (no KV manager).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/mapped_file.h"
#include "loader/config_parser.h"
#include "loader/weight_store.h"
#include "model/decoder_model.h"
#include "runtime/forward_batch.h"
#include "runtime/step_builder.h"

namespace llmrt::test {

inline std::string sharedTestdata() { return LLMRT_SHARED_TESTDATA; }

// The committed transformers fixtures (tests/data/golden/<name>/ with config.json, weights and
// golden.json), by name.
inline std::string goldenDir() { return std::string(LLMRT_TEST_DATA) + "/golden"; }
inline std::vector<std::string> goldenModels() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(goldenDir(), ec))
    if (e.is_directory() && std::filesystem::exists(e.path() / "golden.json")) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

struct LoadedModel {
  ModelConfig config;
  WeightStore store;
  std::unique_ptr<CpuBackend> backend;
  std::unique_ptr<DecoderModel> model;
  int64_t tokens_per_block = 0;
  int64_t next_block = 0;
  StepBuilder steps;  // lays a ForwardBatch out as the runtime does

  // One step of `b` through the model (logits: backend memory, valid until the next step).
  Result<TensorView> forward(const ForwardBatch& b) {
    StepLayout layout;
    LLMRT_ASSIGN_OR_RETURN(const StepInputs in, steps.build(b, *model, *backend, &layout));
    return model->forward(in, layout);
  }

  // Fresh, distinct blocks for a sequence of up to `tokens` tokens.
  std::vector<int32_t> allocBlocks(int64_t tokens) {
    std::vector<int32_t> t;
    for (int64_t i = 0; i < (tokens + tokens_per_block - 1) / tokens_per_block; ++i)
      t.push_back(static_cast<int32_t>(next_block++));
    return t;
  }
};

// `backend`: a CPU backend of the test's own (a subclass), else one on `threads` threads.
inline Result<LoadedModel> loadModel(const std::string& dir, int64_t num_blocks = 256,
                                     int64_t tokens_per_block = 8, int threads = 2,
                                     const DecoderModelOptions& options = {},
                                     std::unique_ptr<CpuBackend> backend = nullptr) {
  LoadedModel m;
  LLMRT_ASSIGN_OR_RETURN(m.config, loadModelConfig(dir + "/config.json"));
  LLMRT_ASSIGN_OR_RETURN(m.store, WeightStore::openDirectory(dir));
  m.backend = backend ? std::move(backend) : std::make_unique<CpuBackend>(threads);
  const WeightStore* store = &m.store;
  LLMRT_ASSIGN_OR_RETURN(
      m.model,
      DecoderModel::load(m.config, [store](const std::string& n) { return store->tensor(n); }, *m.backend, options));
  // (The model's own KV heads: a tensor-parallel rank holds its share.)
  KvPoolGeometry g{num_blocks, m.config.num_hidden_layers, m.model->config().num_key_value_heads, m.config.head_dim,
                   tokens_per_block, DType::kF32};
  LLMRT_RETURN_IF_ERROR(m.backend->allocateKvPools(g, 0));
  m.tokens_per_block = tokens_per_block;
  return m;
}

inline std::vector<float> toVector(const TensorView& t) {
  const float* p = t.as<const float>();
  return std::vector<float>(p, p + t.numel());
}

// The logits of every position of `ids`, run as one fresh sequence.
inline Result<std::vector<float>> promptLogits(LoadedModel& m, const std::vector<int32_t>& ids) {
  ForwardBatch b;
  b.add(ids.data(), static_cast<int64_t>(ids.size()), 0, m.allocBlocks(static_cast<int64_t>(ids.size())),
        LogitsMode::kAll);
  LLMRT_ASSIGN_OR_RETURN(TensorView logits, m.forward(b));
  return toVector(logits);
}

inline int32_t argmax(const float* row, int64_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

// Greedy continuation with the KV cache: one prefill step then one step per token.
inline std::vector<int32_t> greedy(LoadedModel& m, const std::vector<int32_t>& prompt, int n_new) {
  std::vector<int32_t> blocks = m.allocBlocks(static_cast<int64_t>(prompt.size()) + n_new);
  std::vector<int32_t> out;
  ForwardBatch b;
  b.add(prompt.data(), static_cast<int64_t>(prompt.size()), 0, blocks, LogitsMode::kLast);
  auto logits = m.forward(b);
  EXPECT_TRUE(logits.isOk()) << logits.status().toString();
  if (!logits.isOk()) return out;
  int64_t cached = static_cast<int64_t>(prompt.size());
  for (int i = 0; i < n_new; ++i) {
    int32_t next = argmax(logits->as<const float>(), m.config.vocab_size);
    out.push_back(next);
    if (i + 1 == n_new) break;
    ForwardBatch d;
    d.add(&next, 1, cached, blocks, LogitsMode::kLast);
    logits = m.forward(d);
    EXPECT_TRUE(logits.isOk()) << logits.status().toString();
    if (!logits.isOk()) return out;
    ++cached;
  }
  return out;
}

// max |a - b| <= rel * max|b| + abs
inline void expectClose(const std::vector<float>& got, const std::vector<float>& want, double rel, double abs,
                        const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double max_ref = 0, max_diff = 0;
  size_t worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(want[i])));
    double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (d > max_diff) {
      max_diff = d;
      worst = i;
    }
  }
  EXPECT_LE(max_diff, rel * max_ref + abs) << what << ": worst at " << worst << " got " << got[worst] << " want "
                                           << want[worst] << " (max |ref| " << max_ref << ")";
}

}  // namespace llmrt::test
