// EngineConfig: validate() is the one check of the value's fields; resolveConfig() makes it
// concrete for a model (auto choices, lengths against max_position_embeddings, the CPU's KV
// cap) and says which values a default or a policy chose; computeDtype / kvCacheDtype say what
// "auto" means for a checkpoint.
#include <gtest/gtest.h>

#include "../loader/loader_test_util.h"
#include "runtime/engine.h"

namespace llmrt {
namespace {

EngineConfig cfg(BackendKind backend, ComputeDtype dtype, KvCacheDtype kv = KvCacheDtype::kAuto) {
  EngineConfig c;
  c.model = "/some/model";
  c.backend = backend;
  c.dtype = dtype;
  c.kv_cache_config.dtype = kv;
  return c;
}

TEST(EngineConfig, DtypeChoicesAreValidatedWithTheFieldAndTheAllowedValues) {
  for (ComputeDtype d : {ComputeDtype::kAuto, ComputeDtype::kBFloat16, ComputeDtype::kFloat16, ComputeDtype::kFloat32})
    EXPECT_TRUE(cfg(BackendKind::kCuda, d).validate().isOk()) << toString(d);
  for (KvCacheDtype kv : {KvCacheDtype::kAuto, KvCacheDtype::kFloat32, KvCacheDtype::kBFloat16, KvCacheDtype::kFloat16,
                          KvCacheDtype::kFp8}) {
    EXPECT_TRUE(cfg(BackendKind::kCuda, ComputeDtype::kBFloat16, kv).validate().isOk()) << toString(kv);
    EXPECT_TRUE(cfg(BackendKind::kCuda, ComputeDtype::kFloat16, kv).validate().isOk()) << toString(kv);
  }
  EXPECT_ERROR_CONTAINS(cfg(BackendKind::kCpu, ComputeDtype::kFloat16).validate(), "dtype", "float16", "backend cpu");
  EXPECT_ERROR_CONTAINS(cfg(BackendKind::kCuda, ComputeDtype::kFloat32, KvCacheDtype::kFloat16).validate(),
                        "KvCacheConfig", "16-bit");
  EXPECT_FALSE(cfg(BackendKind::kCpu, ComputeDtype::kAuto, KvCacheDtype::kFloat16).validate().isOk());
  // FP8 codes with any compute dtype and backend (the CPU reference emulates them exactly).
  EXPECT_TRUE(cfg(BackendKind::kCpu, ComputeDtype::kAuto, KvCacheDtype::kFp8).validate().isOk());
  EXPECT_TRUE(cfg(BackendKind::kCuda, ComputeDtype::kFloat32, KvCacheDtype::kFp8).validate().isOk());
  EXPECT_EQ(parseKvCacheDtype("fp8"), KvCacheDtype::kFp8);
  EXPECT_ERROR_CONTAINS(cfg(static_cast<BackendKind>(9), ComputeDtype::kAuto).validate(), "backend");
  EXPECT_EQ(parseKvCacheDtype("fp16"), std::nullopt);
  EXPECT_EQ(parseComputeDtype("half"), std::nullopt);
  EXPECT_EQ(parseBackendKind("cuda"), BackendKind::kCuda);
}

TEST(EngineConfig, LimitsAreCheckedOnceWithTheirRanges) {
  EngineConfig c = cfg(BackendKind::kCpu, ComputeDtype::kAuto);
  EXPECT_TRUE(c.validate().isOk());
  c.max_input_len = 600;
  c.max_seq_len = 512;
  EXPECT_ERROR_CONTAINS(c.validate(), "max_input_len", "600", "less than max_seq_len (512)");
  c = cfg(BackendKind::kCpu, ComputeDtype::kAuto);
  c.num_threads = -1;
  EXPECT_ERROR_CONTAINS(c.validate(), "num_threads", "-1");
  c = cfg(BackendKind::kCpu, ComputeDtype::kAuto);
  c.kv_cache_config.max_tokens = 0;
  EXPECT_ERROR_CONTAINS(c.validate(), "max_tokens", "0");
  c.kv_cache_config.max_tokens = INT64_MAX;  // would overflow the sizing arithmetic
  EXPECT_ERROR_CONTAINS(c.validate(), "max_tokens", "9223372036854775807");
  c = cfg(BackendKind::kCpu, ComputeDtype::kAuto);
  c.kv_cache_config.host_cache_size = UINT64_MAX;
  EXPECT_ERROR_CONTAINS(c.validate(), "host_cache_size");
  c = cfg(BackendKind::kCpu, ComputeDtype::kAuto);
  c.cuda_tuning.gemv_rows = 9;
  EXPECT_ERROR_CONTAINS(c.validate(), "gemv_rows", "9", "[0, 8]");
}

class ResolveConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    Json j = testutil::tinyConfig("llama");
    j["max_position_embeddings"] = 512;
    testutil::writeModelDir(dir_.path(), j);
    auto d = ModelDirectory::open(dir_.path());
    ASSERT_TRUE(d.isOk()) << d.status().toString();
    model_ = std::move(*d);
  }
  EngineConfig base() const {
    EngineConfig c = cfg(BackendKind::kCpu, ComputeDtype::kAuto);
    c.model = dir_.path();
    return c;
  }
  testutil::TempDir dir_;
  ModelDirectory model_;
};

