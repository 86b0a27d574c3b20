// KvCacheConfig / KvCacheRetentionConfig validation and pool sizing (with the
// TensorRT-LLM-style log lines).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/logging.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_cache_sizing.h"
#include "llmrt/kv_cache_config.h"
#include "llmrt/kv_cache_retention.h"

namespace llmrt {
namespace {

using ::testing::HasSubstr;

TEST(KvCacheConfigTest, DefaultsAreValid) {
  KvCacheConfig c;
  EXPECT_TRUE(c.validate().isOk());
  EXPECT_EQ(c.tokens_per_block, 32);
  EXPECT_DOUBLE_EQ(c.effectiveFreeGpuMemoryFraction(), 0.9);
  EXPECT_TRUE(c.enable_block_reuse);
  EXPECT_TRUE(c.enable_partial_reuse);
  EXPECT_TRUE(c.onboard_blocks);
  EXPECT_EQ(c.host_cache_size, 0u);
  EXPECT_EQ(c.secondary_offload_min_priority, 35);
  EXPECT_EQ(c.event_buffer_max_size, 0u);
}

TEST(KvCacheConfigTest, TokensPerBlockMustBePowerOfTwo) {
  KvCacheConfig c;
  for (int v : {1, 2, 16, 64, 128, 65536}) {
    c.tokens_per_block = v;
    EXPECT_TRUE(c.validate().isOk()) << v;
  }
  for (int v : {0, -32, 3, 48, 100, 131072}) {
    c.tokens_per_block = v;
    Status st = c.validate();
    ASSERT_FALSE(st.isOk()) << v;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(st.message(), HasSubstr("tokens_per_block"));
    EXPECT_THAT(st.message(), HasSubstr(std::to_string(v)));
    EXPECT_THAT(st.message(), HasSubstr("power of two"));
  }
}

TEST(KvCacheConfigTest, FreeMemoryFractionOpenInterval) {
  KvCacheConfig c;
  for (double f : {0.01, 0.5, 0.9, 0.99}) {
    c.free_gpu_memory_fraction = f;
    EXPECT_TRUE(c.validate().isOk()) << f;
  }
  for (double f : {0.0, 1.0, 1.5, -0.1}) {
    c.free_gpu_memory_fraction = f;
    Status st = c.validate();
    ASSERT_FALSE(st.isOk()) << f;
    EXPECT_THAT(st.message(), HasSubstr("free_gpu_memory_fraction"));
  }
  c.free_gpu_memory_fraction = 1.0;
  EXPECT_THAT(c.validate().message(), HasSubstr("1.0 leaves no memory"));
}

TEST(KvCacheConfigTest, OtherFields) {
  KvCacheConfig c;
  c.max_tokens = 0;
  EXPECT_THAT(c.validate().message(), HasSubstr("max_tokens"));
  c.max_tokens = 1024;
  EXPECT_TRUE(c.validate().isOk());
  c.max_attention_window = {0};
  EXPECT_THAT(c.validate().message(), HasSubstr("max_attention_window[0]"));
  c.max_attention_window = {4096, -3};
  EXPECT_THAT(c.validate().message(), HasSubstr("max_attention_window[1]' has value -3"));
  c.max_attention_window = {4096};
  EXPECT_TRUE(c.validate().isOk());
  c.max_attention_window = {16, 4096, 8};  // a per-layer pattern
  EXPECT_TRUE(c.validate().isOk());
  c.secondary_offload_min_priority = 101;
  EXPECT_THAT(c.validate().message(), HasSubstr("secondary_offload_min_priority"));
  c.secondary_offload_min_priority = 0;
  EXPECT_FALSE(c.validate().isOk());
  c.secondary_offload_min_priority = 100;
  EXPECT_TRUE(c.validate().isOk());
  for (const char* ok : {"auto", "float32", "bfloat16", "float16", "fp8"}) {
    c.dtype = *parseKvCacheDtype(ok);
    EXPECT_TRUE(c.validate().isOk()) << ok;
    EXPECT_EQ(toString(c.dtype), ok);
  }
  EXPECT_EQ(parseKvCacheDtype("fp8_e5m2"), std::nullopt);
  c.dtype = static_cast<KvCacheDtype>(9);
  EXPECT_THAT(c.validate().message(), HasSubstr("dtype"));
}

TEST(KvCacheRetentionConfigTest, ValidRanges) {
  KvCacheRetentionConfig r;
  EXPECT_TRUE(r.validate().isOk());
  r.token_range_retention_configs = {{64, std::nullopt, 10, std::nullopt}, {0, 64, 90, 1000}};
  EXPECT_TRUE(r.validate().isOk());  // any order, adjacent is fine
}

TEST(KvCacheRetentionConfigTest, OverlapIsRejectedClearly) {
  KvCacheRetentionConfig r;
  r.token_range_retention_configs = {{0, 100, 80, std::nullopt}, {50, 150, 20, std::nullopt}};
  Status st = r.validate();
  ASSERT_FALSE(st.isOk());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("[0, 100)"));
  EXPECT_THAT(st.message(), HasSubstr("[50, 150)"));
  EXPECT_THAT(st.message(), HasSubstr("overlap"));
  // An open end reaches the end of the prompt, so it overlaps any later range.
  r.token_range_retention_configs = {{0, std::nullopt, 80, std::nullopt}, {500, 600, 20, std::nullopt}};
  st = r.validate();
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("end of prompt"));
}

