// An engine of 2 CPU ranks (EngineConfig::tensor_parallel_size) against one rank on the bundled
// model: the same greedy tokens and context logits within float32 reduction order, through the
// one scheduler and KV cache manager — batched requests, chunked prompts, a reused prefix and the
// pauses of MAX_UTILIZATION under a small cache, host offload and onboarding, cancellation, a
// mixture of experts; the same with CUDA ranks (on separate GPUs where the machine has several,
// sharing the one GPU otherwise), every golden architecture on 2 and 4 CUDA ranks, and TP=1 through
// a communicator bit-exact. Bad sizes are one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "llmrt/llm.h"
#include "loader/config_parser.h"
#include "model/tensor_parallel.h"
#include "../test_models.h"

namespace llmrt {
namespace {

// Ranks sharing the one GPU need CUDA's eager kernel loading (makeCudaGroup refuses them under
// lazy loading, which would deadlock them): set before this process's first CUDA call.
[[maybe_unused]] const bool kEagerLoading = setenv("CUDA_MODULE_LOADING", "EAGER", 0) == 0;

struct RankRun {
  std::vector<std::vector<TokenId>> tokens;
  std::vector<std::vector<float>> logits;
  LlmStats stats;
};

// Whether a CUDA engine can be made here ("" when it can, else why not).
std::string cudaMissing() {
  LlmArgs args;
  args.model = testmodels::bundledDir();
  args.backend = BackendKind::kCuda;
  auto llm = LLM::create(args);
  return llm.isOk() ? "" : llm.status().message();
}

// The bundled model's prompts: two sharing a prefix (reused with block reuse on).
std::vector<Prompt> textPrompts() {
  const std::string shared = "The program reads the configuration file and prints the list of packages that";
  return {Prompt::fromText(shared + " depend on it."), Prompt::fromText("Once upon a time"),
          Prompt::fromText(shared + " it needs, one per line."), Prompt::fromText("A cat sat on the mat and")};
}

// args.model (the bundled model when empty) generating `prompts` greedily on `tp` ranks.
RankRun generate(LlmArgs args, int tp, BackendKind backend = BackendKind::kCpu,
                 const std::vector<Prompt>& prompts = textPrompts(), int max_tokens = 12) {
  if (args.model.empty()) args.model = testmodels::bundledDir();
  args.backend = backend;
  args.num_threads = 2;
  args.tensor_parallel_size = tp;
  auto llm = LLM::create(args);
  EXPECT_TRUE(llm.isOk()) << llm.status().toString();
  if (!llm.isOk()) return {};
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = max_tokens;
  sp.ignore_eos = true;
  RequestOptions ro;
  ro.return_context_logits = true;
  auto outs = (*llm)->generate(prompts, {sp}, {ro});
  EXPECT_TRUE(outs.isOk()) << outs.status().toString();
  RankRun r;
  if (!outs.isOk()) return r;
  r.stats = (*llm)->stats();
  for (const RequestOutput& o : *outs) {
    EXPECT_TRUE(o.status.isOk()) << o.status.toString();
    r.tokens.push_back(o.outputs[0].token_ids);
    r.logits.push_back(o.context_logits);
  }
  return r;
}

// Tokens equal, and logits within `tolerance` x max |logit| (0: the same bits).
void expectSame(const RankRun& one, const RankRun& two, const std::string& what, double tolerance = 1e-5) {
  ASSERT_EQ(one.tokens.size(), two.tokens.size()) << what;
  for (size_t i = 0; i < one.tokens.size(); ++i) {
    EXPECT_EQ(one.tokens[i], two.tokens[i]) << what << ": request " << i;
    ASSERT_EQ(one.logits[i].size(), two.logits[i].size()) << what;
    double max_ref = 0, max_diff = 0;
    for (size_t j = 0; j < one.logits[i].size(); ++j) {
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(one.logits[i][j])));
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(one.logits[i][j]) - two.logits[i][j]));
    }
    EXPECT_LE(max_diff, tolerance * max_ref) << what << ": request " << i;
  }
}

TEST(TensorParallelEngine, TwoCpuRanksGenerateAsOne) {
  LlmArgs plain;
  expectSame(generate(plain, 1), generate(plain, 2), "batched");
  // Prompts in chunks of 8 tokens, the shared prefix's blocks reused, and a cache of 6 blocks of
  // 8 tokens that makes MAX_UTILIZATION pause and resume requests.
  LlmArgs tight;
  tight.max_num_tokens = 8;
  tight.kv_cache_config.enable_block_reuse = true;
  tight.kv_cache_config.tokens_per_block = 8;
  tight.kv_cache_config.max_tokens = 48;
  tight.scheduler_config.capacity_scheduler_policy = CapacitySchedulerPolicy::kMaxUtilization;
  const RankRun one = generate(tight, 1), two = generate(tight, 2);
  expectSame(one, two, "chunked, reused, paused");
  EXPECT_GT(two.stats.pauses, 0u) << "the small cache should pause requests";
  EXPECT_GT(two.stats.reused_blocks, 0u) << "the shared prefix should be reused";
}

