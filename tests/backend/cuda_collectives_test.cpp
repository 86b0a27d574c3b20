// The collectives of CUDA ranks (makeCudaGroup, CudaBackend::allReduceSum / allGatherColumns),
// rank r on GPU r % visible GPUs as the engine places them: on one GPU several ranks share it; on a
// machine of several, ranks sit on separate GPUs (and share them past the GPU count). Each rank is a
// thread with its own CudaBackend and stream, as the engine runs them. The custom kernels must give every rank the rank-order sum bit for bit
// (one-shot, two-shot, in staging-sized pieces, with both staging parities), place gathered
// columns, release a waiting rank on abort; NCCL (a group of one, where libnccl.so.2 loads)
// leaves the data as it is, and between separate GPUs sums within float32 reduction order; a CUDA
// backend with a host communicator takes the host path.
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/comm/communicator.h"
#include "backend/comm/in_process_communicator.h"
#if LLMRT_HAVE_CUDA
#include <cuda_runtime.h>

#include <atomic>
#include <latch>

#include "backend/cuda/cuda_backend.h"
#endif

namespace llmrt {
namespace {

// Ranks sharing the one GPU need CUDA's eager kernel loading (makeCudaGroup refuses them under
// lazy loading, which would deadlock them): set before this process's first CUDA call.
[[maybe_unused]] const bool kEagerLoading = setenv("CUDA_MODULE_LOADING", "EAGER", 0) == 0;

#if LLMRT_HAVE_CUDA

struct Ranks {
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<std::unique_ptr<Communicator>> comms;
};

// n ranks, rank r on GPU r % visible GPUs as the engine places them (`spread`; else all on GPU 0):
// a CUDA group (custom kernels unless `custom` is false) and a backend each.
Result<Ranks> gpuRanks(int n, bool custom = true, bool spread = true, int64_t staging = int64_t{1} << 16) {
  Ranks r;
  CudaGroupOptions g;
  for (int i = 0; i < n; ++i) g.devices.push_back(spread ? i % cudaDeviceCount() : 0);
  g.custom_all_reduce = custom;
  g.staging_floats = staging;
  LLMRT_ASSIGN_OR_RETURN(r.comms, makeCudaGroup(g));
  for (int i = 0; i < n; ++i) {
    CudaBackendOptions o;
    o.device = g.devices[static_cast<size_t>(i)];
    o.weight_dtype = DType::kF32;
    o.kv_dtype = DType::kF32;
    LLMRT_ASSIGN_OR_RETURN(std::unique_ptr<Backend> b, createCudaBackend(o));
    r.backends.push_back(std::move(b));
  }
  return r;
}

// Runs fn(rank) on one thread per rank; each rank's status.
std::vector<Status> onRanks(int n, const std::function<Status(int)>& fn) {
  std::vector<Status> st(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { st[static_cast<size_t>(r)] = fn(r); });
  for (std::thread& t : threads) t.join();
  return st;
}

// Each rank's all-reduce of in[rank] through its backend, on its thread: out[rank]; each rank's status.
std::vector<Status> allReduceOnRanks(Ranks& ranks, const std::vector<std::vector<float>>& in,
                                     std::vector<std::vector<float>>& out) {
  const int n = static_cast<int>(in.size());
  out.assign(in.size(), {});
  return onRanks(n, [&](int r) -> Status {
    Backend& b = *ranks.backends[static_cast<size_t>(r)];
    const int64_t count = static_cast<int64_t>(in[static_cast<size_t>(r)].size());
    TensorView t = b.scratch(0, 1, count, DType::kF32);
    LLMRT_RETURN_IF_ERROR(b.copyFromHost(in[static_cast<size_t>(r)].data(), t));
    LLMRT_RETURN_IF_ERROR(b.allReduceSum(*ranks.comms[static_cast<size_t>(r)], t));
    out[static_cast<size_t>(r)].resize(static_cast<size_t>(count));
    return b.copyToHost(t, out[static_cast<size_t>(r)].data());
  });
}

std::vector<float> randomValues(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

bool sameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

class CudaCollectives : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(CudaCollectives, AllReduceGivesEveryRankTheRankOrderSum) {
  // counts: 1 and 5 (the scalar tail), a decode-sized 4096, past 256 KiB (two-shot from 3 ranks),
  // past the 65536-float staging buffers (pieces), each twice in a row (both parities).
  for (const int n : {1, 2, 3, 4, 8}) {
    auto ranks = gpuRanks(n);
    ASSERT_TRUE(ranks.isOk()) << ranks.status().toString();
    for (const int64_t count : {int64_t{1}, int64_t{5}, int64_t{4096}, int64_t{4096}, int64_t{70001}, int64_t{200003}}) {
      std::vector<std::vector<float>> in, out;
      for (int r = 0; r < n; ++r) in.push_back(randomValues(static_cast<size_t>(count), static_cast<uint32_t>(count * 16 + r)));
      const std::vector<Status> st = allReduceOnRanks(*ranks, in, out);
      const std::string what = std::to_string(n) + " ranks, " + std::to_string(count) + " floats";
      for (const Status& s : st) ASSERT_TRUE(s.isOk()) << what << ": " << s.toString();
      int64_t wrong = 0;
      for (int64_t i = 0; i < count; ++i) {
        float want = in[0][static_cast<size_t>(i)];
        for (int r = 1; r < n; ++r) want += in[static_cast<size_t>(r)][static_cast<size_t>(i)];
        for (int r = 0; r < n; ++r) wrong += !sameBits(out[static_cast<size_t>(r)][static_cast<size_t>(i)], want);
      }
      EXPECT_EQ(wrong, 0) << what;
    }
  }
}

TEST_F(CudaCollectives, AllGatherPlacesEachRanksColumns) {
  // 700 rows of 1000 floats exceed the 65536-float staging: gathered in pieces of whole rows.
  for (const int n : {2, 4}) {
    auto ranks = gpuRanks(n);
    ASSERT_TRUE(ranks.isOk()) << ranks.status().toString();
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{1, 5}, {3, 1000}, {700, 1000}, {2, 7}}) {
      std::vector<std::vector<float>> in, out(static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) in.push_back(randomValues(static_cast<size_t>(rows * cols), static_cast<uint32_t>(rows + r)));
      const std::vector<Status> st = onRanks(n, [&](int r) -> Status {
        Backend& b = *ranks->backends[static_cast<size_t>(r)];
        TensorView local = b.scratch(0, rows, cols, DType::kF32), all = b.scratch(1, rows, cols * n, DType::kF32);
        LLMRT_RETURN_IF_ERROR(b.copyFromHost(in[static_cast<size_t>(r)].data(), local));
        LLMRT_RETURN_IF_ERROR(b.allGatherColumns(*ranks->comms[static_cast<size_t>(r)], local, all));
        out[static_cast<size_t>(r)].resize(static_cast<size_t>(rows * cols * n));
        return b.copyToHost(all, out[static_cast<size_t>(r)].data());
      });
      for (const Status& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
      int64_t wrong = 0;
      for (int r = 0; r < n; ++r)
        for (int p = 0; p < n; ++p)
          for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < cols; ++j)
              wrong += out[static_cast<size_t>(r)][static_cast<size_t>(i * cols * n + p * cols + j)] !=
                       in[static_cast<size_t>(p)][static_cast<size_t>(i * cols + j)];
      EXPECT_EQ(wrong, 0) << n << " ranks, " << rows << "x" << cols;
    }
  }
}

TEST_F(CudaCollectives, HostCollectivesOfTheGroup) {
  auto ranks = gpuRanks(3);
  ASSERT_TRUE(ranks.isOk()) << ranks.status().toString();
  std::vector<std::vector<float>> data(3), gathered(3, std::vector<float>(6));
  const std::vector<Status> st = onRanks(3, [&](int r) -> Status {
    Communicator& c = *ranks->comms[static_cast<size_t>(r)];
    std::vector<float>& d = data[static_cast<size_t>(r)];
    d = {float(r), float(10 * r)};
    LLMRT_RETURN_IF_ERROR(c.allGather(d.data(), 2, gathered[static_cast<size_t>(r)].data()));
    LLMRT_RETURN_IF_ERROR(c.allReduceSum(d.data(), 2));
    std::vector<float> b{float(r)};
    LLMRT_RETURN_IF_ERROR(c.broadcast(b.data(), 1, 2));
    if (b[0] != 2.0f) return internalError("broadcast gave " + std::to_string(b[0]));
    return c.barrier();
  });
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(st[static_cast<size_t>(r)].isOk()) << st[static_cast<size_t>(r)].toString();
    EXPECT_EQ(data[static_cast<size_t>(r)], (std::vector<float>{3, 30}));
    EXPECT_EQ(gathered[static_cast<size_t>(r)], (std::vector<float>{0, 0, 1, 10, 2, 20}));
  }
}

