// The real checkpoints of ../shared/testdata/models (see its SOURCES.md): tiny llama2.c models
// converted to HF LlamaForCausalLM, tied embeddings; and the bundled models/llmrt-tiny (in every clone).
#include <gtest/gtest.h>

#include <cstring>

#include "llmrt/model_info.h"
#include "loader/decoder_weights.h"
#include "loader/model_directory.h"
#include "loader_test_util.h"
#include "test_models.h"

namespace llmrt {
namespace {

using testutil::sharedModelDir;

struct RealModel {
  const char* name;
  DType dtype;
  int64_t params;
  int64_t layers, heads, kv_heads, head_dim, intermediate, max_pos;
  uint64_t kv_bytes_per_token;
  int64_t vocab = 512, hidden = 64, bos = 1, eos = 2;
  bool bundled = false;  // models/llmrt-tiny rather than ../shared/testdata/models/NAME
};

const RealModel kModels[] = {
    {"stories260K-hf", DType::kF32, 260032, 5, 8, 4, 8, 172, 512, 5 * 2 * 4 * 8 * 4},
    {"stories260K-hf-fp16", DType::kF16, 260032, 5, 8, 4, 8, 172, 512, 5 * 2 * 4 * 8 * 2},
    {"stories260K-hf-bf16", DType::kBF16, 260032, 5, 8, 4, 8, 172, 512, 5 * 2 * 4 * 8 * 2},
    {"llama2xs-tinystories-hf", DType::kF32, 279232, 5, 8, 4, 8, 192, 256, 5 * 2 * 4 * 8 * 4},
    {"aidreams260K-hf", DType::kF32, 230976, 4, 4, 4, 16, 172, 128, 4 * 2 * 4 * 16 * 4},
    // models/llmrt-tiny/README.md: 12,587,904 parameters, bf16, GQA 6/2 heads of 64, vocabulary 8192.
    {"llmrt-tiny", DType::kBF16, 12587904, 6, 6, 2, 64, 1024, 512, 6 * 2 * 2 * 64 * 2, 8192, 384, 0, 1, true},
};

void PrintTo(const RealModel& m, std::ostream* os) { *os << m.name; }

class RealModelTest : public ::testing::TestWithParam<RealModel> {};

TEST_P(RealModelTest, LoadsAndChecks) {
  const RealModel& rm = GetParam();
  const std::string dir = rm.bundled ? testmodels::bundledDir() : sharedModelDir(rm.name);
  if (dir.empty())
    GTEST_SKIP() << testmodels::sharedAbsent(std::string(LLMRT_SHARED_TESTDATA) + "/models/" + rm.name);

  auto m = ModelDirectory::open(dir);
  ASSERT_TRUE(m.isOk()) << m.status().toString();
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.arch, ModelArch::kLlama);
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.vocab_size, rm.vocab);
  EXPECT_EQ(c.hidden_size, rm.hidden);
  EXPECT_EQ(c.num_hidden_layers, rm.layers);
  EXPECT_EQ(c.num_attention_heads, rm.heads);
  EXPECT_EQ(c.num_key_value_heads, rm.kv_heads);
  EXPECT_EQ(c.head_dim, rm.head_dim);
  EXPECT_EQ(c.intermediate_size, rm.intermediate);
  EXPECT_EQ(c.max_position_embeddings, rm.max_pos);
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kNone);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_ids, std::vector<int64_t>{rm.bos});
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{rm.eos});

  EXPECT_FALSE(m->weights.contains("lm_head.weight"));
  EXPECT_TRUE(m->unused_tensors.empty());
  EXPECT_EQ(m->weights.size(), expectedTensors(c).size());
  EXPECT_EQ(m->weights.totalParameters(), rm.params);
  EXPECT_EQ(m->weights.totalBytes(), static_cast<uint64_t>(rm.params) * dtypeSize(rm.dtype));
  for (const WeightEntry& e : m->weights.entries()) EXPECT_EQ(e.dtype, rm.dtype) << e.name;
  EXPECT_EQ(checkpointDtype(m->weights), std::optional<DType>(rm.dtype));
  EXPECT_EQ(kvBytesPerToken(c, rm.dtype), rm.kv_bytes_per_token);

  ASSERT_TRUE(m->generation.has_value());
  EXPECT_EQ(m->generation->do_sample, std::optional<bool>(false));
  EXPECT_EQ(m->generation->eos_token_ids, std::vector<int64_t>{rm.eos});
  EXPECT_EQ(m->tokenizer_json, std::optional<std::string>(dir + "/tokenizer.json"));

  // Norm weights are finite and not all zero (the mapping really holds the data).
  auto norm = m->weights.tensor("model.norm.weight");
  ASSERT_TRUE(norm.isOk());
  std::vector<float> v = testutil::toF32(*norm);
  ASSERT_EQ(v.size(), static_cast<size_t>(rm.hidden));
  double sum = 0;
  for (float x : v) {
    EXPECT_TRUE(std::isfinite(x));
    sum += std::abs(x);
  }
  EXPECT_GT(sum, 0.0);

  auto info = inspectModel(dir);
  ASSERT_TRUE(info.isOk()) << info.status().toString();
  EXPECT_TRUE(info->weights_valid) << info->weights_error;
  EXPECT_EQ(info->parameter_count, rm.params);
  EXPECT_EQ(info->dtype, std::string(dtypeName(rm.dtype)));
  EXPECT_EQ(info->kv_bytes_per_token, rm.kv_bytes_per_token);
  EXPECT_TRUE(info->has_tokenizer_json);
  const std::string text = formatModelInfo(*info);
  EXPECT_NE(text.find("LlamaForCausalLM"), std::string::npos) << text;
  EXPECT_NE(text.find(formatParameterCount(rm.params)), std::string::npos) << text;
}

