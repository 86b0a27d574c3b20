// Cross-backend op tests in the style of ggml's test-backend-ops: each op runs
// on the CPU reference and on the CUDA backend with the same random inputs
// (odd sizes, block boundaries, GQA ratios, sliding windows, prefix-shared
// block tables) and the outputs are compared with per-op tolerances.
//
// In the bf16 modes the inputs that the CUDA backend stores in bf16 (matrix
// weights, activations entering a matrix product, KV) are rounded to bf16
// first, so both backends compute on the same values and the comparison
// stays tight: differences are float32 rounding and summation order only.
// Skipped without the CUDA backend or without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#if LLMRT_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace llmrt {
namespace {

struct Mode {
  DType weight;
  DType kv;
  const char* name;
};

std::vector<float> randomVec(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

void roundToBf16(std::vector<float>& v) {
  for (float& x : v) x = bf16ToF32(f32ToBf16(x));
}

// Relative L2 error and largest absolute difference; NaN anywhere fails.
void expectClose(const std::vector<float>& got, const std::vector<float>& ref, double rel_tol, double abs_tol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double num = 0.0, den = 0.0, max_abs = 0.0;
  size_t worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << what << ": NaN (unwritten?) at " << i;
    const double d = static_cast<double>(got[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
    if (std::abs(d) > max_abs) {
      max_abs = std::abs(d);
      worst = i;
    }
  }
  const double rel = std::sqrt(num / std::max(den, 1e-30));
  EXPECT_LE(rel, rel_tol) << what << ": relative L2 error";
  EXPECT_LE(max_abs, abs_tol) << what << ": max |diff| at " << worst << " (got " << got[worst] << ", ref "
                              << ref[worst] << ")";
}

TensorView columns(const TensorView& t, int64_t begin, int64_t n) {
  TensorView v = t;
  v.data = t.as<float>() + begin;
  v.shape = Shape{t.shape[0], n};
  v.strides = Shape{t.strides[0], 1};
  return v;
}

class BackendOps : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
#if !LLMRT_HAVE_CUDA
    GTEST_SKIP() << "this build has no CUDA backend (LLMRT_CUDA=OFF)";
#else
    if (cudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device found";
    CudaBackendOptions o;
    o.weight_dtype = GetParam().weight;
    o.kv_dtype = GetParam().kv;
    auto r = createCudaBackend(o);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    gpu_ = std::move(*r);
    cpu_ = std::make_unique<CpuBackend>(2);
#endif
  }

  bool bf16Weights() const { return GetParam().weight == DType::kBF16; }
  bool bf16Kv() const { return GetParam().kv == DType::kBF16 && GetParam().weight == DType::kBF16; }

  // Scratch `slot` of both backends, filled with `data` (GPU side poisoned first when data is empty).
  std::pair<TensorView, TensorView> put(int slot, int64_t rows, int64_t cols,
                                        const std::vector<float>& data) {
    TensorView c = cpu_->scratch(slot, rows, cols), g = gpu_->scratch(slot, rows, cols);
    std::vector<float> fill = data.empty() ? std::vector<float>(static_cast<size_t>(rows * cols), NAN) : data;
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
  std::pair<TensorView, TensorView> weight(const std::vector<float>& data, Shape shape) {
    TensorView host(const_cast<float*>(data.data()), DType::kF32, shape);
    std::vector<TensorView> parts{host};
    auto c = cpu_->loadWeight(parts, "w"), g = gpu_->loadWeight(parts, "w");
    EXPECT_TRUE(c.isOk() && g.isOk());
    return {*c, *g};
  }

  std::mt19937 rng_{1234};
  std::unique_ptr<Backend> cpu_, gpu_;
};

TEST_P(BackendOps, Embedding) {
  for (int64_t dim : {8, 77, 1024}) {
    const int64_t vocab = 1000;
    std::vector<float> table = randomVec(static_cast<size_t>(vocab * dim), rng_);
    if (bf16Weights()) roundToBf16(table);
    auto [wc, wg] = weight(table, Shape{vocab, dim});
    std::vector<int32_t> ids{0, 999, 5, 5, 123, 998, 1, 500, 77};
    auto [oc, og] = put(0, static_cast<int64_t>(ids.size()), dim, {});
    cpu_->embedding(wc, ids, oc);
    gpu_->embedding(wg, ids, og);
    expectClose(get(*gpu_, og), get(*cpu_, oc), 0.0, 0.0, "embedding dim " + std::to_string(dim));
  }
}

TEST_P(BackendOps, RmsNormAndAddRmsNorm) {
  for (int64_t rows : {1, 7, 33}) {
    for (int64_t cols : {8, 77, 4099}) {
      const std::string what = std::to_string(rows) + "x" + std::to_string(cols);
      std::vector<float> x = randomVec(static_cast<size_t>(rows * cols), rng_, 3.0f);
      std::vector<float> res = randomVec(static_cast<size_t>(rows * cols), rng_);
      std::vector<float> w = randomVec(static_cast<size_t>(cols), rng_);
      auto [wc, wg] = weight(w, Shape{cols});
      auto [xc, xg] = put(0, rows, cols, x);
      auto [oc, og] = put(1, rows, cols, {});
      cpu_->rmsNorm(xc, wc, 1e-5f, oc);
      gpu_->rmsNorm(xg, wg, 1e-5f, og);
      expectClose(get(*gpu_, og), get(*cpu_, oc), 2e-6, 1e-4, "rmsNorm " + what);

      auto [rc, rg] = put(2, rows, cols, res);
      auto [o2c, o2g] = put(3, rows, cols, {});
      cpu_->addRmsNorm(rc, xc, wc, 1e-6f, o2c);
      gpu_->addRmsNorm(rg, xg, wg, 1e-6f, o2g);
      expectClose(get(*gpu_, rg), get(*cpu_, rc), 0.0, 0.0, "addRmsNorm residual " + what);
      expectClose(get(*gpu_, o2g), get(*cpu_, o2c), 2e-6, 1e-4, "addRmsNorm out " + what);
    }
  }
}

TEST_P(BackendOps, Linear) {
  struct Case {
    int64_t m, k, n;
    bool bias;
  };
  for (const Case& c : {Case{1, 64, 3, false}, Case{5, 130, 257, true}, Case{37, 256, 512, false},
                        Case{3, 1000, 701, true}, Case{64, 4096, 96, false}}) {
    const std::string what = std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n);
    std::vector<float> x = randomVec(static_cast<size_t>(c.m * c.k), rng_);
    std::vector<float> w = randomVec(static_cast<size_t>(c.n * c.k), rng_, 0.05f);
    std::vector<float> b = randomVec(static_cast<size_t>(c.n), rng_);
    if (bf16Weights()) {
      roundToBf16(x);
      roundToBf16(w);
    }
    auto [wc, wg] = weight(w, Shape{c.n, c.k});
    auto [bc, bg] = weight(b, Shape{c.n});
    auto [xc, xg] = put(0, c.m, c.k, x);
    // The output is a column slice of a wider buffer (row stride != n), as qkv slices are.
    auto [oc_full, og_full] = put(1, c.m, c.n + 5, {});
    TensorView oc = columns(oc_full, 2, c.n), og = columns(og_full, 2, c.n);
    cpu_->linear(xc, wc, c.bias ? &bc : nullptr, oc);
    gpu_->linear(xg, wg, c.bias ? &bg : nullptr, og);
    expectClose(get(*gpu_, og), get(*cpu_, oc), 1e-5, 1e-4, "linear " + what);
  }
}

TEST_P(BackendOps, AddGatherSiluMul) {
  const int64_t rows = 13, cols = 333;
  auto [xc, xg] = put(0, rows, cols, randomVec(static_cast<size_t>(rows * cols), rng_));
  auto [yc, yg] = put(1, rows, cols, randomVec(static_cast<size_t>(rows * cols), rng_));
  cpu_->add(xc, yc);
  gpu_->add(xg, yg);
  expectClose(get(*gpu_, xg), get(*cpu_, xc), 0.0, 0.0, "add");

  std::vector<int64_t> idx{12, 0, 5, 5, 7};
  auto [gc, gg] = put(2, static_cast<int64_t>(idx.size()), cols, {});
  cpu_->gatherRows(xc, idx, gc);
  gpu_->gatherRows(xg, idx, gg);
  expectClose(get(*gpu_, gg), get(*cpu_, gc), 0.0, 0.0, "gatherRows");

  const int64_t inter = 173;
  auto [guc, gug] = put(3, rows, 2 * inter, randomVec(static_cast<size_t>(rows * 2 * inter), rng_, 4.0f));
  auto [sc, sg] = put(4, rows, inter, {});
  cpu_->siluMul(guc, sc);
  gpu_->siluMul(gug, sg);
  expectClose(get(*gpu_, sg), get(*cpu_, sc), 1e-6, 1e-5, "siluMul");
}

TEST_P(BackendOps, Rope) {
  struct Case {
    int64_t head_dim, rotary_dim, q_heads, k_heads;
    float scaling;
  };
  for (const Case& c : {Case{64, 64, 8, 2, 1.0f}, Case{128, 128, 4, 4, 1.0f}, Case{64, 32, 4, 1, 1.25f},
                        Case{8, 8, 8, 4, 1.0f}}) {
    const int64_t n = 23, Q = c.q_heads * c.head_dim, KV = c.k_heads * c.head_dim;
    std::vector<float> inv(static_cast<size_t>(c.rotary_dim / 2));
    for (size_t i = 0; i < inv.size(); ++i)
      inv[i] = 1.0f / std::pow(10000.0f, static_cast<float>(2 * i) / static_cast<float>(c.rotary_dim));
    std::vector<int32_t> pos(static_cast<size_t>(n));
    std::uniform_int_distribution<int32_t> pd(0, 5000);
    for (int32_t& p : pos) p = pd(rng_);
    auto [qkvc, qkvg] = put(0, n, Q + 2 * KV, randomVec(static_cast<size_t>(n * (Q + 2 * KV)), rng_));
    const RopeParams params{inv.data(), c.rotary_dim, c.scaling};
    // Two calls over row ranges, as the model makes per sequence.
    for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 9}, {9, n}}) {
      cpu_->rope(columns(qkvc, 0, Q), columns(qkvc, Q, KV), c.head_dim, pos, b, e, params);
      gpu_->rope(columns(qkvg, 0, Q), columns(qkvg, Q, KV), c.head_dim, pos, b, e, params);
    }
    expectClose(get(*gpu_, qkvg), get(*cpu_, qkvc), 1e-6, 1e-5,
                "rope head_dim " + std::to_string(c.head_dim));
  }
}

