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
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "op_test_util.h"
#include "llmrt/engine_config.h"
#if LLMRT_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace llmrt {
namespace {

struct Mode {
  DType weight;
  DType kv;
  const char* name;
  CudaTuning tuning = {};  // the backend's switches: the variants device_check once ran with variables set
};

void PrintTo(const Mode& m, std::ostream* os) { *os << m.name; }

// bf16 with one switch of CudaTuning moved from its default (each the peer of a fast path).
Mode tuned(const char* name, void (*set)(CudaTuning&)) {
  Mode m{DType::kBF16, DType::kBF16, name};
  set(m.tuning);
  return m;
}

using optest::columns;
using optest::randomVec;
using optest::roundTo;

float rounded(float v, DType dt) {
  std::vector<float> one{v};
  roundTo(one, dt);
  return one[0];
}

// Relative L2 error and largest absolute difference beyond |ref| * elem_rel (16-bit outputs
// pass half a step: rounding alone moves a value by up to |v| * 2^-8 in bf16, 2^-11 in fp16);
// NaN anywhere fails.
double halfStep(DType dt) { return dt == DType::kBF16 ? 1.0 / 256 : (dt == DType::kF16 ? 1.0 / 2048 : 0.0); }

void expectClose(const std::vector<float>& got, const std::vector<float>& ref, double rel_tol, double abs_tol,
                 const std::string& what, double elem_rel = 0.0) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double num = 0.0, den = 0.0, max_abs = 0.0;
  size_t worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << what << ": NaN (unwritten?) at " << i;
    const double d = static_cast<double>(got[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
    const double beyond = std::abs(d) - std::abs(static_cast<double>(ref[i])) * elem_rel;
    if (beyond > max_abs) {
      max_abs = beyond;
      worst = i;
    }
  }
  const double rel = std::sqrt(num / std::max(den, 1e-30));
  EXPECT_LE(rel, rel_tol) << what << ": relative L2 error";
  EXPECT_LE(max_abs, abs_tol) << what << ": max |diff| (beyond |ref| * " << elem_rel << ") at " << worst << " (got " << got[worst] << ", ref "
                              << ref[worst] << ")";
}

// Two RoPE tables of `half` frequencies each (as dynamic NTK gives per sequence): base^(-2i / rotary)
// and the same times 0.37.
std::vector<float> twoRopeTables(int64_t rotary_dim, float base) {
  const int64_t half = rotary_dim / 2;
  std::vector<float> inv(static_cast<size_t>(2 * half));
  for (int64_t i = 0; i < half; ++i) {
    inv[static_cast<size_t>(i)] = 1.0f / std::pow(base, static_cast<float>(2 * i) / static_cast<float>(rotary_dim));
    inv[static_cast<size_t>(half + i)] = inv[static_cast<size_t>(i)] * 0.37f;
  }
  return inv;
}

// A step's inputs over the given rows and sequences (the spans must outlive it).
StepInputs ropeStep(const std::vector<int32_t>& ids, const std::vector<int32_t>& pos, const std::vector<int64_t>& slots,
                    const std::vector<StepSeq>& seqs, const std::vector<float>& inv, int64_t rotary_dim, float scaling) {
  StepInputs in;
  in.token_ids = ids;
  in.positions = pos;
  in.slots = slots;
  in.seqs = seqs;
  in.rope_inv_freq = inv;
  in.rotary_dim = rotary_dim;
  in.rope_attention_scaling = scaling;
  return in;
}

// A linearAddNormLinear case: x [m, k], residual [m, h], out [m, n].
struct NormCase {
  int64_t m, k, h, n;
  bool bias, f32_out;
  std::string name() const {
    return std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(h) + "x" + std::to_string(n) +
           (bias ? " bias" : "") + (f32_out ? " f32 out" : "");
  }
};

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
    o.tuning = GetParam().tuning;
    auto r = createCudaBackend(o);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    gpu_ = std::move(*r);
    cpu_ = std::make_unique<CpuBackend>(2);
    // A small pool, so steps can begin in tests that use no KV.
    ASSERT_TRUE(cpu_->allocateKvPools(KvPoolGeometry{4, 1, 1, 8, 16, DType::kF32}, 0).isOk());
    ASSERT_TRUE(gpu_->allocateKvPools(KvPoolGeometry{4, 1, 1, 8, 16, gpuKv()}, 0).isOk());
#endif
  }

  // What the GPU stores the cache in (a float32-weight backend always uses float32).
  DType gpuKv() const { return GetParam().weight == DType::kF32 ? DType::kF32 : GetParam().kv; }

  // Begins the same step on both backends.
  void begin(const StepInputs& in) {
    Status c = cpu_->beginStep(in), g = gpu_->beginStep(in);
    ASSERT_TRUE(c.isOk()) << c.toString();
    ASSERT_TRUE(g.isOk()) << g.toString();
  }
  // A step of `n` rows in one sequence (no KV written, positions 0..n-1) picking `logit_rows`.
  void beginPlain(int64_t n, std::vector<int32_t> ids = {}, std::vector<int64_t> logit_rows = {}) {
    plain_ids_ = ids.empty() ? std::vector<int32_t>(static_cast<size_t>(n), 0) : std::move(ids);
    plain_pos_.resize(static_cast<size_t>(n));
    std::iota(plain_pos_.begin(), plain_pos_.end(), 0);
    plain_slots_.assign(static_cast<size_t>(n), -1);
    plain_logits_ = std::move(logit_rows);
    plain_table_.assign(static_cast<size_t>((n + 15) / 16), 0);
    plain_seq_ = StepSeq{0, n, n, plain_table_, 0};
    StepInputs in;
    in.token_ids = plain_ids_;
    in.positions = plain_pos_;
    in.slots = plain_slots_;
    in.seqs = std::span<const StepSeq>(&plain_seq_, 1);
    in.logit_rows = plain_logits_;
    begin(in);
  }
  // Allocates pools of geometry g (the GPU's in its KV dtype) and writes random K/V rows to
  // every slot of every layer of `blocks` (empty: every block) on both backends.
 public:
  void fill(const KvPoolGeometry& g, std::vector<int32_t> blocks = {}) {
    KvPoolGeometry gg = g;
    gg.dtype = gpuKv();
    ASSERT_TRUE(cpu_->allocateKvPools(g, 0).isOk());
    Status allocated = gpu_->allocateKvPools(gg, 0);
    ASSERT_TRUE(allocated.isOk()) << allocated.toString();
    if (blocks.empty()) {
      blocks.resize(static_cast<size_t>(g.num_blocks));
      std::iota(blocks.begin(), blocks.end(), 0);
    }
    const int64_t tpb = g.tokens_per_block, n_slots = static_cast<int64_t>(blocks.size()) * tpb;
    const int64_t KV = g.num_kv_heads * g.head_dim;
    std::vector<int64_t> slots;
    slots.reserve(static_cast<size_t>(n_slots));
    for (int32_t b : blocks)
      for (int64_t t = 0; t < tpb; ++t) slots.push_back(int64_t{b} * tpb + t);
    std::vector<int32_t> ids(static_cast<size_t>(n_slots), 0), pos(static_cast<size_t>(n_slots), 0);
    const StepSeq seq{0, n_slots, n_slots, blocks, 0};
    StepInputs in;
    in.token_ids = ids;
    in.positions = pos;
    in.slots = slots;
    in.seqs = std::span<const StepSeq>(&seq, 1);
    begin(in);
    for (int64_t layer = 0; layer < g.num_layers; ++layer) {
      std::vector<float> k = randomVec(static_cast<size_t>(n_slots * KV), rng_);
      std::vector<float> v = randomVec(static_cast<size_t>(n_slots * KV), rng_);
      roundTo(k, gpuKv());
      roundTo(v, gpuKv());
      auto [kc, kg] = put(0, n_slots, KV, k);
      auto [vc, vg] = put(1, n_slots, KV, v);
      cpu_->ropeWriteKv(layer, columns(kc, 0, 0), kc, vc, g.head_dim);
      gpu_->ropeWriteKv(layer, columns(kg, 0, 0), kg, vg, g.head_dim);
    }
  }

 protected:
  std::vector<int32_t> plain_ids_, plain_pos_, plain_table_;
  std::vector<int64_t> plain_slots_, plain_logits_;
  StepSeq plain_seq_;

  DType weights() const { return GetParam().weight; }
  bool halfWeights() const { return weights() != DType::kF32; }
  bool halfKv() const { return gpuKv() != DType::kF32; }

  // Scratch `slot` of both backends, filled with `data` (GPU side poisoned first when data is empty).
  // With a 16-bit gpu_dtype the GPU view is 16-bit and both backends get the data rounded to it.
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
  std::pair<TensorView, TensorView> weight(const std::vector<float>& data, Shape shape) {
    // The CPU backend may use a float32 weight in place: keep the data alive for the test.
    const std::vector<float>& kept = kept_weights_.emplace_back(data);
    TensorView host(const_cast<float*>(kept.data()), DType::kF32, shape);
    std::vector<TensorView> parts{host};
    auto c = cpu_->loadWeight(parts, "w"), g = gpu_->loadWeight(parts, "w");
    EXPECT_TRUE(c.isOk() && g.isOk());
    EXPECT_TRUE(gpu_->finishWeights().isOk());
    return {*c, *g};
  }

  // A linearAddNormLinear case's operands on both backends: random weights rounded to the weights'
  // type (the CPU computes on the GPU's values), biases and norm weights; x [m, k] in the activation
  // dtype, the float32 residual (kept in `res`), the normed scratch and out (slots 0-3).
  struct NormOperands {
    std::pair<TensorView, TensorView> w1, b1, norm_w, w2, b2, x, residual, normed, out;
    std::vector<float> g, res;  // the norm's weights, the residual's initial rows
  };
  NormOperands normOperands(const NormCase& c, DType out_dtype) {
    const DType act = gpu_->activationDtype();
    NormOperands o;
    std::vector<float> w1 = randomVec(static_cast<size_t>(c.h * c.k), rng_, 0.05f);
    std::vector<float> w2 = randomVec(static_cast<size_t>(c.n * c.h), rng_, 0.05f);
    roundTo(w1, weights());
    roundTo(w2, weights());
    o.g = randomVec(static_cast<size_t>(c.h), rng_);
    o.w1 = weight(w1, Shape{c.h, c.k});
    o.b1 = weight(randomVec(static_cast<size_t>(c.h), rng_), Shape{c.h});
    o.norm_w = weight(o.g, Shape{c.h});
    o.w2 = weight(w2, Shape{c.n, c.h});
    o.b2 = weight(randomVec(static_cast<size_t>(c.n), rng_), Shape{c.n});
    o.x = put(0, c.m, c.k, randomVec(static_cast<size_t>(c.m * c.k), rng_), act);  // (put rounds both copies)
    o.res = randomVec(static_cast<size_t>(c.m * c.h), rng_, 3.0f);
    o.residual = put(1, c.m, c.h, o.res);
    o.normed = put(2, c.m, c.h, {}, act);
    o.out = put(3, c.m, c.n, {}, out_dtype);
    return o;
  }

  std::mt19937 rng_{1234};
  std::deque<std::vector<float>> kept_weights_;  // weights the CPU backend uses in place
  std::unique_ptr<Backend> cpu_, gpu_;
};

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

