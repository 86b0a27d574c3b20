// Cross-backend op tests in the style of ggml's test-backend-ops: each op runs
// on the CPU reference and on the CUDA backend with the same random inputs
// (odd sizes, block boundaries, GQA ratios, sliding windows, prefix-shared
// block tables) and the outputs are compared with per-op tolerances.
//
// In the 16-bit modes (bf16, fp16, and a bf16-weight / fp16-cache mix) the inputs that the
// CUDA backend stores in 16 bits (matrix weights, activations entering a matrix product, KV)
// are rounded to that type first, so both backends compute on the same values and the comparison
// stays tight: differences are float32 rounding and summation order only.
// Skipped without the CUDA backend or without a device.
#include "backend_ops_fixture.h"

namespace llmrt {
namespace {

// Weights go up through two pinned staging buffers of 32 MiB, converted chunk by chunk: a fused
// weight of three parts (f32, bf16, f16; unaligned data) spanning several chunks must arrive whole.
TEST_P(BackendOps, WeightUploadThroughStagingBuffers) {
  const int64_t cols = 1024;
  const int64_t rows[3] = {9000, 1000, 3};  // 36.9 MB of f32: more than one chunk in either dtype
  const DType dtypes[3] = {DType::kF32, DType::kBF16, DType::kF16};
  std::vector<std::vector<uint8_t>> storage;
  std::vector<TensorView> parts;
  std::vector<float> expect;
  for (int i = 0; i < 3; ++i) {
    const size_t n = static_cast<size_t>(rows[i] * cols);
    std::vector<float> v = randomVec(n, rng_);
    std::vector<uint8_t>& bytes = storage.emplace_back(n * dtypeSize(dtypes[i]) + 1);
    convertFromF32(v.data(), bytes.data() + 1, dtypes[i], n);  // +1: unaligned, as safetensors may be
    std::vector<float> back(n);
    convertToF32(bytes.data() + 1, dtypes[i], back.data(), n);
    roundTo(back, weights());
    expect.insert(expect.end(), back.begin(), back.end());
    parts.emplace_back(bytes.data() + 1, dtypes[i], Shape{rows[i], cols});
  }
  auto g = gpu_->loadWeight(parts, "staged");
  ASSERT_TRUE(g.isOk()) << g.status().toString();
  ASSERT_TRUE(gpu_->finishWeights().isOk());
  EXPECT_EQ(g->shape, (Shape{rows[0] + rows[1] + rows[2], cols}));
  EXPECT_EQ(g->dtype, weights());
  std::vector<float> got = get(*gpu_, *g);
  ASSERT_EQ(got.size(), expect.size());
  size_t differ = 0;
  for (size_t i = 0; i < got.size(); ++i) differ += got[i] != expect[i];
  EXPECT_EQ(differ, 0u) << "elements that differ from the host conversion";
}

// fp16 weights: a checkpoint value beyond fp16's range is refused with the weight's name (it would
// become infinity); the largest finite fp16 value loads exactly.
TEST_P(BackendOps, Fp16WeightsOutOfRangeAreRefused) {
  if (weights() != DType::kF16) GTEST_SKIP() << "weights are not fp16 in this mode";
  std::vector<float> ok{1.0f, -65504.0f, 65504.0f, 3.0e-5f}, bad{1.0f, 2.0f, -70000.0f, 4.0f};
  TensorView okv(ok.data(), DType::kF32, Shape{2, 2}), badv(bad.data(), DType::kF32, Shape{2, 2});
  std::vector<TensorView> ok_parts{okv}, bad_parts{badv};
  auto g = gpu_->loadWeight(ok_parts, "fine");
  ASSERT_TRUE(g.isOk()) << g.status().toString();
  ASSERT_TRUE(gpu_->finishWeights().isOk());
  std::vector<float> back = get(*gpu_, *g), want = ok;
  roundTo(want, DType::kF16);
  EXPECT_EQ(back, want);
  // Converted on the device: the upload reports the first weight that overflowed once it is done.
  ASSERT_TRUE(gpu_->loadWeight(ok_parts, "model.layers.2.mlp.up_proj.weight").isOk());
  ASSERT_TRUE(gpu_->loadWeight(bad_parts, "model.layers.3.mlp.down_proj.weight").isOk());
  ASSERT_TRUE(gpu_->loadWeight(bad_parts, "model.layers.4.mlp.down_proj.weight").isOk());
  const Status st = gpu_->finishWeights();
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.toString().find("model.layers.3.mlp.down_proj.weight"), std::string::npos) << st.toString();
  EXPECT_NE(st.toString().find("bfloat16"), std::string::npos) << st.toString();
  // The next upload starts clean.
  ASSERT_TRUE(gpu_->loadWeight(ok_parts, "again").isOk());
  EXPECT_TRUE(gpu_->finishWeights().isOk());
}

// Growable device buffers come from a stream-ordered pool whose figures the backend reports.
TEST_P(BackendOps, WorkspacePoolFiguresFollowTheBuffers) {
  const BackendMemoryStats before = gpu_->memoryStats();
  EXPECT_GT(before.device_total, 0u);
  EXPECT_GE(before.workspace_reserved, before.workspace_used);
  EXPECT_GE(before.workspace_used, uint64_t{32} << 20) << "the cuBLAS workspace comes from the pool";
  const int slot = 40;  // a slot no other test uses
  TensorView a = gpu_->scratch(slot, 1024, 1024);  // 4 MiB
  ASSERT_NE(a.data, nullptr);
  const BackendMemoryStats grown = gpu_->memoryStats();
  EXPECT_GE(grown.workspace_used, before.workspace_used + (uint64_t{4} << 20));
  EXPECT_GE(grown.workspace_reserved, grown.workspace_used);
  TensorView b = gpu_->scratch(slot, 4096, 1024);  // 16 MiB: the 4 MiB buffer goes back to the pool
  ASSERT_NE(b.data, nullptr);
  std::vector<float> ones(4096 * 1024, 1.0f);  // the new buffer works (and the stream has drained)
  ASSERT_TRUE(gpu_->copyFromHost(ones.data(), b).isOk());
  std::vector<float> back = get(*gpu_, b);
  EXPECT_EQ(back.front(), 1.0f);
  EXPECT_EQ(back.back(), 1.0f);
  const BackendMemoryStats regrown = gpu_->memoryStats();
  EXPECT_GE(regrown.workspace_used, before.workspace_used + (uint64_t{16} << 20));
  EXPECT_LT(regrown.workspace_used, before.workspace_used + (uint64_t{20} << 20)) << "the old buffer was released";
  EXPECT_GE(regrown.workspace_peak, regrown.workspace_used);
}

TEST_P(BackendOps, Embedding) {
  for (int64_t dim : {8, 77, 1024}) {
    const int64_t vocab = 1000;
    std::vector<float> table = randomVec(static_cast<size_t>(vocab * dim), rng_);
    roundTo(table, weights());
    auto [wc, wg] = weight(table, Shape{vocab, dim});
    std::vector<int32_t> ids{0, 999, 5, 5, 123, 998, 1, 500, 77};
    auto [oc, og] = put(0, static_cast<int64_t>(ids.size()), dim, {});
    beginPlain(static_cast<int64_t>(ids.size()), ids);
    cpu_->embedding(wc, oc);
    gpu_->embedding(wg, og);
    expectClose(get(*gpu_, og), get(*cpu_, oc), 0.0, 0.0, "embedding dim " + std::to_string(dim));
  }
}

TEST_P(BackendOps, RmsNorm) {
  for (int64_t rows : {1, 7, 33}) {
    // 8, 1028, 3072, 4096, 5120 and 8192 take the float4 kernel (1, 2, 3, 4, 5 and 8 float4 per
    // thread), 77 and 4099 the scalar one.
    for (int64_t cols : {8, 77, 1028, 3072, 4096, 4099, 5120, 8192}) {
      const std::string what = std::to_string(rows) + "x" + std::to_string(cols);
      std::vector<float> x = randomVec(static_cast<size_t>(rows * cols), rng_, 3.0f);
      std::vector<float> w = randomVec(static_cast<size_t>(cols), rng_);
      auto [wc, wg] = weight(w, Shape{cols});
      auto [xc, xg] = put(0, rows, cols, x);
      auto [oc, og] = put(1, rows, cols, {});
      cpu_->rmsNorm(xc, wc, 1e-5f, oc);
      gpu_->rmsNorm(xg, wg, 1e-5f, og);
      expectClose(get(*gpu_, og), get(*cpu_, oc), 2e-6, 1e-4, "rmsNorm " + what);
      expectClose(get(*gpu_, xg), x, 0.0, 0.0, "rmsNorm input " + what);
    }
  }
}

TEST_P(BackendOps, Linear) {
  struct Case {
    int64_t m, k, n;
    bool bias;
  };
  // m <= 2 (LLMRT_CUDA_GEMV_ROWS: up to 8) with k % 8 == 0 takes the GPU's matrix-vector kernel
  // (16-bit weights), others cuBLAS.
  for (const Case& c : {Case{1, 64, 3, false}, Case{5, 130, 257, true}, Case{37, 256, 512, false},
                        Case{3, 1000, 701, true}, Case{64, 4096, 96, false}, Case{1, 4096, 1001, true},
                        Case{2, 136, 7, true}, Case{4, 512, 333, false}, Case{6, 2048, 64, true},
                        Case{8, 1024, 129, true}, Case{7, 8, 5, false}}) {
    const std::string what = std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n);
    std::vector<float> x = randomVec(static_cast<size_t>(c.m * c.k), rng_);
    std::vector<float> w = randomVec(static_cast<size_t>(c.n * c.k), rng_, 0.05f);
    std::vector<float> b = randomVec(static_cast<size_t>(c.n), rng_);
    roundTo(w, weights());
    // With float32 activations (a float32 cache) x goes in as 16-bit hi + lo parts: unrounded.
    roundTo(x, gpu_->activationDtype());
    auto [wc, wg] = weight(w, Shape{c.n, c.k});
    auto [bc, bg] = weight(b, Shape{c.n});
    auto [xc, xg] = put(0, c.m, c.k, x);
    // The output is a column slice of a wider buffer (row stride != n), as qkv slices are.
    auto [oc_full, og_full] = put(1, c.m, c.n + 5, {});
    TensorView oc = columns(oc_full, 2, c.n), og = columns(og_full, 2, c.n);
    cpu_->linear(xc, wc, c.bias ? &bc : nullptr, oc);
    gpu_->linear(xg, wg, c.bias ? &bg : nullptr, og);
    expectClose(get(*gpu_, og), get(*cpu_, oc), 1e-5, 1e-4, "linear " + what);

    // linearAdd: the product added to a float32 residual (the o and down products' use), here a
    // column slice too; the columns beside it stay untouched.
    const std::vector<float> res = randomVec(static_cast<size_t>(c.m * (c.n + 3)), rng_, 4.0f);
    auto [rc_full, rg_full] = put(2, c.m, c.n + 3, res);
    TensorView rc = columns(rc_full, 1, c.n), rg = columns(rg_full, 1, c.n);
    cpu_->linearAdd(xc, wc, c.bias ? &bc : nullptr, rc);
    gpu_->linearAdd(xg, wg, c.bias ? &bg : nullptr, rg);
    const std::vector<float> got = get(*gpu_, rg_full), want = get(*cpu_, rc_full);
    expectClose(got, want, 1e-5, 1e-4, "linearAdd " + what);
    for (int64_t r = 0; r < c.m; ++r)
      for (int64_t j : {int64_t{0}, c.n + 1, c.n + 2}) {
        const size_t i = static_cast<size_t>(r * (c.n + 3) + j);
        EXPECT_EQ(got[i], res[i]) << "linearAdd wrote outside its columns: " << what;
      }
    // And into a whole, aligned buffer, as the model's residual stream is.
    auto [ac, ag] = put(3, c.m, c.n, randomVec(static_cast<size_t>(c.m * c.n), rng_, 4.0f));
    cpu_->linearAdd(xc, wc, c.bias ? &bc : nullptr, ac);
    gpu_->linearAdd(xg, wg, c.bias ? &bg : nullptr, ag);
    expectClose(get(*gpu_, ag), get(*cpu_, ac), 1e-5, 1e-4, "linearAdd (aligned) " + what);
  }
}

