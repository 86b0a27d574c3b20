// Cross-backend tests of the ops only some architectures use — LayerNorm, the MLP activations
// (plain and gated), learned position embeddings, residual adds, scaling with soft-capping — and
// of attention with the model's extras (logit soft-capping, ALiBi) on every CUDA attention path:
// the flash context kernel, the tensor-core and CUDA-core decode kernels (with key splits), the
// fused RoPE decode kernel. Each op runs on the CPU reference and on the CUDA backend with the
// same inputs (rounded to 16 bits where the CUDA side stores 16 bits), in the style of
// backend_ops_test.cpp. Skipped without the CUDA backend or without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "llmrt/engine_config.h"
#include "op_test_util.h"
#include "two_backends.h"
#if LLMRT_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace llmrt {
namespace {

using optest::expectClose;
using optest::halfStep;
using optest::randomVec;
using optest::roundTo;

struct ArchMode {
  DType weight;
  DType kv;
  const char* name;
  CudaTuning tuning = {};
};

void PrintTo(const ArchMode& m, std::ostream* os) { *os << m.name; }

ArchMode tunedBf16(const char* name, void (*set)(CudaTuning&)) {
  ArchMode m{DType::kBF16, DType::kBF16, name};
  set(m.tuning);
  return m;
}

const Activation kActivations[] = {Activation::kSilu, Activation::kGelu, Activation::kGeluTanh,
                                   Activation::kRelu};
const char* actName(Activation a) {
  switch (a) {
    case Activation::kSilu:
      return "silu";
    case Activation::kGelu:
      return "gelu";
    case Activation::kGeluTanh:
      return "gelu_tanh";
    case Activation::kRelu:
      return "relu";
  }
  return "?";
}

double relDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// Columns [begin, begin + n) of a row-major matrix of any dtype, as a strided view.
TensorView slice(const TensorView& t, int64_t begin, int64_t n) {
  TensorView v = t;
  v.data = static_cast<uint8_t*>(t.data) + begin * static_cast<int64_t>(dtypeSize(t.dtype));
  v.shape = Shape{t.shape[0], n};
  v.strides = Shape{t.strides[0], 1};
  return v;
}

// ALiBi slopes of `heads` heads: 2^(-8 (h + 1) / heads).
std::vector<float> alibiSlopes(int64_t heads) {
  std::vector<float> s(static_cast<size_t>(heads));
  for (int64_t h = 0; h < heads; ++h)
    s[static_cast<size_t>(h)] = std::pow(2.0f, -8.0f * static_cast<float>(h + 1) / static_cast<float>(heads));
  return s;
}

// A sequence of a step: q_len new rows ending at kv_len.
struct SeqSpec {
  int64_t q_len, kv_len;
};
// The packed rows of a step over `specs` in `tables`: positions, cache slots (-1 unless `write`),
// sequence i on RoPE table i % 2. The StepSeqs point into `tables`.
struct StepRows {
  std::vector<StepSeq> seqs;
  std::vector<int32_t> ids, pos;
  std::vector<int64_t> slots;
  int64_t rows = 0;
};
StepRows stepRows(const std::vector<SeqSpec>& specs, const std::vector<std::vector<int32_t>>& tables,
                  int64_t tpb, bool write) {
  StepRows s;
  for (size_t i = 0; i < specs.size(); ++i) {
    const SeqSpec& sp = specs[i];
    s.seqs.push_back(StepSeq{s.rows, sp.q_len, sp.kv_len, tables[i], static_cast<int32_t>(i % 2)});
    for (int64_t r = 0; r < sp.q_len; ++r) {
      const int64_t at = sp.kv_len - sp.q_len + r;
      s.ids.push_back(0);
      s.pos.push_back(static_cast<int32_t>(at));
      s.slots.push_back(write ? int64_t{tables[i][static_cast<size_t>(at / tpb)]} * tpb + at % tpb : -1);
    }
    s.rows += sp.q_len;
  }
  return s;
}
StepInputs stepInputs(const StepRows& st, const std::vector<float>& inv, int64_t rotary_dim) {
  StepInputs in;
  in.token_ids = st.ids;
  in.positions = st.pos;
  in.slots = st.slots;
  in.seqs = st.seqs;
  in.rope_inv_freq = inv;
  in.rotary_dim = rotary_dim;
  return in;
}
// Two RoPE tables of rotary_dim / 2 frequencies (the second 0.37 times the first).
std::vector<float> twoRopeTables(int64_t rotary_dim) {
  const int64_t half = rotary_dim / 2;
  std::vector<float> inv(static_cast<size_t>(2 * half));
  for (int64_t i = 0; i < half; ++i) {
    inv[static_cast<size_t>(i)] =
        1.0f / std::pow(10000.0f, static_cast<float>(2 * i) / static_cast<float>(rotary_dim));
    inv[static_cast<size_t>(half + i)] = inv[static_cast<size_t>(i)] * 0.37f;
  }
  return inv;
}

class ArchOps : public ::testing::TestWithParam<ArchMode>, protected optest::TwoBackends {
 protected:
  void SetUp() override {
    setUpBackends(GetParam().weight, GetParam().kv, GetParam().tuning, gpuKv());
  }