TEST_P(BackendOps, RopeWriteKv) {
  struct Case {
    int64_t head_dim, rotary_dim, q_heads, k_heads;
    float scaling;
  };
  // All but the last case take the CUDA float4 kernel; rotary 6 (an odd half) takes the scalar one.
  for (const Case& c : {Case{64, 64, 8, 2, 1.0f}, Case{128, 128, 4, 4, 1.0f}, Case{64, 32, 4, 1, 1.25f},
                        Case{8, 8, 8, 4, 1.0f}, Case{64, 0, 2, 2, 1.0f}, Case{12, 6, 3, 1, 1.0f}}) {
    const std::string what = "head_dim " + std::to_string(c.head_dim) + " rotary " + std::to_string(c.rotary_dim);
    SCOPED_TRACE(what);
    const int64_t n = 23, Q = c.q_heads * c.head_dim, KV = c.k_heads * c.head_dim, tpb = 8, blocks = 6;
    KvPoolGeometry g{blocks, 2, c.k_heads, c.head_dim, tpb, DType::kF32};
    KvPoolGeometry gg = g;
    gg.dtype = gpuKv();
    ASSERT_TRUE(cpu_->allocateKvPools(g, 0).isOk());
    ASSERT_TRUE(gpu_->allocateKvPools(gg, 0).isOk());
    // Two RoPE tables (as dynamic NTK gives per sequence): sequence 0 uses table 1, sequence 1 table 0.
    const std::vector<float> inv = twoRopeTables(c.rotary_dim, 10000.0f);
    std::vector<int32_t> ids(static_cast<size_t>(n), 0), pos(static_cast<size_t>(n));
    std::uniform_int_distribution<int32_t> pd(0, 5000);
    for (int32_t& p : pos) p = pd(rng_);
    // Random distinct slots, a few rows not written (-1).
    std::vector<int64_t> all(static_cast<size_t>(blocks * tpb)), slots(static_cast<size_t>(n));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng_);
    std::copy(all.begin(), all.begin() + n, slots.begin());
    slots[3] = -1;
    slots[17] = -1;
    std::vector<int32_t> table(static_cast<size_t>(blocks));
    std::iota(table.begin(), table.end(), 0);
    std::vector<StepSeq> seqs{StepSeq{0, 9, 9, table, 1}, StepSeq{9, n - 9, n - 9, table, 0}};
    begin(ropeStep(ids, pos, slots, seqs, inv, c.rotary_dim, c.scaling));
    std::vector<float> qkv = randomVec(static_cast<size_t>(n * (Q + 2 * KV)), rng_);
    roundTo(qkv, gpuKv());  // values the 16-bit pool stores exactly when not rotated
    auto [qkvc, qkvg] = put(0, n, Q + 2 * KV, qkv);
    for (int64_t layer : {1, 0}) {
      cpu_->ropeWriteKv(layer, columns(qkvc, 0, Q), columns(qkvc, Q, KV), columns(qkvc, Q + KV, KV), c.head_dim);
      gpu_->ropeWriteKv(layer, columns(qkvg, 0, Q), columns(qkvg, Q, KV), columns(qkvg, Q + KV, KV), c.head_dim);
      // (Layer 0 rotates the already rotated rows again: the second call checks the same math.)
    }
    expectClose(get(*gpu_, qkvg), get(*cpu_, qkvc), 1e-6, 1e-5, "rotated q/k");
    // The pools: rotated keys rounded to the cache's 16-bit type.
    const size_t per = static_cast<size_t>(g.elementsPerBlock());
    std::vector<float> a(per), b(per);
    for (int32_t blk = 0; blk < blocks; ++blk) {
      ASSERT_TRUE(cpu_->readKvBlock(KvPool::kPrimary, blk, a.data()).isOk());
      ASSERT_TRUE(gpu_->readKvBlock(KvPool::kPrimary, blk, b.data()).isOk());
      expectClose(b, a, halfKv() ? 4e-3 : 1e-6, halfKv() ? 0.05 : 1e-5, "pool block " + std::to_string(blk),
                  halfStep(gpuKv()));
    }
  }
}

