// SmoothQuant's migration (loader/smoothing.h) is an identity of the model: with any positive s
// per group, dividing each group's norm and multiplying its matrices' columns leaves the float32
// logits of every golden architecture as they were (up to float32 rounding) — sequential,
// parallel (one norm or two), sandwich (Gemma's (1 + w) norms), LayerNorm biases, packed q/k/v,
// mixture-of-experts layers. A group with a missing or extra member would change them by the
// order of the logits. The checkpoint those smoothed tensors are quantized into is tested end to
// end by tests/cli/int8_perplexity_test.sh.
#include <nlohmann/json.hpp>

#include <deque>
#include <random>

#include "loader/arch_table.h"
#include "loader/smoothing.h"
#include "model_test_util.h"

namespace llmrt::test {
namespace {

class Smoothing : public ::testing::TestWithParam<std::string> {};

Result<std::vector<float>> logitsWith(const std::string& dir, const TensorSmoothing* smoothing,
                                      const std::vector<int32_t>& ids) {
  LoadedModel m;
  LLMRT_ASSIGN_OR_RETURN(m.config, loadModelConfig(dir + "/config.json"));
  LLMRT_ASSIGN_OR_RETURN(m.store, WeightStore::openDirectory(dir));
  m.backend = std::make_unique<CpuBackend>(2);
  std::deque<std::vector<float>> held;
  const WeightStore* store = &m.store;
  const std::string prefix(archEntry(m.config.arch).names.optional_prefix);
  auto source = [&](const std::string& n) -> Result<TensorView> {
    LLMRT_ASSIGN_OR_RETURN(TensorView t, store->tensor(n));
    const std::string key = smoothing && smoothing->touches(n) ? n : prefix + n;
    if (smoothing == nullptr || !smoothing->touches(key)) return t;
    std::vector<float>& f = held.emplace_back(static_cast<size_t>(t.numel()));
    convertToF32(t.data, t.dtype, f.data(), f.size());
    LLMRT_RETURN_IF_ERROR(smoothing->apply(key, t.shape, f));
    return TensorView(f.data(), DType::kF32, t.shape);
  };
  LLMRT_ASSIGN_OR_RETURN(m.model, DecoderModel::load(m.config, source, *m.backend, {}));
  KvPoolGeometry g{64, m.config.num_hidden_layers, m.model->config().num_key_value_heads, m.config.head_dim, 8,
                   DType::kF32};
  LLMRT_RETURN_IF_ERROR(m.backend->allocateKvPools(g, 0));
  m.tokens_per_block = 8;
  return promptLogits(m, ids);
}

TEST_P(Smoothing, LeavesTheLogitsAsTheyWere) {
  const std::string dir = goldenDir() + "/" + GetParam();
  auto config = loadModelConfig(dir + "/config.json");
  ASSERT_TRUE(config.isOk()) << config.status().toString();
  const std::vector<SmoothingGroup> groups = smoothingGroups(*config);
  if (archEntry(config->arch).names.transposed) {
    EXPECT_TRUE(groups.empty());
    GTEST_SKIP() << GetParam() << ": Conv1D matrices (smoothquant refuses them)";
  }
  const bool moe = config->decoder.num_experts > 0;
  const bool one_norm = config->decoder.residual == ResidualWiring::kParallel;
  EXPECT_EQ(static_cast<int64_t>(groups.size()), config->num_hidden_layers * (moe || one_norm ? 1 : 2));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  TensorSmoothing smoothing;
  for (const SmoothingGroup& g : groups) {
    std::vector<float> s(static_cast<size_t>(config->hidden_size));
    for (float& v : s) v = std::exp2(u(rng));  // 0.25 .. 4
    smoothing.add(g, std::move(s), config->decoder.norm_weight_offset_one);
  }
  auto text = readTextFile(dir + "/golden.json");
  ASSERT_TRUE(text.isOk());
  const std::vector<int32_t> ids = nlohmann::json::parse(*text)["cases"][0]["prompt_ids"].get<std::vector<int32_t>>();
  auto plain = logitsWith(dir, nullptr, ids);
  auto smoothed = logitsWith(dir, &smoothing, ids);
  ASSERT_TRUE(plain.isOk()) << plain.status().toString();
  ASSERT_TRUE(smoothed.isOk()) << smoothed.status().toString();
  double max_ref = 0.0, max_diff = 0.0;
  for (size_t i = 0; i < plain->size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(static_cast<double>((*plain)[i])));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>((*plain)[i]) - (*smoothed)[i]));
  }
  EXPECT_LT(max_diff, 1e-4 * max_ref) << GetParam() << ": " << smoothing.size() << " tensors smoothed";
}

// A scale vector of the wrong length is refused with the tensor's name.
TEST(SmoothingApply, WrongShapeIsAnError) {
  SmoothingGroup g{0, "layers.0.qkv", "model.layers.0.input_layernorm.weight", "", {"model.layers.0.q.weight"}};
  TensorSmoothing t;
  t.add(g, std::vector<float>(4, 2.0f), false);
  std::vector<float> v(12, 1.0f);
  const Status s = t.apply("model.layers.0.q.weight", Shape{4, 3}, v);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("model.layers.0.q.weight"), std::string::npos) << s.toString();
  std::vector<float> w(8, 1.0f);
  ASSERT_TRUE(t.apply("model.layers.0.q.weight", Shape{2, 4}, w).isOk());
  EXPECT_EQ(w[0], 2.0f);
  std::vector<float> n(4, 1.0f);
  ASSERT_TRUE(t.apply("model.layers.0.input_layernorm.weight", Shape{4}, n).isOk());
  EXPECT_EQ(n[3], 0.5f);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Smoothing, ::testing::ValuesIn(goldenModels()));
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Smoothing);

}  // namespace
}  // namespace llmrt::test