  DType gpuKv() const { return GetParam().weight == DType::kF32 ? DType::kF32 : GetParam().kv; }
  DType weights() const { return GetParam().weight; }
  bool halfKv() const { return gpuKv() != DType::kF32; }
  // The 16-bit dtypes the GPU side of an activation operand may have besides F32.
  std::vector<DType> operandDtypes() const {
    std::vector<DType> d{DType::kF32};
    if (gpu_->activationDtype() != DType::kF32) d.push_back(gpu_->activationDtype());
    return d;
  }

  void setExtras(const AttentionExtras& e) {
    Status c = cpu_->setAttentionExtras(e), g = gpu_->setAttentionExtras(e);
    ASSERT_TRUE(c.isOk()) << c.toString();
    ASSERT_TRUE(g.isOk()) << g.toString();
  }


  // Pools of `blocks` blocks (the GPU's in its KV dtype) whose every slot of every layer holds
  // random K/V rows (rounded to the GPU's KV dtype), and per sequence of kv_lens a table of
  // distinct random blocks.
  std::vector<std::vector<int32_t>> fillPools(const KvPoolGeometry& g, const std::vector<int64_t>& kv_lens) {
    KvPoolGeometry gg = g;
    gg.dtype = gpuKv();
    EXPECT_TRUE(cpu_->allocateKvPools(g, 0).isOk());
    Status allocated = gpu_->allocateKvPools(gg, 0);
    EXPECT_TRUE(allocated.isOk()) << allocated.toString();
    const int64_t tpb = g.tokens_per_block, n_slots = g.num_blocks * tpb, KV = g.num_kv_heads * g.head_dim;
    std::vector<int64_t> slots(static_cast<size_t>(n_slots));
    std::iota(slots.begin(), slots.end(), 0);
    std::vector<int32_t> ids(static_cast<size_t>(n_slots), 0), pos(static_cast<size_t>(n_slots), 0);
    std::vector<int32_t> all(static_cast<size_t>(g.num_blocks));
    std::iota(all.begin(), all.end(), 0);
    const StepSeq seq{0, n_slots, n_slots, all, 0};
    StepInputs in;
    in.token_ids = ids;
    in.positions = pos;
    in.slots = slots;
    in.seqs = std::span<const StepSeq>(&seq, 1);
    begin(in);
    for (int64_t layer = 0; layer < g.num_layers; ++layer) {
      std::vector<float> k = randomVec(static_cast<size_t>(n_slots * KV), rng_);
      std::vector<float> v = randomVec(static_cast<size_t>(n_slots * KV), rng_);
      roundTo(k, gpuKv());  // what a 16-bit cache stores: both backends attend to the same keys
      roundTo(v, gpuKv());
      auto [kc, kg] = put(0, n_slots, KV, k);
      auto [vc, vg] = put(1, n_slots, KV, v);
      cpu_->ropeWriteKv(layer, slice(kc, 0, 0), kc, vc, g.head_dim);
      gpu_->ropeWriteKv(layer, slice(kg, 0, 0), kg, vg, g.head_dim);
    }
    std::shuffle(all.begin(), all.end(), rng_);
    std::vector<std::vector<int32_t>> tables;
    size_t next = 0;
    for (int64_t n : kv_lens) {
      std::vector<int32_t>& t = tables.emplace_back();
      for (int64_t b = 0; b < (n + tpb - 1) / tpb; ++b) t.push_back(all[next++]);
    }
    EXPECT_LE(next, all.size());
    return tables;
  }