INSTANTIATE_TEST_SUITE_P(TrainedModels, RealModelTest, ::testing::ValuesIn(kModels),
                         [](const ::testing::TestParamInfo<RealModel>& p) {
                           std::string n = p.param.name;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

// The fp16 and bf16 checkpoints are the fp32 one rounded to nearest even.
TEST(RealModels, ReducedPrecisionCopiesMatchFp32) {
  const std::string f32_dir = sharedModelDir("stories260K-hf");
  const std::string f16_dir = sharedModelDir("stories260K-hf-fp16");
  const std::string bf16_dir = sharedModelDir("stories260K-hf-bf16");
  if (f32_dir.empty() || f16_dir.empty() || bf16_dir.empty())
    GTEST_SKIP() << testmodels::sharedAbsent(std::string(LLMRT_SHARED_TESTDATA) + "/models/stories260K-hf*");
  auto f32 = WeightStore::openDirectory(f32_dir);
  auto f16 = WeightStore::openDirectory(f16_dir);
  auto bf16 = WeightStore::openDirectory(bf16_dir);
  ASSERT_TRUE(f32.isOk() && f16.isOk() && bf16.isOk());
  ASSERT_EQ(f32->names(), f16->names());
  ASSERT_EQ(f32->names(), bf16->names());
  size_t checked = 0;
  for (const WeightEntry& e : f32->entries()) {
    const WeightEntry* h = f16->find(e.name);
    const WeightEntry* b = bf16->find(e.name);
    ASSERT_EQ(h->shape, e.shape);
    ASSERT_EQ(b->shape, e.shape);
    const size_t n = static_cast<size_t>(e.shape.numel());
    std::vector<float> src(n);
    std::memcpy(src.data(), e.data, n * 4);  // the mapping may be unaligned: copy, don't cast
    std::vector<uint16_t> want_h(n), want_b(n), got_h(n), got_b(n);
    convertFromF32(src.data(), want_h.data(), DType::kF16, n);
    convertFromF32(src.data(), want_b.data(), DType::kBF16, n);
    std::memcpy(got_h.data(), h->data, n * 2);
    std::memcpy(got_b.data(), b->data, n * 2);
    EXPECT_EQ(got_h, want_h) << e.name;
    EXPECT_EQ(got_b, want_b) << e.name;
    checked += n;
  }
  EXPECT_EQ(checked, 260032u);
}

}  // namespace
}  // namespace llmrt
