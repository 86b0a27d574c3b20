// EngineOptions: the dtype choices (validated in one place) and what "auto" resolves to for a
// checkpoint (computeDtype / kvCacheDtype): a float16 checkpoint keeps float16 on the GPU,
// bf16 and fp32 ones run in bf16, the CPU computes in float32.
#include <gtest/gtest.h>

#include "../loader/loader_test_util.h"
#include "runtime/engine.h"

namespace llmrt {
namespace {

EngineOptions opts(const std::string& backend, const std::string& dtype, const std::string& kv = "auto") {
  EngineOptions o;
  o.model_dir = "/some/model";
  o.backend = backend;
  o.dtype = dtype;
  o.kv_cache_config.dtype = kv;
  return o;
}

TEST(EngineOptions, DtypeChoicesAreValidatedWithTheFieldAndTheAllowedValues) {
  for (const char* d : {"auto", "bfloat16", "float16", "float32"}) EXPECT_TRUE(opts("cuda", d).validate().isOk()) << d;
  for (const char* kv : {"auto", "float32", "bfloat16", "float16"}) {
    EXPECT_TRUE(opts("cuda", "bfloat16", kv).validate().isOk()) << kv;
    EXPECT_TRUE(opts("cuda", "float16", kv).validate().isOk()) << kv;
  }
  const Status bad = opts("cuda", "half").validate();
  EXPECT_FALSE(bad.isOk());
  EXPECT_NE(bad.message().find("dtype"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("\"float16\""), std::string::npos) << bad.message();
  const Status cpu16 = opts("cpu", "float16").validate();
  EXPECT_FALSE(cpu16.isOk());
  EXPECT_NE(cpu16.message().find("CPU backend"), std::string::npos) << cpu16.message();
  const Status kv16 = opts("cuda", "float32", "float16").validate();
  EXPECT_FALSE(kv16.isOk());
  EXPECT_NE(kv16.message().find("KvCacheConfig"), std::string::npos) << kv16.message();
  EXPECT_NE(kv16.message().find("16-bit"), std::string::npos) << kv16.message();
  EXPECT_FALSE(opts("cpu", "auto", "float16").validate().isOk());
  KvCacheConfig k;
  k.dtype = "fp16";
  EXPECT_FALSE(k.validate().isOk());
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

TEST(EngineOptions, AutoKeepsAFloat16CheckpointInFloat16) {
  testutil::TempDir dir;
  const WeightStore f16 = storeOf(dir, "F16", 2), bf16 = storeOf(dir, "BF16", 2), f32 = storeOf(dir, "F32", 4);
  ModelConfig unset, says16, saysbf16;
  says16.torch_dtype = "float16";
  saysbf16.torch_dtype = "bfloat16";
  // The config's torch_dtype decides; without one, the weights' dtype.
  EXPECT_EQ(computeDtype(opts("cuda", "auto"), bf16, says16), DType::kF16);
  EXPECT_EQ(computeDtype(opts("cuda", "auto"), f16, saysbf16), DType::kBF16);
  EXPECT_EQ(computeDtype(opts("cuda", "auto"), f16, unset), DType::kF16);
  EXPECT_EQ(computeDtype(opts("cuda", "auto"), bf16, unset), DType::kBF16);
  EXPECT_EQ(computeDtype(opts("cuda", "auto"), f32, unset), DType::kBF16);
  // An explicit choice wins; the CPU computes in float32 whatever the checkpoint.
  EXPECT_EQ(computeDtype(opts("cuda", "float16"), bf16, saysbf16), DType::kF16);
  EXPECT_EQ(computeDtype(opts("cuda", "bfloat16"), f16, says16), DType::kBF16);
  EXPECT_EQ(computeDtype(opts("cuda", "float32"), f16, says16), DType::kF32);
  EXPECT_EQ(computeDtype(opts("cpu", "auto"), f16, says16), DType::kF32);
}

TEST(EngineOptions, KvCacheDtypeFollowsTheComputeDtypeUnlessSet) {
  EXPECT_EQ(kvCacheDtype(opts("cuda", "auto"), DType::kF16), DType::kF16);
  EXPECT_EQ(kvCacheDtype(opts("cuda", "auto"), DType::kBF16), DType::kBF16);
  EXPECT_EQ(kvCacheDtype(opts("cuda", "auto", "float16"), DType::kBF16), DType::kF16);
  EXPECT_EQ(kvCacheDtype(opts("cuda", "auto", "bfloat16"), DType::kF16), DType::kBF16);
  EXPECT_EQ(kvCacheDtype(opts("cuda", "auto", "float32"), DType::kF16), DType::kF32);
  EXPECT_EQ(kvCacheDtype(opts("cuda", "float32"), DType::kF32), DType::kF32);
}

}  // namespace
}  // namespace llmrt
