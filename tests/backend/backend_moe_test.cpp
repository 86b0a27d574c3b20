// Cross-backend tests of the mixture-of-experts ops: moeAdd (routing: float32 softmax, top-k with
// ties to the lower expert id, optional renormalization; each chosen expert's gated MLP, weighted,
// summed in top-k order into the residual) and sigmoidGatedAdd (Qwen2-MoE's shared expert). Each
// runs on the CPU reference and on the CUDA backend with the same inputs (rounded to 16 bits where
// the CUDA side stores 16 bits). The CUDA paths: decode-sized steps (at most 64 slots) on the
// matrix-vector kernels, larger ones on the grouped tensor-core products (16-bit weights; the
// no_gemv modes send every step there), F32 weights and sizes not a multiple of 8 on the CUDA-core
// grouped products. Skipped without the CUDA backend or without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

using optest::randomVec;
using optest::expectClose;
using optest::roundTo;

struct MoeMode {
  DType weight;
  DType kv;
  const char* name;
  CudaTuning tuning = {};
};

void PrintTo(const MoeMode& m, std::ostream* os) { *os << m.name; }

MoeMode noGemv(DType weight, const char* name) {
  MoeMode m{weight, weight, name};
  m.tuning.gemv = false;
  return m;
}

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

// Router logits [T, E] without near-ties: each row a random permutation of E levels 3 / E apart,
// each moved by less than a tenth of the gap (so both backends rank the experts alike).
std::vector<float> distinctLogits(int64_t T, int64_t E, std::mt19937& rng) {
  std::vector<float> l(static_cast<size_t>(T * E));
  std::vector<int> perm(static_cast<size_t>(E));
  std::uniform_real_distribution<float> jitter(0.0f, 0.3f / static_cast<float>(E));
  for (int64_t t = 0; t < T; ++t) {
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int64_t e = 0; e < E; ++e)
      l[static_cast<size_t>(t * E + e)] =
          3.0f * static_cast<float>(perm[static_cast<size_t>(e)]) / static_cast<float>(E) + jitter(rng);
  }
  return l;
}

struct MoeCase {
  int64_t E, K;
  bool renorm;
  int64_t T, H, I;
  Activation act;
  std::string name() const {
    return "E " + std::to_string(E) + " k " + std::to_string(K) + (renorm ? " renorm" : "") + " T " +
           std::to_string(T) + " h " + std::to_string(H) + " i " + std::to_string(I) + " " + actName(act);
  }
};

class MoeOps : public ::testing::TestWithParam<MoeMode>, protected optest::TwoBackends {
 protected:
  void SetUp() override {
    setUpBackends(GetParam().weight, GetParam().kv, GetParam().tuning,
                  GetParam().weight == DType::kF32 ? DType::kF32 : GetParam().kv);
  }

  DType weights() const { return GetParam().weight; }
  // The dtypes the GPU side of x may have: F32 and the activation dtype.
  std::vector<DType> operandDtypes() const {
    std::vector<DType> d{DType::kF32};
    if (gpu_->activationDtype() != DType::kF32) d.push_back(gpu_->activationDtype());
    return d;
  }
  // Tolerances of the residual's change: float32 throughout (F32 weights); 16-bit weights with
  // float32 activations (hi + lo parts, ~16 bits); 16-bit activations between the products.
  double relTol() const {
    const DType a = gpu_->activationDtype();
    if (a == DType::kF32) return weights() == DType::kF32 ? 1e-5 : 2e-4;
    return a == DType::kBF16 ? 1.2e-2 : 3e-3;
  }
  double absTol() const {
    const DType a = gpu_->activationDtype();
    if (a == DType::kF32) return weights() == DType::kF32 ? 1e-4 : 2e-3;
    return a == DType::kBF16 ? 6e-2 : 1.5e-2;
  }

