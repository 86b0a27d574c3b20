// An FP8 KV cache's scales from the checkpoint (loader/kv_cache_scales.h): per layer a scalar
// k_scale and v_scale, on the attention module or beside the k / v projections, reach the backend
// as [layer][K, V] when the model loads; partial or bad ones are one-line load errors naming the
// tensor where the cache is FP8 (ignored otherwise); a checkpoint without them leaves the
// backend's scales alone.
#include "loader/kv_cache_scales.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "../loader/loader_test_util.h"
#include "backend/cpu/cpu_backend.h"
#include "loader/model_directory.h"
#include "model/decoder_model.h"

namespace llmrt {
namespace {

class ScaleRecordingBackend final : public CpuBackend {
 public:
  ScaleRecordingBackend() : CpuBackend(1) {}
  std::vector<std::vector<float>> calls;
  Status setKvCacheScales(std::span<const float> scales) override {
    calls.emplace_back(scales.begin(), scales.end());
    return CpuBackend::setKvCacheScales(scales);
  }
};

class KvCacheScales : public ::testing::Test {
 protected:
  void SetUp() override {
    testutil::Json j = testutil::tinyConfig("llama");
    j["num_hidden_layers"] = 2;
    config_ = testutil::writeModelDir(tmp_.subdir("m"), j);
    auto dir = ModelDirectory::open(tmp_.subdir("m"));
    ASSERT_TRUE(dir.isOk()) << dir.status().toString();
    dir_ = std::make_unique<ModelDirectory>(std::move(*dir));
  }
  // The checkpoint's tensors plus `extra` (name -> values, F32 of shape [n] or a scalar for one value).
  WeightSource source() {
    return [this](const std::string& name) -> Result<TensorView> {
      auto it = extra_.find(name);
      if (it == extra_.end()) return dir_->weights.tensor(name);
      return TensorView(it->second.data(), DType::kF32,
                        it->second.size() == 1 ? Shape{} : Shape{static_cast<int64_t>(it->second.size())});
    };
  }
  testutil::TempDir tmp_;
  ModelConfig config_;
  std::unique_ptr<ModelDirectory> dir_;
  std::map<std::string, std::vector<float>> extra_;
};

TEST_F(KvCacheScales, BothLayoutsReachTheBackendWhenTheModelLoads) {
  // Layer 0 on the attention module (vLLM's current names), layer 1 beside the projections.
  extra_["model.layers.0.self_attn.k_scale"] = {0.25f};
  extra_["model.layers.0.self_attn.v_scale"] = {0.5f};
  extra_["model.layers.1.self_attn.k_proj.k_scale"] = {2.0f};
  extra_["model.layers.1.self_attn.v_proj.v_scale"] = {0.125f};
  auto scales = checkpointKvCacheScales(config_, source());
  ASSERT_TRUE(scales.isOk()) << scales.status().toString();
  EXPECT_EQ(*scales, (std::vector<float>{0.25f, 0.5f, 2.0f, 0.125f}));
  ScaleRecordingBackend backend;
  auto model = DecoderModel::load(config_, source(), backend, DecoderModelOptions{});
  ASSERT_TRUE(model.isOk()) << model.status().toString();
  ASSERT_EQ(backend.calls.size(), 1u);
  EXPECT_EQ(backend.calls[0], *scales);
}

TEST_F(KvCacheScales, AnOlderKvScaleServesBoth) {
  extra_["model.layers.0.self_attn.kv_scale"] = {0.5f};
  extra_["model.layers.1.self_attn.k_proj.kv_scale"] = {0.25f};
  auto scales = checkpointKvCacheScales(config_, source());
  ASSERT_TRUE(scales.isOk()) << scales.status().toString();
  EXPECT_EQ(*scales, (std::vector<float>{0.5f, 0.5f, 0.25f, 0.25f}));
}

TEST_F(KvCacheScales, NoneLeaveTheBackendAlone) {
  auto scales = checkpointKvCacheScales(config_, source());
  ASSERT_TRUE(scales.isOk());
  EXPECT_TRUE(scales->empty());
  ScaleRecordingBackend backend;
  ASSERT_TRUE(DecoderModel::load(config_, source(), backend, DecoderModelOptions{}).isOk());
  EXPECT_TRUE(backend.calls.empty());
}

TEST_F(KvCacheScales, PartialOrBadScalesAreLoadErrorsNamingTheTensor) {
  extra_["model.layers.0.self_attn.k_scale"] = {0.25f};
  extra_["model.layers.0.self_attn.v_scale"] = {0.5f};
  extra_["model.layers.1.self_attn.k_scale"] = {0.5f};
  Status st = checkpointKvCacheScales(config_, source()).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("model.layers.1.self_attn.v_scale"), std::string::npos) << st.toString();
  // A load error where the cache is FP8; a warning (and no scales) where it is not.
  DecoderModelOptions fp8;
  fp8.fp8_kv_cache = true;
  ScaleRecordingBackend backend;
  EXPECT_EQ(DecoderModel::load(config_, source(), backend, fp8).status().code(),
            StatusCode::kInvalidArgument);
  ScaleRecordingBackend other;
  EXPECT_TRUE(DecoderModel::load(config_, source(), other, DecoderModelOptions{}).isOk());
  EXPECT_TRUE(other.calls.empty());

  extra_["model.layers.1.self_attn.v_scale"] = {-1.0f};
  st = checkpointKvCacheScales(config_, source()).status();
  EXPECT_NE(st.message().find("'model.layers.1.self_attn.v_scale' is -1"), std::string::npos)
      << st.toString();
  extra_["model.layers.1.self_attn.v_scale"] = {1.0f, 2.0f};
  st = checkpointKvCacheScales(config_, source()).status();
  EXPECT_NE(st.message().find("has 2 values; expected one"), std::string::npos) << st.toString();
}

}  // namespace
}  // namespace llmrt