  std::mt19937 rng_{4321};
};

// LayerNorm with and without a bias, float32 statistics, on widths the float4 kernel takes (a
// multiple of 4, up to 8 float4 per thread) and others; contiguous rows, strided views the float4
// kernel still takes (offsets and row strides of whole float4) and unaligned ones; float32 and
// 16-bit outputs. The rows sit far from zero (the two-pass variance matters there).
TEST_P(ArchOps, LayerNorm) {
  for (int64_t rows : {1, 7, 33}) {
    for (int64_t cols : {8, 77, 768, 1028, 4099, 5120, 8192}) {
      for (bool bias : {false, true}) {
        const std::string what =
            std::to_string(rows) + "x" + std::to_string(cols) + (bias ? " bias" : " no bias");
        std::vector<float> x = randomVec(static_cast<size_t>(rows * (cols + 8)), rng_, 3.0f);
        for (float& v : x) v += 20.0f;
        auto [wc, wg] = weight(randomVec(static_cast<size_t>(cols), rng_), Shape{cols});
        auto [bc, bg] = weight(randomVec(static_cast<size_t>(cols), rng_), Shape{cols});
        const TensorView* b_c = bias ? &bc : nullptr;
        const TensorView* b_g = bias ? &bg : nullptr;
        // (x offset, x row stride, out offset, out row stride): contiguous, float4-aligned slices, unaligned.
        struct Layout {
          int64_t x_off, x_ld, o_off, o_ld;
          const char* name;
        };
        for (const Layout& l :
             {Layout{0, cols, 0, cols, "contiguous"}, Layout{4, cols + 8, 4, cols + 4, "aligned slices"},
              Layout{3, cols + 5, 1, cols + 3, "unaligned slices"}}) {
          std::vector<float> xl(x.begin(), x.begin() + rows * l.x_ld);
          auto [xc_full, xg_full] = put(0, rows, l.x_ld, xl);
          const TensorView xc = slice(xc_full, l.x_off, cols), xg = slice(xg_full, l.x_off, cols);
          for (DType od : operandDtypes()) {
            auto [oc_full, og_full] = put(1, rows, l.o_ld, {}, od);
            const TensorView oc = slice(oc_full, l.o_off, cols), og = slice(og_full, l.o_off, cols);
            cpu_->layerNorm(xc, wc, b_c, 1e-5f, oc);
            gpu_->layerNorm(xg, wg, b_g, 1e-5f, og);
            std::vector<float> want = get(*cpu_, oc);
            const std::string w = "layerNorm " + what + " " + l.name + " -> " + std::string(dtypeName(od));
            if (od == DType::kF32) {
              expectClose(get(*gpu_, og), want, 1e-5, 1e-4, w);
            } else {
              expectClose(get(*gpu_, og), want, 3e-3, 2e-2, w, halfStep(od));
            }
          }
          expectClose(get(*gpu_, xg_full), get(*cpu_, xc_full), 0.0, 0.0, "layerNorm input " + what);
        }
      }
    }
  }
}

// activation(act): every activation, input and output F32 or the activation dtype, widths the
// 8-wide kernel takes (344) and others (173), contiguous and strided views.
TEST_P(ArchOps, Activation) {
  const int64_t rows = 13;
  for (Activation act : kActivations) {
    for (int64_t cols : {173, 344}) {
      for (DType in : operandDtypes()) {
        for (DType od : operandDtypes()) {
          for (bool strided : {false, true}) {
            const std::string what = std::string("activation ") + actName(act) + " " + std::to_string(cols) +
                                     " " + std::string(dtypeName(in)) + " -> " + std::string(dtypeName(od)) +
                                     (strided ? " strided" : "");
            // Strided: x at column 8 of cols + 16 (the 8-wide kernel still applies), out at 3 of cols + 5.
            const int64_t x_ld = strided ? cols + 16 : cols, x_off = strided ? 8 : 0;
            const int64_t o_ld = strided ? cols + 5 : cols, o_off = strided ? 3 : 0;
            auto [xc_full, xg_full] =
                put(0, rows, x_ld, randomVec(static_cast<size_t>(rows * x_ld), rng_, 3.0f), in);
            auto [oc_full, og_full] = put(1, rows, o_ld, {}, od);
            const TensorView oc = slice(oc_full, o_off, cols), og = slice(og_full, o_off, cols);
            cpu_->activation(act, slice(xc_full, x_off, cols), oc);
            gpu_->activation(act, slice(xg_full, x_off, cols), og);
            if (od == DType::kF32) {
              expectClose(get(*gpu_, og), get(*cpu_, oc), 1e-6, 1e-5, what);
            } else {
              expectClose(get(*gpu_, og), get(*cpu_, oc), 3e-3, 4e-2, what, halfStep(od));
            }
          }
        }
      }
    }
  }
}

// gatedActivation(act): act(gate) * up for every activation, dtypes and layouts as Activation
// (gate_up a column slice of a wider buffer when strided); kSilu is siluMul to the bit.
TEST_P(ArchOps, GatedActivation) {
  const int64_t rows = 13;
  for (Activation act : kActivations) {
    for (int64_t inter : {173, 344}) {
      for (DType in : operandDtypes()) {
        for (DType od : operandDtypes()) {
          for (bool strided : {false, true}) {
            const std::string what = std::string("gatedActivation ") + actName(act) + " " +
                                     std::to_string(inter) + " " + std::string(dtypeName(in)) + " -> " +
                                     std::string(dtypeName(od)) + (strided ? " strided" : "");
            const int64_t g_ld = strided ? 2 * inter + 16 : 2 * inter, g_off = strided ? 8 : 0;
            const int64_t o_ld = strided ? inter + 5 : inter, o_off = strided ? 3 : 0;
            auto [gc_full, gg_full] =
                put(0, rows, g_ld, randomVec(static_cast<size_t>(rows * g_ld), rng_, 3.0f), in);
            auto [oc_full, og_full] = put(1, rows, o_ld, {}, od);
            const TensorView gc = slice(gc_full, g_off, 2 * inter), gg = slice(gg_full, g_off, 2 * inter);
            const TensorView oc = slice(oc_full, o_off, inter), og = slice(og_full, o_off, inter);
            cpu_->gatedActivation(act, gc, oc);
            gpu_->gatedActivation(act, gg, og);
            const std::vector<float> got = get(*gpu_, og);
            if (od == DType::kF32) {
              expectClose(got, get(*cpu_, oc), 1e-6, 1e-5, what);
            } else {
              expectClose(got, get(*cpu_, oc), 3e-3, 4e-2, what, halfStep(od));
            }
            if (act == Activation::kSilu) {
              gpu_->siluMul(gg, og);
              const std::vector<float> silu = get(*gpu_, og);
              EXPECT_EQ(0, std::memcmp(got.data(), silu.data(), got.size() * sizeof(float)))
                  << what << " vs siluMul";
            }
          }
        }
      }
    }
  }
}

// linearActivation (MLPs without a gate) against linear + activation on the same backend: on the
// CUDA backend, decode-sized products with 16-bit weights run as one matrix-vector kernel with the
// activation in its epilogue (act_fusion; the same bits), others as the two ops; and against the
// CPU. Every activation, with and without a bias, 1, 2 and 5 rows, float32 and 16-bit outputs.
TEST_P(ArchOps, LinearActivationIsLinearThenActivation) {
  const int64_t k = 264, n = 344;
  std::vector<float> w = randomVec(static_cast<size_t>(n * k), rng_, 0.1f);
  roundTo(w, weights());
  auto [wc, wg] = weight(w, Shape{n, k});
  auto [bc, bg] = weight(randomVec(static_cast<size_t>(n), rng_), Shape{n});
  for (Activation act : kActivations) {
    for (int64_t m : {1, 2, 5}) {
      for (DType od : operandDtypes()) {
        for (bool bias : {false, true}) {
          const std::string what = std::string("linearActivation ") + actName(act) + " m " +
                                   std::to_string(m) + " -> " + std::string(dtypeName(od)) +
                                   (bias ? " bias" : "");
          std::vector<float> x = randomVec(static_cast<size_t>(m * k), rng_);
          auto [xc, xg] = put(0, m, k, x, gpu_->activationDtype());
          auto [tc, tg] = put(1, m, n, {}, od);
          auto [oc, og] = put(2, m, n, {}, od);
          cpu_->linearActivation(act, xc, wc, bias ? &bc : nullptr, tc, oc);
          gpu_->linearActivation(act, xg, wg, bias ? &bg : nullptr, tg, og);
          const std::vector<float> fused = get(*gpu_, og);
          // The fused kernel leaves tmp as put() filled it (NaN); the two ops write it.
          const CudaTuning& t = GetParam().tuning;
          const DType ad = gpu_->activationDtype();
          const bool expect_fused = weights() != DType::kF32 && t.gemv && t.act_fusion && m <= t.gemv_rows &&
                                    (ad == DType::kF32 || ad == weights()) &&
                                    (od == DType::kF32 || od == weights());
          const std::vector<float> tmp = get(*gpu_, tg);
          const size_t untouched = static_cast<size_t>(
              std::count_if(tmp.begin(), tmp.end(), [](float v) { return std::isnan(v); }));
          EXPECT_EQ(untouched, expect_fused ? tmp.size() : 0)
              << what << (expect_fused ? ": not fused" : ": fused");
          auto [t2c, t2g] = put(3, m, n, {}, od);
          auto [o2c, o2g] = put(4, m, n, {}, od);
          gpu_->linear(xg, wg, bias ? &bg : nullptr, t2g);
          gpu_->activation(act, t2g, o2g);
          const std::vector<float> two = get(*gpu_, o2g);
          EXPECT_EQ(0, std::memcmp(fused.data(), two.data(), fused.size() * sizeof(float)))
              << what << ": differs from linear + activation";
          if (od == DType::kF32)
            expectClose(fused, get(*cpu_, oc), 1e-5, 1e-4, what);
          else
            expectClose(fused, get(*cpu_, oc), 1e-2, 5e-2, what, halfStep(od));
        }
      }
    }
  }
}

// add: residual += y (y F32 or the activation dtype), contiguous and as column slices (the
// columns beside them untouched); float32 adds, so the same bits as the CPU.
TEST_P(ArchOps, Add) {
  const int64_t rows = 9;
  for (int64_t cols : {77, 344, 4096}) {
    for (DType yd : operandDtypes()) {
      for (int64_t off : {0, 8, 1}) {
        const std::string what = "add " + std::to_string(cols) + " y " + std::string(dtypeName(yd)) +
                                 " offset " + std::to_string(off);
        const int64_t ld = cols + off;
        auto [rc_full, rg_full] = put(0, rows, ld, randomVec(static_cast<size_t>(rows * ld), rng_, 4.0f));
        auto [yc_full, yg_full] = put(1, rows, ld, randomVec(static_cast<size_t>(rows * ld), rng_), yd);
        cpu_->add(slice(yc_full, off, cols), slice(rc_full, off, cols));
        gpu_->add(slice(yg_full, off, cols), slice(rg_full, off, cols));
        expectClose(get(*gpu_, rg_full), get(*cpu_, rc_full), 0.0, 0.0, what);
      }
    }
  }
}

// scaleSoftcap: x * scale, then cap * tanh(x / cap) with cap > 0 (Gemma's final logits), in place,
// on logits-wide rows (the 4-wide kernel) and odd widths, contiguous and strided.
TEST_P(ArchOps, ScaleSoftcap) {
  const int64_t rows = 5;
  struct Case {
    float scale, cap;
  };
  for (int64_t cols : {77, 1000, 32000}) {
    for (const Case& c : {Case{1.0f, 30.0f}, Case{0.125f, 0.0f}, Case{2.5f, 5.0f}}) {
      for (int64_t off : {0, 4, 3}) {
        const std::string what = "scaleSoftcap " + std::to_string(cols) + " scale " +
                                 std::to_string(c.scale) + " cap " + std::to_string(c.cap) + " offset " +
                                 std::to_string(off);
        const int64_t ld = cols + off;
        auto [xc, xg] = put(0, rows, ld, randomVec(static_cast<size_t>(rows * ld), rng_, 40.0f));
        cpu_->scaleSoftcap(slice(xc, off, cols), c.scale, c.cap);
        gpu_->scaleSoftcap(slice(xg, off, cols), c.scale, c.cap);
        const std::vector<float> got = get(*gpu_, xg), want = get(*cpu_, xc);
        if (c.cap == 0.0f) {
          expectClose(got, want, 0.0, 0.0, what);  // one float32 product
        } else {
          expectClose(got, want, 1e-6, 1e-5, what);
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = off; j < ld; ++j)
              ASSERT_LE(std::abs(got[static_cast<size_t>(r * ld + j)]), c.cap) << what;
        }
      }
    }
  }
}

