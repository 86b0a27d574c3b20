// Tensor parallelism on CPU ranks (DecoderModelOptions::comm, one thread per rank over an
// in-process group): every golden architecture the plan can split runs as 2 and 4 ranks, a
// prompt then decode steps through each rank's KV pool, and the logits equal the single-rank
// run's within float32 reduction order (1e-5 x max |logit|), the same bits on every rank.
#include <filesystem>
#include <thread>

#include "backend/comm/in_process_communicator.h"
#include "model/tensor_parallel.h"
#include "model_test_util.h"

namespace llmrt::test {
namespace {

// A prompt of 9 tokens, then 3 decode steps; every step's logits, concatenated.
Result<std::vector<float>> runSteps(LoadedModel& m) {
  const std::vector<int32_t> prompt{1, 5, 9, 2, 30, 17, 4, 8, 11};
  std::vector<int32_t> blocks = m.allocBlocks(16);
  std::vector<float> all;
  int64_t cached = 0;
  const std::vector<std::vector<int32_t>> steps{prompt, {3}, {7}, {12}};
  for (const std::vector<int32_t>& tokens : steps) {
    ForwardBatch b;
    b.add(tokens.data(), static_cast<int64_t>(tokens.size()), cached, blocks,
          cached == 0 ? LogitsMode::kAll : LogitsMode::kLast);
    cached += static_cast<int64_t>(tokens.size());
    LLMRT_ASSIGN_OR_RETURN(TensorView logits, m.forward(b));
    const std::vector<float> v = toVector(logits);
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

class TensorParallelForward : public ::testing::TestWithParam<std::string> {};

TEST_P(TensorParallelForward, RanksReproduceTheSingleRankLogits) {
  const std::string dir = goldenDir() + "/" + GetParam();
  auto config = loadModelConfig(dir + "/config.json");
  ASSERT_TRUE(config.isOk());
  auto single = loadModel(dir, 64, 8, 1);
  ASSERT_TRUE(single.isOk()) << single.status().toString();
  auto want = runSteps(*single);
  ASSERT_TRUE(want.isOk()) << want.status().toString();
  double max_ref = 0;
  for (float v : *want) max_ref = std::max(max_ref, std::fabs(static_cast<double>(v)));
  int ran = 0;
  for (int tp : {2, 4}) {
    if (!planTensorParallel(*config, tp).isOk()) continue;
    ++ran;
    auto group = makeInProcessGroup(tp);
    ASSERT_TRUE(group.isOk());
    std::vector<Result<std::vector<float>>> got(static_cast<size_t>(tp), internalError("not run"));
    std::vector<std::thread> ranks;
    for (int r = 0; r < tp; ++r)
      ranks.emplace_back([&, r] {
        DecoderModelOptions o;
        o.comm = (*group)[static_cast<size_t>(r)].get();
        auto m = loadModel(dir, 64, 8, 1, o);
        if (!m.isOk()) {
          o.comm->abort(m.status());
          got[static_cast<size_t>(r)] = m.status();
          return;
        }
        got[static_cast<size_t>(r)] = runSteps(*m);
      });
    for (std::thread& t : ranks) t.join();
    for (int r = 0; r < tp; ++r) {
      const auto& g = got[static_cast<size_t>(r)];
      ASSERT_TRUE(g.isOk()) << GetParam() << " tp " << tp << " rank " << r << ": " << g.status().toString();
      ASSERT_EQ(g->size(), want->size());
      if (r > 0) {
        EXPECT_EQ(*g, *got[0]) << GetParam() << " tp " << tp << ": rank " << r << " differs from rank 0";
        continue;
      }
      double max_diff = 0;
      for (size_t i = 0; i < g->size(); ++i)
        max_diff = std::max(max_diff, std::fabs(static_cast<double>((*g)[i]) - (*want)[i]));
      EXPECT_LE(max_diff, 1e-5 * max_ref) << GetParam() << " tp " << tp << ": max |diff| " << max_diff << " of "
                                          << max_ref;
    }
  }
  if (ran == 0) GTEST_SKIP() << GetParam() << ": no rank count in {2, 4} splits its shapes";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TensorParallelForward, ::testing::ValuesIn(goldenModels()));
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TensorParallelForward);

}  // namespace
}  // namespace llmrt::test