// linearAddNormLinear: a residual product, the RMSNorm of the residual, the next product (o ->
// gate|up, down -> q/k/v), against the CPU's three ops, whose second product takes the normed rows
// in the activation dtype. Small steps on the GPU (16-bit weights; up to 2 rows by default, up to
// 8 with LLMRT_CUDA_NORM_SPLIT=8 and LLMRT_CUDA_GEMV_ROWS=8) split the norm over two matrix-vector launches
// (LinearAddNormLinearIsTheThreeOpsToTheBit below).
TEST_P(BackendOps, LinearAddNormLinear) {
  const DType act = gpu_->activationDtype(), kF = DType::kF32;
  using Case = NormCase;
  // h 4104: 513 column groups (a second pass over the sums at one row), h 17000: 2,125 groups and a
  // wide residual product (two rows per warp); n 16400: a wide second product; h 100: never split
  // (h % 8 != 0).
  for (const Case& c : {Case{1, 64, 64, 3, false, false}, Case{1, 256, 4104, 1001, true, true},
                        Case{2, 136, 1024, 258, false, true}, Case{3, 8, 8, 10, true, false},
                        Case{4, 512, 4096, 64, true, false}, Case{8, 2048, 520, 130, false, true},
                        Case{5, 264, 136, 77, true, false}, Case{9, 256, 128, 66, true, false},
                        Case{1, 96, 100, 5, false, false}, Case{2, 40, 17000, 24, true, true},
                        Case{1, 64, 256, 16400, true, false}}) {
    const std::string what = c.name();
    const DType out_dtype = c.f32_out ? kF : act;
    const NormOperands o = normOperands(c, out_dtype);
    const auto [w1c, w1g] = o.w1;
    const auto [b1c, b1g] = o.b1;
    const auto [nwc, nwg] = o.norm_w;
    const auto [w2c, w2g] = o.w2;
    const auto [b2c, b2g] = o.b2;
    const auto [xc, xg] = o.x;
    const auto [rc, rg] = o.residual;
    const auto [nc, ng] = o.normed;
    const auto [oc, og] = o.out;
    gpu_->linearAddNormLinear(xg, w1g, c.bias ? &b1g : nullptr, rg, nwg, 1e-5f, ng, w2g, c.bias ? &b2g : nullptr, og);
    const std::vector<float> got = get(*gpu_, og), got_residual = get(*gpu_, rg);

    // CPU: the three ops, the normed rows rounded as the GPU's norm stores them in the activation
    // dtype: round(round(g * residual) * inv_rms).
    cpu_->linearAdd(xc, w1c, c.bias ? &b1c : nullptr, rc);
    const std::vector<float> residual = get(*cpu_, rc);
    expectClose(got_residual, residual, 1e-5, 1e-4, "linearAddNormLinear residual " + what);
    const std::vector<float>& g = o.g;
    std::vector<float> normed(residual.size());
    for (int64_t r = 0; r < c.m; ++r) {
      double ss = 0.0;
      for (int64_t j = 0; j < c.h; ++j) ss += static_cast<double>(residual[static_cast<size_t>(r * c.h + j)]) *
                                              residual[static_cast<size_t>(r * c.h + j)];
      const float inv = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(c.h)) + 1e-5f);
      for (int64_t j = 0; j < c.h; ++j) {
        const size_t i = static_cast<size_t>(r * c.h + j);
        normed[i] = rounded(rounded(g[static_cast<size_t>(j)] * residual[i], act) * inv, act);
      }
    }
    ASSERT_TRUE(cpu_->copyFromHost(normed.data(), nc).isOk());
    cpu_->linear(nc, w2c, c.bias ? &b2c : nullptr, oc);
    std::vector<float> want = get(*cpu_, oc);
    roundTo(want, out_dtype);
    // A normed feature may round the other way on the two backends (different summation orders).
    const double rel = act == kF ? 1e-5 : 6e-3, abs = act == kF ? 1e-4 : 2e-2;
    expectClose(got, want, rel, abs, "linearAddNormLinear " + what, out_dtype != kF ? halfStep(out_dtype) : 0.0);
  }
}