TEST_P(BackendOps, WriteKvAndCopyBlocks) {
  KvPoolGeometry g{12, 3, 2, 64, 16, DType::kF32};
  KvPoolGeometry gg = g;
  gg.dtype = bf16Kv() ? DType::kBF16 : DType::kF32;
  ASSERT_TRUE(cpu_->allocateKvPools(g, 4).isOk());
  ASSERT_TRUE(gpu_->allocateKvPools(gg, 4).isOk());
  const int64_t KV = g.num_kv_heads * g.head_dim, slots_n = 37;
  std::vector<int64_t> slots(static_cast<size_t>(slots_n));
  std::vector<int64_t> all(static_cast<size_t>(g.num_blocks * g.tokens_per_block));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng_);
  std::copy(all.begin(), all.begin() + slots_n, slots.begin());
  for (int64_t layer = 0; layer < g.num_layers; ++layer) {
    std::vector<float> kv = randomVec(static_cast<size_t>(slots_n * (2 * KV + 3)), rng_);
    if (bf16Kv()) roundToBf16(kv);
    auto [c, gv] = put(0, slots_n, 2 * KV + 3, kv);
    cpu_->writeKv(layer, columns(c, 1, KV), columns(c, 1 + KV, KV), slots);
    gpu_->writeKv(layer, columns(gv, 1, KV), columns(gv, 1 + KV, KV), slots);
  }
  std::vector<KvBlockCopy> copies{
      {KvPoolKind::kPrimary, 3, KvPoolKind::kSecondary, 1, -1},
      {KvPoolKind::kSecondary, 1, KvPoolKind::kPrimary, 10, -1},
      {KvPoolKind::kPrimary, 5, KvPoolKind::kPrimary, 11, 7},
      {KvPoolKind::kPrimary, 6, KvPoolKind::kSecondary, 2, 9},
      {KvPoolKind::kPrimary, 0, KvPoolKind::kPrimary, 9, 16},
  };
  ASSERT_TRUE(cpu_->copyKvBlocks(copies).isOk());
  ASSERT_TRUE(gpu_->copyKvBlocks(copies).isOk());
  const size_t per = static_cast<size_t>(g.elementsPerBlock());
  std::vector<float> a(per), b(per);
  for (KvPoolKind pool : {KvPoolKind::kPrimary, KvPoolKind::kSecondary}) {
    const int32_t n = pool == KvPoolKind::kPrimary ? static_cast<int32_t>(g.num_blocks) : 4;
    for (int32_t blk = 0; blk < n; ++blk) {
      ASSERT_TRUE(cpu_->readKvBlock(pool, blk, a.data()).isOk());
      ASSERT_TRUE(gpu_->readKvBlock(pool, blk, b.data()).isOk());
      expectClose(b, a, 0.0, 0.0,
                  std::string(pool == KvPoolKind::kPrimary ? "primary" : "secondary") + " block " +
                      std::to_string(blk));
    }
  }
  EXPECT_FALSE(gpu_->readKvBlock(KvPoolKind::kSecondary, 4, b.data()).isOk());
}

