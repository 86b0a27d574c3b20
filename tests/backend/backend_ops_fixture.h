// The fixture of the cross-backend op tests (backend_ops_test.cpp, backend_attention_test.cpp):
// the test modes (weight / KV dtypes, CUDA tuning switches) and BackendOps, which runs each op on
// the CPU reference and the CUDA backend with the same inputs. Skipped without the CUDA backend
// or without a device.
#pragma once

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
#include "two_backends.h"
#include "llmrt/engine_config.h"
#if LLMRT_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace llmrt {

using optest::columns;
using optest::expectClose;
using optest::halfStep;
using optest::maxAbs;
using optest::randomVec;
using optest::roundTo;

struct Mode {
  DType weight;
  DType kv;
  const char* name;
  CudaTuning tuning = {};  // the backend's switches: the variants device_check once ran with variables set
};

inline void PrintTo(const Mode& m, std::ostream* os) { *os << m.name; }

// bf16 with one switch of CudaTuning moved from its default (each the peer of a fast path).
inline Mode tuned(const char* name, void (*set)(CudaTuning&)) {
  Mode m{DType::kBF16, DType::kBF16, name};
  set(m.tuning);
  return m;
}

inline float rounded(float v, DType dt) {
  std::vector<float> one{v};
  roundTo(one, dt);
  return one[0];
}

// Two RoPE tables of `half` frequencies each (as dynamic NTK gives per sequence): base^(-2i / rotary)
// and the same times 0.37.
inline std::vector<float> twoRopeTables(int64_t rotary_dim, float base) {
  const int64_t half = rotary_dim / 2;
  std::vector<float> inv(static_cast<size_t>(2 * half));
  for (int64_t i = 0; i < half; ++i) {
    inv[static_cast<size_t>(i)] = 1.0f / std::pow(base, static_cast<float>(2 * i) / static_cast<float>(rotary_dim));
    inv[static_cast<size_t>(half + i)] = inv[static_cast<size_t>(i)] * 0.37f;
  }
  return inv;
}