// On the GPU, linearAddNormLinear gives the bits of its three ops one after another (linearAdd,
// rmsNorm, linear) for any step, so whether it splits the norm over its products (16-bit weights;
// steps of up to LLMRT_CUDA_NORM_SPLIT rows, default 2, at most LLMRT_CUDA_GEMV_ROWS) never changes a token: the
// split product rounds each normed entry as the norm kernel stores it, from the same 1 / rms
// (the same order of the sums of squares).
TEST_P(BackendOps, LinearAddNormLinearIsTheThreeOpsToTheBit) {
  const DType act = gpu_->activationDtype();
  using Case = NormCase;
  // h 4104: 513 column groups (a second pass over the sums at one row and in rmsNorm's tile);
  // h 17000 with k 40: a wide residual product; 9 rows: the three ops on both sides.
  for (const Case& c : {Case{1, 512, 4096, 6144, false, false}, Case{2, 4096, 4096, 1000, true, false},
                        Case{1, 256, 4104, 1001, true, true}, Case{3, 136, 1024, 258, false, true},
                        Case{4, 512, 4096, 64, true, false}, Case{5, 264, 136, 77, true, false},
                        Case{6, 64, 2048, 520, false, false}, Case{7, 8, 8, 10, true, true},
                        Case{8, 2048, 520, 130, false, false}, Case{2, 40, 17000, 24, true, false},
                        Case{9, 256, 128, 66, true, false}}) {
    const std::string what = c.name();
    const NormOperands o = normOperands(c, c.f32_out ? DType::kF32 : act);
    const TensorView w1g = o.w1.second, b1g = o.b1.second, nwg = o.norm_w.second, w2g = o.w2.second,
                     b2g = o.b2.second, xg = o.x.second, rg = o.residual.second, ng = o.normed.second,
                     og = o.out.second;
    const std::vector<float>& res = o.res;
    gpu_->linearAddNormLinear(xg, w1g, c.bias ? &b1g : nullptr, rg, nwg, 1e-5f, ng, w2g, c.bias ? &b2g : nullptr, og);
    const std::vector<float> fused = get(*gpu_, og), fused_residual = get(*gpu_, rg);
    ASSERT_TRUE(gpu_->copyFromHost(res.data(), rg).isOk());
    gpu_->linearAdd(xg, w1g, c.bias ? &b1g : nullptr, rg);
    gpu_->rmsNorm(rg, nwg, 1e-5f, ng);
    gpu_->linear(ng, w2g, c.bias ? &b2g : nullptr, og);
    const std::vector<float> three = get(*gpu_, og), three_residual = get(*gpu_, rg);
    ASSERT_EQ(0, std::memcmp(fused_residual.data(), three_residual.data(), fused_residual.size() * sizeof(float)))
        << "residual " << what;
    for (size_t i = 0; i < fused.size(); ++i)
      ASSERT_EQ(0, std::memcmp(&fused[i], &three[i], sizeof(float)))
          << "output " << i << " of " << what << ": " << fused[i] << " vs " << three[i];
  }
}