// addPositionEmbedding: x[i] += table[positions[i]] at the step's positions (any order, repeats,
// the first and last rows of the table), the table in the weights' dtype, x a column slice.
TEST_P(ArchOps, AddPositionEmbedding) {
  const int64_t max_pos = 300;
  const std::vector<int32_t> pos{0, 299, 5, 5, 123, 298, 1, 150, 77};
  const int64_t n = static_cast<int64_t>(pos.size());
  const std::vector<int32_t> ids(static_cast<size_t>(n), 0), table_blocks{0};
  const std::vector<int64_t> slots(static_cast<size_t>(n), -1);
  const StepSeq seq{0, n, n, table_blocks, 0};
  StepInputs in;
  in.token_ids = ids;
  in.positions = pos;
  in.slots = slots;
  in.seqs = std::span<const StepSeq>(&seq, 1);
  begin(in);
  for (int64_t dim : {8, 77, 768}) {
    std::vector<float> table = randomVec(static_cast<size_t>(max_pos * dim), rng_);
    roundTo(table, weights());
    auto [tc, tg] = weight(table, Shape{max_pos, dim});
    auto [xc, xg] = put(0, n, dim + 5, randomVec(static_cast<size_t>(n * (dim + 5)), rng_));
    cpu_->addPositionEmbedding(tc, slice(xc, 2, dim));
    gpu_->addPositionEmbedding(tg, slice(xg, 2, dim));
    const std::vector<float> got = get(*gpu_, xg), want = get(*cpu_, xc);
    expectClose(got, want, 0.0, 0.0, "addPositionEmbedding dim " + std::to_string(dim));
  }
}

