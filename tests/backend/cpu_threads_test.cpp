// The CPU backend's thread count bounds every pool it computes on, OpenBLAS's included
// (OpenBLAS otherwise starts one thread per core, whatever --threads says).
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "core/thread_pool.h"

extern "C" int openblas_get_num_threads(void);

namespace llmrt {
namespace {

TEST(CpuBackendThreads, NumThreadsBoundsOpenBlasToo) {
  {
    CpuBackend one(1);
    EXPECT_EQ(openblas_get_num_threads(), 1);
  }
  {
    CpuBackend two(2);
    EXPECT_EQ(openblas_get_num_threads(), 2);
  }
  CpuBackend all(0);  // 0: every core this process may use (OpenBLAS may cap it at its build's maximum)
  EXPECT_GE(availableCores(), 1);
  EXPECT_GE(openblas_get_num_threads(), 1);
  EXPECT_LE(openblas_get_num_threads(), availableCores());
}

}  // namespace
}  // namespace llmrt