// A step's inputs over the given rows and sequences (the spans must outlive it).
inline StepInputs ropeStep(const std::vector<int32_t>& ids, const std::vector<int32_t>& pos, const std::vector<int64_t>& slots,
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

class BackendOps : public ::testing::TestWithParam<Mode>, protected optest::TwoBackends {
 protected:
  void SetUp() override {
    setUpBackends(GetParam().weight, GetParam().kv, GetParam().tuning, gpuKv());
    if (!IsSkipped() && gpuKv() == DType::kF8E4M3) {  // both FP8 pools with the same scales, unequal ones
      for (Backend* b : {cpu_.get(), gpu_.get()}) ASSERT_TRUE(b->setKvCacheScales(kFp8KvScales).isOk());
    }
  }
  // The FP8 modes' scales, [layer][K, V]: the tests' values (a few units) span most of the codes.
  static constexpr float kFp8KvScales[8] = {0.011f, 0.0093f, 0.0125f, 0.008f, 0.01f, 0.014f, 0.009f, 0.012f};

  // x W^T (+ b) on both backends (the pairs put / weight return) into a column slice of a wider
  // buffer (row stride n + 8, as q/k/v slices are) of `out_dtype`: the GPU's output and the CPU's
  // rounded to out_dtype.
  std::pair<std::vector<float>, std::vector<float>> linearBoth(const std::pair<TensorView, TensorView>& x,
                                                               const std::pair<TensorView, TensorView>& w,
                                                               const std::pair<TensorView, TensorView>* b, int64_t n,
                                                               DType out_dtype) {
    auto [oc_full, og_full] = put(1, x.first.shape[0], n + 8, {}, out_dtype);
    TensorView oc = columns(oc_full, 0, n), og = columns(og_full, 0, n);
    cpu_->linear(x.first, w.first, b ? &b->first : nullptr, oc);
    gpu_->linear(x.second, w.second, b ? &b->second : nullptr, og);
    std::vector<float> want = get(*cpu_, oc);
    roundTo(want, out_dtype);
    return {get(*gpu_, og), want};
  }
  // residual (float32 [rows, n], from `res`) += x W^T (+ b) on both backends: the GPU's and the CPU's.
  std::pair<std::vector<float>, std::vector<float>> linearAddBoth(const std::pair<TensorView, TensorView>& x,
                                                                  const std::pair<TensorView, TensorView>& w,
                                                                  const std::pair<TensorView, TensorView>* b,
                                                                  const std::vector<float>& res) {
    const int64_t rows = x.first.shape[0];
    auto [rc, rg] = put(2, rows, static_cast<int64_t>(res.size()) / rows, res);
    cpu_->linearAdd(x.first, w.first, b ? &b->first : nullptr, rc);
    gpu_->linearAdd(x.second, w.second, b ? &b->second : nullptr, rg);
    return {get(*gpu_, rg), get(*cpu_, rc)};
  }

  // What the GPU stores the cache in (a float32-weight backend uses float32, or FP8 codes).
  DType gpuKv() const {
    return GetParam().weight == DType::kF32 && GetParam().kv != DType::kF8E4M3 ? DType::kF32 : GetParam().kv;
  }
  // What the CPU reference stores it in: FP8 codes as the GPU does, else float32.
  DType cpuKv() const { return gpuKv() == DType::kF8E4M3 ? DType::kF8E4M3 : DType::kF32; }

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
    KvPoolGeometry gc = g, gg = g;
    gc.dtype = cpuKv();
    gg.dtype = gpuKv();
    ASSERT_TRUE(cpu_->allocateKvPools(gc, 0).isOk());
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
  bool halfKv() const { return gpuKv() == DType::kBF16 || gpuKv() == DType::kF16; }


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
};

// Pools of `layers` layers (geometry into *g) holding sequences of kv_lens plus `spare` blocks,
// filled as BackendOps::fill does, and a table of distinct random blocks for each sequence. With
// first_block > 0 the pools have that many blocks more in front, left unwritten, and the tables
// use only blocks from first_block on.
inline std::vector<std::vector<int32_t>> fillWithTables(BackendOps& t, const std::vector<int64_t>& kv_lens,
                                                        int64_t spare, int64_t layers, int64_t kv_heads,
                                                        int64_t head_dim, int64_t tpb, std::mt19937& rng,
                                                        KvPoolGeometry* g, int64_t first_block = 0) {
  int64_t need = 0;
  for (int64_t n : kv_lens) need += (n + tpb - 1) / tpb;
  *g = KvPoolGeometry{first_block + need + spare, layers, kv_heads, head_dim, tpb, DType::kF32};
  std::vector<int32_t> perm(static_cast<size_t>(need + spare));
  std::iota(perm.begin(), perm.end(), static_cast<int32_t>(first_block));
  if (first_block == 0)
    t.fill(*g);
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

// A sequence of a step: q_len new rows ending at kv_len; `slot` false: its rows write no KV (a
// padded graph row).
struct SeqSpec {
  int64_t q_len, kv_len;
  bool slot = true;
};
inline std::vector<int64_t> kvLens(const std::vector<SeqSpec>& specs) {
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
inline StepRows stepRows(const std::vector<SeqSpec>& specs, const std::vector<std::vector<int32_t>>& tables,
                         int64_t tpb, bool write, bool two_tables) {
  StepRows s;
  for (size_t i = 0; i < specs.size(); ++i) {
    const SeqSpec& sp = specs[i];
    s.seqs.push_back(
        StepSeq{s.rows, sp.q_len, sp.kv_len, tables[i], two_tables ? static_cast<int32_t>(i % 2) : 0});
    for (int64_t r = 0; r < sp.q_len; ++r) {
      const int64_t at = sp.kv_len - sp.q_len + r;
      s.ids.push_back(0);
      s.pos.push_back(static_cast<int32_t>(at));
      s.slots.push_back(write && sp.slot ? int64_t{tables[i][static_cast<size_t>(at / tpb)]} * tpb + at % tpb
                                         : -1);
    }
    s.rows += sp.q_len;
  }
  return s;
}

}  // namespace llmrt
