// The two backends of a cross-backend op test (backend_ops_fixture.h, backend_arch_ops_test.cpp,
// backend_moe_test.cpp): the CPU reference and the CUDA backend, and the helpers that give both
// the same operands. A fixture derives from ::testing::TestWithParam<Mode> and from TwoBackends,
// and calls setUpBackends from its SetUp.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "llmrt/engine_config.h"
#include "op_test_util.h"
#if LLMRT_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace llmrt::optest {

class TwoBackends {
 protected:
  // The CUDA backend in these dtypes and switches, and the CPU reference on 2 threads, each with
  // a small KV pool (the GPU's in `gpu_kv`) so that steps can begin in tests that use no KV.
  // Skips the test without the CUDA backend or without a device.
  void setUpBackends(DType weight, DType kv, const CudaTuning& tuning, DType gpu_kv) {
#if !LLMRT_HAVE_CUDA
    (void)weight, (void)kv, (void)tuning, (void)gpu_kv;
    GTEST_SKIP() << "this build has no CUDA backend (LLMRT_CUDA=OFF)";
#else
    if (cudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device found";
    CudaBackendOptions o;
    o.weight_dtype = weight;
    o.kv_dtype = kv;
    o.tuning = tuning;
    auto r = createCudaBackend(o);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    gpu_ = std::move(*r);
    cpu_ = std::make_unique<CpuBackend>(2);
    ASSERT_TRUE(cpu_->allocateKvPools(KvPoolGeometry{4, 1, 1, 8, 16, DType::kF32}, 0).isOk());
    ASSERT_TRUE(gpu_->allocateKvPools(KvPoolGeometry{4, 1, 1, 8, 16, gpu_kv}, 0).isOk());
#endif
  }

  // Begins the same step on both backends.
  void begin(const StepInputs& in) {
    Status c = cpu_->beginStep(in), g = gpu_->beginStep(in);
    ASSERT_TRUE(c.isOk()) << c.toString();
    ASSERT_TRUE(g.isOk()) << g.toString();
  }

  // Scratch `slot` of both backends filled with `data` (NaN when empty), the GPU's of gpu_dtype;
  // both get the data rounded to gpu_dtype.
  std::pair<TensorView, TensorView> put(int slot, int64_t rows, int64_t cols, const std::vector<float>& data,
                                        DType gpu_dtype = DType::kF32) {
    TensorView c = cpu_->scratch(slot, rows, cols), g = gpu_->scratch(slot, rows, cols, gpu_dtype);
    EXPECT_NE(g.data, nullptr);
    std::vector<float> fill = data.empty() ? std::vector<float>(static_cast<size_t>(rows * cols), NAN) : data;
    roundTo(fill, gpu_dtype);
    EXPECT_TRUE(cpu_->copyFromHost(fill.data(), c).isOk());
    EXPECT_TRUE(gpu_->copyFromHost(fill.data(), g).isOk());
    return {c, g};
  }
  std::vector<float> get(Backend& b, const TensorView& v) {
    std::vector<float> out(static_cast<size_t>(v.shape[0] * v.shape[v.shape.rank() - 1]));
    Status s = b.copyToHost(v, out.data());
    EXPECT_TRUE(s.isOk()) << s.toString();
    return out;
  }
  // A float32 weight on both backends (matrices in the GPU's weight dtype: pass values rounded to
  // it); the data is kept alive, as the CPU backend may use it in place.
  std::pair<TensorView, TensorView> weight(const std::vector<float>& data, Shape shape) {
    const std::vector<float>& kept = kept_weights_.emplace_back(data);
    TensorView host(const_cast<float*>(kept.data()), DType::kF32, shape);
    std::vector<TensorView> parts{host};
    auto c = cpu_->loadWeight(parts, "w"), g = gpu_->loadWeight(parts, "w");
    EXPECT_TRUE(c.isOk() && g.isOk());
    EXPECT_TRUE(gpu_->finishWeights().isOk());
    return {*c, *g};
  }

  std::deque<std::vector<float>> kept_weights_;
  std::unique_ptr<Backend> cpu_, gpu_;
};

}  // namespace llmrt::optest