// A row's linearAddNormLinear result is the same bits whatever rows share its step, for steps the
// matrix-vector kernels serve (split or not): up to the mode's gemv_rows (2 by default, 8 in the
// gemv8 modes). (Larger steps take cuBLAS, whose bits depend on the rows.)
TEST_P(BackendOps, LinearAddNormLinearRowsDoNotDependOnTheBatch) {
  if (!halfWeights()) GTEST_SKIP() << "float32 weights take cuBLAS, not the matrix-vector kernel";
  const int64_t k = 512, h = 4096, n = 6144, rows = std::clamp<int64_t>(GetParam().tuning.gemv_rows, 1, 8);
  std::vector<float> w1 = randomVec(static_cast<size_t>(h * k), rng_, 0.05f);
  std::vector<float> w2 = randomVec(static_cast<size_t>(n * h), rng_, 0.05f);
  auto [w1c, w1g] = weight(w1, Shape{h, k});
  auto [nwc, nwg] = weight(randomVec(static_cast<size_t>(h), rng_), Shape{h});
  auto [w2c, w2g] = weight(w2, Shape{n, h});
  auto [b2c, b2g] = weight(randomVec(static_cast<size_t>(n), rng_), Shape{n});
  const DType act = gpu_->activationDtype();
  const std::vector<float> x = randomVec(static_cast<size_t>(rows * k), rng_);
  const std::vector<float> res = randomVec(static_cast<size_t>(rows * h), rng_, 3.0f);
  auto run = [&](int64_t first, int64_t m) {
    auto [xc, xg] = put(0, m, k, std::vector<float>(x.begin() + first * k, x.begin() + (first + m) * k), act);
    auto [rc, rg] = put(1, m, h, std::vector<float>(res.begin() + first * h, res.begin() + (first + m) * h));
    auto [nc, ng] = put(2, m, h, {}, act);
    auto [oc, og] = put(3, m, n, {}, act);
    gpu_->linearAddNormLinear(xg, w1g, nullptr, rg, nwg, 1e-5f, ng, w2g, &b2g, og);
    return get(*gpu_, og);
  };
  for (int64_t m = 1; m <= rows; ++m) {
    const std::vector<float> batch = run(0, m);
    for (int64_t r = 0; r < m; ++r) {
      const std::vector<float> alone = run(r, 1);
      ASSERT_EQ(0, std::memcmp(alone.data(), batch.data() + r * n, static_cast<size_t>(n) * sizeof(float)))
          << "row " << r << " of " << m << " differs from the row alone";
    }
  }
}