TEST_P(BackendOps, WriteKvAndCopyBlocks) {
  KvPoolGeometry g{12, 3, 2, 64, 16, DType::kF32};
  KvPoolGeometry gg = g;
  gg.dtype = gpuKv();
  ASSERT_TRUE(cpu_->allocateKvPools(g, 4).isOk());
  ASSERT_TRUE(gpu_->allocateKvPools(gg, 4).isOk());
  const int64_t KV = g.num_kv_heads * g.head_dim, slots_n = 37;
  std::vector<int64_t> slots(static_cast<size_t>(slots_n));
  std::vector<int64_t> all(static_cast<size_t>(g.num_blocks * g.tokens_per_block));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng_);
  std::copy(all.begin(), all.begin() + slots_n, slots.begin());
  std::vector<int32_t> ids(static_cast<size_t>(slots_n), 0), pos(static_cast<size_t>(slots_n), 0);
  std::vector<int32_t> table(static_cast<size_t>(g.num_blocks));
  std::iota(table.begin(), table.end(), 0);
  const StepSeq seq{0, slots_n, slots_n, table, 0};
  StepInputs in;
  in.token_ids = ids;
  in.positions = pos;
  in.slots = slots;
  in.seqs = std::span<const StepSeq>(&seq, 1);
  begin(in);  // rotary_dim 0: the rows are written as they are
  for (int64_t layer = 0; layer < g.num_layers; ++layer) {
    std::vector<float> kv = randomVec(static_cast<size_t>(slots_n * (2 * KV + 3)), rng_);
    roundTo(kv, gpuKv());
    auto [c, gv] = put(0, slots_n, 2 * KV + 3, kv);
    cpu_->ropeWriteKv(layer, columns(c, 1, 0), columns(c, 1, KV), columns(c, 1 + KV, KV), g.head_dim);
    gpu_->ropeWriteKv(layer, columns(gv, 1, 0), columns(gv, 1, KV), columns(gv, 1 + KV, KV), g.head_dim);
  }
  std::vector<KvBlockCopy> copies{
      {KvPool::kPrimary, 3, KvPool::kSecondary, 1, -1},
      {KvPool::kSecondary, 1, KvPool::kPrimary, 10, -1},
      {KvPool::kPrimary, 5, KvPool::kPrimary, 11, 7},
      {KvPool::kPrimary, 6, KvPool::kSecondary, 2, 9},
      {KvPool::kPrimary, 0, KvPool::kPrimary, 9, 16},
  };
  ASSERT_TRUE(cpu_->copyKvBlocks(copies).isOk());
  ASSERT_TRUE(gpu_->copyKvBlocks(copies).isOk());
  const size_t per = static_cast<size_t>(g.elementsPerBlock());
  std::vector<float> a(per), b(per);
  for (KvPool pool : {KvPool::kPrimary, KvPool::kSecondary}) {
    const int32_t n = pool == KvPool::kPrimary ? static_cast<int32_t>(g.num_blocks) : 4;
    for (int32_t blk = 0; blk < n; ++blk) {
      ASSERT_TRUE(cpu_->readKvBlock(pool, blk, a.data()).isOk());
      ASSERT_TRUE(gpu_->readKvBlock(pool, blk, b.data()).isOk());
      expectClose(b, a, 0.0, 0.0,
                  std::string(pool == KvPool::kPrimary ? "primary" : "secondary") + " block " +
                      std::to_string(blk));
    }
  }
  EXPECT_FALSE(gpu_->readKvBlock(KvPool::kSecondary, 4, b.data()).isOk());
  // A list with one bad id is refused whole (nothing enqueued) and the backend keeps working.
  std::vector<KvBlockCopy> bad{{KvPool::kPrimary, 4, KvPool::kSecondary, 0, -1},
                               {KvPool::kSecondary, 4, KvPool::kPrimary, 1, -1}};
  EXPECT_FALSE(gpu_->copyKvBlocks(bad).isOk());
  ASSERT_TRUE(gpu_->readKvBlock(KvPool::kSecondary, 0, b.data()).isOk());
  ASSERT_TRUE(cpu_->readKvBlock(KvPool::kSecondary, 0, a.data()).isOk());
  expectClose(b, a, 0.0, 0.0, "secondary block 0 after a refused list");
}

