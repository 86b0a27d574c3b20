// Sliding windows over released KV blocks: the KV cache manager releases a block once it is
// outside every layer's window, and its block-table entry becomes kNoKvBlock (-1). A step that
// declares its widest window (StepInputs::attention_window) must be accepted with such entries
// below every row's window, and attention must never read them: the output equals the output
// with the real blocks there, and with a block full of NaN there. Runs on the CPU backend
// everywhere and on the CUDA backend (float32, bf16 and fp16 caches: the flash context kernel,
// the tensor-core and CUDA-core decode kernels with key splits, the fused RoPE decode kernel)
// where there is a device; each backend is also checked against a float64 reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "op_test_util.h"
#if LLMRT_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace llmrt {
namespace {

struct WinMode {
  const char* name;
  bool cuda;
  DType weight;
  DType kv;
};

using optest::columns;
using optest::expectClose;
using optest::randomVec;
using optest::roundTo;

struct Spec {
  int64_t q_len, kv_len;
};

// One geometry: per-layer windows (the step declares the widest) and the step's sequences.
struct WinCase {
  int64_t tpb;
  std::vector<int64_t> windows;  // per layer (> 0)
  std::vector<Spec> seqs;
  std::string name() const {
    std::string s = "tpb " + std::to_string(tpb) + " windows";
    for (int64_t w : windows) s += " " + std::to_string(w);
    return s;
  }
};

class WindowedAttention : public ::testing::TestWithParam<WinMode> {
 protected:
  static constexpr int64_t kLayers = 2, kKvHeads = 2, kHeads = 8, kHeadDim = 64;