TEST(KvCacheRetentionConfigTest, FieldBounds) {
  auto one = [](TokenRangeRetentionConfig t) {
    KvCacheRetentionConfig r;
    r.token_range_retention_configs = {t};
    return r.validate();
  };
  EXPECT_THAT(one({0, 10, 0, std::nullopt}).message(), HasSubstr(".priority"));
  EXPECT_THAT(one({0, 10, 101, std::nullopt}).message(), HasSubstr(".priority"));
  EXPECT_TRUE(one({0, 10, 1, std::nullopt}).isOk());
  EXPECT_TRUE(one({0, 10, 100, std::nullopt}).isOk());
  EXPECT_THAT(one({-1, 10, 50, std::nullopt}).message(), HasSubstr("token_start"));
  EXPECT_THAT(one({10, 10, 50, std::nullopt}).message(), HasSubstr("token_end"));
  EXPECT_THAT(one({0, 10, 50, 0}).message(), HasSubstr("duration_ms"));
  KvCacheRetentionConfig r;
  r.decode_retention_priority = 0;
  EXPECT_THAT(r.validate().message(), HasSubstr("decode_retention_priority"));
  r.decode_retention_priority = 50;
  r.decode_duration_ms = -5;
  EXPECT_THAT(r.validate().message(), HasSubstr("decode_duration_ms"));
}

// ---- sizing ------------------------------------------------------------------

class LogCapture {
 public:
  LogCapture() {
    old_level_ = logLevel();
    setLogLevel(LogLevel::kInfo);
    old_sink_ = setLogSink([this](LogLevel, std::string_view line) { lines_.emplace_back(line); });
  }
  ~LogCapture() {
    setLogSink(old_sink_);
    setLogLevel(old_level_);
  }
  const std::vector<std::string>& lines() const { return lines_; }
  bool has(const std::string& s) const {
    for (const auto& l : lines_)
      if (l.find(s) != std::string::npos) return true;
    return false;
  }

 private:
  LogLevel old_level_;
  LogSink old_sink_;
  std::vector<std::string> lines_;
};

KvCacheLayout llama8bLayout() {
  KvCacheLayout l;
  l.num_layers = 32;
  l.num_kv_heads = 8;
  l.head_dim = 128;
  l.dtype = DType::kBF16;
  l.max_sequence_length = 8192;
  return l;
}

constexpr uint64_t kGiB = 1024ull * 1024 * 1024;

TEST(KvCacheSizingTest, BytesPerBlockFormula) {
  KvCacheLayout l = llama8bLayout();
  // 32 layers x 2 x 8 heads x 128 x 2 bytes = 128 KiB per token.
  EXPECT_EQ(l.bytesPerToken(), 131072u);
  l.num_kv_heads_per_layer = std::vector<int32_t>(32, 8);
  l.num_kv_heads_per_layer[0] = 16;
  EXPECT_EQ(l.bytesPerToken(), 131072u + 8 * 2 * 128 * 2);
  l.num_kv_heads_per_layer.resize(3);
  EXPECT_THAT(l.validate().message(), HasSubstr("num_kv_heads_per_layer"));
}

