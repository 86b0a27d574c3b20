// Quantization calibrated at load (EngineConfig::quantization smoothquant / awq,
// runtime/quantize_at_load.h) on the bundled model: the checkpoint is the one `llmrt quantize`
// writes, made once and then found in the cache under a key of the source's content and the
// calibration settings; the engine generates what loading that checkpoint generates; bad
// requests are one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../loader/loader_test_util.h"
#include "llmrt/llm.h"
#include "llmrt/quantize.h"
#include "loader/model_directory.h"
#include "runtime/quantize_at_load.h"
#include "test_models.h"

namespace llmrt {
namespace {

namespace fs = std::filesystem;
using testutil::TempDir;

EngineConfig calibrated(Quantization q, const std::string& cache, const std::string& model = testmodels::bundledDir()) {
  EngineConfig c;
  c.model = model;
  c.backend = BackendKind::kCpu;
  c.num_threads = 2;
  c.quantization = q;
  c.calibration_file = testmodels::bundledDir() + "/calibration.txt";
  c.calibration_size = 4;
  c.quantization_cache_dir = cache;
  return c;
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<TokenId> greedy(LlmArgs args) {
  args.backend = BackendKind::kCpu;
  args.num_threads = 2;
  auto llm = LLM::create(args);
  EXPECT_TRUE(llm.isOk()) << llm.status().toString();
  if (!llm.isOk()) return {};
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = 12;
  sp.ignore_eos = true;
  auto out = (*llm)->generate({Prompt::fromText("The program reads the configuration file and")}, {sp});
  EXPECT_TRUE(out.isOk()) << out.status().toString();
  return out.isOk() ? (*out)[0].outputs[0].token_ids : std::vector<TokenId>{};
}

TEST(QuantizeAtLoad, SmoothQuantIsTheQuantizeCommandsCheckpointMadeOnce) {
  TempDir tmp;
  const std::string cache = tmp.file("cache");
  const EngineConfig c = calibrated(Quantization::kSmoothQuant, cache);
  auto source = ModelDirectory::open(c.model);
  ASSERT_TRUE(source.isOk()) << source.status().toString();
  auto first = calibratedCheckpointFor(c, *source);
  ASSERT_TRUE(first.isOk()) << first.status().toString();
  EXPECT_TRUE(first->made);
  auto second = calibratedCheckpointFor(c, *source);
  ASSERT_TRUE(second.isOk()) << second.status().toString();
  EXPECT_FALSE(second->made);  // found in the cache
  EXPECT_EQ(second->dir, first->dir);
  const std::vector<std::string> names = entries(cache);
  ASSERT_EQ(names.size(), 1u);  // no temporary left behind
  EXPECT_EQ(names[0].rfind("smoothquant-", 0), 0u) << names[0];
  // What `llmrt quantize --method smoothquant` writes with the same settings, byte for byte.
  const std::string direct = tmp.file("direct");
  auto report = quantizeCheckpoint({.method = "smoothquant", .model = c.model, .output = direct,
                                    .calib_file = c.calibration_file, .calib_size = 4, .num_threads = 2});
  ASSERT_TRUE(report.isOk()) << report.status().toString();
  EXPECT_EQ(testutil::readFile(first->dir + "/model.safetensors"), testutil::readFile(direct + "/model.safetensors"));
  // The engine loads it: the tokens of the checkpoint loaded as it is, and not the 32-bit model's
  // logits (INT8 products).
  const LlmArgs jit = c;  // (LlmArgs is EngineConfig)
  LlmArgs loaded;
  loaded.model = direct;
  EXPECT_EQ(greedy(jit), greedy(loaded));
}

TEST(QuantizeAtLoad, TheKeyFollowsTheContentAndTheSettings) {
  TempDir tmp;
  const EngineConfig c = calibrated(Quantization::kSmoothQuant, tmp.file("cache"));
  auto source = ModelDirectory::open(c.model);
  ASSERT_TRUE(source.isOk());
  auto key = [&](const EngineConfig& e, const ModelDirectory& m) {
    auto k = calibratedCheckpointKey(e, m);
    EXPECT_TRUE(k.isOk()) << k.status().toString();
    return k.isOk() ? *k : std::string();
  };
  const std::string base = key(c, *source);
  EXPECT_EQ(base.size(), 16u);
  EngineConfig alpha = c;
  alpha.smoothquant_alpha = 0.5;
  EXPECT_NE(key(alpha, *source), base);
  EngineConfig size = c;
  size.calibration_size = 3;
  EXPECT_NE(key(size, *source), base);
  EngineConfig awq = c;
  awq.quantization = Quantization::kAwq;
  EXPECT_NE(key(awq, *source), base);
  // A copy elsewhere has the same key (content, not path); one changed weight byte changes it.
  const std::string copy = tmp.file("copy");
  fs::copy(c.model, copy, fs::copy_options::recursive);
  auto same = ModelDirectory::open(copy);
  ASSERT_TRUE(same.isOk());
  EXPECT_EQ(key(c, *same), base);
  // One byte in the middle of the weights' data, then of the tokenizer, changes it.
  const auto& header = same->weights.files()[0].header();
  auto flip = [](const std::string& path, uint64_t at) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    char byte = 0;
    f.read(&byte, 1);
    byte = static_cast<char>(byte ^ 0x5a);
    f.seekp(static_cast<std::streamoff>(at));
    f.write(&byte, 1);
  };
  flip(copy + "/model.safetensors", header.data_offset + header.data_bytes / 2 + 12345);
  auto changed = ModelDirectory::open(copy);
  ASSERT_TRUE(changed.isOk());
  const std::string weights_changed = key(c, *changed);
  EXPECT_NE(weights_changed, base);
  flip(copy + "/tokenizer.json", fs::file_size(copy + "/tokenizer.json") / 2);
  EXPECT_NE(key(c, *changed), weights_changed);
}

TEST(QuantizeAtLoad, AwqRunsAsTheAwqCheckpoint) {
  TempDir tmp;
  EngineConfig c = calibrated(Quantization::kAwq, tmp.file("cache"));
  c.calibration_size = 2;
  auto source = ModelDirectory::open(c.model);
  ASSERT_TRUE(source.isOk());
  auto q = calibratedCheckpointFor(c, *source);
  ASSERT_TRUE(q.isOk()) << q.status().toString();
  auto m = ModelDirectory::open(q->dir);
  ASSERT_TRUE(m.isOk()) << m.status().toString();
  EXPECT_EQ(m->config.weight_quantization, "awq");
  const LlmArgs jit = c;  // (LlmArgs is EngineConfig)
  LlmArgs loaded;
  loaded.model = q->dir;
  const std::vector<TokenId> tokens = greedy(jit);
  EXPECT_EQ(tokens.size(), 12u);
  EXPECT_EQ(tokens, greedy(loaded));
}

TEST(QuantizeAtLoad, BadRequestsAreOneLineErrors) {
  TempDir tmp;
  EngineConfig c = calibrated(Quantization::kSmoothQuant, tmp.file("cache"));
  c.calibration_file.clear();
  EXPECT_NE(c.validate().message().find("calibration_file"), std::string::npos) << c.validate().toString();
  c = calibrated(Quantization::kSmoothQuant, tmp.file("cache"));
  c.smoothquant_alpha = 1.5;
  EXPECT_NE(c.validate().message().find("smoothquant_alpha"), std::string::npos);
  // An already quantized checkpoint.
  const std::string int8 = tmp.file("int8");
  ASSERT_TRUE(quantizeCheckpoint({.method = "int8", .model = testmodels::bundledDir(), .output = int8}).isOk());
  LlmArgs args = calibrated(Quantization::kSmoothQuant, tmp.file("cache"), int8);
  auto llm = LLM::create(args);
  ASSERT_FALSE(llm.isOk());
  EXPECT_NE(llm.status().message().find("already a int8 checkpoint"), std::string::npos) << llm.status().toString();
  // A cache directory that cannot be made (a file is in the way).
  std::ofstream(tmp.file("file")) << "x";
  args = calibrated(Quantization::kSmoothQuant, tmp.file("file") + "/cache");
  llm = LLM::create(args);
  ASSERT_FALSE(llm.isOk());
  EXPECT_NE(llm.status().message().find("--quantization-cache-dir"), std::string::npos) << llm.status().toString();
  // A missing calibration text names it.
  args = calibrated(Quantization::kSmoothQuant, tmp.file("cache"));
  args.calibration_file = tmp.file("absent.txt");
  llm = LLM::create(args);
  ASSERT_FALSE(llm.isOk());
  EXPECT_NE(llm.status().message().find("absent.txt"), std::string::npos) << llm.status().toString();
}

}  // namespace
}  // namespace llmrt