TEST_F(ResolveConfig, FillsTheModelsLimitsAndSaysSo) {
  auto r = resolveConfig(base(), model_);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->config.max_seq_len, 512);
  EXPECT_EQ(r->config.max_input_len, 511);
  EXPECT_EQ(r->config.backend, BackendKind::kCpu);
  EXPECT_EQ(r->config.dtype, ComputeDtype::kFloat32);
  EXPECT_EQ(r->config.overlap, OverlapMode::kOff);
  // The CPU's KV cap is a policy: it shows in the resolved config and in the log line.
  ASSERT_TRUE(r->config.kv_cache_config.max_tokens.has_value());
  EXPECT_EQ(*r->config.kv_cache_config.max_tokens, 32768);
  const std::string line = describeConfig(*r);
  EXPECT_NE(line.find("max_tokens 32768"), std::string::npos) << line;
  EXPECT_NE(line.find("the CPU backend's cap"), std::string::npos) << line;
  EXPECT_NE(line.find("max_seq_len 512"), std::string::npos) << line;
  // A user-sized cache is left alone.
  EngineConfig sized = base();
  sized.kv_cache_config.max_tokens = 1000;
  auto rs = resolveConfig(sized, model_);
  ASSERT_TRUE(rs.isOk());
  EXPECT_EQ(*rs->config.kv_cache_config.max_tokens, 1000);
  EXPECT_EQ(describeConfig(*rs).find("the CPU backend's cap"), std::string::npos);
}

TEST_F(ResolveConfig, LengthsBeyondTheModelAreErrorsNamingBoth) {
  EngineConfig c = base();
  c.max_seq_len = 100000;
  EXPECT_ERROR_CONTAINS(resolveConfig(c, model_), "max_seq_len", "100000", "at most 512",
                        "max_position_embeddings 512");
  c = base();
  c.max_input_len = 600;  // max_seq_len comes from the model: 512
  EXPECT_ERROR_CONTAINS(resolveConfig(c, model_), "max_input_len", "600", "less than max_seq_len (512");
  c = base();
  c.max_seq_len = 256;
  c.max_input_len = 255;
  auto ok = resolveConfig(c, model_);
  ASSERT_TRUE(ok.isOk()) << ok.status().toString();
  EXPECT_EQ(ok->config.max_input_len, 255);
}

// RoPE scaling made for longer sequences moves the limit (vLLM's rule): linear and yarn by their
// factor, dynamic NTK without a bound.
TEST(ResolveConfigRope, ScaledPositionsMoveTheLimit) {
  for (const char* type : {"linear", "yarn", "dynamic"}) {
    testutil::TempDir dir;
    Json j = testutil::tinyConfig("llama");
    j["max_position_embeddings"] = 512;
    j["rope_scaling"] = {{"rope_type", type}, {"factor", 4.0}};
    testutil::writeModelDir(dir.path(), j);
    auto d = ModelDirectory::open(dir.path());
    ASSERT_TRUE(d.isOk()) << type << ": " << d.status().toString();
    EngineConfig c = cfg(BackendKind::kCpu, ComputeDtype::kAuto);
    c.model = dir.path();
    c.max_seq_len = 2048;
    EXPECT_TRUE(resolveConfig(c, *d).isOk()) << type;
    c.max_seq_len = 2049;
    if (std::string(type) == "dynamic") {
      EXPECT_TRUE(resolveConfig(c, *d).isOk());
    } else {
      EXPECT_ERROR_CONTAINS(resolveConfig(c, *d), "max_seq_len", "2049", "at most 2048", type);
    }
  }
}

