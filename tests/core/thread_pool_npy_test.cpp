#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <vector>

#include "core/npy.h"
#include "core/thread_pool.h"

namespace llmrt {
namespace {

TEST(ThreadPool, CoversRangeExactlyOnce) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.numThreads(), 3);
  for (int64_t n : {0, 1, 2, 7, 1000}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallelFor(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << " " << i;
  }
  // Many back-to-back jobs (exercises the generation handshake).
  std::atomic<int64_t> sum{0};
  for (int r = 0; r < 2000; ++r)
    pool.parallelFor(10, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 20000);
}

TEST(Npy, WriteThenReadRoundTrips) {
  std::string path = ::testing::TempDir() + "/llmrt_npy_test.npy";
  std::vector<float> data(2 * 3);
  std::iota(data.begin(), data.end(), -1.5f);
  ASSERT_TRUE(writeNpyF32(path, data.data(), Shape{2, 3}).isOk());
  auto back = readNpy(path);
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  EXPECT_EQ(back->shape, (Shape{2, 3}));
  EXPECT_EQ(back->data, data);
  ASSERT_TRUE(writeNpyF32(path, data.data(), Shape{6}).isOk());
  back = readNpy(path);
  ASSERT_TRUE(back.isOk());
  EXPECT_EQ(back->shape, (Shape{6}));
  const uint8_t junk[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 200, 0, 0, 0};
  auto bad = parseNpy(junk, sizeof(junk), "junk.npy");
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("junk.npy"), std::string::npos);
}

}  // namespace
}  // namespace llmrt