// Attention with soft-capping, ALiBi and both, against the CPU: MHA and GQA (groups 1, 2, 4, 8, 16,
// 71), head_dim 64 / 128 / 256 (tensor-core kernels on a 16-bit cache) and 96 (CUDA-core kernel), sliding
// windows; steps of prefill rows (flash tiles), a mixed step (a chunk after a cached prefix beside
// decode rows), and decode rows of several sequences with long contexts (key splits and their
// merge). The extras must change the output (so a path ignoring them fails), and clearing them
// gives the plain attention back.
TEST_P(ArchOps, AttentionWithExtras) {
  struct Case {
    int64_t head_dim, heads, kv_heads, tpb, window;
  };
  const std::vector<Case> cases{{64, 8, 8, 16, 0},     {128, 16, 4, 16, 0}, {64, 16, 2, 32, 20},
                                {128, 32, 8, 16, 100}, {64, 16, 1, 16, 0},  {96, 12, 3, 8, 0},
                                {256, 8, 4, 16, 20},   {64, 71, 1, 16, 0}};
  for (const Case& c : cases) {
    const std::vector<SeqSpec> prefill{{80, 80}, {17, 17}};
    const std::vector<SeqSpec> mixed{{37, 37}, {1, 100}, {21, 70}, {1, 2 * c.tpb}, {5, 2 * c.tpb + 1}};
    const std::vector<SeqSpec> decode{{1, 700}, {1, 333}, {1, 1}, {1, 64}, {1, 129}};
    const std::vector<SeqSpec> decode_one{{1, 1500}};  // batch-1 decode: many key splits
    const int64_t layers = 2, Q = c.heads * c.head_dim;
    int64_t blocks = 0;
    for (const auto* specs : {&prefill, &mixed, &decode, &decode_one}) {
      int64_t need = 0;
      for (const SeqSpec& s : *specs) need += (s.kv_len + c.tpb - 1) / c.tpb;
      blocks = std::max(blocks, need);
    }
    const KvPoolGeometry g{blocks + 3, layers, c.kv_heads, c.head_dim, c.tpb, DType::kF32};
    const std::vector<float> slopes = alibiSlopes(c.heads);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    for (const auto* specs : {&prefill, &mixed, &decode, &decode_one}) {
      const std::string sname = specs == &prefill  ? "prefill"
                                : specs == &mixed  ? "mixed"
                                : specs == &decode ? "decode"
                                                   : "decode 1";
      std::vector<int64_t> lens;
      for (const SeqSpec& s : *specs) lens.push_back(s.kv_len);
      const std::vector<std::vector<int32_t>> tables = fillPools(g, lens);
      if (HasFailure()) return;
      const StepRows st = stepRows(*specs, tables, c.tpb, false);
      begin(stepInputs(st, {}, 0));
      const int64_t rows = st.rows;
      // Tensor cores (P rounded to 16 bits) on a 16-bit cache: context chunks with head_dim 64 /
      // 128, decode rows with 64 / 128 / 256.
      const bool tensor = halfKv() && (c.head_dim == 64 || c.head_dim == 128 || c.head_dim == 256);
      const double rel = tensor ? 5e-3 : 2e-5, abs = tensor ? 3e-2 : 1e-4;
      struct Variant {
        float softcap;
        bool alibi;
        const char* name;
      };
      for (const Variant& v : {Variant{4.0f, false, "softcap"}, Variant{0.0f, true, "alibi"},
                               Variant{4.0f, true, "softcap+alibi"}, Variant{0.0f, false, "none"}}) {
        const std::string what = sname + " hd " + std::to_string(c.head_dim) + " heads " +
                                 std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " tpb " +
                                 std::to_string(c.tpb) + " window " + std::to_string(c.window) + " " + v.name;
        SCOPED_TRACE(what);
        AttentionExtras e;
        e.logit_softcap = v.softcap;
        if (v.alibi) e.alibi_slopes = slopes;
        setExtras(e);
        auto [qc, qg] = put(2, rows, Q, randomVec(static_cast<size_t>(rows * Q), rng_, 2.0f));
        auto [oc, og] = put(3, rows, Q, {});
        for (int64_t layer = 0; layer < layers; ++layer) {
          cpu_->attention(layer, qc, c.heads, c.window, scale, oc);
          gpu_->attention(layer, qg, c.heads, c.window, scale, og);
          const std::vector<float> ref = get(*cpu_, oc);
          expectClose(get(*gpu_, og), ref, rel, abs, "attention layer " + std::to_string(layer));
          if (layer == 0 && !e.empty()) {  // the extras matter for these inputs
            ASSERT_TRUE(cpu_->setAttentionExtras(AttentionExtras{}).isOk());
            cpu_->attention(layer, qc, c.heads, c.window, scale, oc);
            EXPECT_GT(relDiff(get(*cpu_, oc), ref), 2e-2) << "the extras hardly change the output";
            ASSERT_TRUE(cpu_->setAttentionExtras(e).isOk());
          }
        }
      }
      if (HasFailure()) return;
    }
  }
}