  void SetUp() override {
    if (!GetParam().cuda) {
      b_ = std::make_unique<CpuBackend>(2);
      kv_ = DType::kF32;
      return;
    }
#if !LLMRT_HAVE_CUDA
    GTEST_SKIP() << "this build has no CUDA backend (LLMRT_CUDA=OFF)";
#else
    if (cudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device found";
    CudaBackendOptions o;
    o.weight_dtype = GetParam().weight;
    o.kv_dtype = GetParam().kv;
    auto r = createCudaBackend(o);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    b_ = std::move(*r);
    kv_ = GetParam().weight == DType::kF32 ? DType::kF32 : GetParam().kv;
#endif
  }

  // Allocates the pool (every sequence's blocks, distinct and shuffled, plus one poison block,
  // the last) and writes random K/V (rounded to the cache's type) to every block, NaN to the
  // poison block. Keeps the K/V on the host for the reference.
  void fill(const WinCase& c) {
    tpb_ = c.tpb;
    int64_t blocks = 0;
    for (const Spec& s : c.seqs) blocks += (s.kv_len + tpb_ - 1) / tpb_;
    num_blocks_ = blocks + 1;
    poison_ = static_cast<int32_t>(blocks);
    std::vector<int32_t> ids(static_cast<size_t>(blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng_);
    tables_.clear();
    size_t next = 0;
    for (const Spec& s : c.seqs) {
      const int64_t n = (s.kv_len + tpb_ - 1) / tpb_;
      tables_.emplace_back(ids.begin() + static_cast<int64_t>(next),
                           ids.begin() + static_cast<int64_t>(next + n));
      next += static_cast<size_t>(n);
    }
    ASSERT_TRUE(
        b_->allocateKvPools(KvPoolGeometry{num_blocks_, kLayers, kKvHeads, kHeadDim, tpb_, kv_}, 0).isOk());
    const int64_t slots = num_blocks_ * tpb_, KV = kKvHeads * kHeadDim;
    std::vector<int64_t> slot(static_cast<size_t>(slots));
    std::iota(slot.begin(), slot.end(), 0);
    std::vector<int32_t> zeros(static_cast<size_t>(slots), 0);
    std::vector<int32_t> all(static_cast<size_t>(num_blocks_));
    std::iota(all.begin(), all.end(), 0);
    const StepSeq fill_seq{0, slots, slots, all, 0};
    StepInputs in;
    in.token_ids = zeros;
    in.positions = zeros;
    in.slots = slot;
    in.seqs = std::span<const StepSeq>(&fill_seq, 1);
    ASSERT_TRUE(b_->beginStep(in).isOk());
    k_.assign(kLayers, {});
    v_.assign(kLayers, {});
    for (int64_t layer = 0; layer < kLayers; ++layer) {
      k_[layer] = randomVec(static_cast<size_t>(slots * KV), rng_);
      v_[layer] = randomVec(static_cast<size_t>(slots * KV), rng_);
      roundTo(k_[layer], kv_);
      roundTo(v_[layer], kv_);
      std::vector<float> kw = k_[layer], vw = v_[layer];
      std::fill(kw.begin() + poison_ * tpb_ * KV, kw.end(), NAN);
      std::fill(vw.begin() + poison_ * tpb_ * KV, vw.end(), NAN);
      TensorView k = b_->scratch(0, slots, KV), v = b_->scratch(1, slots, KV);
      ASSERT_TRUE(b_->copyFromHost(kw.data(), k).isOk());
      ASSERT_TRUE(b_->copyFromHost(vw.data(), v).isOk());
      b_->ropeWriteKv(layer, columns(k, 0, 0), k, v, kHeadDim);
    }
  }

  // Block tables of the step: 0 real blocks everywhere, 1 kNoKvBlock and 2 the poison block
  // for blocks wholly below the first row's widest window. Returns the released count.
  int64_t tables(const WinCase& c, int variant, std::vector<std::vector<int32_t>>& out) const {
    const int64_t widest = *std::max_element(c.windows.begin(), c.windows.end());
    out = tables_;
    int64_t released = 0;
    for (size_t s = 0; s < c.seqs.size(); ++s) {
      const int64_t read_lo = std::max<int64_t>(0, c.seqs[s].kv_len - c.seqs[s].q_len - widest + 1);
      for (int64_t b = 0; (b + 1) * tpb_ <= read_lo; ++b) {
        int32_t& e = out[s][static_cast<size_t>(b)];
        e = variant == 1 ? kNoKvBlock : variant == 2 ? poison_ : e;
        ++released;
      }
    }
    return released;
  }

  // float64 attention of every row of the step over the host K/V (what the ops must give).
  std::vector<float> reference(const WinCase& c, const std::vector<float>& q, int64_t layer,
                               float scale) const {
    const int64_t KV = kKvHeads * kHeadDim, Q = kHeads * kHeadDim, group = kHeads / kKvHeads;
    const int64_t w = c.windows[static_cast<size_t>(layer)];
    std::vector<float> out;
    int64_t row = 0;
    for (size_t s = 0; s < c.seqs.size(); ++s) {
      const Spec& sp = c.seqs[s];
      for (int64_t t = 0; t < sp.q_len; ++t, ++row) {
        const int64_t p = sp.kv_len - sp.q_len + t, lo = std::max<int64_t>(0, p - w + 1);
        for (int64_t h = 0; h < kHeads; ++h) {
          const int64_t kvh = h / group;
          std::vector<double> sc;
          double mx = -INFINITY;
          for (int64_t j = lo; j <= p; ++j) {
            const int64_t slot = int64_t{tables_[s][static_cast<size_t>(j / tpb_)]} * tpb_ + j % tpb_;
            double d = 0;
            for (int64_t e = 0; e < kHeadDim; ++e)
              d += double{q[static_cast<size_t>(row * Q + h * kHeadDim + e)]} *
                   k_[layer][static_cast<size_t>(slot * KV + kvh * kHeadDim + e)];
            sc.push_back(d * scale);
            mx = std::max(mx, sc.back());
          }
          double sum = 0;
          for (double& x : sc) sum += (x = std::exp(x - mx));
          for (int64_t e = 0; e < kHeadDim; ++e) {
            double acc = 0;
            for (int64_t j = lo; j <= p; ++j) {
              const int64_t slot = int64_t{tables_[s][static_cast<size_t>(j / tpb_)]} * tpb_ + j % tpb_;
              acc += sc[static_cast<size_t>(j - lo)] *
                     v_[layer][static_cast<size_t>(slot * KV + kvh * kHeadDim + e)];
            }
            out.push_back(static_cast<float>(acc / sum));
          }
        }
      }
    }
    return out;
  }

  // Tolerances of the backend against the float64 reference: float32 everywhere, or the
  // 16-bit tensor-core kernels (P rounded to the cache's type).
  double relTol() const { return kv_ == DType::kF32 ? 1e-5 : 5e-3; }
  double absTol() const { return kv_ == DType::kF32 ? 5e-5 : 3e-2; }

  std::vector<float> get(const TensorView& t) {
    std::vector<float> out(static_cast<size_t>(t.shape[0] * t.shape[1]));
    Status s = b_->copyToHost(t, out.data());
    EXPECT_TRUE(s.isOk()) << s.toString();
    return out;
  }

  std::unique_ptr<Backend> b_;
  DType kv_ = DType::kF32;
  std::mt19937 rng_{99};
  int64_t tpb_ = 0, num_blocks_ = 0;
  int32_t poison_ = 0;
  std::vector<std::vector<int32_t>> tables_;
  std::vector<std::vector<float>> k_, v_;  // [layer][slot * KV + head * head_dim + d]
};

const std::vector<WinCase>& cases() {
  // Context chunks (16+ rows: the flash kernel on 16-bit caches, tiles at rows 0 and 64), long
  // decode rows (key splits), short chunks and short contexts; windows smaller and larger than
  // a block, and a per-layer pair.
  static const std::vector<WinCase> c{
      {16, {48, 20}, {{100, 300}, {1, 700}, {1, 45}, {5, 90}, {20, 37}}},
      {32, {7, 7}, {{70, 200}, {1, 333}, {1, 8}, {3, 65}}},
      {8, {100, 33}, {{130, 260}, {1, 500}, {2, 101}}},
  };
  return c;
}

// attention() on released blocks: accepted, never read (the same bits as with the real blocks and
// as with NaN there), and right (the float64 reference over the real blocks).
TEST_P(WindowedAttention, ReleasedBlocksBelowTheWindowAreNeverRead) {
  for (const WinCase& c : cases()) {
    SCOPED_TRACE(c.name());
    fill(c);
    if (HasFatalFailure()) return;
    const int64_t Q = kHeads * kHeadDim, widest = *std::max_element(c.windows.begin(), c.windows.end());
    int64_t rows = 0;
    for (const Spec& s : c.seqs) rows += s.q_len;
    const std::vector<float> q = randomVec(static_cast<size_t>(rows * Q), rng_);
    const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
    std::vector<std::vector<float>> outs[3];
    for (int variant = 0; variant < 3; ++variant) {
      std::vector<std::vector<int32_t>> t;
      const int64_t released = tables(c, variant, t);
      ASSERT_GE(released, 4) << "the case must release blocks";
      std::vector<int32_t> ids(static_cast<size_t>(rows), 0), pos;
      std::vector<int64_t> slots(static_cast<size_t>(rows), -1);
      std::vector<StepSeq> seqs;
      int64_t row = 0;
      for (size_t s = 0; s < c.seqs.size(); ++s) {
        seqs.push_back(StepSeq{row, c.seqs[s].q_len, c.seqs[s].kv_len, t[s], 0});
        for (int64_t r = 0; r < c.seqs[s].q_len; ++r)
          pos.push_back(static_cast<int32_t>(c.seqs[s].kv_len - c.seqs[s].q_len + r));
        row += c.seqs[s].q_len;
      }
      StepInputs in;
      in.token_ids = ids;
      in.positions = pos;
      in.slots = slots;
      in.seqs = seqs;
      in.attention_window = widest;
      Status begun = b_->beginStep(in);
      ASSERT_TRUE(begun.isOk()) << "variant " << variant << ": " << begun.toString();
      TensorView qv = b_->scratch(2, rows, Q), out = b_->scratch(3, rows, Q);
      ASSERT_TRUE(b_->copyFromHost(q.data(), qv).isOk());
      for (int64_t layer = 0; layer < kLayers; ++layer) {
        b_->attention(layer, qv, kHeads, c.windows[static_cast<size_t>(layer)], scale, out);
        outs[variant].push_back(get(out));
      }
    }
    for (int64_t layer = 0; layer < kLayers; ++layer) {
      const std::vector<float>& full = outs[0][static_cast<size_t>(layer)];
      for (int variant : {1, 2}) {
        const std::vector<float>& got = outs[variant][static_cast<size_t>(layer)];
        ASSERT_EQ(got.size(), full.size());
        EXPECT_EQ(std::memcmp(got.data(), full.data(), full.size() * sizeof(float)), 0)
            << (variant == 1 ? "kNoKvBlock" : "NaN blocks") << " below the window changed layer " << layer;
      }
      expectClose(full, reference(c, q, layer, scale), relTol(), absTol(), "layer " + std::to_string(layer));
    }
  }
}

// ropeAttention of decode steps (on CUDA with a 16-bit cache: the one kernel that rotates, writes
// the row's KV and attends) over released blocks: the same bits as over the real blocks.
TEST_P(WindowedAttention, RopeAttentionDecodeOverReleasedBlocks) {
  const WinCase c{16, {40, 24}, {{1, 700}, {1, 300}, {1, 45}, {1, 17}}};
  fill(c);
  if (HasFatalFailure()) return;
  const int64_t Q = kHeads * kHeadDim, KV = kKvHeads * kHeadDim, rows = static_cast<int64_t>(c.seqs.size());
  std::vector<float> inv(kHeadDim / 2);
  for (int64_t i = 0; i < kHeadDim / 2; ++i)
    inv[static_cast<size_t>(i)] = 1.0f / std::pow(10000.0f, static_cast<float>(2 * i) / kHeadDim);
  const std::vector<float> qkv = randomVec(static_cast<size_t>(rows * (Q + 2 * KV)), rng_);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  std::vector<float> outs[2];
  for (int variant = 0; variant < 2; ++variant) {
    std::vector<std::vector<int32_t>> t;
    ASSERT_GE(tables(c, variant, t), 4);
    std::vector<int32_t> ids(static_cast<size_t>(rows), 0), pos;
    std::vector<int64_t> slots;
    std::vector<StepSeq> seqs;
    for (size_t s = 0; s < c.seqs.size(); ++s) {
      const int64_t p = c.seqs[s].kv_len - 1;
      seqs.push_back(StepSeq{static_cast<int64_t>(s), 1, c.seqs[s].kv_len, t[s], 0});
      pos.push_back(static_cast<int32_t>(p));
      slots.push_back(int64_t{t[s][static_cast<size_t>(p / tpb_)]} * tpb_ + p % tpb_);
    }
    StepInputs in;
    in.token_ids = ids;
    in.positions = pos;
    in.slots = slots;
    in.seqs = seqs;
    in.rope_inv_freq = inv;
    in.rotary_dim = kHeadDim;
    in.attention_window = 40;
    Status begun = b_->beginStep(in);
    ASSERT_TRUE(begun.isOk()) << begun.toString();
    TensorView x = b_->scratch(2, rows, Q + 2 * KV), out = b_->scratch(3, rows, Q);
    for (int64_t layer = 0; layer < kLayers; ++layer) {
      ASSERT_TRUE(b_->copyFromHost(qkv.data(), x).isOk());  // q is rotated in place by some paths
      b_->ropeAttention(layer, columns(x, 0, Q), columns(x, Q, KV), columns(x, Q + KV, KV), kHeadDim, kHeads,
                        c.windows[static_cast<size_t>(layer)], scale, out);
      const std::vector<float> o = get(out);
      outs[variant].insert(outs[variant].end(), o.begin(), o.end());
    }
  }
  ASSERT_EQ(outs[0].size(), outs[1].size());
  for (float x : outs[1]) ASSERT_FALSE(std::isnan(x));
  EXPECT_EQ(std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * sizeof(float)), 0);
}

// The step validation: kNoKvBlock only where no row of the step can read it.
TEST_P(WindowedAttention, ReleasedBlocksARowCouldReadAreRejected) {
  const WinCase c{16, {48, 20}, {{4, 100}}};
  fill(c);
  if (HasFatalFailure()) return;
  auto begin = [&](std::vector<int32_t> table, int64_t window) {
    std::vector<int32_t> ids(4, 0), pos{96, 97, 98, 99};
    std::vector<int64_t> slots(4, -1);
    const StepSeq seq{0, 4, 100, table, 0};
    StepInputs in;
    in.token_ids = ids;
    in.positions = pos;
    in.slots = slots;
    in.seqs = std::span<const StepSeq>(&seq, 1);
    in.attention_window = window;
    return b_->beginStep(in);
  };
  // The first row (position 96) sees keys from 96 - 48 + 1 = 49 on: blocks 0-2 (keys 0-47) may
  // be released, block 3 (48-63) may not.
  std::vector<int32_t> t = tables_[0];
  for (int b = 0; b < 3; ++b) t[static_cast<size_t>(b)] = kNoKvBlock;
  EXPECT_TRUE(begin(t, 48).isOk());
  Status full = begin(t, 0);  // a layer attends fully: every block is read
  EXPECT_FALSE(full.isOk());
  EXPECT_NE(full.message().find("released block"), std::string::npos) << full.toString();
  Status wider = begin(t, 50);  // keys from 47 on: block 2 is read
  EXPECT_FALSE(wider.isOk());
  t[3] = kNoKvBlock;
  Status read = begin(t, 48);
  EXPECT_FALSE(read.isOk());
  EXPECT_NE(read.message().find("block 3"), std::string::npos) << read.toString();
  t[3] = -2;  // not the released mark: outside the pool
  EXPECT_FALSE(begin(t, 48).isOk());
  EXPECT_FALSE(begin(tables_[0], -1).isOk());
}

#if LLMRT_HAVE_CUDA
// On the GPU an attention op wider than the step's declared window would load released blocks:
// the backend fails the step instead.
TEST_P(WindowedAttention, CudaFailsAWindowWiderThanTheStepDeclares) {
  if (!GetParam().cuda) GTEST_SKIP() << "a CUDA check";
  const WinCase c{16, {48, 20}, {{1, 200}}};
  fill(c);
  if (HasFatalFailure()) return;
  std::vector<int32_t> t = tables_[0];
  t[0] = kNoKvBlock;
  std::vector<int32_t> ids(1, 0), pos{199};
  std::vector<int64_t> slots(1, -1);
  const StepSeq seq{0, 1, 200, t, 0};
  StepInputs in;
  in.token_ids = ids;
  in.positions = pos;
  in.slots = slots;
  in.seqs = std::span<const StepSeq>(&seq, 1);
  in.attention_window = 48;
  ASSERT_TRUE(b_->beginStep(in).isOk());
  TensorView q = b_->scratch(2, 1, kHeads * kHeadDim), out = b_->scratch(3, 1, kHeads * kHeadDim);
  b_->attention(0, q, kHeads, 0, 0.125f, out);
  std::vector<float> host(static_cast<size_t>(kHeads * kHeadDim));
  Status s = b_->copyToHost(out, host.data());
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("released KV blocks"), std::string::npos) << s.toString();
}
#endif

INSTANTIATE_TEST_SUITE_P(Backends, WindowedAttention,
                         ::testing::Values(WinMode{"cpu", false, DType::kF32, DType::kF32},
                                           WinMode{"cuda_f32", true, DType::kF32, DType::kF32},
                                           WinMode{"cuda_bf16", true, DType::kBF16, DType::kBF16},
                                           WinMode{"cuda_fp16", true, DType::kF16, DType::kF16}),
                         [](const ::testing::TestParamInfo<WinMode>& i) {
                           return std::string(i.param.name);
                         });

}  // namespace
}  // namespace llmrt
