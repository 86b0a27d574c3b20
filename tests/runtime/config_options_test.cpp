// The option tables (llmrt/config_options.h): one strict parser per knob, shared by every front
// end, and the same range messages as a config built in C++ (EngineConfig::validate).
#include <gtest/gtest.h>

#include <set>

#include "llmrt/config_options.h"

namespace llmrt {
namespace {

#define EXPECT_ERROR(expr, fragment)                                                                 \
  do {                                                                                                \
    const Status s_ = (expr);                                                                         \
    EXPECT_FALSE(s_.isOk());                                                                          \
    EXPECT_NE(s_.message().find(fragment), std::string::npos) << "message: " << s_.message();        \
  } while (0)

TEST(ConfigOptions, EveryOptionHasOneKeyAndOneFlag) {
  std::set<std::string_view> keys, flags;
  for (auto table : {engineOptionTable(), samplingOptionTable()}) {
    for (const OptionInfo& o : table) {
      EXPECT_TRUE(keys.insert(o.key).second) << o.key;
      EXPECT_TRUE(flags.insert(o.flag).second) << o.flag;
      if (!o.negation.empty()) EXPECT_TRUE(flags.insert(o.negation).second) << o.negation;
      EXPECT_EQ(o.flag.substr(0, 2), "--") << o.key;
      EXPECT_FALSE(o.help.empty()) << o.key;
      EXPECT_EQ(findOption(o.key), &o);
      EXPECT_EQ(findOption(o.flag), &o);
    }
  }
}

TEST(ConfigOptions, ValuesRoundTripThroughText) {
  EngineConfig c;
  ASSERT_TRUE(setEngineOption(c, "--max-batch-size", "12").isOk());
  ASSERT_TRUE(setEngineOption(c, "kv_cache_config.free_gpu_memory_fraction", "0.5").isOk());
  ASSERT_TRUE(setEngineOption(c, "max-num-tokens", "64").isOk());  // dashes optional
  ASSERT_TRUE(setEngineOption(c, "--backend", "cuda").isOk());
  ASSERT_TRUE(setEngineOption(c, "--kv-cache-dtype", "float16").isOk());
  ASSERT_TRUE(setEngineOption(c, "--scheduler-policy", "max_utilization").isOk());
  ASSERT_TRUE(setEngineOption(c, "--max-attention-window", "16,32").isOk());
  ASSERT_TRUE(setEngineOption(c, "--cuda-tuning", "graphs=off,gemv_rows=8").isOk());
  ASSERT_TRUE(setEngineOption(c, "--quantization", "fp8").isOk());
  EXPECT_EQ(c.quantization, Quantization::kFp8);
  EXPECT_EQ(engineOptionValue(c, "quantization"), "fp8");
  Status bad = setEngineOption(c, "--quantization", "int4");
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.message().find("auto|none|fp8"), std::string::npos) << bad.toString();
  EXPECT_EQ(c.max_batch_size, 12);
  EXPECT_EQ(c.kv_cache_config.free_gpu_memory_fraction, 0.5);
  EXPECT_EQ(c.max_num_tokens, 64);
  EXPECT_EQ(c.backend, BackendKind::kCuda);
  EXPECT_EQ(c.kv_cache_config.dtype, KvCacheDtype::kFloat16);
  EXPECT_EQ(c.scheduler_config.capacity_scheduler_policy, CapacitySchedulerPolicy::kMaxUtilization);
  EXPECT_EQ(c.kv_cache_config.max_attention_window, (std::vector<int32_t>{16, 32}));
  EXPECT_FALSE(c.cuda_tuning.graphs);
  EXPECT_EQ(c.cuda_tuning.gemv_rows, 8);
  EXPECT_EQ(engineOptionValue(c, "max_batch_size"), "12");
  EXPECT_EQ(engineOptionValue(c, "backend"), "cuda");
  EXPECT_EQ(engineOptionValue(c, "kv_cache_config.max_attention_window"), "16,32");
  EXPECT_EQ(engineOptionValue(c, "cuda_tuning"), "graphs=off,gemv_rows=8");
  EXPECT_EQ(engineOptionValue(EngineConfig{}, "kv_cache_config.max_tokens"), "");  // unset
  // Every option's printed default parses back to the same value.
  const EngineConfig defaults;
  for (const OptionInfo& o : engineOptionTable()) {
    const std::string v = engineOptionValue(defaults, o.key);
    if (v.empty()) continue;
    EngineConfig back;
    ASSERT_TRUE(setEngineOption(back, o.key, v).isOk()) << o.key << " = " << v;
    EXPECT_EQ(engineOptionValue(back, o.key), v) << o.key;
  }
}

TEST(ConfigOptions, BooleansAndTheirNegations) {
  EngineConfig c;
  ASSERT_TRUE(setEngineOption(c, "--disable-block-reuse", "").isOk());
  EXPECT_FALSE(c.kv_cache_config.enable_block_reuse);
  ASSERT_TRUE(setEngineOption(c, "--enable-block-reuse", "").isOk());  // a bare flag means true
  EXPECT_TRUE(c.kv_cache_config.enable_block_reuse);
  ASSERT_TRUE(setEngineOption(c, "--enable-block-reuse", "false").isOk());
  EXPECT_FALSE(c.kv_cache_config.enable_block_reuse);
  ASSERT_TRUE(setEngineOption(c, "--disable-chunked-context", "true").isOk());
  EXPECT_FALSE(c.scheduler_config.enable_chunked_context);
  EXPECT_ERROR(setEngineOption(c, "--enable-block-reuse", "maybe"), "'maybe' is not true or false");
}

// The bad values of issue #25 (item 5): each is refused with a line naming the option.
TEST(ConfigOptions, BadValuesAreRefusedNotWrapped) {
  EngineConfig c;
  EXPECT_ERROR(setEngineOption(c, "--kv-cache-host-size", "-1"), "'-1' is not an integer in [0, 18446744073709551615]");
  EXPECT_ERROR(setEngineOption(c, "--max-batch-size", "4294967297"), "--max-batch-size: '4294967297' is not an integer");
  EXPECT_ERROR(setEngineOption(c, "--max-batch-size", "3.9"), "'3.9' is not an integer");
  EXPECT_ERROR(setEngineOption(c, "--max-batch-size", ""), "is not an integer");
  EXPECT_ERROR(setEngineOption(c, "--kv-cache-free-gpu-memory-fraction", "nan"), "not a finite number");
  EXPECT_ERROR(setEngineOption(c, "--kv-cache-free-gpu-memory-fraction", "0.5x"), "not a finite number");
  EXPECT_ERROR(setEngineOption(c, "--backend", "tpu"), "'tpu' is not one of auto|cpu|cuda");
  EXPECT_ERROR(setEngineOption(c, "--max-attention-window", "16,,32"), "is not an integer");
  EXPECT_ERROR(setEngineOption(c, "--max-token", "5"), "did you mean '--max-tokens'?");
  EXPECT_ERROR(setEngineOption(c, "--cuda-tuning", "gemv_rows=9"), "gemv_rows");
  EXPECT_ERROR(setEngineOption(c, "--cuda-tuning", "graphs=off,graphs=on"), "given twice");
  EXPECT_ERROR(setEngineOption(c, "--cuda-tuning", "graphs"), "not key=value");
  // Parsed, then range-checked once by validate(), with the API's message.
  c = EngineConfig{};
  c.model = "m";
  ASSERT_TRUE(setEngineOption(c, "--kv-cache-max-tokens", "0").isOk());
  EXPECT_ERROR(c.validate(), "KvCacheConfig: field 'max_tokens' has value 0");
  ASSERT_TRUE(setEngineOption(c, "--kv-cache-max-tokens", "9223372036854775807").isOk());
  EXPECT_ERROR(c.validate(), "field 'max_tokens' has value 9223372036854775807");
  SamplingParams p;
  EXPECT_ERROR(setSamplingOption(p, "--seed", "-1"), "'-1' is not an integer in [0, 18446744073709551615]");
  EXPECT_ERROR(setSamplingOption(p, "--top-k", "4294967296"), "is not an integer");
  EXPECT_ERROR(setSamplingOption(p, "--temperature", "1e999"), "not a finite number");
  ASSERT_TRUE(setSamplingOption(p, "--stop", "a,b").isOk());  // one stop string per occurrence
  ASSERT_TRUE(setSamplingOption(p, "--stop", "c").isOk());
  EXPECT_EQ(p.stop, (std::vector<std::string>{"a,b", "c"}));
  ASSERT_TRUE(setSamplingOption(p, "--top-p", "0").isOk());
  EXPECT_ERROR(p.validate(), "SamplingParams: field 'top_p' has value 0");
}

TEST(CudaTuning, ParsesKnownKeysAndPrintsWhatDiffers) {
  CudaTuning t;
  EXPECT_EQ(t.toString(), "");
  ASSERT_TRUE(parseCudaTuning(" rope_fusion=off , norm_split_rows=0,profile=on", t).isOk());
  EXPECT_FALSE(t.rope_fusion);
  EXPECT_EQ(t.norm_split_rows, 0);
  EXPECT_TRUE(t.profile);
  EXPECT_EQ(t.toString(), "rope_fusion=off,norm_split_rows=0,profile=on");
  CudaTuning back;
  ASSERT_TRUE(parseCudaTuning(t.toString(), back).isOk());
  EXPECT_EQ(back, t);
  // A bad spec leaves the value as it was.
  CudaTuning kept = t;
  EXPECT_FALSE(parseCudaTuning("graphs=off,split_waves=0", kept).isOk());
  EXPECT_EQ(kept, t);
  EXPECT_ERROR(parseCudaTuning("split_waves=17", kept), "an integer in [1, 16]");
  EXPECT_ERROR(parseCudaTuning("split_keys=8", kept), "an integer in [16, 4096]");
  ASSERT_TRUE(parseCudaTuning("split_keys=128", kept).isOk());
  EXPECT_EQ(kept.split_keys, 128);
  EXPECT_ERROR(parseCudaTuning("gemv=sometimes", kept), "on or off");
}

}  // namespace
}  // namespace llmrt