  // A weight on both backends (rounded to the GPU's weight dtype first).
  std::pair<TensorView, TensorView> weight(std::vector<float> data, Shape shape) {
    roundTo(data, weights());
    return TwoBackends::weight(data, std::move(shape));
  }
  // Experts' weights of a case: [E * 2I, H] (gate ~ x / sqrt(H) scale) and [E * H, I]; `nan_experts`
  // get NaN rows in both.
  struct Experts {
    std::pair<TensorView, TensorView> gate_up, down;
  };
  Experts experts(const MoeCase& c, const std::vector<int64_t>& nan_experts = {}) {
    std::vector<float> gu = randomVec(static_cast<size_t>(c.E * 2 * c.I * c.H), rng_,
                                      1.0f / std::sqrt(static_cast<float>(c.H)));
    std::vector<float> dn = randomVec(static_cast<size_t>(c.E * c.H * c.I), rng_,
                                      1.0f / std::sqrt(static_cast<float>(c.I)));
    for (int64_t e : nan_experts) {
      std::fill_n(gu.begin() + e * 2 * c.I * c.H, 2 * c.I * c.H, NAN);
      std::fill_n(dn.begin() + e * c.H * c.I, c.H * c.I, NAN);
    }
    return {weight(std::move(gu), Shape{c.E * 2 * c.I, c.H}), weight(std::move(dn), Shape{c.E * c.H, c.I})};
  }

  // moeAdd on both backends with x of x_dtype on the GPU, logits as given; compares the residual's
  // change. The residual starts random.
  void check(const MoeCase& c, const Experts& w, const std::vector<float>& logits, DType x_dtype,
             const std::string& what) {
    SCOPED_TRACE(what);
    auto [xc, xg] = put(0, c.T, c.H, randomVec(static_cast<size_t>(c.T * c.H), rng_), x_dtype);
    auto [lc, lg] = put(1, c.T, c.E, logits);
    const std::vector<float> res0 = randomVec(static_cast<size_t>(c.T * c.H), rng_, 2.0f);
    auto [rc, rg] = put(2, c.T, c.H, res0);
    const MoeRouting routing{c.E, c.K, c.renorm};
    cpu_->moeAdd(xc, lc, w.gate_up.first, w.down.first, routing, c.act, rc);
    gpu_->moeAdd(xg, lg, w.gate_up.second, w.down.second, routing, c.act, rg);
    std::vector<float> got = get(*gpu_, rg), want = get(*cpu_, rc);
    if (HasFailure()) return;
    for (size_t i = 0; i < res0.size(); ++i) {
      got[i] -= res0[i];
      want[i] -= res0[i];
    }
    expectClose(got, want, relTol(), absTol(), "moeAdd " + std::string(dtypeName(x_dtype)) + " x");
  }

  // One decode row per sequence, T rows (what a recorded step looks like).
  void beginDecodeStep(int64_t T) {
    step_ids_.assign(static_cast<size_t>(T), 0);
    step_pos_.assign(static_cast<size_t>(T), 0);
    step_slots_.assign(static_cast<size_t>(T), -1);
    step_seqs_.clear();
    for (int64_t r = 0; r < T; ++r) step_seqs_.push_back(StepSeq{r, 1, 1, step_table_, 0});
    StepInputs in;
    in.token_ids = step_ids_;
    in.positions = step_pos_;
    in.slots = step_slots_;
    in.seqs = step_seqs_;
    begin(in);
  }

  std::mt19937 rng_{2718};
  std::vector<int32_t> step_ids_, step_pos_;
  std::vector<int64_t> step_slots_;
  std::vector<StepSeq> step_seqs_;
  const std::vector<int32_t> step_table_{0};
};