TEST_F(ResolveConfig, AutoBackendIsTheCpuWithoutAGpu) {
  EngineConfig c = base();
  c.backend = BackendKind::kAuto;
  auto r = resolveConfig(c, model_);
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r->config.backend, cudaBackendAvailable() ? BackendKind::kCuda : BackendKind::kCpu);
  EXPECT_NE(describeConfig(*r).find("backend auto"), std::string::npos);
}

// A one-tensor checkpoint of `dtype` (safetensors name) for the weight-dtype vote.
WeightStore storeOf(const testutil::TempDir& dir, const std::string& dtype, size_t elem_bytes) {
  const std::string path = dir.file("model-" + dtype + ".safetensors");
  testutil::writeFile(path, testutil::makeSafetensors({{"model.embed_tokens.weight", dtype, {4, 8},
                                                         std::string(32 * elem_bytes, '\0')}}));
  auto s = WeightStore::openFile(path);
  EXPECT_TRUE(s.isOk()) << s.status().toString();
  return std::move(*s);
}

TEST(EngineConfig, AutoKeepsAFloat16CheckpointInFloat16) {
  testutil::TempDir dir;
  const WeightStore f16 = storeOf(dir, "F16", 2), bf16 = storeOf(dir, "BF16", 2), f32 = storeOf(dir, "F32", 4);
  ModelConfig unset, says16, saysbf16;
  says16.torch_dtype = "float16";
  saysbf16.torch_dtype = "bfloat16";
  const auto cuda = [](ComputeDtype d) { return cfg(BackendKind::kCuda, d); };
  const BackendKind gpu = BackendKind::kCuda;
  // The config's torch_dtype decides; without one, the weights' dtype.
  EXPECT_EQ(computeDtype(cuda(ComputeDtype::kAuto), gpu, bf16, says16), DType::kF16);
  EXPECT_EQ(computeDtype(cuda(ComputeDtype::kAuto), gpu, f16, saysbf16), DType::kBF16);
  EXPECT_EQ(computeDtype(cuda(ComputeDtype::kAuto), gpu, f16, unset), DType::kF16);
  EXPECT_EQ(computeDtype(cuda(ComputeDtype::kAuto), gpu, bf16, unset), DType::kBF16);
  EXPECT_EQ(computeDtype(cuda(ComputeDtype::kAuto), gpu, f32, unset), DType::kBF16);
  // An explicit choice wins; the CPU computes in float32 whatever the checkpoint.
  EXPECT_EQ(computeDtype(cuda(ComputeDtype::kFloat16), gpu, bf16, saysbf16), DType::kF16);
  EXPECT_EQ(computeDtype(cuda(ComputeDtype::kBFloat16), gpu, f16, says16), DType::kBF16);
  EXPECT_EQ(computeDtype(cuda(ComputeDtype::kFloat32), gpu, f16, says16), DType::kF32);
  EXPECT_EQ(computeDtype(cuda(ComputeDtype::kAuto), BackendKind::kCpu, f16, says16), DType::kF32);
}

TEST(EngineConfig, KvCacheDtypeFollowsTheComputeDtypeUnlessSet) {
  const auto c = [](KvCacheDtype kv) { return cfg(BackendKind::kCuda, ComputeDtype::kAuto, kv); };
  EXPECT_EQ(kvCacheDtype(c(KvCacheDtype::kAuto), DType::kF16), DType::kF16);
  EXPECT_EQ(kvCacheDtype(c(KvCacheDtype::kAuto), DType::kBF16), DType::kBF16);
  EXPECT_EQ(kvCacheDtype(c(KvCacheDtype::kFloat16), DType::kBF16), DType::kF16);
  EXPECT_EQ(kvCacheDtype(c(KvCacheDtype::kBFloat16), DType::kF16), DType::kBF16);
  EXPECT_EQ(kvCacheDtype(c(KvCacheDtype::kFloat32), DType::kF16), DType::kF32);
  EXPECT_EQ(kvCacheDtype(c(KvCacheDtype::kAuto), DType::kF32), DType::kF32);
  EXPECT_EQ(kvCacheDtype(c(KvCacheDtype::kFp8), DType::kF32), DType::kF8E4M3);
  EXPECT_EQ(kvCacheDtype(c(KvCacheDtype::kFp8), DType::kBF16), DType::kF8E4M3);
}

}  // namespace
}  // namespace llmrt