// Fills every slot of every layer of both backends' pools with random K/V rows.
void fillPools(BackendOps& t, const KvPoolGeometry& g);
// Pools of `layers` layers (geometry into *g) holding sequences of kv_lens plus `spare` blocks,
// filled as fillPools does, and a table of distinct random blocks for each sequence. With
// first_block > 0 the pools have that many blocks more in front, left unwritten, and the tables
// use only blocks from first_block on.
std::vector<std::vector<int32_t>> fillWithTables(BackendOps& t, const std::vector<int64_t>& kv_lens, int64_t spare,
                                                 int64_t layers, int64_t kv_heads, int64_t head_dim, int64_t tpb,
                                                 std::mt19937& rng, KvPoolGeometry* g, int64_t first_block = 0);

// A sequence of a step: q_len new rows ending at kv_len; `slot` false: its rows write no KV (a
// padded graph row).
struct SeqSpec {
  int64_t q_len, kv_len;
  bool slot = true;
};
std::vector<int64_t> kvLens(const std::vector<SeqSpec>& specs) {
  std::vector<int64_t> lens;
  for (const SeqSpec& sp : specs) lens.push_back(sp.kv_len);
  return lens;
}
// The packed rows of a step over `specs` in `tables`: token ids 0, positions, cache slots (-1 unless
// `write` and the sequence's slot flag), and sequence i on RoPE table i % 2 when `two_tables`.
// The StepSeqs point into `tables`.
struct StepRows {
  std::vector<StepSeq> seqs;
  std::vector<int32_t> ids, pos;
  std::vector<int64_t> slots;
  int64_t rows = 0;
};
StepRows stepRows(const std::vector<SeqSpec>& specs, const std::vector<std::vector<int32_t>>& tables, int64_t tpb,
                  bool write, bool two_tables) {
  StepRows s;
  for (size_t i = 0; i < specs.size(); ++i) {
    const SeqSpec& sp = specs[i];
    s.seqs.push_back(StepSeq{s.rows, sp.q_len, sp.kv_len, tables[i], two_tables ? static_cast<int32_t>(i % 2) : 0});
    for (int64_t r = 0; r < sp.q_len; ++r) {
      const int64_t at = sp.kv_len - sp.q_len + r;
      s.ids.push_back(0);
      s.pos.push_back(static_cast<int32_t>(at));
      s.slots.push_back(write && sp.slot ? int64_t{tables[i][static_cast<size_t>(at / tpb)]} * tpb + at % tpb : -1);
    }
    s.rows += sp.q_len;
  }
  return s;
}

