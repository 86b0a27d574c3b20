// The communicators of tensor-parallel ranks (backend/comm): a group of one, and the in-process
// group of CPU ranks, each rank on its own thread as the engine will run them.
#include <gtest/gtest.h>

#include <functional>
#include <thread>
#include <vector>

#include "backend/comm/communicator.h"
#include "backend/comm/in_process_communicator.h"

namespace llmrt {
namespace {

// Runs fn(rank's communicator) on one thread per rank and returns each rank's status.
std::vector<Status> onRanks(std::vector<std::unique_ptr<Communicator>>& ranks,
                            const std::function<Status(Communicator&)>& fn) {
  std::vector<Status> st(ranks.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ranks.size(); ++r) threads.emplace_back([&, r] { st[r] = fn(*ranks[r]); });
  for (std::thread& t : threads) t.join();
  return st;
}

TEST(Communicator, SingleRankLeavesDataAndCopiesGathers) {
  SingleRankCommunicator c;
  std::vector<float> v{1, 2, 3}, out(3);
  ASSERT_TRUE(c.allReduceSum(v.data(), 3).isOk());
  EXPECT_EQ(v, (std::vector<float>{1, 2, 3}));
  ASSERT_TRUE(c.allGather(v.data(), 3, out.data()).isOk());
  EXPECT_EQ(out, v);
  EXPECT_FALSE(c.broadcast(v.data(), 3, 1).isOk());
  c.abort(internalError("rank failed"));
  EXPECT_EQ(c.barrier().message(), "rank failed");
}

class InProcess : public ::testing::TestWithParam<int> {};

// Sums in rank order: the same bits on every rank, equal to the sequential sum; repeated
// collectives reuse the group (the barrier's generations) with counts from 0 to many.
TEST_P(InProcess, AllReduceIsTheRankOrderSumOnEveryRank) {
  const int n = GetParam();
  auto ranks = makeInProcessGroup(n);
  ASSERT_TRUE(ranks.isOk());
  const std::vector<int64_t> counts{0, 1, 7, 1000, 4097};
  std::vector<std::vector<std::vector<float>>> got(static_cast<size_t>(n));
  auto value = [](int r, int64_t i, size_t round) {
    return 1.0f / static_cast<float>(1 + i + r) + 1e-3f * static_cast<float>(round) * static_cast<float>(r);
  };
  const auto st = onRanks(*ranks, [&](Communicator& c) -> Status {
    for (size_t round = 0; round < counts.size(); ++round) {
      std::vector<float> v(static_cast<size_t>(counts[round]));
      for (int64_t i = 0; i < counts[round]; ++i) v[static_cast<size_t>(i)] = value(c.rank(), i, round);
      LLMRT_RETURN_IF_ERROR(c.allReduceSum(v.data(), counts[round]));
      got[static_cast<size_t>(c.rank())].push_back(std::move(v));
    }
    return Status::ok();
  });
  for (const Status& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
  for (size_t round = 0; round < counts.size(); ++round)
    for (int64_t i = 0; i < counts[round]; ++i) {
      float want = 0.0f;
      for (int r = 0; r < n; ++r) want += value(r, i, round);
      for (int r = 0; r < n; ++r)
        ASSERT_EQ(got[static_cast<size_t>(r)][round][static_cast<size_t>(i)], want) << "rank " << r << " i " << i;
    }
}

TEST_P(InProcess, AllGatherBroadcastAndBarrier) {
  const int n = GetParam();
  auto ranks = makeInProcessGroup(n);
  ASSERT_TRUE(ranks.isOk());
  std::vector<std::vector<float>> gathered(static_cast<size_t>(n)), cast(static_cast<size_t>(n));
  const auto st = onRanks(*ranks, [&](Communicator& c) -> Status {
    const std::vector<float> mine{static_cast<float>(c.rank()), static_cast<float>(10 * c.rank())};
    std::vector<float> out(static_cast<size_t>(2 * n));
    LLMRT_RETURN_IF_ERROR(c.allGather(mine.data(), 2, out.data()));
    gathered[static_cast<size_t>(c.rank())] = out;
    std::vector<float> b{static_cast<float>(c.rank() + 100), 5.0f};
    LLMRT_RETURN_IF_ERROR(c.broadcast(b.data(), 2, n - 1));
    cast[static_cast<size_t>(c.rank())] = b;
    return c.barrier();
  });
  for (const Status& s : st) ASSERT_TRUE(s.isOk()) << s.toString();
  for (int r = 0; r < n; ++r) {
    for (int q = 0; q < n; ++q) {
      EXPECT_EQ(gathered[static_cast<size_t>(r)][static_cast<size_t>(2 * q)], static_cast<float>(q));
      EXPECT_EQ(gathered[static_cast<size_t>(r)][static_cast<size_t>(2 * q + 1)], static_cast<float>(10 * q));
    }
    EXPECT_EQ(cast[static_cast<size_t>(r)], (std::vector<float>{static_cast<float>(n - 1 + 100), 5.0f}));
  }
}

// A rank that fails aborts the group: the others, waiting in a collective, get its error instead
// of waiting forever; counts that differ between ranks are an error on every rank.
TEST_P(InProcess, AbortAndMismatchedCountsFailEveryRank) {
  const int n = GetParam();
  if (n < 2) GTEST_SKIP() << "needs two ranks";
  auto ranks = makeInProcessGroup(n);
  ASSERT_TRUE(ranks.isOk());
  auto st = onRanks(*ranks, [&](Communicator& c) -> Status {
    std::vector<float> v(4, 1.0f);
    return c.allReduceSum(v.data(), c.rank() == 0 ? 3 : 4);
  });
  for (const Status& s : st) {
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("different counts"), std::string::npos) << s.toString();
  }
  auto fresh = makeInProcessGroup(n);
  ASSERT_TRUE(fresh.isOk());
  st = onRanks(*fresh, [&](Communicator& c) -> Status {
    if (c.rank() == 1) {
      c.abort(internalError("rank 1: out of memory"));
      return internalError("rank 1: out of memory");
    }
    std::vector<float> v(4, 1.0f);
    return c.allReduceSum(v.data(), 4);
  });
  for (const Status& s : st) EXPECT_EQ(s.message(), "rank 1: out of memory");
  EXPECT_FALSE(makeInProcessGroup(0).isOk());
}

INSTANTIATE_TEST_SUITE_P(Ranks, InProcess, ::testing::Values(1, 2, 4, 7));

}  // namespace
}  // namespace llmrt
