// The invariants the executor builds on: packing several sequences into one
// step, splitting a prompt into chunks, or starting from a cached prefix gives
// the same logits and tokens as running each prompt alone in one piece. On stories260K
// (../shared/testdata; skipped where absent), the bundled llmrt-tiny (tests/test_models.h) and
// every architecture's golden checkpoint (tests/data/golden: random weights, no trained bos).
#include <filesystem>

#include "model_test_util.h"
#include "test_models.h"

namespace llmrt::test {
namespace {

constexpr double kRel = 1e-5, kAbs = 1e-6;

class BatchInvariance : public ::testing::TestWithParam<std::string> {};

// The model directory and bos id of a parameter: a trained model's name, or "golden_<fixture>".
struct ModelUnderTest {
  std::string dir;
  int32_t bos = 1;
};

constexpr std::string_view kGoldenPrefix = "golden_";

std::vector<std::string> modelNames() {
  std::vector<std::string> names = testmodels::trainedModelNames();
  const std::string root = std::string(LLMRT_TEST_DATA) + "/golden";
  std::vector<std::string> golden;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(root, ec))
    if (std::filesystem::exists(e.path() / "golden.json")) golden.push_back(std::string(kGoldenPrefix) + e.path().filename().string());
  std::sort(golden.begin(), golden.end());
  names.insert(names.end(), golden.begin(), golden.end());
  return names;
}

// Prompt ids below the vocabulary (random-weight fixtures have 256 or 320 ids).
int64_t g_vocab = 512;

std::vector<int32_t> prompt(int n, int seed, int32_t bos) {
  std::vector<int32_t> p{bos};
  const auto range = static_cast<int>(std::min<int64_t>(500, g_vocab - 3));
  for (int i = 1; i < n; ++i) p.push_back(3 + (seed * 131 + i * 71) % range);
  return p;
}

std::vector<float> soloLogits(LoadedModel& m, const std::vector<int32_t>& ids) {
  ForwardBatch b;
  b.add(ids.data(), static_cast<int64_t>(ids.size()), 0, m.allocBlocks(static_cast<int64_t>(ids.size())),
        LogitsMode::kAll);
  auto l = m.forward(b);
  EXPECT_TRUE(l.isOk());
  return l.isOk() ? toVector(*l) : std::vector<float>{};
}

TEST_P(BatchInvariance, PackedBatchEqualsSoloRuns) {
  ModelUnderTest tm;
  if (GetParam().starts_with(kGoldenPrefix)) {
    tm.dir = std::string(LLMRT_TEST_DATA) + "/golden/" + GetParam().substr(kGoldenPrefix.size());
  } else {
    LLMRT_TRAINED_MODEL(trained, GetParam());
    tm = {trained.dir, trained.bos};
  }
  const int32_t bos = tm.bos;
  auto m = loadModel(tm.dir);
  ASSERT_TRUE(m.isOk()) << m.status().toString();
  g_vocab = m->config.vocab_size;
  std::vector<std::vector<int32_t>> prompts = {prompt(5, 1, bos), prompt(17, 2, bos), prompt(1, 3, bos),
                                               prompt(33, 4, bos)};
  std::vector<std::vector<float>> solo;
  for (const auto& p : prompts) solo.push_back(soloLogits(*m, p));

  ForwardBatch b;
  for (const auto& p : prompts)
    b.add(p.data(), static_cast<int64_t>(p.size()), 0, m->allocBlocks(static_cast<int64_t>(p.size())),
          LogitsMode::kAll);
  auto l = m->forward(b);
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

TEST_P(BatchInvariance, ChunkedPrefillAndCachedPrefixEqualOnePiece) {
  ModelUnderTest tm;
  if (GetParam().starts_with(kGoldenPrefix)) {
    tm.dir = std::string(LLMRT_TEST_DATA) + "/golden/" + GetParam().substr(kGoldenPrefix.size());
  } else {
    LLMRT_TRAINED_MODEL(trained, GetParam());
    tm = {trained.dir, trained.bos};
  }
  const int32_t bos = tm.bos;
  auto m = loadModel(tm.dir);
  ASSERT_TRUE(m.isOk()) << m.status().toString();
  g_vocab = m->config.vocab_size;
  if (ropeDependsOnLength(m->config))
    GTEST_SKIP() << "dynamic NTK rotates each step with its own length's table, so chunks differ by design";
  const std::vector<int32_t> p = prompt(41, 7, bos);
  std::vector<float> whole = soloLogits(*m, p);
  const int64_t V = m->config.vocab_size;

  // Chunks of 8, 8, 16, 9 tokens, each step writing on top of the cached prefix.
  std::vector<int32_t> blocks = m->allocBlocks(static_cast<int64_t>(p.size()));
  std::vector<float> chunked;
  int64_t done = 0;
  for (int64_t len : {8, 8, 16, 9}) {
    ForwardBatch b;
    b.add(p.data() + done, len, done, blocks, LogitsMode::kAll);
    auto l = m->forward(b);
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
  auto l = m->forward(b);
  ASSERT_TRUE(l.isOk());
  std::vector<float> want(whole.begin() + 24 * V, whole.end());
  expectClose(toVector(*l), want, kRel, kAbs, "cached prefix");

  // Greedy tokens identical when decoding from a mixed batch (decode + context).
  std::vector<int32_t> solo_tokens = greedy(*m, prompt(9, 11, bos), 12);
  std::vector<int32_t> other = prompt(20, 12, bos);
  std::vector<int32_t> pa = prompt(9, 11, bos);
  std::vector<int32_t> ba = m->allocBlocks(21), bb = m->allocBlocks(20 + 12);
  ForwardBatch first;
  first.add(pa.data(), 9, 0, ba, LogitsMode::kLast);
  auto lf = m->forward(first);
  ASSERT_TRUE(lf.isOk());
  std::vector<int32_t> mixed{argmax(lf->as<const float>(), V)};
  int64_t cached = 9;
  for (int step = 1; step < 12; ++step) {
    ForwardBatch d;
    int32_t last = mixed.back();
    d.add(&last, 1, cached, ba, LogitsMode::kLast);
    if (step == 3) d.add(other.data(), 20, 0, bb, LogitsMode::kLast);  // a new prompt joins mid-decode
    auto ld = m->forward(d);
    ASSERT_TRUE(ld.isOk());
    mixed.push_back(argmax(ld->as<const float>(), V));
    ++cached;
  }
  EXPECT_EQ(mixed, solo_tokens);
}

INSTANTIATE_TEST_SUITE_P(Models, BatchInvariance, ::testing::ValuesIn(modelNames()),
                         testmodels::paramName);

}  // namespace
}  // namespace llmrt::test