TEST_P(BackendOps, PagedAttention) {
  struct Case {
    int64_t head_dim, heads, kv_heads, tpb, window;
  };
  const std::vector<Case> cases{
      {64, 8, 8, 16, 0},   {64, 8, 8, 16, 7}, {128, 16, 4, 16, 0}, {128, 16, 4, 32, 20}, {64, 32, 4, 16, 0},
      {64, 32, 4, 16, 16}, {8, 8, 4, 16, 0},  {256, 4, 2, 16, 0},  {96, 12, 3, 8, 0},    {128, 32, 8, 16, 0},
      {128, 32, 8, 16, 100}, {64, 16, 1, 16, 0},  // GQA group 16: the CUDA-core decode kernel on 16 bits too
      {64, 71, 1, 16, 0}, {128, 66, 2, 16, 24}, {256, 40, 2, 16, 0},  // large groups (Falcon-7B: 71): CTA chunks
  };
  for (const Case& c : cases) {
    // Mixed: prefill, long decode, a chunk after a shared cached prefix, decode at a block
    // boundary, a short chunk crossing one. Decode only: few rows with long contexts, so the
    // GPU splits the keys (flash-decoding) and merges.
    const std::vector<SeqSpec> mixed{{37, 37}, {1, 100}, {21, 70}, {1, 2 * c.tpb}, {5, 2 * c.tpb + 1}};
    const std::vector<SeqSpec> decode{{1, 700}, {1, 333}, {1, 1}};
    for (const auto* specs : {&mixed, &decode}) {
      const std::string what = std::string(specs == &mixed ? "mixed" : "decode") + " hd " +
                               std::to_string(c.head_dim) + " heads " + std::to_string(c.heads) + "/" +
                               std::to_string(c.kv_heads) + " tpb " + std::to_string(c.tpb) + " window " +
                               std::to_string(c.window);
      SCOPED_TRACE(what);
      const int64_t layers = 2, Q = c.heads * c.head_dim, KV = c.kv_heads * c.head_dim;
      // Block tables are random blocks; the chunked sequence shares its first two blocks with
      // the prefill one (prefix reuse).
      KvPoolGeometry g;
      std::vector<std::vector<int32_t>> tables =
          fillWithTables(*this, kvLens(*specs), 8, layers, c.kv_heads, c.head_dim, c.tpb, rng_, &g);
      if (specs == &mixed) {
        tables[2][0] = tables[0][0];
        tables[2][1] = tables[0][1];
      }
      // Nothing written: the pools hold the keys already.
      const StepRows st = stepRows(*specs, tables, c.tpb, false, false);
      const int64_t rows = st.rows;
      begin(ropeStep(st.ids, st.pos, st.slots, st.seqs, {}, 0, 1.0f));
      std::vector<float> q = randomVec(static_cast<size_t>(rows * (Q + 2 * KV)), rng_);
      auto [qc, qg] = put(2, rows, Q + 2 * KV, q);
      auto [oc, og] = put(3, rows, Q, {});
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
      for (int64_t layer = 0; layer < layers; ++layer) {
        cpu_->attention(layer, columns(qc, 0, Q), c.heads, c.window, scale, oc);
        gpu_->attention(layer, columns(qg, 0, Q), c.heads, c.window, scale, og);
        // 16-bit cache, head_dim 64/128: context chunks (any group) and decode rows (GQA group <= 8)
        // run on tensor cores with P rounded to the cache's type.
        const bool flash = halfKv() && (c.head_dim == 64 || c.head_dim == 128) &&
                           (specs == &mixed || c.heads / c.kv_heads <= 8);
        const std::vector<float> ref = get(*cpu_, oc);
        expectClose(get(*gpu_, og), ref, flash ? 5e-3 : 1e-5, flash ? 3e-2 : 5e-5,
                    "attention layer " + std::to_string(layer));
        if (const DType act = gpu_->activationDtype(); act != DType::kF32) {  // the output rounded as well
          TensorView ob = gpu_->scratch(5, rows, Q, act);
          gpu_->attention(layer, columns(qg, 0, Q), c.heads, c.window, scale, ob);
          expectClose(get(*gpu_, ob), ref, flash ? 6e-3 : 3e-3, flash ? 3e-2 : 1e-2,
                      "attention (" + std::string(dtypeName(act)) + " out) layer " + std::to_string(layer),
                      halfStep(act));
        }
      }
    }
  }
}

