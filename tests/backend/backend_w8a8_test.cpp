// 8-bit products (Backend::loadQuantizedWeight) on the CUDA backend against the CPU reference: the
// same codes, scales and (rounded) inputs, so both quantize x to the same codes.
//   FP8: the code products are exact, and the sums differ by the tensor cores' FP8 accumulation
//   (fewer bits than float32: about 1e-4 relative at these sizes) and the output's rounding.
//   INT8: bit for bit — the code products are summed in int32 (exact, in any order: the
//   matrix-vector kernel's MMAs, cuBLASLt's int8 GEMM), and both scale the sums with the same
//   float32 operations.
// Decode-sized products take the tensor-core matrix-vector kernel (k % 64 == 0, m <= fp8_gemv_rows),
// the rest cuBLASLt's 8-bit GEMM; the "cublaslt" mode sends every product to cuBLASLt. One row
// takes the row-per-warp matrix-vector kernel by default; the "row_gemv" modes send 1-2 rows
// there, "block_gemv" none.
#include <functional>

#include "backend_ops_fixture.h"
#include "core/fp8.h"
#include "core/int8.h"

namespace llmrt {
namespace {

// Tolerances of FP8: relative L2 error, and the largest difference as a share of the largest |ref|.
constexpr double kRel = 1e-3, kAbs = 2e-3;

class BackendW8a8 : public BackendOps {
 protected:
  // A random [n, k] weight quantized per row into `codes` (F8_E4M3 or I8), loaded on both backends.
  std::pair<TensorView, TensorView> quantizedWeight(int64_t n, int64_t k, DType codes) {
    std::vector<float> w = randomVec(static_cast<size_t>(n * k), rng_, 0.05f);
    std::vector<uint8_t>& c = codes_.emplace_back(static_cast<size_t>(n * k));
    std::vector<float>& scales = scales_.emplace_back(static_cast<size_t>(n));
    const TensorView wv(w.data(), DType::kF32, Shape{n, k});
    if (codes == DType::kI8 && compressor_codes_) {
      // llm-compressor's symmetric int8: scale amax / 127.5, codes -128..127 (checkpoints keep them).
      for (int64_t i = 0; i < n; ++i) {
        float amax = 0.0f;
        for (int64_t j = 0; j < k; ++j) amax = std::max(amax, std::fabs(w[static_cast<size_t>(i * k + j)]));
        scales[static_cast<size_t>(i)] = amax / 127.5f;
        for (int64_t j = 0; j < k; ++j)
          c[static_cast<size_t>(i * k + j)] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(
              std::nearbyint(w[static_cast<size_t>(i * k + j)] / scales[static_cast<size_t>(i)]), -128.0f, 127.0f)));
      }
    } else if (codes == DType::kI8) {
      quantizeInt8Rows(wv, reinterpret_cast<int8_t*>(c.data()), scales.data());
    } else
      quantizeFp8Rows(wv, c.data(), scales.data());
    const TensorView cv(c.data(), codes, Shape{n, k}), sv(scales.data(), DType::kF32, Shape{n});
    auto cw = cpu_->loadQuantizedWeight(cv, sv, "w"), gw = gpu_->loadQuantizedWeight(cv, sv, "w");
    EXPECT_TRUE(cw.isOk()) << cw.status().toString();
    EXPECT_TRUE(gw.isOk()) << gw.status().toString();
    EXPECT_TRUE(gpu_->finishWeights().isOk());
    return {*cw, *gw};
  }
  // FP8: within the tolerances (a 16-bit output may round the other way where the sums differ: up
  // to a step on a few entries); INT8: equal.
  void expectMatch(DType codes, const std::vector<float>& got, const std::vector<float>& want, DType out_dtype,
                   const std::string& what) {
    if (codes == DType::kF8E4M3) {
      expectClose(got, want, kRel + halfStep(out_dtype), kAbs * maxAbs(want), what, halfStep(out_dtype));
      return;
    }
    ASSERT_EQ(got.size(), want.size()) << what;
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (!(got[i] == want[i]) && bad++ < 5) ADD_FAILURE() << what << " at " << i << ": " << got[i] << " vs " << want[i];
    EXPECT_EQ(bad, 0u) << what;
  }
  void linearAndLinearAdd(DType codes);
  void zeroSpikyAndTiedRows(DType codes);
  void quantizedInputs(DType codes);
  bool compressor_codes_ = false;  // int8 weights as llm-compressor writes them (codes down to -128)
  std::deque<std::vector<uint8_t>> codes_;
  std::deque<std::vector<float>> scales_;
};