TEST_F(CudaCollectives, AbortReleasesARankWaitingForOneThatNeverComes) {
  auto ranks = gpuRanks(2);
  ASSERT_TRUE(ranks.isOk()) << ranks.status().toString();
  Status waited;
  std::thread rank0([&] {
    Backend& b = *ranks->backends[0];
    TensorView t = b.scratch(0, 1, 4096, DType::kF32);
    waited = b.allReduceSum(*ranks->comms[0], t);  // enqueued; the kernel waits for rank 1
    if (waited.isOk()) {
      std::vector<float> host(4096);
      waited = b.copyToHost(t, host.data());  // returns once the kernel gave up
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ranks->comms[1]->abort(internalError("rank 1 failed"));
  rank0.join();
  // The kernel is released (the join above returned); later collectives fail at once.
  std::vector<float> one{1.0f};
  EXPECT_EQ(ranks->comms[0]->allReduceSum(one.data(), 1).message(), "rank 1 failed");
}

TEST_F(CudaCollectives, NcclGroupOfOneLeavesDataAndSharedGpusAreRefused) {
  auto ranks = gpuRanks(1, /*custom=*/false);
  if (!ranks.isOk() && ranks.status().message().find("libnccl") != std::string::npos)
    GTEST_SKIP() << ranks.status().message();
  ASSERT_TRUE(ranks.isOk()) << ranks.status().toString();
  const std::vector<float> in = randomValues(300000, 7);
  std::vector<float> out(in.size());
  Backend& b = *ranks->backends[0];
  TensorView t = b.scratch(0, 1, static_cast<int64_t>(in.size()), DType::kF32);
  ASSERT_TRUE(b.copyFromHost(in.data(), t).isOk());
  ASSERT_TRUE(b.allReduceSum(*ranks->comms[0], t).isOk());
  ASSERT_TRUE(b.copyToHost(t, out.data()).isOk());
  EXPECT_EQ(out, in);
  auto shared = gpuRanks(2, /*custom=*/false, /*spread=*/false);
  ASSERT_FALSE(shared.isOk());
  EXPECT_NE(shared.status().message().find("share a GPU"), std::string::npos) << shared.status().toString();
}

// NCCL between separate GPUs (skipped with fewer than 2): every size through NCCL (custom kernels
// off), and with the custom kernels on, a message past kCustomAllReduceMaxBytes (handed to NCCL).
// NCCL's ring adds the ranks in its own order: every rank gets the same bits, within float32
// reduction order of the rank-order sum.
TEST_F(CudaCollectives, NcclAcrossGpusSumsOnEveryRank) {
  const int n = std::min(cudaDeviceCount(), 4);
  if (n < 2) GTEST_SKIP() << "one GPU: NCCL needs a GPU per rank";
  for (const bool custom : {false, true}) {
    auto ranks = gpuRanks(n, custom);
    if (!ranks.isOk() && ranks.status().message().find("libnccl") != std::string::npos)
      GTEST_SKIP() << ranks.status().message();
    ASSERT_TRUE(ranks.isOk()) << ranks.status().toString();
    for (const int64_t count : custom ? std::vector<int64_t>{3'000'001} : std::vector<int64_t>{1, 4096, 3'000'001}) {
      std::vector<std::vector<float>> in, out;
      for (int r = 0; r < n; ++r) in.push_back(randomValues(static_cast<size_t>(count), static_cast<uint32_t>(count + r)));
      const std::vector<Status> st = allReduceOnRanks(*ranks, in, out);
      const std::string what = std::string(custom ? "custom on, " : "NCCL, ") + std::to_string(count) + " floats";
      for (const Status& x : st) ASSERT_TRUE(x.isOk()) << what << ": " << x.toString();
      int64_t far = 0, differ = 0;
      for (int64_t i = 0; i < count; ++i) {
        double want = 0, magnitude = 0;
        for (int r = 0; r < n; ++r) {
          want += in[static_cast<size_t>(r)][static_cast<size_t>(i)];
          magnitude += std::fabs(in[static_cast<size_t>(r)][static_cast<size_t>(i)]);
        }
        far += std::fabs(out[0][static_cast<size_t>(i)] - want) > 1e-6 * magnitude;
        for (int r = 1; r < n; ++r) differ += !sameBits(out[static_cast<size_t>(r)][static_cast<size_t>(i)], out[0][static_cast<size_t>(i)]);
      }
      EXPECT_EQ(far, 0) << what;
      EXPECT_EQ(differ, 0) << what;
    }
  }
}

// Enqueue fences (fencedCollective) against the deadlock they exist for. Two ranks share GPU 0;
// between two all-reduces rank 0's thread waits for the whole GPU to go idle (cudaDeviceSynchronize,
// as a kernel's lazy load does), after rank 1 has had time to enqueue its second all-reduce.
// Unfenced, rank 1's second all-reduce spins on the GPU for rank 0's, which waits for the GPU:
// only the watchdog's abort ends it. Fenced, rank 1 waits on the host until rank 0 arrives, and
// both calls complete with the rank-order sums.
TEST_F(CudaCollectives, EnqueueFencesKeepADeviceWideWaitFromDeadlocking) {
  for (const bool fenced : {false, true}) {
    auto ranks = gpuRanks(2, /*custom=*/true, /*spread=*/false);
    ASSERT_TRUE(ranks.isOk()) << ranks.status().toString();
    std::latch rank1_at_second(1);
    std::atomic<bool> done{false};
    std::vector<std::vector<float>> out(2, std::vector<float>(2));
    std::thread watchdog([&] {
      for (int i = 0; i < 100 && !done.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (!done.load()) ranks->comms[0]->abort(internalError("deadlocked: aborted by the watchdog"));
    });
    const std::vector<Status> st = onRanks(2, [&](int r) -> Status {
      Backend& b = *ranks->backends[static_cast<size_t>(r)];
      Communicator& c = *ranks->comms[static_cast<size_t>(r)];
      TensorView t = b.scratch(0, 1, 4096, DType::kF32);
      const std::vector<float> in(4096, 1.0f + static_cast<float>(r));
      LLMRT_RETURN_IF_ERROR(b.copyFromHost(in.data(), t));
      auto reduce = [&] { return b.allReduceSum(c, t); };
      LLMRT_RETURN_IF_ERROR(fencedCollective(c, fenced, reduce));
      if (r == 0) {
        rank1_at_second.wait();
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // (rank 1 enqueues, unless fenced)
        if (cudaDeviceSynchronize() != cudaSuccess) return internalError("cudaDeviceSynchronize failed");
      } else {
        rank1_at_second.count_down();
      }
      LLMRT_RETURN_IF_ERROR(fencedCollective(c, fenced, reduce));
      std::vector<float> host(4096);
      LLMRT_RETURN_IF_ERROR(b.copyToHost(t, host.data()));
      out[static_cast<size_t>(r)] = {host[0], host[4095]};
      return Status::ok();
    });
    done.store(true);
    watchdog.join();
    if (!fenced) {
      EXPECT_FALSE(st[0].isOk() && st[1].isOk()) << "unfenced: expected the deadlock the fences prevent";
      continue;
    }
    for (const Status& x : st) EXPECT_TRUE(x.isOk()) << x.toString();
    for (const auto& o : out) EXPECT_EQ(o, (std::vector<float>{6.0f, 6.0f}));  // (1 + 2) summed twice
  }
}

TEST_F(CudaCollectives, CudaBackendsWithAHostCommunicatorGoThroughTheHost) {
  auto comms = makeInProcessGroup(2);
  ASSERT_TRUE(comms.isOk());
  auto ranks = gpuRanks(2);
  ASSERT_TRUE(ranks.isOk()) << ranks.status().toString();
  std::vector<std::vector<float>> out(2, std::vector<float>(3));
  const std::vector<Status> st = onRanks(2, [&](int r) -> Status {
    Backend& b = *ranks->backends[static_cast<size_t>(r)];
    const std::vector<float> in{1.0f + r, 2.0f, 3.0f * r};
    TensorView t = b.scratch(0, 1, 3, DType::kF32);
    LLMRT_RETURN_IF_ERROR(b.copyFromHost(in.data(), t));
    LLMRT_RETURN_IF_ERROR(b.allReduceSum(*(*comms)[static_cast<size_t>(r)], t));
    return b.copyToHost(t, out[static_cast<size_t>(r)].data());
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(st[static_cast<size_t>(r)].isOk()) << st[static_cast<size_t>(r)].toString();
    EXPECT_EQ(out[static_cast<size_t>(r)], (std::vector<float>{3, 4, 3}));
  }
}

#endif  // LLMRT_HAVE_CUDA

}  // namespace
}  // namespace llmrt