// ropeAttention against ropeWriteKv + attention on the same backend: on the CUDA backend a decode
// step (every sequence one new row) on the tensor-core decode kernel (16-bit cache, head_dim 64 /
// 128, GQA group <= 8, full rotary dim) runs as one kernel that rotates q in registers (q in memory
// stays as it was: that is how the test knows the fused kernel ran) and k, and writes the KV itself;
// every other step runs the two ops. Either way the output and the pool are the two ops' to the
// bit, and close to the CPU's.
TEST_P(BackendOps, RopeAttentionIsRopeThenAttention) {
  struct Case {
    int64_t head_dim, heads, kv_heads, tpb, window, rotary_dim;
    bool decode;  // one new row per sequence (else a mixed step with a prefill)
  };
  const std::vector<Case> cases{
      {128, 32, 8, 16, 0, 128, true},  {128, 16, 2, 32, 0, 128, true},   {64, 8, 8, 16, 0, 64, true},
      {64, 32, 4, 16, 100, 64, true},  {128, 8, 8, 16, 37, 128, true},   {64, 16, 1, 16, 0, 64, true},  // group 16
      {128, 32, 8, 16, 0, 64, true},   {128, 32, 8, 16, 0, 128, false},
  };
  for (const Case& c : cases) {
    const std::vector<SeqSpec> decode{{1, 700}, {1, 333}, {1, 1}, {1, 2 * c.tpb}, {1, 2 * c.tpb + 1},
                                      {1, 64, false}, {1, 129}};
    const std::vector<SeqSpec> mixed{{37, 37}, {1, 100}, {1, 2 * c.tpb + 1}};
    const std::vector<SeqSpec>& specs = c.decode ? decode : mixed;
    const int64_t group = c.heads / c.kv_heads;
    // Without the fused kernel or the tensor-core decode kernel: the two ops always.
    const bool switched_off = !GetParam().tuning.rope_fusion || !GetParam().tuning.mma_decode;
    const bool fused = halfKv() && c.decode && (c.head_dim == 64 || c.head_dim == 128) && group <= 8 &&
                       c.rotary_dim == c.head_dim && !switched_off;
    SCOPED_TRACE("hd " + std::to_string(c.head_dim) + " heads " + std::to_string(c.heads) + "/" +
                 std::to_string(c.kv_heads) + " tpb " + std::to_string(c.tpb) + " window " + std::to_string(c.window) +
                 " rotary " + std::to_string(c.rotary_dim) + (c.decode ? " decode" : " mixed") +
                 (fused ? " (fused)" : ""));
    const int64_t layers = 2, Q = c.heads * c.head_dim, KV = c.kv_heads * c.head_dim;
    KvPoolGeometry g;
    const std::vector<std::vector<int32_t>> tables =
        fillWithTables(*this, kvLens(specs), 4, layers, c.kv_heads, c.head_dim, c.tpb, rng_, &g);
    const int64_t num_blocks = g.num_blocks;
    // Two RoPE tables (per-sequence tables, as dynamic NTK gives): odd sequences use table 1.
    const StepRows st = stepRows(specs, tables, c.tpb, true, true);
    const int64_t rows = st.rows;
    const std::vector<float> inv = twoRopeTables(c.rotary_dim, 500000.0f);
    begin(ropeStep(st.ids, st.pos, st.slots, st.seqs, inv, c.rotary_dim, 1.25f));
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    const size_t per = static_cast<size_t>(g.elementsPerBlock());
    auto pools = [&](Backend& b) {
      std::vector<float> all(per * static_cast<size_t>(num_blocks));
      for (int32_t blk = 0; blk < num_blocks; ++blk)
        EXPECT_TRUE(b.readKvBlock(KvPool::kPrimary, blk, all.data() + per * static_cast<size_t>(blk)).isOk());
      return all;
    };
    for (int64_t layer = 0; layer < layers; ++layer) {
      SCOPED_TRACE("layer " + std::to_string(layer));
      const std::vector<float> qkv = randomVec(static_cast<size_t>(rows * (Q + 2 * KV)), rng_);
      auto [qc, qg] = put(2, rows, Q + 2 * KV, qkv);
      auto [oc, og] = put(3, rows, Q, {});
      cpu_->ropeAttention(layer, columns(qc, 0, Q), columns(qc, Q, KV), columns(qc, Q + KV, KV), c.head_dim,
                          c.heads, c.window, scale, oc);
      gpu_->ropeAttention(layer, columns(qg, 0, Q), columns(qg, Q, KV), columns(qg, Q + KV, KV), c.head_dim,
                          c.heads, c.window, scale, og);
      const std::vector<float> out_one = get(*gpu_, og), pool_one = pools(*gpu_), q_after = get(*gpu_, qg);
      bool q_kept = true;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < Q; ++j)
          q_kept = q_kept && q_after[static_cast<size_t>(r * (Q + 2 * KV) + j)] == qkv[static_cast<size_t>(r * (Q + 2 * KV) + j)];
      EXPECT_EQ(q_kept, fused) << "q left unrotated <=> the one-kernel path ran";
      // The two ops on a fresh copy (they write the same slots again).
      auto [qc2, qg2] = put(4, rows, Q + 2 * KV, qkv);
      auto [oc2, og2] = put(5, rows, Q, {});
      gpu_->ropeWriteKv(layer, columns(qg2, 0, Q), columns(qg2, Q, KV), columns(qg2, Q + KV, KV), c.head_dim);
      gpu_->attention(layer, columns(qg2, 0, Q), c.heads, c.window, scale, og2);
      const std::vector<float> out_two = get(*gpu_, og2), pool_two = pools(*gpu_);
      EXPECT_EQ(0, std::memcmp(out_one.data(), out_two.data(), out_one.size() * sizeof(float)))
          << "ropeAttention's output differs from ropeWriteKv + attention";
      EXPECT_EQ(0, std::memcmp(pool_one.data(), pool_two.data(), pool_one.size() * sizeof(float)))
          << "ropeAttention's pool differs from ropeWriteKv's";
      // (The new rows' k / v are rounded to a 16-bit cache on the GPU, kept float32 on the CPU.)
      const bool flash = halfKv() && (c.head_dim == 64 || c.head_dim == 128) && (!c.decode || group <= 8);
      expectClose(out_one, get(*cpu_, oc), flash ? 5e-3 : (halfKv() ? 3e-3 : 1e-5),
                  flash ? 3e-2 : (halfKv() ? 1e-2 : 5e-5), "ropeAttention vs the CPU", halfStep(gpuKv()));
      expectClose(pool_one, pools(*cpu_), halfKv() ? 4e-3 : 1e-6, halfKv() ? 0.05 : 1e-5, "pool vs the CPU",
                  halfStep(gpuKv()));
    }
  }
}