// A mixture of experts (the tiny Mixtral golden: 4 experts, top 2), each expert split over 2 CPU
// ranks, through the engine with 8-token chunks, batched: as one rank.
TEST(TensorParallelEngine, MixtureOfExpertsOnTwoCpuRanksGeneratesAsOne) {
  LlmArgs args;
  args.model = std::string(LLMRT_TEST_DATA) + "/golden/mixtral_moe";
  args.max_num_tokens = 8;
  args.kv_cache_config.tokens_per_block = 8;
  std::vector<Prompt> prompts;
  std::vector<TokenId> shared;
  for (int i = 0; i < 19; ++i) shared.push_back(static_cast<TokenId>((i * 37 + 11) % 256));
  for (int tail = 0; tail < 3; ++tail) {
    std::vector<TokenId> ids = shared;
    for (int i = 0; i <= tail; ++i) ids.push_back(static_cast<TokenId>(200 + 7 * tail + i));
    prompts.push_back(Prompt::fromIds(ids));
  }
  const RankRun one = generate(args, 1, BackendKind::kCpu, prompts), two = generate(args, 2, BackendKind::kCpu, prompts);
  expectSame(one, two, "mixtral, chunked");
}

// Host offload at 2 ranks: a small primary pool pushes the shared system prompt's blocks to the
// host pool, later requests onboard them, and every copy runs on every rank's pools (each holds
// its KV heads under the same block ids); the tokens equal one rank's.
struct OffloadRun {
  std::vector<std::vector<TokenId>> tokens;
  std::vector<int32_t> cached;
  LlmStats stats;
};
OffloadRun offloadRun(int tp, BackendKind backend, KvCacheDtype kv) {
  LlmArgs a;
  a.kv_cache_config.dtype = kv;
  a.model = testmodels::bundledDir();
  a.backend = backend;
  a.dtype = ComputeDtype::kFloat32;  // (the CUDA ranks agree with one rank to float32 rounding)
  a.num_threads = 2;
  a.tensor_parallel_size = tp;
  a.kv_cache_config.enable_block_reuse = true;
  a.kv_cache_config.tokens_per_block = 8;
  a.kv_cache_config.max_tokens = 64;                      // 8 blocks: two requests' worth
  a.kv_cache_config.host_cache_size = uint64_t{1} << 20;  // plenty of host blocks
  OffloadRun r;
  auto llm = LLM::create(a);
  EXPECT_TRUE(llm.isOk()) << llm.status().toString();
  if (!llm.isOk()) return r;
  std::vector<TokenId> system;
  for (int i = 0; i < 16; ++i) system.push_back(static_cast<TokenId>(100 + 13 * i));
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = 4;
  sp.ignore_eos = true;
  for (int q = 0; q < 6; ++q) {
    // Even requests: the system prompt and a question; odd ones: unrelated text filling the
    // primary pool, which offloads every cached block.
    std::vector<TokenId> ids = q % 2 == 0 ? system : std::vector<TokenId>{};
    for (int i = 0; i < (q % 2 == 0 ? 12 : 56); ++i) ids.push_back(static_cast<TokenId>(3000 + 97 * q + 7 * i));
    auto out = (*llm)->generate({Prompt::fromIds(ids)}, {sp});
    EXPECT_TRUE(out.isOk()) << out.status().toString();
    if (!out.isOk()) return r;
    r.tokens.push_back((*out)[0].outputs[0].token_ids);
    r.cached.push_back((*out)[0].cached_tokens);
  }
  r.stats = (*llm)->stats();
  return r;
}

void expectOffloadAsOneRank(BackendKind backend, KvCacheDtype kv = KvCacheDtype::kAuto) {
  const OffloadRun one = offloadRun(1, backend, kv), two = offloadRun(2, backend, kv);
  EXPECT_EQ(one.tokens, two.tokens);
  EXPECT_EQ(one.cached, two.cached);
  EXPECT_GT(two.stats.offloaded_blocks, 0u);
  EXPECT_GT(two.stats.onboarded_blocks, 0u);
  ASSERT_EQ(two.cached.size(), 6u);
  EXPECT_GE(two.cached[2], 16);  // the later system-prompt requests reuse its onboarded blocks
  EXPECT_GE(two.cached[4], 16);
}

TEST(TensorParallelEngine, HostOffloadAndOnboardRunOnEveryRank) { expectOffloadAsOneRank(BackendKind::kCpu); }