// Every routing shape of the brief on decode and prefill sizes: 4, 8 and 60 experts, top 1, 2, 4,
// with and without renormalization, 1 to 300 tokens (up to 64 slots the matrix-vector path, more
// the grouped products), x F32 and (in turn) the activation dtype.
TEST_P(MoeOps, MoeAddMatchesCpu) {
  const int64_t H = 128, I = 192;
  int n = 0;
  for (int64_t E : {4, 8, 60}) {
    const Experts w = experts(MoeCase{E, 1, true, 1, H, I, Activation::kSilu});
    for (int64_t K : {1, 2, 4}) {
      for (bool renorm : {false, true}) {
        for (int64_t T : {1, 2, 7, 64, 300}) {
          const MoeCase c{E, K, renorm, T, H, I, Activation::kSilu};
          const std::vector<DType> xd = operandDtypes();
          check(c, w, distinctLogits(T, E, rng_), xd[static_cast<size_t>(n++) % xd.size()], c.name());
          if (HasFailure()) return;
        }
      }
    }
  }
}

// Hidden / inter sizes: multiples of 64, multiples of 8 only (the tensor-core and matrix-vector
// paths with partial tiles), and sizes no 16-byte row takes (the CUDA-core path); the activations.
TEST_P(MoeOps, MoeAddSizesAndActivations) {
  struct Size {
    int64_t H, I;
  };
  for (const Size& s : {Size{64, 64}, Size{256, 128}, Size{72, 40}, Size{136, 200}, Size{100, 36}, Size{37, 13}}) {
    for (Activation act : {Activation::kSilu, Activation::kGeluTanh, Activation::kGelu, Activation::kRelu}) {
      const Experts w = experts(MoeCase{8, 2, true, 1, s.H, s.I, act});
      for (int64_t T : {1, 5, 64, 130}) {
        for (DType xd : operandDtypes()) {
          const MoeCase c{8, 2, true, T, s.H, s.I, act};
          check(c, w, distinctLogits(T, 8, rng_), xd, c.name());
          if (HasFailure()) return;
        }
      }
    }
  }
}

// Ties in the router logits go to the lower expert id on both backends: a row of equal logits
// (experts 0 .. k-1), rows drawn from three values (many ties), with distinct experts' weights so a
// different pick changes the output.
TEST_P(MoeOps, MoeAddRoutingTies) {
  const int64_t E = 8, H = 64, I = 64;
  const Experts w = experts(MoeCase{E, 1, true, 1, H, I, Activation::kSilu});
  std::uniform_int_distribution<int> level(0, 2);
  for (int64_t K : {1, 2, 4}) {
    for (bool renorm : {false, true}) {
      for (int64_t T : {3, 9, 100}) {
        std::vector<float> logits(static_cast<size_t>(T * E));
        for (float& v : logits) v = static_cast<float>(level(rng_));
        std::fill_n(logits.begin(), E, 0.5f);  // token 0: every expert alike
        const MoeCase c{E, K, renorm, T, H, I, Activation::kSilu};
        check(c, w, logits, DType::kF32, "ties " + c.name());
        if (HasFailure()) return;
      }
    }
  }
}

// An expert no token chooses is never read: experts 2 and 5 hold NaN weights and lose every
// routing, and the output stays finite (and right) on every path.
TEST_P(MoeOps, MoeAddNeverReadsUnchosenExperts) {
  const int64_t E = 8, H = 128, I = 64;
  const Experts w = experts(MoeCase{E, 1, true, 1, H, I, Activation::kSilu}, {2, 5});
  for (int64_t K : {1, 2, 4}) {
    for (int64_t T : {1, 3, 64, 300}) {
      std::vector<float> logits = distinctLogits(T, E, rng_);
      for (int64_t t = 0; t < T; ++t) logits[static_cast<size_t>(t * E + 2)] = logits[static_cast<size_t>(t * E + 5)] = -30.0f;
      const MoeCase c{E, K, true, T, H, I, Activation::kSilu};
      check(c, w, logits, operandDtypes().back(), "NaN experts " + c.name());
      if (HasFailure()) return;
    }
  }
}