// Long contexts in a pool of more than 2^31 elements whose every used block lies beyond element
// 2^31 (byte 4 GiB / 8 GiB), as a serving-sized cache has them: a 2300-token context chunk on
// cached keys beside decode rows of up to 16411 keys (the GPU splits those keys many ways), then a
// decode step through ropeAttention (on the GPU, with a 16-bit cache, the one-kernel path) writing
// its new rows out there; without and with a sliding window. Output and written rows vs the CPU.
TEST_P(BackendOps, LongContextsAtFarPoolOffsets) {
  struct Case {
    int64_t head_dim, heads, kv_heads, tpb;
  };
  for (const Case& c : {Case{128, 16, 4, 16}, Case{64, 16, 2, 32}}) {
    const int64_t layers = 2, Q = c.heads * c.head_dim, KV = c.kv_heads * c.head_dim;
    const int64_t per_block = layers * 2 * c.kv_heads * c.tpb * c.head_dim;
    const int64_t first_block = (int64_t{1} << 31) / per_block + 1;
    // Sequences: the context chunk (300 new of 2300), then decode rows; the same tables serve the
    // decode step after it (each sequence one token longer).
    const std::vector<SeqSpec> chunk{{300, 2300}, {1, 16411}, {1, 5000}, {1, 4099}, {1, 1}};
    std::vector<SeqSpec> next;
    for (const SeqSpec& sp : chunk) next.push_back(SeqSpec{1, sp.kv_len + 1});
    KvPoolGeometry g;
    const std::vector<std::vector<int32_t>> tables =
        fillWithTables(*this, kvLens(next), 2, layers, c.kv_heads, c.head_dim, c.tpb, rng_, &g, first_block);
    ASSERT_GT(g.num_blocks * g.elementsPerBlock(), int64_t{1} << 31);
    const std::vector<float> inv = twoRopeTables(c.head_dim, 500000.0f);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    const bool flash = halfKv() && (c.head_dim == 64 || c.head_dim == 128);
    for (int64_t window : {int64_t{0}, int64_t{4096}}) {
      SCOPED_TRACE("hd " + std::to_string(c.head_dim) + " heads " + std::to_string(c.heads) + "/" +
                   std::to_string(c.kv_heads) + " tpb " + std::to_string(c.tpb) + " window " + std::to_string(window));
      // 1. The context chunk and decode rows attend to what the pools hold (nothing written).
      {
        const StepRows st = stepRows(chunk, tables, c.tpb, false, false);
        const int64_t rows = st.rows;
        begin(ropeStep(st.ids, st.pos, st.slots, st.seqs, inv, c.head_dim, 1.0f));
        auto [qc, qg] = put(2, rows, Q, randomVec(static_cast<size_t>(rows * Q), rng_));
        auto [oc, og] = put(3, rows, Q, {});
        for (int64_t layer = 0; layer < layers; ++layer) {
          cpu_->attention(layer, qc, c.heads, window, scale, oc);
          gpu_->attention(layer, qg, c.heads, window, scale, og);
          expectClose(get(*gpu_, og), get(*cpu_, oc), flash ? 5e-3 : 1e-5, flash ? 3e-2 : 5e-5,
                      "attention, layer " + std::to_string(layer));
        }
      }
      // 2. A decode step: each sequence's next token rotated, written and attended in one op.
      {
        const StepRows st = stepRows(next, tables, c.tpb, true, true);
        const int64_t rows = st.rows;
        const std::vector<int64_t>& slots = st.slots;
        begin(ropeStep(st.ids, st.pos, st.slots, st.seqs, inv, c.head_dim, 1.0f));
        const size_t per = static_cast<size_t>(g.elementsPerBlock());
        auto newRows = [&](Backend& b) {  // the blocks holding the new rows
          std::vector<float> all;
          for (int64_t slot : slots) {
            std::vector<float> blk(per);
            EXPECT_TRUE(b.readKvBlock(KvPool::kPrimary, static_cast<int32_t>(slot / c.tpb), blk.data()).isOk());
            all.insert(all.end(), blk.begin(), blk.end());
          }
          return all;
        };
        for (int64_t layer = 0; layer < layers; ++layer) {
          const std::vector<float> qkv = randomVec(static_cast<size_t>(rows * (Q + 2 * KV)), rng_);
          auto [qc, qg] = put(2, rows, Q + 2 * KV, qkv);
          auto [oc, og] = put(3, rows, Q, {});
          cpu_->ropeAttention(layer, columns(qc, 0, Q), columns(qc, Q, KV), columns(qc, Q + KV, KV), c.head_dim,
                              c.heads, window, scale, oc);
          gpu_->ropeAttention(layer, columns(qg, 0, Q), columns(qg, Q, KV), columns(qg, Q + KV, KV), c.head_dim,
                              c.heads, window, scale, og);
          expectClose(get(*gpu_, og), get(*cpu_, oc), flash ? 5e-3 : (halfKv() ? 3e-3 : 1e-5),
                      flash ? 3e-2 : (halfKv() ? 1e-2 : 5e-5), "ropeAttention, layer " + std::to_string(layer),
                      halfStep(gpuKv()));
          expectClose(newRows(*gpu_), newRows(*cpu_), halfKv() ? 4e-3 : 1e-6, halfKv() ? 0.05 : 1e-5,
                      "the new rows' blocks, layer " + std::to_string(layer), halfStep(gpuKv()));
        }
      }
    }
  }
}

void fillPools(BackendOps& t, const KvPoolGeometry& g) {
  t.fill(g);
}

std::vector<std::vector<int32_t>> fillWithTables(BackendOps& t, const std::vector<int64_t>& kv_lens, int64_t spare,
                                                 int64_t layers, int64_t kv_heads, int64_t head_dim, int64_t tpb,
                                                 std::mt19937& rng, KvPoolGeometry* g, int64_t first_block) {
  int64_t need = 0;
  for (int64_t n : kv_lens) need += (n + tpb - 1) / tpb;
  *g = KvPoolGeometry{first_block + need + spare, layers, kv_heads, head_dim, tpb, DType::kF32};
  std::vector<int32_t> perm(static_cast<size_t>(need + spare));
  std::iota(perm.begin(), perm.end(), static_cast<int32_t>(first_block));
  if (first_block == 0)
    fillPools(t, *g);
  else
    t.fill(*g, perm);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<std::vector<int32_t>> tables;
  size_t next = 0;
  for (int64_t n : kv_lens) {
    std::vector<int32_t>& table = tables.emplace_back();
    for (int64_t b = 0; b < (n + tpb - 1) / tpb; ++b) table.push_back(perm[next++]);
  }
  return tables;
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
  fillPools(*this, g);
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