TEST(KvCacheSizingTest, FractionOfFreeMemoryAndLogLines) {
  LogCapture logs;
  KvCacheConfig c;  // fraction 0.9, 32 tokens per block
  FixedKvMemoryReporter mem({80 * kGiB, 40 * kGiB});
  auto s = computeKvCacheSizing(c, llama8bLayout(), mem);
  ASSERT_TRUE(s.isOk()) << s.status().toString();
  EXPECT_EQ(s->bytes_per_block, 131072u * 32);  // 4 MiB
  // floor(0.9 * 40 GiB / 4 MiB) = 9216 blocks.
  EXPECT_EQ(s->num_primary_blocks, 9216);
  EXPECT_EQ(s->num_secondary_blocks, 0);
  EXPECT_EQ(s->max_blocks_per_sequence, 256);
  EXPECT_EQ(s->primary_pool_bytes, 9216ull * 4 * 1024 * 1024);
  EXPECT_TRUE(
      logs.has("Memory usage when calculating max tokens in paged kv cache: total: 80.00 GiB, "
               "available: 40.00 GiB"));
  EXPECT_TRUE(logs.has("Number of blocks in KV cache primary pool: 9216"));
  EXPECT_TRUE(
      logs.has("Number of blocks in KV cache secondary pool: 0, onboard blocks to primary memory "
               "before reuse: true"));
  EXPECT_TRUE(logs.has("Max KV cache pages per sequence: 256"));
  EXPECT_TRUE(logs.has("Number of tokens per block: 32."));
  EXPECT_TRUE(logs.has("[MemUsageChange] Allocated 36.00 GiB for max tokens in paged KV cache (294912)."));
  for (const auto& l : logs.lines()) EXPECT_THAT(l, HasSubstr("[INFO]"));
}

TEST(KvCacheSizingTest, MaxTokensTakesTheSmaller) {
  KvCacheConfig c;
  FixedKvMemoryReporter mem({80 * kGiB, 40 * kGiB});
  c.max_tokens = 1000;  // ceil(1000 / 32) = 32 blocks < 9216
  auto s = computeKvCacheSizing(c, llama8bLayout(), mem);
  ASSERT_TRUE(s.isOk());
  EXPECT_EQ(s->num_primary_blocks, 32);
  c.max_tokens = 10'000'000;  // memory is the smaller
  s = computeKvCacheSizing(c, llama8bLayout(), mem);
  ASSERT_TRUE(s.isOk());
  EXPECT_EQ(s->num_primary_blocks, 9216);
  c.free_gpu_memory_fraction = 0.5;  // both set: still the smaller
  s = computeKvCacheSizing(c, llama8bLayout(), mem);
  ASSERT_TRUE(s.isOk());
  EXPECT_EQ(s->num_primary_blocks, 5120);
}

TEST(KvCacheSizingTest, SecondaryPoolFromHostCacheSize) {
  LogCapture logs;
  KvCacheConfig c;
  c.host_cache_size = 10 * kGiB + 123;
  c.onboard_blocks = false;
  FixedKvMemoryReporter mem({80 * kGiB, 40 * kGiB});
  auto s = computeKvCacheSizing(c, llama8bLayout(), mem);
  ASSERT_TRUE(s.isOk());
  EXPECT_EQ(s->num_secondary_blocks, 2560);
  EXPECT_TRUE(
      logs.has("Number of blocks in KV cache secondary pool: 2560, onboard blocks to primary memory "
               "before reuse: false"));
}

TEST(KvCacheSizingTest, NoRoomIsAnError) {
  KvCacheConfig c;
  FixedKvMemoryReporter mem({80 * kGiB, 1024});
  auto s = computeKvCacheSizing(c, llama8bLayout(), mem);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(s.status().message(), HasSubstr("no room for one block"));
  c.free_gpu_memory_fraction = 1.0;  // (refused by KvCacheConfig::validate, before any sizing)
  EXPECT_EQ(c.validate().code(), StatusCode::kInvalidArgument);
}

TEST(KvCacheSizingTest, ManagerFromSizing) {
  KvCacheConfig c;
  c.host_cache_size = 64ull * 4 * 1024 * 1024;
  FixedKvMemoryReporter mem({80 * kGiB, 1 * kGiB});
  auto s = computeKvCacheSizing(c, llama8bLayout(), mem);
  ASSERT_TRUE(s.isOk());
  auto m = KvCacheManager::create(c, *s);
  ASSERT_TRUE(m.isOk()) << m.status().toString();
  KvCacheStats st = (*m)->stats();
  EXPECT_EQ(st.primary.total, s->num_primary_blocks);
  EXPECT_EQ(st.secondary.total, 64);
  EXPECT_EQ((*m)->maxBlocksPerSequence(), 256);
  // max_sequence_length comes from the sizing.
  std::vector<TokenId> too_long(8193, 1);
  EXPECT_EQ((*m)->addSequence(1, too_long).status().code(), StatusCode::kOutOfRange);
}

TEST(KvCacheManagerCreateTest, RejectsBadArguments) {
  KvCacheConfig c;
  EXPECT_FALSE(KvCacheManager::create(c, 0, 0).isOk());
  EXPECT_FALSE(KvCacheManager::create(c, 10, -1).isOk());
  // (A bad config is the caller's to refuse: KvCacheConfig::validate, run once by Executor::create.)
}

}  // namespace
}  // namespace llmrt
