// LMI configuration: serving.properties parsing, OPTION_* variables, precedence, LMI's defaults,
// and errors that name key, value and source.
#include <gtest/gtest.h>

#include "llmrt/config_options.h"
#include "serving_config.h"
#include "test_models.h"

namespace llmrt::serve {
namespace {

TEST(ServingConfig, PropertiesSyntax) {
  auto p = parseProperties(
      "# comment\n! also a comment\n\nengine=MPI\noption.max_input_len : 2048\n  option.dtype   bf16  \n"
      "option.model_id=/a/very/\\\n   long/path\n",
      "serving.properties");
  ASSERT_TRUE(p.isOk()) << p.status().toString();
  EXPECT_EQ(p->at("engine").value, "MPI");
  EXPECT_EQ(p->at("engine").source, "serving.properties:4");
  EXPECT_EQ(p->at("option.max_input_len").value, "2048");
  EXPECT_EQ(p->at("option.dtype").value, "bf16");
  EXPECT_EQ(p->at("option.model_id").value, "/a/very/long/path");
  EXPECT_EQ(p->at("option.model_id").source, "serving.properties:7");
  auto bad = parseProperties("novalue\n", "f");
  EXPECT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("f:1"), std::string::npos);
}

TEST(ServingConfig, EnvironmentNames) {
  auto s = lmiFromEnvironment({{"OPTION_MAX_ROLLING_BATCH_SIZE", "64"},
                               {"HF_MODEL_ID", "/m"},
                               {"TENSOR_PARALLEL_DEGREE", "max"},
                               {"OPTION_ENGINE", "Python"},
                               {"PATH", "/bin"}});
  EXPECT_EQ(s.at("option.max_rolling_batch_size").value, "64");
  EXPECT_EQ(s.at("option.max_rolling_batch_size").source, "OPTION_MAX_ROLLING_BATCH_SIZE");
  EXPECT_EQ(s.at("option.model_id").value, "/m");
  EXPECT_EQ(s.at("option.tensor_parallel_degree").value, "max");
  EXPECT_EQ(s.at("engine").value, "Python");
  EXPECT_EQ(s.size(), 4u);
}

// LMI's quantization at server start: smoothquant with its alpha, awq with its calibration size;
// per-token / per-channel scaling is always on (false only warns); multi_query_mode is ignored;
// kv_cache_dtype fp8 (vLLM's name) is the FP8 KV cache.
TEST(ServingConfig, MapsSmoothQuantAndAwqOptions) {
  auto apply = [](const LmiSettings& s, EngineConfig& c, std::vector<std::string>& warnings) {
    ServeOptions o;
    Provenance prov;
    auto r = applyLmi(s, c, o, prov);
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    if (r.isOk()) warnings = r->warnings;
    return prov;
  };
  EngineConfig c;
  std::vector<std::string> warnings;
  Provenance prov = apply({{"option.quantize", {"SmoothQuant", "OPTION_QUANTIZE"}},
                          {"option.smoothquant_alpha", {"0.5", "serving.properties:2"}},
                          {"option.smoothquant_per_token", {"true", "serving.properties:3"}},
                          {"option.smoothquant_per_channel", {"false", "serving.properties:4"}},
                          {"option.multi_query_mode", {"true", "serving.properties:5"}}},
                         c, warnings);
  EXPECT_EQ(c.quantization, Quantization::kSmoothQuant);
  EXPECT_DOUBLE_EQ(c.smoothquant_alpha, 0.5);
  EXPECT_EQ(prov.at("smoothquant_alpha"), "serving.properties:2 (option.smoothquant_alpha)");
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("option.multi_query_mode is ignored"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("smoothquant_per_channel=false is ignored"), std::string::npos) << warnings[1];
  EngineConfig a;
  apply({{"option.quantize", {"awq", "OPTION_QUANTIZE"}},
         {"option.awq_calib_size", {"16", "OPTION_AWQ_CALIB_SIZE"}},
         {"option.awq_format", {"int4_awq", "f:1"}}},
        a, warnings);
  EXPECT_EQ(a.quantization, Quantization::kAwq);
  EXPECT_EQ(a.calibration_size, 16);
  EXPECT_TRUE(warnings.empty());
  EngineConfig d;  // LMI's awq_calib_size default: 32 samples
  prov = apply({{"option.quantize", {"AWQ", "OPTION_QUANTIZE"}}}, d, warnings);
  EXPECT_EQ(d.calibration_size, 32);
  EXPECT_EQ(prov.at("calibration_size"), "LMI default (option.awq_calib_size)");
  EngineConfig k;  // the FP8 KV cache, under vLLM's names
  prov = apply({{"option.kv_cache_dtype", {"FP8_E4M3", "OPTION_KV_CACHE_DTYPE"}}}, k, warnings);
  EXPECT_EQ(k.kv_cache_config.dtype, KvCacheDtype::kFp8);
  EXPECT_EQ(prov.at("kv_cache_config.dtype"), "OPTION_KV_CACHE_DTYPE (option.kv_cache_dtype)");
  ServeOptions o;
  Provenance p;
  auto bad = applyLmi({{"option.kv_cache_dtype", {"fp8_e5m2", "f:3"}}}, k, o, p);
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("auto, fp8 or fp8_e4m3"), std::string::npos) << bad.status().toString();
}