TEST_P(BackendOps, GatherSiluMul) {
  const int64_t rows = 13, cols = 333;
  auto [xc, xg] = put(0, rows, cols, randomVec(static_cast<size_t>(rows * cols), rng_));
  std::vector<int64_t> idx{12, 0, 5, 5, 7};
  auto [gc, gg] = put(2, static_cast<int64_t>(idx.size()), cols, {});
  beginPlain(rows, {}, idx);
  cpu_->gatherLogitRows(xc, gc);
  gpu_->gatherLogitRows(xg, gg);
  expectClose(get(*gpu_, gg), get(*cpu_, gc), 0.0, 0.0, "gatherLogitRows");

  for (const int64_t inter : {173, 344}) {  // the scalar kernel, then the 8-wide one
    auto [guc, gug] = put(3, rows, 2 * inter, randomVec(static_cast<size_t>(rows * 2 * inter), rng_, 4.0f));
    auto [sc, sg] = put(4, rows, inter, {});
    cpu_->siluMul(guc, sc);
    gpu_->siluMul(gug, sg);
    expectClose(get(*gpu_, sg), get(*cpu_, sc), 1e-6, 1e-5, "siluMul inter " + std::to_string(inter));
  }
}

TEST_P(BackendOps, Argmax) {
  // Few rows of a large vocabulary are split over several CTAs per row (50000: 13 slices of 3847
  // ids, so the tie at 777 / 49000 spans slices), small vocabularies and many rows take one CTA per
  // row; the answers are the same.
  for (const auto& [rows, vocab] : {std::pair<int64_t, int64_t>{6, 50000}, {6, 3000}, {130, 9000}}) {
    SCOPED_TRACE(std::to_string(rows) + " rows of " + std::to_string(vocab));
    std::vector<float> logits = randomVec(static_cast<size_t>(rows * vocab), rng_, 3.0f);
    auto at = [&](int64_t r, int64_t i) -> float& { return logits[static_cast<size_t>(r * vocab + i)]; };
    at(1, 777) = 100.0f;  // a tie: the lower id wins
    at(1, vocab - 1000) = 100.0f;
    at(2, vocab - 1) = 1e9f;  // the last id
    at(3, 12) = NAN;          // reported as -1
    for (int64_t i = 0; i < vocab; ++i) at(4, i) = -INFINITY;
    at(5, vocab / 2) = INFINITY;  // reported as -1
    auto [lc, lg] = put(0, rows, vocab, logits);
    std::vector<int32_t> ids(static_cast<size_t>(rows), -7);
    ASSERT_TRUE(gpu_->argmaxRows(lg, ids.data()).isOk());
    std::vector<int32_t> want(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r)
      want[static_cast<size_t>(r)] = static_cast<int32_t>(
          std::max_element(logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab) - (logits.begin() + r * vocab));
    want[1] = 777;
    want[2] = static_cast<int32_t>(vocab - 1);
    want[3] = want[4] = want[5] = -1;
    EXPECT_EQ(ids, want);
  }
  EXPECT_FALSE(cpu_->hasArgmax());
}

// deviceStepSeconds: each step's device time, from beginStep to its results going back, is added
// when the results are read; a step whose results never go back is counted at the next read.
TEST_P(BackendOps, DeviceStepTimeAddsUp) {
  EXPECT_EQ(cpu_->deviceStepSeconds(), 0.0);
  const int64_t n = 64, k = 4096, vocab = 8192;
  std::vector<float> w = randomVec(static_cast<size_t>(vocab * k), rng_);
  auto [wc, wg] = put(0, vocab, k, w);
  auto [xc, xg] = put(1, n, k, randomVec(static_cast<size_t>(n * k), rng_));
  auto [oc, og] = put(2, n, vocab, {});
  std::vector<int32_t> ids(static_cast<size_t>(n));
  const double t0 = gpu_->deviceStepSeconds();
  beginPlain(n);
  gpu_->linear(xg, wg, nullptr, og);  // a step with no results read
  beginPlain(n);
  gpu_->linear(xg, wg, nullptr, og);
  EXPECT_EQ(gpu_->deviceStepSeconds(), t0);  // nothing read yet
  ASSERT_TRUE(gpu_->argmaxRows(og, ids.data()).isOk());
  const double t1 = gpu_->deviceStepSeconds();
  EXPECT_GT(t1, t0);
  EXPECT_LT(t1 - t0, 1.0);  // two 64 x 8192 x 4096 products and an argmax
  beginPlain(n);
  gpu_->linear(xg, wg, nullptr, og);
  ASSERT_TRUE(gpu_->argmaxRows(og, ids.data()).isOk());
  EXPECT_GT(gpu_->deviceStepSeconds(), t1);
}