// ropeAttention with both extras: on a 16-bit cache, decode steps with head_dim 64 / 128 / 256 and
// a full rotary dim run as the one fused kernel (q in memory stays
// unrotated: that is how the test knows); its output is the two ops' (ropeWriteKv + attention) to
// the bit, and close to the CPU's. Mixed steps run the two ops.
TEST_P(ArchOps, RopeAttentionWithExtras) {
  struct Case {
    int64_t head_dim, heads, kv_heads, tpb, window;
    bool decode;
  };
  for (const Case& c :
       {Case{128, 16, 4, 16, 0, true}, Case{64, 8, 8, 16, 37, true}, Case{64, 16, 1, 16, 0, true},
        Case{96, 12, 3, 8, 0, true}, Case{128, 32, 8, 16, 0, false}, Case{256, 8, 4, 16, 0, true},
        Case{64, 24, 2, 16, 0, true}}) {
    const std::vector<SeqSpec> decode{{1, 700},       {1, 333},           {1, 1},
                                      {1, 2 * c.tpb}, {1, 2 * c.tpb + 1}, {1, 129}};
    const std::vector<SeqSpec> mixed{{37, 37}, {1, 100}, {1, 2 * c.tpb + 1}};
    const std::vector<SeqSpec>& specs = c.decode ? decode : mixed;
    const bool mma_dim = c.head_dim == 64 || c.head_dim == 128 || c.head_dim == 256;
    const bool fused =
        halfKv() && c.decode && mma_dim && GetParam().tuning.rope_fusion && GetParam().tuning.mma_decode;
    const std::string what = std::string(c.decode ? "decode" : "mixed") + " hd " +
                             std::to_string(c.head_dim) + " heads " + std::to_string(c.heads) + "/" +
                             std::to_string(c.kv_heads) + " window " + std::to_string(c.window) +
                             (fused ? " (fused)" : "");
    SCOPED_TRACE(what);
    const int64_t layers = 2, Q = c.heads * c.head_dim, KV = c.kv_heads * c.head_dim;
    std::vector<int64_t> lens;
    int64_t need = 0;
    for (const SeqSpec& s : specs) {
      lens.push_back(s.kv_len);
      need += (s.kv_len + c.tpb - 1) / c.tpb;
    }
    const KvPoolGeometry g{need + 2, layers, c.kv_heads, c.head_dim, c.tpb, DType::kF32};
    const std::vector<std::vector<int32_t>> tables = fillPools(g, lens);
    if (HasFailure()) return;
    const StepRows st = stepRows(specs, tables, c.tpb, true);
    const std::vector<float> inv = twoRopeTables(c.head_dim);
    begin(stepInputs(st, inv, c.head_dim));
    AttentionExtras e;
    e.logit_softcap = 4.0f;
    e.alibi_slopes = alibiSlopes(c.heads);
    setExtras(e);
    const int64_t rows = st.rows, W = Q + 2 * KV;
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    const bool tensor = halfKv() && (c.decode ? mma_dim : (c.head_dim == 64 || c.head_dim == 128));
    for (int64_t layer = 0; layer < layers; ++layer) {
      SCOPED_TRACE("layer " + std::to_string(layer));
      const std::vector<float> qkv = randomVec(static_cast<size_t>(rows * W), rng_, 1.5f);
      auto [qc, qg] = put(4, rows, W, qkv);
      auto [oc, og] = put(5, rows, Q, {});
      cpu_->ropeAttention(layer, slice(qc, 0, Q), slice(qc, Q, KV), slice(qc, Q + KV, KV), c.head_dim,
                          c.heads, c.window, scale, oc);
      gpu_->ropeAttention(layer, slice(qg, 0, Q), slice(qg, Q, KV), slice(qg, Q + KV, KV), c.head_dim,
                          c.heads, c.window, scale, og);
      const std::vector<float> out_one = get(*gpu_, og), q_after = get(*gpu_, qg);
      bool q_kept = true;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < Q; ++j)
          q_kept = q_kept && q_after[static_cast<size_t>(r * W + j)] == qkv[static_cast<size_t>(r * W + j)];
      EXPECT_EQ(q_kept, fused) << "q left unrotated <=> the one-kernel path ran";
      auto [qc2, qg2] = put(6, rows, W, qkv);
      auto [oc2, og2] = put(7, rows, Q, {});
      gpu_->ropeWriteKv(layer, slice(qg2, 0, Q), slice(qg2, Q, KV), slice(qg2, Q + KV, KV), c.head_dim);
      gpu_->attention(layer, slice(qg2, 0, Q), c.heads, c.window, scale, og2);
      const std::vector<float> out_two = get(*gpu_, og2);
      EXPECT_EQ(0, std::memcmp(out_one.data(), out_two.data(), out_one.size() * sizeof(float)))
          << "ropeAttention's output differs from ropeWriteKv + attention";
      // (The new rows' k / v are rounded to a 16-bit cache on the GPU, kept float32 on the CPU.)
      // A bf16 cache moves the new keys 8x further than fp16 does, on either attention path.
      const double half_abs = gpuKv() == DType::kBF16 ? 3e-2 : 1e-2;
      expectClose(out_one, get(*cpu_, oc), tensor ? 5e-3 : (halfKv() ? 3e-3 : 2e-5),
                  tensor ? 3e-2 : (halfKv() ? half_abs : 1e-4), "ropeAttention vs the CPU", halfStep(gpuKv()));
    }
  }
}