void BackendW8a8::linearAndLinearAdd(DType codes) {
  struct Case {
    int64_t m, k, n;
    bool bias;
  };
  const std::string kind = codes == DType::kI8 ? "int8 " : "fp8 ";
  // k 1008: a multiple of 16, not of 64 (cuBLASLt even at one row); n 5 / 33 / 1001: partial
  // 16-row blocks; m 1-8: the matrix-vector kernel; m 9, 64, 300: cuBLASLt; 2048 x 20000: sums in
  // bands of rows (kW8a8SumsBytes: 838 rows here); k 4160 at 1 and 2 rows: whole steps of the
  // row-per-warp kernel, then a last one with lanes past the row's end; 1 x 14336: whole warps.
  for (const Case& c :
       {Case{1, 64, 5, false}, Case{1, 4096, 1001, true}, Case{2, 256, 512, false}, Case{3, 1024, 33, true},
        Case{8, 2048, 64, true}, Case{9, 512, 130, false}, Case{1, 1008, 48, true}, Case{64, 4096, 96, false},
        Case{300, 512, 200, true}, Case{2048, 64, 20000, true}, Case{2, 4160, 77, true},
        Case{1, 4160, 24, false}, Case{1, 14336, 40, false}}) {
    const std::string what = kind + std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n);
    std::vector<float> x = randomVec(static_cast<size_t>(c.m * c.k), rng_, 3.0f);
    roundTo(x, gpu_->activationDtype());
    const std::vector<float> b = randomVec(static_cast<size_t>(c.n), rng_);
    const auto w = quantizedWeight(c.n, c.k, codes);
    const auto bias = weight(b, Shape{c.n});
    const auto xs = put(0, c.m, c.k, x, gpu_->activationDtype());
    for (const DType out_dtype : {DType::kF32, gpu_->activationDtype()}) {
      const auto [got, want] = linearBoth(xs, w, c.bias ? &bias : nullptr, c.n, out_dtype);
      expectMatch(codes, got, want, out_dtype, "linear " + what + " out " + std::string(dtypeName(out_dtype)));
    }
    const auto [got, want] =
        linearAddBoth(xs, w, c.bias ? &bias : nullptr, randomVec(static_cast<size_t>(c.m * c.n), rng_, 4.0f));
    expectMatch(codes, got, want, DType::kF32, "linearAdd " + what);
  }
}

// Rows of zeros (scale 1), with one huge entry (all others quantize to zero or subnormals) and
// with codes at ties (x.5: INT8 rounds to even) give the CPU's values too.
void BackendW8a8::zeroSpikyAndTiedRows(DType codes) {
  const int64_t m = 4, k = 128, n = 32;
  std::vector<float> x(static_cast<size_t>(m * k), 0.0f);
  for (int64_t j = 0; j < k; ++j) {
    x[static_cast<size_t>(k + j)] = 1e-3f * static_cast<float>(j % 7);
    x[static_cast<size_t>(2 * k + j)] = -0.5f + 0.01f * static_cast<float>(j);
    x[static_cast<size_t>(3 * k + j)] = static_cast<float>(j % 5) * 0.5f - 1.0f;
  }
  x[static_cast<size_t>(k + 5)] = 3000.0f;
  x[static_cast<size_t>(3 * k)] = 2.0f;  // amax 2: codes of +-0.5 are 31.75, of +-1 63.5 (a tie)
  roundTo(x, gpu_->activationDtype());
  auto [wc, wg] = quantizedWeight(n, k, codes);
  auto [xc, xg] = put(0, m, k, x, gpu_->activationDtype());
  for (int gemv : {1, 0}) {
    const int64_t rows = gemv ? 1 : m;  // one row: the matrix-vector kernel
    TensorView xc_r = xc, xg_r = xg;
    xc_r.shape[0] = xg_r.shape[0] = rows;
    auto [oc, og] = put(1, rows, n, {});
    cpu_->linear(xc_r, wc, nullptr, oc);
    gpu_->linear(xg_r, wg, nullptr, og);
    expectMatch(codes, get(*gpu_, og), get(*cpu_, oc), DType::kF32, "special rows, m " + std::to_string(rows));
  }
}