// The products' operands in 16 bits (activationDtype() with 16-bit weights and cache: the weights'
// type): normed rows, product inputs and outputs, SiLU·mul. The CPU computes in float32 on the
// same rounded inputs; a 16-bit output differs from it by its rounding (half a step).
TEST_P(BackendOps, HalfActivations) {
  if (gpu_->activationDtype() == DType::kF32) GTEST_SKIP() << "activations are float32 in this mode";
  const DType kB = gpu_->activationDtype(), kF = DType::kF32;
  ASSERT_EQ(kB, weights());
  const double step = halfStep(kB);
  const std::string B = std::string(dtypeName(kB));
  for (int64_t rows : {1, 5, 40}) {
    for (int64_t cols : {64, 4104}) {
      const std::string what = std::to_string(rows) + "x" + std::to_string(cols);
      std::vector<float> x = randomVec(static_cast<size_t>(rows * cols), rng_, 3.0f);
      auto [wc, wg] = weight(randomVec(static_cast<size_t>(cols), rng_), Shape{cols});
      auto [xc, xg] = put(0, rows, cols, x);
      auto [oc, og] = put(1, rows, cols, {}, kB);
      cpu_->rmsNorm(xc, wc, 1e-5f, oc);
      gpu_->rmsNorm(xg, wg, 1e-5f, og);
      expectClose(get(*gpu_, og), get(*cpu_, oc), 3e-3, 2e-2, "rmsNorm -> " + B + " " + what, step);
    }
  }
  struct Case {
    int64_t m, k, n;
    bool bias;
  };
  // m <= 8: the matrix-vector kernel (16-bit x read directly); larger m: cuBLASLt with a 16-bit or f32 output.
  for (const Case& c : {Case{1, 64, 3, false}, Case{3, 1000, 701, true}, Case{8, 1024, 129, true},
                        Case{37, 256, 512, true}, Case{64, 4096, 96, false}, Case{130, 136, 72, true}}) {
    for (DType xd : {kB, kF}) {
      for (DType od : {kB, kF}) {
        const std::string what = std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n) +
                                 " x " + std::string(dtypeName(xd)) + " out " + std::string(dtypeName(od));
        std::vector<float> x = randomVec(static_cast<size_t>(c.m * c.k), rng_);
        std::vector<float> w = randomVec(static_cast<size_t>(c.n * c.k), rng_, 0.05f);
        roundTo(x, kB);
        roundTo(w, kB);
        auto [wc, wg] = weight(w, Shape{c.n, c.k});
        auto [bc, bg] = weight(randomVec(static_cast<size_t>(c.n), rng_), Shape{c.n});
        auto [xc, xg] = put(0, c.m, c.k, x, xd);
        auto [oc_full, og_full] = put(1, c.m, c.n + 8, {}, od);  // a column slice, as q/k/v are
        TensorView oc = columns(oc_full, 8, c.n), og = columns(og_full, 8, c.n);
        cpu_->linear(xc, wc, c.bias ? &bc : nullptr, oc);
        gpu_->linear(xg, wg, c.bias ? &bg : nullptr, og);
        expectClose(get(*gpu_, og), get(*cpu_, oc), od == kB ? 3e-3 : 1e-5, od == kB ? 2e-2 : 1e-4,
                    "linear " + what, od == kB ? step : 0.0);
      }
    }
  }
  const int64_t rows = 13;
  for (const int64_t inter : {173, 344}) {  // the scalar kernel, then the 8-wide one
    auto [guc, gug] = put(3, rows, 2 * inter, randomVec(static_cast<size_t>(rows * 2 * inter), rng_, 4.0f), kB);
    auto [sc, sg] = put(4, rows, inter, {}, kB);
    cpu_->siluMul(guc, sc);
    gpu_->siluMul(gug, sg);
    expectClose(get(*gpu_, sg), get(*cpu_, sc), 3e-3, 4e-2, "siluMul " + B + " -> " + B + ", inter " + std::to_string(inter),
                step);
  }
  // An operand of another dtype fails the backend with a message naming the op.
  const int64_t cols = 173;
  TensorView bad = gpu_->scratch(6, rows, cols, kB);
  auto [nwc, nwg] = weight(randomVec(static_cast<size_t>(cols * cols), rng_), Shape{cols, cols});
  gpu_->linearAdd(gpu_->scratch(5, rows, cols, kB), nwg, nullptr, bad);  // the residual must be float32
  std::vector<float> sink(static_cast<size_t>(rows * cols));
  const Status st = gpu_->copyToHost(gpu_->scratch(4, rows, cols), sink.data());
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.toString().find("linearAdd residual"), std::string::npos) << st.toString();
}