// A recorded step (CUDA graph) replayed after setAttentionExtras changed the extras computes with
// the new ones (the soft-cap is a kernel argument: setAttentionExtras drops the records).
TEST_P(ArchOps, NewExtrasDropRecordedSteps) {
  if (!gpu_->canRecord()) GTEST_SKIP() << "recording disabled";
  const int64_t hd = 64, heads = 8, kv_heads = 2, tpb = 16, Q = heads * hd;
  const std::vector<SeqSpec> specs{{1, 300}, {1, 45}, {1, 130}};
  const KvPoolGeometry g{40, 1, kv_heads, hd, tpb, DType::kF32};
  const std::vector<std::vector<int32_t>> tables = fillPools(g, {300, 45, 130});
  if (HasFailure()) return;
  const StepRows st = stepRows(specs, tables, tpb, false);
  begin(stepInputs(st, {}, 0));
  const float scale = 0.125f;
  auto [qc, qg] = put(0, st.rows, Q, randomVec(static_cast<size_t>(st.rows * Q), rng_, 2.0f));
  auto [oc, og] = put(1, st.rows, Q, {});
  std::vector<float> slopes = alibiSlopes(heads);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    AttentionExtras e;
    e.logit_softcap = round == 0 ? 4.0f : (round == 1 ? 1.5f : 0.0f);
    if (round < 2) e.alibi_slopes = slopes;
    for (float& s : slopes) s *= 2.0f;  // other slopes next round (same buffer on the GPU)
    setExtras(e);
    cpu_->attention(0, qc, heads, 0, scale, oc);
    for (int i = 0; i < 2; ++i) gpu_->recordOrReplay(9, [&] { gpu_->attention(0, qg, heads, 0, scale, og); });
    const bool tensor = halfKv();
    expectClose(get(*gpu_, og), get(*cpu_, oc), tensor ? 5e-3 : 2e-5, tensor ? 3e-2 : 1e-4,
                "recorded attention");
  }
}