TEST(ServingConfig, MapsOntoTheEngineWithLmiDefaults) {
  EngineConfig c;
  ServeOptions o;
  Provenance prov;
  LmiSettings s = {{"option.model_id", {testmodels::bundledDir(), "serving.properties:1"}},
                   {"option.rolling_batch", {"trtllm", "serving.properties:2"}},
                   {"option.max_num_sequences", {"12", "serving.properties:3"}},
                   {"option.max_rolling_batch_size", {"64", "serving.properties:4"}},
                   {"option.enable_kv_cache_reuse", {"true", "OPTION_ENABLE_KV_CACHE_REUSE"}},
                   {"option.dtype", {"fp16", "OPTION_DTYPE"}},
                   {"option.quantize", {"FP8", "OPTION_QUANTIZE"}},
                   {"option.enable_chunked_context", {"false", "x:1"}},
                   {"option.max_num_tokens", {"512", "x:2"}},
                   {"job_queue_size", {"7", "x:3"}},
                   {"option.tensor_parallel_degree", {"max", "x:6"}},
                   {"option.use_custom_all_reduce", {"false", "x:7"}},
                   {"option.trust_remote_code", {"true", "x:4"}},
                   {"option.not_a_thing", {"1", "x:5"}}};
  auto r = applyLmi(s, c, o, prov);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(c.model, testmodels::bundledDir());
  EXPECT_EQ(c.max_batch_size, 12);  // max_num_sequences wins over max_rolling_batch_size
  EXPECT_TRUE(c.kv_cache_config.enable_block_reuse);
  EXPECT_EQ(c.dtype, ComputeDtype::kFloat16);
  EXPECT_EQ(c.quantization, Quantization::kFp8);
  EXPECT_EQ(prov.at("quantization"), "OPTION_QUANTIZE (option.quantize)");
  EXPECT_FALSE(c.scheduler_config.enable_chunked_context);
  EXPECT_EQ(c.max_num_tokens, 512);
  EXPECT_EQ(o.max_queued_requests, 7);
  EXPECT_EQ(c.tensor_parallel_size, 0);  // max: every visible GPU, resolved by the engine
  EXPECT_FALSE(c.cuda_tuning.custom_all_reduce);
  EXPECT_EQ(prov.at("tensor_parallel_size"), "x:6 (option.tensor_parallel_degree)");
  // LMI's defaults for what was not given.
  EXPECT_EQ(c.max_input_len, 1024);
  EXPECT_EQ(o.max_output_len, 512);
  EXPECT_EQ(c.kv_cache_config.tokens_per_block, 128);
  EXPECT_DOUBLE_EQ(c.kv_cache_config.free_gpu_memory_fraction.value_or(0.0), 0.95);
  EXPECT_EQ(c.scheduler_config.capacity_scheduler_policy, CapacitySchedulerPolicy::kMaxUtilization);
  EXPECT_EQ(c.overlap, OverlapMode::kOff);
  EXPECT_EQ(prov.at("max_batch_size"), "serving.properties:3 (option.max_num_sequences)");
  EXPECT_EQ(prov.at("max_input_len"), "LMI default (option.max_input_len)");
  ASSERT_EQ(r->warnings.size(), 2u);
  EXPECT_NE(r->warnings[0].find("option.not_a_thing"), std::string::npos);
  EXPECT_NE(r->warnings[1].find("trust_remote_code"), std::string::npos);
  // Nothing LMI: nothing changes, not even the defaults.
  EngineConfig d;
  ServeOptions od;
  auto none = applyLmi({}, d, od, prov);
  ASSERT_TRUE(none.isOk());
  EXPECT_FALSE(none->configured);
  EXPECT_EQ(d.kv_cache_config.tokens_per_block, EngineConfig{}.kv_cache_config.tokens_per_block);
}

