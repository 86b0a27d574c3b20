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

// A rank's communicator that writes down its calls in order: 'B' barrier, 'R' all-reduce, 'G'
// all-gather (the group's own communicator does the work).
class RecordingCommunicator final : public Communicator {
 public:
  explicit RecordingCommunicator(Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  Status allReduceSum(float* data, int64_t count) override {
    calls += 'R';
    return inner_.allReduceSum(data, count);
  }
  Status allGather(const float* in, int64_t count, float* out) override {
    calls += 'G';
    return inner_.allGather(in, count, out);
  }
  Status broadcast(float* data, int64_t count, int root) override {
    return inner_.broadcast(data, count, root);
  }
  Status barrier() override {
    calls += 'B';
    return inner_.barrier();
  }
  void abort(const Status& why) override { inner_.abort(why); }
  std::string calls;

 private:
  Communicator& inner_;
};

// A CPU backend that says its memory is a device's, as CUDA ranks' is (so the model fences its
// collectives), and that can record decode steps (the recording runs the step's ops as they are).
class DeviceLikeCpu final : public CpuBackend {
 public:
  explicit DeviceLikeCpu(bool record) : CpuBackend(1), record_(record) {}
  Device device() const override { return Device::kCuda; }
  bool canRecord() const override { return record_; }

 private:
  bool record_;
};

// Which collectives a step of a sharded model enqueues between fences (fencedCollective): on
// device ranks every collective of a step run op by op sits between two barriers, a recorded step
// has none inside and one after its launch; on CPU ranks (host collectives) there are no fences.
// Every step begins with the barrier after beginStep.
TEST(TensorParallelFences, DeviceRanksFenceEachCollectiveOrTheRecordedStep) {
  const std::string dir = goldenDir() + "/llama_gqa_llama3rope";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << dir << " is missing";
  auto config = loadModelConfig(dir + "/config.json");
  ASSERT_TRUE(config.isOk());
  const int64_t layers = config->num_hidden_layers;
  // 0: CPU ranks; 1: device ranks, op by op; 2: device ranks that record decode steps.
  for (int kind : {0, 1, 2}) {
    auto group = makeInProcessGroup(2);
    ASSERT_TRUE(group.isOk());
    std::vector<std::unique_ptr<RecordingCommunicator>> comms;
    for (auto& c : *group) comms.push_back(std::make_unique<RecordingCommunicator>(*c));
    std::vector<std::vector<std::string>> steps(2);  // per rank, each step's calls
    std::vector<Status> result(2);
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r)
      ranks.emplace_back([&, r] {
        DecoderModelOptions o;
        o.comm = comms[static_cast<size_t>(r)].get();
        auto m =
            loadModel(dir, 64, 8, 1, o, kind == 0 ? nullptr : std::make_unique<DeviceLikeCpu>(kind == 2));
        if (!m.isOk()) {
          o.comm->abort(m.status());
          result[static_cast<size_t>(r)] = m.status();
          return;
        }
        std::vector<int32_t> blocks = m->allocBlocks(16);
        const std::vector<std::vector<int32_t>> tokens{{1, 5, 9, 2}, {3}};
        int64_t cached = 0;
        for (const std::vector<int32_t>& t : tokens) {
          comms[static_cast<size_t>(r)]->calls.clear();
          ForwardBatch b;
          b.add(t.data(), static_cast<int64_t>(t.size()), cached, blocks, LogitsMode::kLast);
          cached += static_cast<int64_t>(t.size());
          auto logits = m->forward(b);
          if (!logits.isOk()) {
            result[static_cast<size_t>(r)] = logits.status();
            return;
          }
          steps[static_cast<size_t>(r)].push_back(comms[static_cast<size_t>(r)]->calls);
        }
      });
    for (std::thread& t : ranks) t.join();
    // Two all-reduces per layer (o, down), then the logits' all-gather.
    std::string bare(static_cast<size_t>(2 * layers), 'R');
    bare += 'G';
    std::string fenced;
    for (char c : bare) fenced += std::string("B") + c + "B";
    for (int r = 0; r < 2; ++r) {
      ASSERT_TRUE(result[static_cast<size_t>(r)].isOk())
          << kind << ": " << result[static_cast<size_t>(r)].toString();
      ASSERT_EQ(steps[static_cast<size_t>(r)].size(), 2u);
      const std::string& prefill = steps[static_cast<size_t>(r)][0];
      const std::string& decode = steps[static_cast<size_t>(r)][1];
      if (kind == 0) {
        EXPECT_EQ(prefill, "B" + bare) << "CPU ranks, rank " << r;
        EXPECT_EQ(decode, "B" + bare) << "CPU ranks, rank " << r;
      } else {
        EXPECT_EQ(prefill, "B" + fenced) << "device ranks, rank " << r;
        EXPECT_EQ(decode, kind == 1 ? "B" + fenced : "B" + bare + "B")
            << "device ranks, rank " << r << ", kind " << kind;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TensorParallelForward, ::testing::ValuesIn(goldenModels()));
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TensorParallelForward);

}  // namespace
}  // namespace llmrt::test