// The same with the FP8 KV cache: every rank's pools hold their heads' codes (the bundled model has
// no KV scales: 1 on every rank), offloaded, onboarded and reused as bytes.
TEST(TensorParallelEngine, Fp8KvCacheOffloadsAndReusesOnEveryRank) {
  expectOffloadAsOneRank(BackendKind::kCpu, KvCacheDtype::kFp8);
}

// Cancelling a request mid-generation at 2 ranks: it ends cancelled, its KV blocks are returned,
// and the next request generates what one rank does.
void expectCancelLeavesRanksReady(BackendKind backend) {
  LlmArgs a;
  a.model = testmodels::bundledDir();
  a.backend = backend;
  a.dtype = ComputeDtype::kFloat32;
  a.num_threads = 2;
  a.tensor_parallel_size = 2;
  auto llm = LLM::create(a);
  ASSERT_TRUE(llm.isOk()) << llm.status().toString();
  SamplingParams longer;
  longer.temperature = 0.0f;
  longer.max_tokens = 200;
  longer.ignore_eos = true;
  auto running = (*llm)->generateAsync(Prompt::fromText("Once upon a time"), longer);
  ASSERT_TRUE(running.isOk()) << running.status().toString();
  StreamDelta d;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*running)->next(d));
  (*running)->abort();
  const RequestOutput cancelled = (*running)->result();
  EXPECT_EQ(cancelled.outputs[0].finish_reason, FinishReason::kCancelled);
  EXPECT_LT(cancelled.outputs[0].token_ids.size(), 200u);
  EXPECT_TRUE((*llm)->executor().waitIdle(std::chrono::milliseconds(10000)));
  EXPECT_EQ((*llm)->executor().stats().kv_used_blocks, 0);
  // The ranks go on in lockstep: the next request's tokens are one rank's.
  SamplingParams sp = longer;
  sp.max_tokens = 12;
  auto after = (*llm)->generate({Prompt::fromText("A cat sat on the mat and")}, {sp});
  ASSERT_TRUE(after.isOk()) << after.status().toString();
  a.tensor_parallel_size = 1;
  auto single = LLM::create(a);
  ASSERT_TRUE(single.isOk());
  auto want = (*single)->generate({Prompt::fromText("A cat sat on the mat and")}, {sp});
  ASSERT_TRUE(want.isOk());
  EXPECT_EQ((*after)[0].outputs[0].token_ids, (*want)[0].outputs[0].token_ids);
}

TEST(TensorParallelEngine, CancelledRequestLeavesTheRanksReady) { expectCancelLeavesRanksReady(BackendKind::kCpu); }

TEST(TensorParallelEngine, SizesThatDoNotSplitAreOneLineErrors) {
  LlmArgs args;
  args.model = testmodels::bundledDir();
  args.backend = BackendKind::kCpu;
  args.tensor_parallel_size = 3;  // 2 KV heads
  auto llm = LLM::create(args);
  ASSERT_FALSE(llm.isOk());
  EXPECT_NE(llm.status().message().find("num_key_value_heads 2"), std::string::npos) << llm.status().toString();
  args.tensor_parallel_size = -1;
  EXPECT_NE(LLM::create(args).status().message().find("tensor_parallel_size"), std::string::npos);
  args.tensor_parallel_size = 0;  // max: every visible GPU; one rank on the CPU
  auto max = LLM::create(args);
  EXPECT_TRUE(max.isOk()) << max.status().toString();
  args.tensor_parallel_size = 9;
  args.backend = BackendKind::kCuda;
  llm = LLM::create(args);
  ASSERT_FALSE(llm.isOk());
  EXPECT_NE(llm.status().message().find("at most 8 with backend cuda"), std::string::npos) << llm.status().toString();
}

// GPU ranks (skipped without a GPU): rank r on GPU r % visible GPUs — separate GPUs on a machine
// of several, all sharing the one GPU otherwise — exchanging through the custom kernels (NCCL for
// large messages between separate GPUs), decode steps recorded into CUDA graphs, against one rank:
// in float32, where the CUDA backend agrees with the CPU to float32 rounding.
TEST(TensorParallelEngine, TwoCudaRanksGenerateAsOne) {
  if (const std::string why = cudaMissing(); !why.empty()) GTEST_SKIP() << why;
  LlmArgs f32;
  f32.dtype = ComputeDtype::kFloat32;
  expectSame(generate(f32, 1, BackendKind::kCuda), generate(f32, 2, BackendKind::kCuda), "cuda batched");
  LlmArgs tight = f32;
  tight.max_num_tokens = 8;
  tight.kv_cache_config.enable_block_reuse = true;
  tight.kv_cache_config.tokens_per_block = 8;
  tight.kv_cache_config.max_tokens = 48;
  tight.scheduler_config.capacity_scheduler_policy = CapacitySchedulerPolicy::kMaxUtilization;
  const RankRun one = generate(tight, 1, BackendKind::kCuda), two = generate(tight, 2, BackendKind::kCuda);
  expectSame(one, two, "cuda chunked, reused, paused");
  EXPECT_GT(two.stats.pauses, 0u);
  EXPECT_GT(two.stats.reused_blocks, 0u);
}