TEST_P(BackendOps, PagedAttention) {
  struct Case {
    int64_t head_dim, heads, kv_heads, tpb, window;
  };
  const std::vector<Case> cases{
      {64, 8, 8, 16, 0},   {64, 8, 8, 16, 7}, {128, 16, 4, 16, 0}, {128, 16, 4, 32, 20}, {64, 32, 4, 16, 0},
      {64, 32, 4, 16, 16}, {8, 8, 4, 16, 0},  {256, 4, 2, 16, 0},  {96, 12, 3, 8, 0},
  };
  for (const Case& c : cases) {
    const std::string what = "hd " + std::to_string(c.head_dim) + " heads " + std::to_string(c.heads) + "/" +
                             std::to_string(c.kv_heads) + " tpb " + std::to_string(c.tpb) + " window " +
                             std::to_string(c.window);
    SCOPED_TRACE(what);
    const int64_t num_blocks = 40, layers = 2, KV = c.kv_heads * c.head_dim, Q = c.heads * c.head_dim;
    KvPoolGeometry g{num_blocks, layers, c.kv_heads, c.head_dim, c.tpb, DType::kF32};
    KvPoolGeometry gg = g;
    gg.dtype = bf16Kv() ? DType::kBF16 : DType::kF32;
    ASSERT_TRUE(cpu_->allocateKvPools(g, 0).isOk());
    ASSERT_TRUE(gpu_->allocateKvPools(gg, 0).isOk());
    // Every slot of both layers gets a K/V row.
    const int64_t n_slots = num_blocks * c.tpb;
    std::vector<int64_t> slots(static_cast<size_t>(n_slots));
    std::iota(slots.begin(), slots.end(), 0);
    for (int64_t layer = 0; layer < layers; ++layer) {
      std::vector<float> k = randomVec(static_cast<size_t>(n_slots * KV), rng_);
      std::vector<float> v = randomVec(static_cast<size_t>(n_slots * KV), rng_);
      if (bf16Kv()) {
        roundToBf16(k);
        roundToBf16(v);
      }
      auto [kc, kg] = put(0, n_slots, KV, k);
      auto [vc, vg] = put(1, n_slots, KV, v);
      cpu_->writeKv(layer, kc, vc, slots);
      gpu_->writeKv(layer, kg, vg, slots);
    }
    // Sequences: prefill, long decode, a chunk after a shared cached prefix, decode at a block
    // boundary, a short chunk crossing one. Block tables are random blocks; the chunked
    // sequence shares its first two blocks with the prefill one (prefix reuse).
    std::vector<int32_t> perm(static_cast<size_t>(num_blocks));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng_);
    struct S {
      int64_t q_len, kv_len;
    };
    const std::vector<S> specs{{37, 37}, {1, 100}, {21, 70}, {1, 2 * c.tpb}, {5, 2 * c.tpb + 1}};
    std::vector<std::vector<int32_t>> tables;
    size_t next = 0;
    for (const S& s : specs) {
      std::vector<int32_t> t;
      for (int64_t b = 0; b < (s.kv_len + c.tpb - 1) / c.tpb; ++b) t.push_back(perm[next++ % perm.size()]);
      tables.push_back(t);
    }
    tables[2][0] = tables[0][0];
    tables[2][1] = tables[0][1];
    std::vector<AttentionSeq> seqs;
    int64_t rows = 0;
    for (size_t i = 0; i < specs.size(); ++i) {
      seqs.push_back(AttentionSeq{rows, specs[i].q_len, specs[i].kv_len, tables[i].data(), c.window});
      rows += specs[i].q_len;
    }
    std::vector<float> q = randomVec(static_cast<size_t>(rows * (Q + 2 * KV)), rng_);
    auto [qc, qg] = put(2, rows, Q + 2 * KV, q);
    auto [oc, og] = put(3, rows, Q, {});
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    for (int64_t layer = 0; layer < layers; ++layer) {
      cpu_->attention(layer, columns(qc, 0, Q), c.heads, seqs, scale, oc);
      gpu_->attention(layer, columns(qg, 0, Q), c.heads, seqs, scale, og);
      expectClose(get(*gpu_, og), get(*cpu_, oc), 1e-5, 5e-5, "attention layer " + std::to_string(layer));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, BackendOps,
                         ::testing::Values(Mode{DType::kF32, DType::kF32, "f32"},
                                           Mode{DType::kBF16, DType::kF32, "bf16_weights"},
                                           Mode{DType::kBF16, DType::kBF16, "bf16"}),
                         [](const ::testing::TestParamInfo<Mode>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace llmrt