// A recorded step (CUDA graph) replayed with new step inputs computes what the
// CPU computes op by op for those inputs.
TEST_P(BackendOps, RecordedStepReplaysWithNewInputs) {
  if (!gpu_->canRecord()) GTEST_SKIP() << "recording disabled (LLMRT_CUDA_DISABLE)";
  const int64_t hd = 64, heads = 8, kv_heads = 2, tpb = 16, blocks = 64, dim = heads * hd, vocab = 97;
  const int64_t Q = heads * hd, KV = kv_heads * hd, T = 3;
  KvPoolGeometry g{blocks, 1, kv_heads, hd, tpb, DType::kF32};
  fill(g);
  std::vector<float> table = randomVec(static_cast<size_t>(vocab * dim), rng_);
  roundTo(table, weights());
  auto [ec, eg] = weight(table, Shape{vocab, dim});
  std::vector<float> wq = randomVec(static_cast<size_t>((Q + 2 * KV) * dim), rng_, 0.05f);
  roundTo(wq, weights());
  auto [wc, wg] = weight(wq, Shape{Q + 2 * KV, dim});
  std::vector<float> inv(static_cast<size_t>(hd / 2));
  for (size_t i = 0; i < inv.size(); ++i) inv[i] = std::pow(10000.0f, -2.0f * static_cast<float>(i) / hd);

  auto runBody = [&](Backend& b, TensorView e, TensorView w, int64_t slot0) {
    TensorView x = b.scratch(slot0, T, dim), qkv = b.scratch(slot0 + 1, T, Q + 2 * KV);
    TensorView out = b.scratch(slot0 + 2, T, Q);
    b.embedding(e, x);
    b.linear(x, w, nullptr, qkv);
    b.ropeWriteKv(0, columns(qkv, 0, Q), columns(qkv, Q, KV), columns(qkv, Q + KV, KV), hd);
    b.attention(0, columns(qkv, 0, Q), heads, 0, 1.0f / 8.0f, out);
    return out;
  };
  // Buffers exist before recording (a recorded step must not allocate).
  gpu_->scratch(4, T, dim);
  gpu_->scratch(5, T, Q + 2 * KV);
  gpu_->scratch(6, T, Q);
  // Three steps with the same layout (3 decode rows, 1 RoPE table, key splits unchanged),
  // different ids, positions, slots and block tables: the first records, the others replay.
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    std::vector<int32_t> ids{static_cast<int32_t>(5 + step), 90, static_cast<int32_t>(step)};
    std::vector<int64_t> kv_lens{100 + step, 37 + 5 * step, 60};
    std::vector<std::vector<int32_t>> tables(3);
    std::vector<int32_t> pos;
    std::vector<int64_t> slots, logit_rows{0, 1, 2};
    std::vector<StepSeq> seqs;
    int32_t next = static_cast<int32_t>(step * 7);
    for (int64_t s = 0; s < T; ++s) {
      for (int64_t b = 0; b < (kv_lens[s] + tpb - 1) / tpb; ++b) tables[s].push_back(next++ % blocks);
      const int64_t p = kv_lens[s] - 1;
      pos.push_back(static_cast<int32_t>(p));
      slots.push_back(static_cast<int64_t>(tables[s][static_cast<size_t>(p / tpb)]) * tpb + p % tpb);
      seqs.push_back(StepSeq{s, 1, kv_lens[s], tables[s], 0});
    }
    StepInputs in;
    in.token_ids = ids;
    in.positions = pos;
    in.slots = slots;
    in.seqs = seqs;
    in.logit_rows = logit_rows;
    in.rope_inv_freq = inv;
    in.rotary_dim = hd;
    begin(in);
    TensorView oc = runBody(*cpu_, ec, wc, 4);
    gpu_->recordOrReplay(42, [&] { runBody(*gpu_, eg, wg, 4); });
    const TensorView og = gpu_->scratch(6, T, Q);  // the body's output buffer (not assigned on replay)
    // Rounding of x to 16 bits before the product differs (CPU: float32), so compare loosely.
    const double tol = halfWeights() ? 2e-2 : 1e-5;
    expectClose(get(*gpu_, og), get(*cpu_, oc), tol, halfWeights() ? 0.05 : 1e-4, "recorded attention output");
  }
}

// A recording that cannot complete (here: a buffer must grow inside it) costs no
// step: the body runs op by op, the backend stays usable, recording turns off.
TEST_P(BackendOps, FailedRecordingRunsTheStepOpByOp) {
  if (!gpu_->canRecord()) GTEST_SKIP() << "recording disabled (LLMRT_CUDA_DISABLE)";
  const int64_t rows = 3, cols = 4099;
  beginPlain(rows);
  auto [wc, wg] = weight(randomVec(static_cast<size_t>(cols), rng_), Shape{cols});
  auto [xc, xg] = put(0, rows, cols, randomVec(static_cast<size_t>(rows * cols), rng_));
  auto [yc, yg] = put(1, rows, cols, {});
  cpu_->rmsNorm(xc, wc, 1e-5f, yc);
  TensorView grown;
  gpu_->recordOrReplay(7, [&] {
    grown = gpu_->scratch(11, rows, cols);  // slot 11 is new: it must be allocated
    gpu_->rmsNorm(xg, wg, 1e-5f, yg);
  });
  EXPECT_FALSE(gpu_->canRecord());
  ASSERT_NE(grown.data, nullptr);
  expectClose(get(*gpu_, yg), get(*cpu_, yc), 2e-6, 1e-4, "rmsNorm after a failed recording");
}

