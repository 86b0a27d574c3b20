// The real trained models in ../shared/testdata/models against the float64
// references in ../shared/testdata/references: logits of a prompt and greedy
// continuations must match.
#include <nlohmann/json.hpp>

#include "model_test_util.h"

namespace llmrt::test {
namespace {

class ReferenceModel : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceModel, LogitsAndGreedyMatchFloat64Reference) {
  const std::string name = GetParam();
  const std::string dir = sharedTestdata() + "/models/" + name;
  const std::string ref_path = sharedTestdata() + "/references/" + name + ".greedy.json";
  if (!isDirectory(dir) || !fileExists(ref_path)) GTEST_SKIP() << "shared test data absent: " << dir;
  auto text = readTextFile(ref_path);
  ASSERT_TRUE(text.isOk());
  nlohmann::json ref = nlohmann::json::parse(*text);
  auto m = loadModel(dir);
  ASSERT_TRUE(m.isOk()) << m.status().toString();

  // Full-prompt logits.
  std::vector<int32_t> ids = ref["logits"]["input_ids"].get<std::vector<int32_t>>();
  std::vector<float> want;
  for (const auto& row : ref["logits"]["values"])
    for (const auto& v : row) want.push_back(v.get<float>());
  ForwardBatch b;
  b.add(ids.data(), static_cast<int64_t>(ids.size()), 0, m->allocBlocks(static_cast<int64_t>(ids.size())),
        LogitsMode::kAll);
  auto logits = m->forward(b);
  ASSERT_TRUE(logits.isOk()) << logits.status().toString();
  EXPECT_EQ(logits->shape, (Shape{static_cast<int64_t>(ids.size()), m->config.vocab_size}));
  // References are float64 with 7 significant digits; we compute in float32.
  expectClose(toVector(*logits), want, 1e-4, 1e-5, name + " logits");

  // Greedy continuations through the KV cache.
  for (const auto& c : ref["cases"]) {
    std::vector<int32_t> prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    std::vector<int32_t> expect = c["new_ids"].get<std::vector<int32_t>>();
    std::vector<int32_t> got = greedy(*m, prompt, static_cast<int>(expect.size()));
    EXPECT_EQ(got, expect) << name << " prompt: " << c["prompt"].get<std::string>();
  }
}

INSTANTIATE_TEST_SUITE_P(SharedModels, ReferenceModel,
                         ::testing::Values("stories260K-hf", "stories260K-hf-fp16", "stories260K-hf-bf16",
                                           "llama2xs-tinystories-hf", "aidreams260K-hf"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

}  // namespace
}  // namespace llmrt::test