// setAttentionExtras refuses a negative, NaN or infinite soft-cap and non-finite slopes on both
// backends; ALiBi slopes that are not one per query head fail the CUDA backend's attention with a
// message naming them.
TEST_P(ArchOps, AttentionExtrasAreChecked) {
  for (Backend* b : {cpu_.get(), gpu_.get()}) {
    AttentionExtras e;
    for (float cap : {-1.0f, NAN, INFINITY}) {
      e.logit_softcap = cap;
      EXPECT_FALSE(b->setAttentionExtras(e).isOk()) << b->name() << " softcap " << cap;
    }
    e.logit_softcap = 0.0f;
    e.alibi_slopes = {0.5f, INFINITY};
    EXPECT_FALSE(b->setAttentionExtras(e).isOk()) << b->name() << " slopes";
  }
  const KvPoolGeometry g{8, 1, 2, 64, 16, DType::kF32};
  const std::vector<std::vector<int32_t>> tables = fillPools(g, {40});
  if (HasFailure()) return;
  const StepRows st = stepRows({{1, 40}}, tables, 16, false);
  begin(stepInputs(st, {}, 0));
  AttentionExtras e;
  e.alibi_slopes = alibiSlopes(3);  // for 8 heads
  ASSERT_TRUE(gpu_->setAttentionExtras(e).isOk());
  TensorView q = gpu_->scratch(0, 1, 8 * 64), out = gpu_->scratch(1, 1, 8 * 64);
  gpu_->attention(0, q, 8, 0, 0.125f, out);
  std::vector<float> sink(8 * 64);
  const Status s = gpu_->copyToHost(out, sink.data());
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.toString().find("ALiBi"), std::string::npos) << s.toString();
}

INSTANTIATE_TEST_SUITE_P(Modes, ArchOps,
                         ::testing::Values(ArchMode{DType::kF32, DType::kF32, "f32"},
                                           ArchMode{DType::kBF16, DType::kF32, "bf16_weights"},
                                           ArchMode{DType::kBF16, DType::kBF16, "bf16"},
                                           ArchMode{DType::kF16, DType::kF16, "fp16"},
                                           ArchMode{DType::kBF16, DType::kF16, "bf16_weights_fp16_kv"}),
                         [](const ::testing::TestParamInfo<ArchMode>& i) {
                           return std::string(i.param.name);
                         });
// The other attention kernels on a 16-bit cache: context rows on the decode kernels (flash off),
// decode rows on the CUDA-core kernel (mma_decode off), RoPE beside the fused kernel (rope_fusion off),
// and ungated MLP products followed by the activation kernel (act_fusion off).
INSTANTIATE_TEST_SUITE_P(
    Tuned, ArchOps,
    ::testing::Values(tunedBf16("bf16_no_flash", [](CudaTuning& t) { t.flash = false; }),
                      tunedBf16("bf16_no_mma_decode", [](CudaTuning& t) { t.mma_decode = false; }),
                      tunedBf16("bf16_no_rope_fusion", [](CudaTuning& t) { t.rope_fusion = false; }),
                      tunedBf16("bf16_no_act_fusion", [](CudaTuning& t) { t.act_fusion = false; })),
    [](const ::testing::TestParamInfo<ArchMode>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace llmrt
