// The invariants the executor builds on: packing several sequences into one
// step, splitting a prompt into chunks, or starting from a cached prefix gives
// the same logits and tokens as running each prompt alone in one piece.
#include "model_test_util.h"

namespace llmrt::test {
namespace {

constexpr double kRel = 1e-5, kAbs = 1e-6;

std::string modelDir() { return sharedTestdata() + "/models/stories260K-hf"; }

std::vector<int32_t> prompt(int n, int seed) {
  std::vector<int32_t> p{1};
  for (int i = 1; i < n; ++i) p.push_back(3 + (seed * 131 + i * 71) % 500);
  return p;
}

std::vector<float> soloLogits(LoadedModel& m, const std::vector<int32_t>& ids) {
  ForwardBatch b;
  b.add(ids.data(), static_cast<int64_t>(ids.size()), 0, m.allocBlocks(static_cast<int64_t>(ids.size())),
        LogitsMode::kAll);
  auto l = m.model->forward(b);
  EXPECT_TRUE(l.isOk());
  return l.isOk() ? toVector(*l) : std::vector<float>{};
}

TEST(BatchInvariance, PackedBatchEqualsSoloRuns) {
  if (!isDirectory(modelDir())) GTEST_SKIP() << "shared test data absent: " << modelDir();
  auto m = loadModel(modelDir());
  ASSERT_TRUE(m.isOk()) << m.status().toString();
  std::vector<std::vector<int32_t>> prompts = {prompt(5, 1), prompt(17, 2), prompt(1, 3), prompt(33, 4)};
  std::vector<std::vector<float>> solo;
  for (const auto& p : prompts) solo.push_back(soloLogits(*m, p));

  ForwardBatch b;
  for (const auto& p : prompts)
    b.add(p.data(), static_cast<int64_t>(p.size()), 0, m->allocBlocks(static_cast<int64_t>(p.size())),
          LogitsMode::kAll);
  auto l = m->model->forward(b);
  ASSERT_TRUE(l.isOk());
  std::vector<float> all = toVector(*l);
  const int64_t V = m->config.vocab_size;
  size_t off = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<float> part(all.begin() + static_cast<long>(off), all.begin() + static_cast<long>(off + solo[i].size()));
    expectClose(part, solo[i], kRel, kAbs, "sequence " + std::to_string(i));
    off += prompts[i].size() * static_cast<size_t>(V);
  }
}

TEST(BatchInvariance, ChunkedPrefillAndCachedPrefixEqualOnePiece) {
  if (!isDirectory(modelDir())) GTEST_SKIP() << "shared test data absent: " << modelDir();
  auto m = loadModel(modelDir());
  ASSERT_TRUE(m.isOk());
  const std::vector<int32_t> p = prompt(41, 7);
  std::vector<float> whole = soloLogits(*m, p);
  const int64_t V = m->config.vocab_size;

  // Chunks of 8, 8, 16, 9 tokens, each step writing on top of the cached prefix.
  std::vector<int32_t> blocks = m->allocBlocks(static_cast<int64_t>(p.size()));
  std::vector<float> chunked;
  int64_t done = 0;
  for (int64_t len : {8, 8, 16, 9}) {
    ForwardBatch b;
    b.add(p.data() + done, len, done, blocks, LogitsMode::kAll);
    auto l = m->model->forward(b);
    ASSERT_TRUE(l.isOk());
    std::vector<float> part = toVector(*l);
    chunked.insert(chunked.end(), part.begin(), part.end());
    done += len;
  }
  expectClose(chunked, whole, kRel, kAbs, "chunked prefill");

  // A second sequence whose first 24 tokens reuse the first one's blocks: only
  // the rest is computed, and its logits match the from-scratch ones.
  std::vector<int32_t> shared(blocks.begin(), blocks.begin() + 24 / m->tokens_per_block);
  std::vector<int32_t> tail = m->allocBlocks(static_cast<int64_t>(p.size()) - 24);
  shared.insert(shared.end(), tail.begin(), tail.end());
  ForwardBatch b;
  b.add(p.data() + 24, static_cast<int64_t>(p.size()) - 24, 24, shared, LogitsMode::kAll);
  auto l = m->model->forward(b);
  ASSERT_TRUE(l.isOk());
  std::vector<float> want(whole.begin() + 24 * V, whole.end());
  expectClose(toVector(*l), want, kRel, kAbs, "cached prefix");

  // Greedy tokens identical when decoding from a mixed batch (decode + context).
  std::vector<int32_t> solo_tokens = greedy(*m, prompt(9, 11), 12);
  std::vector<int32_t> other = prompt(20, 12);
  std::vector<int32_t> pa = prompt(9, 11);
  std::vector<int32_t> ba = m->allocBlocks(21), bb = m->allocBlocks(20 + 12);
  ForwardBatch first;
  first.add(pa.data(), 9, 0, ba, LogitsMode::kLast);
  auto lf = m->model->forward(first);
  ASSERT_TRUE(lf.isOk());
  std::vector<int32_t> mixed{argmax(lf->as<const float>(), V)};
  int64_t cached = 9;
  for (int step = 1; step < 12; ++step) {
    ForwardBatch d;
    int32_t last = mixed.back();
    d.add(&last, 1, cached, ba, LogitsMode::kLast);
    if (step == 3) d.add(other.data(), 20, 0, bb, LogitsMode::kLast);  // a new prompt joins mid-decode
    auto ld = m->model->forward(d);
    ASSERT_TRUE(ld.isOk());
    mixed.push_back(argmax(ld->as<const float>(), V));
    ++cached;
  }
  EXPECT_EQ(mixed, solo_tokens);
}

}  // namespace
}  // namespace llmrt::test