// A recorded step (CUDA graph) replays with the routing of its new inputs: the logits, x and the
// residual change between replays (in the same buffers); decode-sized (matrix-vector path) and
// prefill-sized (grouped products) steps.
TEST_P(MoeOps, MoeAddRecordedWithChangingRouting) {
  if (!gpu_->canRecord()) GTEST_SKIP() << "recording disabled";
  const int64_t E = 8, K = 2, H = 128, I = 64;
  const Experts w = experts(MoeCase{E, K, true, 1, H, I, Activation::kSilu});
  const MoeRouting routing{E, K, true};
  for (int64_t T : {3, 100}) {
    SCOPED_TRACE("T " + std::to_string(T));
    beginDecodeStep(T);
    const DType xd = operandDtypes().back();
    TensorView xg = gpu_->scratch(0, T, H, xd), lg = gpu_->scratch(1, T, E), rg = gpu_->scratch(2, T, H);
    for (int round = 0; round < 4; ++round) {
      SCOPED_TRACE("round " + std::to_string(round));
      auto [xc, xg2] = put(0, T, H, randomVec(static_cast<size_t>(T * H), rng_), xd);
      auto [lc, lg2] = put(1, T, E, distinctLogits(T, E, rng_));
      auto [rc, rg2] = put(2, T, H, randomVec(static_cast<size_t>(T * H), rng_));
      ASSERT_EQ(xg2.data, xg.data);
      ASSERT_EQ(lg2.data, lg.data);
      ASSERT_EQ(rg2.data, rg.data);
      cpu_->moeAdd(xc, lc, w.gate_up.first, w.down.first, routing, Activation::kSilu, rc);
      if (round == 0)  // sizes the workspace outside the recording
        gpu_->moeAdd(xg, lg, w.gate_up.second, w.down.second, routing, Activation::kSilu, rg);
      else
        gpu_->recordOrReplay(77, [&] {
          gpu_->moeAdd(xg, lg, w.gate_up.second, w.down.second, routing, Activation::kSilu, rg);
        });
      expectClose(get(*gpu_, rg), get(*cpu_, rc), relTol(), absTol(), "recorded moeAdd");
      ASSERT_TRUE(gpu_->canRecord()) << "the recording failed";
      if (HasFailure()) return;
    }
  }
}

// A step recorded with a workspace sized for fewer tokens runs in chunks of what it holds (and
// replays so), with the same results.
TEST_P(MoeOps, MoeAddRecordedInChunks) {
  if (!gpu_->canRecord()) GTEST_SKIP() << "recording disabled";
  const int64_t E = 8, K = 2, H = 128, I = 64, T = 150;
  const Experts w = experts(MoeCase{E, K, true, 1, H, I, Activation::kSilu});
  const MoeRouting routing{E, K, true};
  {  // one token, unrecorded: the workspace fits a few tokens
    auto [xc, xg] = put(0, 1, H, randomVec(static_cast<size_t>(H), rng_));
    auto [lc, lg] = put(1, 1, E, distinctLogits(1, E, rng_));
    auto [rc, rg] = put(2, 1, H, randomVec(static_cast<size_t>(H), rng_));
    cpu_->moeAdd(xc, lc, w.gate_up.first, w.down.first, routing, Activation::kSilu, rc);
    gpu_->moeAdd(xg, lg, w.gate_up.second, w.down.second, routing, Activation::kSilu, rg);
    expectClose(get(*gpu_, rg), get(*cpu_, rc), relTol(), absTol(), "one token");
  }
  // The step's buffers, at their full size before recording (scratch may not grow while recording).
  const DType xd = operandDtypes().back();
  gpu_->scratch(0, T, H, xd);
  gpu_->scratch(1, T, E);
  gpu_->scratch(2, T, H);
  beginDecodeStep(T);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto [xc, xg] = put(0, T, H, randomVec(static_cast<size_t>(T * H), rng_), xd);
    auto [lc, lg] = put(1, T, E, distinctLogits(T, E, rng_));
    auto [rc, rg] = put(2, T, H, randomVec(static_cast<size_t>(T * H), rng_));
    cpu_->moeAdd(xc, lc, w.gate_up.first, w.down.first, routing, Activation::kSilu, rc);
    gpu_->recordOrReplay(78, [&, xg = xg, lg = lg, rg = rg] {
      gpu_->moeAdd(xg, lg, w.gate_up.second, w.down.second, routing, Activation::kSilu, rg);
    });
    expectClose(get(*gpu_, rg), get(*cpu_, rc), relTol(), absTol(), "chunked recorded moeAdd");
    ASSERT_TRUE(gpu_->canRecord()) << "the recording failed";
    if (HasFailure()) return;
  }
}