// The ops that write a product's input already quantized (Backend::productInputDtype: rmsNorm's
// and siluMul's fused kernels, gatedActivation through the quantization kernel) hand the product
// the codes and scales it would compute from their 16-bit outputs, so its outputs are the same
// bits, on the matrix-vector kernel (m <= 8) and cuBLASLt; and on the CPU reference likewise.
void BackendW8a8::quantizedInputs(DType codes) {
  const int64_t n = 48;
  const DType act = gpu_->activationDtype();
  for (const int64_t k : {1024, 4096, 14336}) {
    const auto w = quantizedWeight(n, k, codes);
    ASSERT_EQ(gpu_->productInputDtype(w.second), codes) << k;
    const auto norm_w = weight(randomVec(static_cast<size_t>(k), rng_, 1.0f), Shape{k});
    for (const int64_t m : {1, 5, 300}) {
      const std::string what = std::to_string(m) + "x" + std::to_string(k);
      auto [xc, xg] = put(0, m, k, randomVec(static_cast<size_t>(m * k), rng_, 2.0f));
      auto [guc, gug] = put(5, m, 2 * k, randomVec(static_cast<size_t>(m * 2 * k), rng_, 3.0f), act);
      // (op, its name): each writes [m, k] from xg / gug into `out`.
      const std::vector<std::pair<
          std::function<void(Backend&, const TensorView&, const TensorView&, TensorView)>, std::string>>
          ops = {{[](Backend& b, const TensorView& x, const TensorView& w1, TensorView out) {
                    b.rmsNorm(x, w1, 1e-5f, out);
                  },
                  "rmsNorm"},
                 {[](Backend& b, const TensorView& gu, const TensorView&, TensorView out) {
                    b.siluMul(gu, out);
                  },
                  "siluMul"},
                 {[](Backend& b, const TensorView& gu, const TensorView&, TensorView out) {
                    b.gatedActivation(Activation::kGeluTanh, gu, out);
                  },
                  "gatedActivation"}};
      for (const auto& [op, name] : ops) {
        const bool norm = name == "rmsNorm";
        for (Backend* b : {gpu_.get(), cpu_.get()}) {
          const bool gpu = b == gpu_.get();
          const TensorView& in = norm ? (gpu ? xg : xc) : (gpu ? gug : guc);
          const TensorView& nw = gpu ? norm_w.second : norm_w.first;
          const TensorView& wq = gpu ? w.second : w.first;
          TensorView plain = b->scratch(3, m, k, gpu ? act : DType::kF32), quant = b->scratch(4, m, k, codes);
          ASSERT_NE(quant.data, nullptr);
          op(*b, in, nw, plain);
          op(*b, in, nw, quant);
          TensorView out_plain = b->scratch(6, m, n), out_quant = b->scratch(7, m, n);
          b->linear(plain, wq, nullptr, out_plain);
          b->linear(quant, wq, nullptr, out_quant);
          const std::vector<float> want = get(*b, out_plain), got = get(*b, out_quant);
          size_t bad = 0;
          for (size_t i = 0; i < got.size(); ++i)
            if (!(got[i] == want[i]) && bad++ < 3)
              ADD_FAILURE() << (gpu ? "gpu " : "cpu ") << name << " " << what << " at " << i << ": " << got[i]
                            << " vs " << want[i];
          EXPECT_EQ(bad, 0u) << (gpu ? "gpu " : "cpu ") << name << " " << what;
        }
      }
    }
  }
}

TEST_P(BackendW8a8, Fp8LinearAndLinearAddMatchTheCpuReference) { linearAndLinearAdd(DType::kF8E4M3); }
TEST_P(BackendW8a8, Int8LinearAndLinearAddEqualTheCpuReference) { linearAndLinearAdd(DType::kI8); }
TEST_P(BackendW8a8, Int8CheckpointCodesDownToMinus128EqualTheCpuReference) {
  compressor_codes_ = true;  // (INT8 checkpoints' own codes reach the products as they are)
  linearAndLinearAdd(DType::kI8);
}
TEST_P(BackendW8a8, Fp8ZeroSpikyAndTiedRows) { zeroSpikyAndTiedRows(DType::kF8E4M3); }
TEST_P(BackendW8a8, Int8ZeroSpikyAndTiedRows) { zeroSpikyAndTiedRows(DType::kI8); }
TEST_P(BackendW8a8, Fp8QuantizedInputsGiveTheSameProducts) { quantizedInputs(DType::kF8E4M3); }
TEST_P(BackendW8a8, Int8QuantizedInputsGiveTheSameProducts) { quantizedInputs(DType::kI8); }

INSTANTIATE_TEST_SUITE_P(
    Modes, BackendW8a8,
    ::testing::Values(Mode{DType::kF32, DType::kF32, "f32"}, Mode{DType::kBF16, DType::kBF16, "bf16"},
                      Mode{DType::kF16, DType::kF16, "fp16"},
                      tuned("bf16_cublaslt", [](CudaTuning& t) { t.fp8_gemv_rows = 0; }),
                      tuned("bf16_row_gemv", [](CudaTuning& t) { t.fp8_row_gemv_rows = 2; }),
                      tuned("bf16_block_gemv", [](CudaTuning& t) { t.fp8_row_gemv_rows = 0; }),
                      Mode{DType::kF32, DType::kF32, "f32_row_gemv",
                           [] {
                             CudaTuning t;
                             t.fp8_row_gemv_rows = 2;
                             return t;
                           }()}),
    [](const ::testing::TestParamInfo<Mode>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace llmrt