TEST(ServingConfig, RollingBatchDisableIsStaticBatching) {
  EngineConfig c;
  ServeOptions o;
  Provenance prov;
  ASSERT_TRUE(applyLmi({{"option.rolling_batch", {"disable", "f:1"}}, {"option.batch_scheduler_policy", {"guaranteed_no_evict", "f:2"}}},
                       c, o, prov)
                  .isOk());
  EXPECT_EQ(c.scheduler_config.capacity_scheduler_policy, CapacitySchedulerPolicy::kStaticBatch);
}

TEST(ServingConfig, ErrorsNameKeyValueAndSource) {
  auto err = [](LmiSettings s) {
    EngineConfig c;
    ServeOptions o;
    Provenance p;
    auto r = applyLmi(s, c, o, p);
    EXPECT_FALSE(r.isOk());
    return r.isOk() ? std::string() : r.status().message();
  };
  std::string m = err({{"option.max_rolling_batch_size", {"lots", "serving.properties:3"}}});
  EXPECT_NE(m.find("serving.properties:3: option.max_rolling_batch_size"), std::string::npos) << m;
  EXPECT_NE(m.find("lots"), std::string::npos) << m;
  m = err({{"option.tensor_parallel_degree", {"two", "TENSOR_PARALLEL_DEGREE"}}});
  EXPECT_NE(m.find("TENSOR_PARALLEL_DEGREE"), std::string::npos) << m;
  EXPECT_NE(m.find("a positive integer or max"), std::string::npos) << m;
  m = err({{"option.use_custom_all_reduce", {"maybe", "f:2"}}});
  EXPECT_NE(m.find("true or false"), std::string::npos) << m;
  m = err({{"option.quantize", {"gptq", "OPTION_QUANTIZE"}}});
  EXPECT_NE(m.find("OPTION_QUANTIZE"), std::string::npos) << m;
  EXPECT_NE(m.find("fp8, smoothquant or awq"), std::string::npos) << m;
  m = err({{"option.awq_format", {"int8_awq", "f:3"}}});
  EXPECT_NE(m.find("int4_awq"), std::string::npos) << m;
  m = err({{"option.awq_calib_size", {"0", "f:4"}}});
  EXPECT_NE(m.find("a positive integer"), std::string::npos) << m;
  m = err({{"option.smoothquant_alpha", {"strong", "f:5"}}});
  EXPECT_NE(m.find("f:5: option.smoothquant_alpha"), std::string::npos) << m;
  m = err({{"option.dtype", {"int3", "f:9"}}});
  EXPECT_NE(m.find("f:9: option.dtype: 'int3'"), std::string::npos) << m;
  m = err({{"option.enable_kv_cache_reuse", {"maybe", "f:2"}}});
  EXPECT_NE(m.find("true or false"), std::string::npos) << m;
  m = err({{"option.model_id", {"org/model", "HF_MODEL_ID"}}});
  EXPECT_NE(m.find("local model directory"), std::string::npos) << m;
  m = err({{"option.rolling_batch", {"sometimes", "f:1"}}});
  EXPECT_NE(m.find("disable"), std::string::npos) << m;
  m = err({{"engine", {"DeepSpeed", "f:1"}}});
  EXPECT_NE(m.find("engine"), std::string::npos) << m;
  m = err({{"option.tokens_per_block", {"-5", "f:4"}}});
  EXPECT_NE(m.find("f:4: option.tokens_per_block"), std::string::npos) << m;
}

TEST(ServingConfig, DescribeNamesEverySource) {
  EngineConfig c;
  ServeOptions o;
  Provenance prov;
  ASSERT_TRUE(applyLmi({{"option.max_input_len", {"99", "OPTION_MAX_INPUT_LEN"}}}, c, o, prov).isOk());
  const std::string d = describeServeConfig(c, o, prov);
  EXPECT_NE(d.find("max_input_len = 99  (OPTION_MAX_INPUT_LEN (option.max_input_len))"), std::string::npos) << d;
  EXPECT_NE(d.find("serve.port = 8000  (default)"), std::string::npos) << d;
  for (const OptionInfo& info : engineOptionTable())
    EXPECT_NE(d.find(std::string(info.key) + " = "), std::string::npos) << info.key;
}

}  // namespace
}  // namespace llmrt::serve