// sigmoidGatedAdd: residual += sigmoid(gate) * y, gate a column of a wider buffer, y F32 or the
// activation dtype, residual a column slice.
TEST_P(MoeOps, SigmoidGatedAdd) {
  for (int64_t rows : {1, 7, 33}) {
    for (int64_t cols : {77, 344, 2048}) {
      for (DType yd : operandDtypes()) {
        const std::string what = "sigmoidGatedAdd " + std::to_string(rows) + "x" + std::to_string(cols) + " y " +
                                 std::string(dtypeName(yd));
        auto [yc, yg] = put(0, rows, cols, randomVec(static_cast<size_t>(rows * cols), rng_), yd);
        auto [gc, gg] = put(1, rows, 3, randomVec(static_cast<size_t>(rows * 3), rng_, 3.0f));
        auto [rc, rg] = put(2, rows, cols + 4, randomVec(static_cast<size_t>(rows * (cols + 4)), rng_));
        cpu_->sigmoidGatedAdd(yc, optest::columns(gc, 1, 1), optest::columns(rc, 2, cols));
        gpu_->sigmoidGatedAdd(yg, optest::columns(gg, 1, 1), optest::columns(rg, 2, cols));
        expectClose(get(*gpu_, rg), get(*cpu_, rc), 1e-6, 1e-5, what);
      }
    }
  }
}

// moeAdd refuses a top_k above num_experts with a message naming them (the backend then reports
// it at the next call that returns a Status).
TEST_P(MoeOps, MoeAddRefusesBadRouting) {
  const int64_t E = 4, H = 64, I = 64, T = 2;
  const Experts w = experts(MoeCase{E, 1, true, 1, H, I, Activation::kSilu});
  auto [xc, xg] = put(0, T, H, randomVec(static_cast<size_t>(T * H), rng_));
  auto [lc, lg] = put(1, T, E, distinctLogits(T, E, rng_));
  auto [rc, rg] = put(2, T, H, randomVec(static_cast<size_t>(T * H), rng_));
  gpu_->moeAdd(xg, lg, w.gate_up.second, w.down.second, MoeRouting{E, 5, true}, Activation::kSilu, rg);
  std::vector<float> sink(static_cast<size_t>(T * H));
  const Status s = gpu_->copyToHost(rg, sink.data());
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.toString().find("top_k"), std::string::npos) << s.toString();
}

INSTANTIATE_TEST_SUITE_P(Modes, MoeOps,
                         ::testing::Values(MoeMode{DType::kF32, DType::kF32, "f32"},
                                           MoeMode{DType::kBF16, DType::kF32, "bf16_weights"},
                                           MoeMode{DType::kBF16, DType::kBF16, "bf16"},
                                           MoeMode{DType::kF16, DType::kF16, "fp16"},
                                           MoeMode{DType::kF16, DType::kF32, "fp16_weights"}),
                         [](const ::testing::TestParamInfo<MoeMode>& i) { return std::string(i.param.name); });
// Decode-sized steps on the grouped tensor-core products too (gemv off).
INSTANTIATE_TEST_SUITE_P(Tuned, MoeOps,
                         ::testing::Values(noGemv(DType::kBF16, "bf16_no_gemv"), noGemv(DType::kF16, "fp16_no_gemv")),
                         [](const ::testing::TestParamInfo<MoeMode>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace llmrt