TEST(TensorParallelEngine, HostOffloadAndOnboardRunOnEveryCudaRank) {
  if (const std::string why = cudaMissing(); !why.empty()) GTEST_SKIP() << why;
  expectOffloadAsOneRank(BackendKind::kCuda);
}

TEST(TensorParallelEngine, CancelledRequestLeavesTheCudaRanksReady) {
  if (const std::string why = cudaMissing(); !why.empty()) GTEST_SKIP() << why;
  expectCancelLeavesRanksReady(BackendKind::kCuda);
}

// Every golden architecture on 2 and 4 CUDA ranks (where its shapes split), float32: three
// prompts sharing a 16-token prefix, in 8-token chunks with the prefix's blocks reused, give one
// rank's greedy tokens and context logits within 1e-5 x max |logit|. Mixture-of-experts layers
// split each expert.
class TensorParallelGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(TensorParallelGolden, CudaRanksGenerateAsOne) {
  if (const std::string why = cudaMissing(); !why.empty()) GTEST_SKIP() << why;
  LlmArgs args;
  args.model = std::string(LLMRT_TEST_DATA) + "/golden/" + GetParam();
  args.dtype = ComputeDtype::kFloat32;
  args.max_num_tokens = 8;
  args.kv_cache_config.enable_block_reuse = true;
  args.kv_cache_config.tokens_per_block = 8;
  auto config = loadModelConfig(args.model + "/config.json");
  ASSERT_TRUE(config.isOk()) << config.status().toString();
  const int64_t vocab = config->vocab_size;
  std::vector<Prompt> prompts;
  std::vector<TokenId> shared;
  for (int i = 0; i < 16; ++i) shared.push_back(static_cast<TokenId>((i * 37 + 11) % vocab));
  for (int tail = 0; tail < 3; ++tail) {
    std::vector<TokenId> ids = shared;
    for (int i = 0; i <= tail; ++i) ids.push_back(static_cast<TokenId>((200 + 7 * tail + i) % vocab));
    prompts.push_back(Prompt::fromIds(ids));
  }
  const RankRun one = generate(args, 1, BackendKind::kCuda, prompts, 8);
  ASSERT_EQ(one.tokens.size(), prompts.size());
  int ran = 0;
  for (const int tp : {2, 4}) {
    if (!planTensorParallel(*config, tp).isOk()) continue;
    ++ran;
    expectSame(one, generate(args, tp, BackendKind::kCuda, prompts, 8), GetParam() + " on " + std::to_string(tp) + " ranks");
  }
  if (ran == 0) GTEST_SKIP() << GetParam() << ": no rank count in {2, 4} splits its shapes";
}

std::vector<std::string> goldenModels() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(std::string(LLMRT_TEST_DATA) + "/golden", ec))
    if (e.is_directory() && std::filesystem::exists(e.path() / "config.json")) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}
INSTANTIATE_TEST_SUITE_P(Fixtures, TensorParallelGolden, ::testing::ValuesIn(goldenModels()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// TP=1 through a communicator (a group of one: the custom kernels, then NCCL where it loads)
// gives the bits of the plain path, in the default bfloat16 mode.
TEST(TensorParallelEngine, OneCudaRankThroughACommunicatorIsBitExact) {
  if (const std::string why = cudaMissing(); !why.empty()) GTEST_SKIP() << why;
  const RankRun plain = generate(LlmArgs{}, 1, BackendKind::kCuda);
  LlmArgs custom;
  custom.cuda_tuning.tp1_collectives = true;
  expectSame(plain, generate(custom, 1, BackendKind::kCuda), "custom group of one", 0.0);
  LlmArgs nccl = custom;
  nccl.cuda_tuning.custom_all_reduce = false;
  nccl.model = testmodels::bundledDir();
  nccl.backend = BackendKind::kCuda;
  if (auto llm = LLM::create(nccl); !llm.isOk()) {
    EXPECT_NE(llm.status().message().find("libnccl"), std::string::npos) << llm.status().toString();
    GTEST_SKIP() << "NCCL: " << llm.status().message();
  }
  expectSame(plain, generate(nccl, 1, BackendKind::kCuda), "NCCL group of one", 0.0);
}

}  // namespace
}  // namespace llmrt