// A backend destroyed with work in flight — a weight upload converted on the device and never
// finished (staging buffers held), an offload copy on the copy stream, a recorded graph, a result
// never waited for — gives all its device memory back: the second of two such lifetimes leaves as
// much free as the first (which also loads the kernels) did. Run under compute-sanitizer, this is
// the teardown's memcheck / leak check.
TEST_P(BackendOps, DestroyedWithWorkInFlightReturnsItsMemory) {
#if LLMRT_HAVE_CUDA
  const int64_t vocab = 4096, dim = 4096, n = 4;
  const DType src = weights() == DType::kF32 ? DType::kBF16 : DType::kF32;  // converted on the device
  std::vector<float> table_f32 = randomVec(static_cast<size_t>(vocab * dim), rng_);
  std::vector<uint8_t> table_src(table_f32.size() * dtypeSize(src));
  convertFromF32(table_f32.data(), table_src.data(), src, table_f32.size());
  const std::vector<int32_t> ids{0, 17, 4095, 17}, pos{0, 1, 2, 3}, table{0};
  const std::vector<int64_t> slots(static_cast<size_t>(n), -1);
  const StepSeq seq{0, n, n, table, 0};
  auto lifetime = [&](uint64_t free_before) {
    CudaBackendOptions o;
    o.weight_dtype = GetParam().weight;
    o.kv_dtype = GetParam().kv;
    o.tuning = GetParam().tuning;
    auto r = createCudaBackend(o);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    std::unique_ptr<Backend> b = std::move(*r);
    ASSERT_TRUE(b->allocateKvPools(KvPoolGeometry{64, 2, 2, 64, 16, gpuKv()}, 8).isOk());
    const std::vector<KvBlockCopy> offload{
        {KvPool::kPrimary, 3, KvPool::kSecondary, 1, KvBlockCopy::kWholeBlock}};
    ASSERT_TRUE(b->copyKvBlocks(offload).isOk());
    std::vector<TensorView> parts{TensorView(table_src.data(), src, Shape{vocab, dim})};
    auto e = b->loadWeight(parts, "model.embed_tokens.weight");  // (no finishWeights)
    ASSERT_TRUE(e.isOk()) << e.status().toString();
    TensorView out = b->scratch(0, n, dim);
    ASSERT_NE(out.data, nullptr);
    StepInputs in;
    in.token_ids = ids;
    in.positions = pos;
    in.slots = slots;
    in.seqs = std::span<const StepSeq>(&seq, 1);
    ASSERT_TRUE(b->beginStep(in).isOk());
    for (int i = 0; i < 2; ++i) b->recordOrReplay(5, [&] { b->embedding(*e, out); });  // records, replays
    auto ticket = b->argmaxRowsAsync(out);
    ASSERT_TRUE(ticket.isOk()) << ticket.status().toString();
    // The weight (32 MiB at least) and the cuBLAS workspace (32 MiB) are out of the free memory.
    EXPECT_LE(b->freeMemoryBytes() + (uint64_t{48} << 20), free_before);
  };
  lifetime(gpu_->freeMemoryBytes());
  if (HasFatalFailure()) return;
  const uint64_t free1 = gpu_->freeMemoryBytes();
  lifetime(free1);
  if (HasFatalFailure()) return;
  const uint64_t free2 = gpu_->freeMemoryBytes();
  // (Allocation granularity and driver bookkeeping: a few MiB; what a lifetime holds is far more.)
  EXPECT_LE(free1 - std::min(free1, free2), uint64_t{8} << 20)
      << "a destroyed backend kept " << (free1 - std::min(free1, free2)) << " bytes of device memory";
#endif
}

INSTANTIATE_TEST_SUITE_P(Modes, BackendOps,
                         ::testing::Values(Mode{DType::kF32, DType::kF32, "f32"},
                                           Mode{DType::kBF16, DType::kF32, "bf16_weights"},
                                           Mode{DType::kBF16, DType::kBF16, "bf16"},
                                           Mode{DType::kF16, DType::kF16, "fp16"},
                                           Mode{DType::kBF16, DType::kF16, "bf16_weights_fp16_kv"},
                                           Mode{DType::kF16, DType::kF32, "fp16_weights"}),
                         [](const ::testing::TestParamInfo<Mode>& i) { return std::string(i.param.name); });
// The same ops with one CUDA switch moved (in-process: each mode builds its own backend): the
// scalar RMSNorm / RoPE kernels, RoPE and the KV write as two kernels beside attention, the
// matrix-vector kernel for products of up to 8 rows with the norm split over up to 8 rows or none.
INSTANTIATE_TEST_SUITE_P(Tuned, BackendOps,
                         ::testing::Values(tuned("bf16_no_vector_ops", [](CudaTuning& t) { t.vector_ops = false; }),
                                           tuned("bf16_no_rope_fusion", [](CudaTuning& t) { t.rope_fusion = false; }),
                                           tuned("bf16_gemv8", [](CudaTuning& t) { t.gemv_rows = 8; }),
                                           tuned("bf16_gemv8_norm_split8",
                                                 [](CudaTuning& t) { t.gemv_rows = t.norm_split_rows = 8; }),
                                           tuned("bf16_gemv8_no_norm_split",
                                                 [](CudaTuning& t) {
                                                   t.gemv_rows = 8;
                                                   t.norm_split_rows = 0;
                                                 })),
                         [](const ::testing::TestParamInfo<Mode>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace llmrt
