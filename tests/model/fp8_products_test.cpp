// 8-bit products (DecoderModelOptions::product_codes, `--quantization fp8|int8`) on every golden
// architecture (tests/data/golden: transformers' float32 logits): the model loads and runs with its
// dense products in W8A8, FP8 or INT8 — Conv1D, packed and per-head q/k/v, biases, parallel
// residuals, shared experts — and its logits stay near the reference, yet differ from the exact
// ones (the products really are quantized).
#include <nlohmann/json.hpp>

#include <filesystem>

#include "core/npy.h"
#include "model_test_util.h"

namespace llmrt::test {
namespace {

class Fp8Products : public ::testing::TestWithParam<std::string> {};

void expectNearTheReference(const std::string& model, DType codes) {
  const std::string dir = goldenDir() + "/" + model;
  auto text = readTextFile(dir + "/golden.json");
  ASSERT_TRUE(text.isOk()) << text.status().toString();
  const nlohmann::json g = nlohmann::json::parse(*text);
  DecoderModelOptions options;
  options.product_codes = codes;
  auto m = loadModel(dir, 512, 8, 2, options);
  ASSERT_TRUE(m.isOk()) << m.status().toString();
  const auto& c = g["cases"][0];
  std::vector<int32_t> ids = c["prompt_ids"].get<std::vector<int32_t>>();
  auto want = readNpy(dir + "/" + c["logits_file"].get<std::string>());
  ASSERT_TRUE(want.isOk()) << want.status().toString();
  auto logits = promptLogits(*m, ids);
  ASSERT_TRUE(logits.isOk()) << logits.status().toString();
  const std::vector<float>& got = *logits;
  ASSERT_EQ(got.size(), want->data.size());
  double num = 0, den = 0, max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want->data[i];
    ASSERT_TRUE(std::isfinite(got[i])) << model << " at " << i;
    num += d * d;
    den += static_cast<double>(want->data[i]) * want->data[i];
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(want->data[i])));
    max_diff = std::max(max_diff, std::fabs(d));
  }
  const double rel = std::sqrt(num / den);
  // Random tiny weights (hidden 32-128) quantize worse than trained ones: 4-14% here; a misplaced
  // row, scale or part would be of the order of the logits themselves.
  EXPECT_LT(rel, 0.2) << model << ": relative L2 distance to the float32 reference";
  EXPECT_GT(max_diff, 1e-4 * max_ref + 1e-5) << model << ": as exact as the 32-bit products";
  std::printf("%s: %s products, relative L2 %.4f, max |diff| %.4f of max |logit| %.3f\n", model.c_str(),
              codes == DType::kI8 ? "INT8" : "FP8", rel,
              max_diff, max_ref);
}

// A CPU backend whose norms and MLP activations write the 8-bit products' inputs quantized
// (Backend::productInputDtype, as the CUDA backend's fused kernels do); counts those writes.
class QuantizingCpu : public CpuBackend {
 public:
  QuantizingCpu() : CpuBackend(2) {}
  DType productInputDtype(const TensorView& w) const override {
    return isRowQuantized(w.dtype) ? w.dtype : activationDtype();
  }
  void rmsNorm(const TensorView& x, const TensorView& w, float eps, TensorView out) override {
    quantized_writes += isRowQuantized(out.dtype);
    CpuBackend::rmsNorm(x, w, eps, out);
  }
  void siluMul(const TensorView& gate_up, TensorView out) override {
    quantized_writes += isRowQuantized(out.dtype);
    CpuBackend::siluMul(gate_up, out);
  }
  int quantized_writes = 0;
};

// The model hands the products of its Llama-style layers inputs quantized by the ops that write
// them where the backend asks for it, and the logits are the same bits as with the products
// quantizing their own inputs (other wirings keep 16-bit inputs: the same logits too).
void expectQuantizedInputsChangeNothing(const std::string& model, DType codes) {
  const std::string dir = goldenDir() + "/" + model;
  auto text = readTextFile(dir + "/golden.json");
  ASSERT_TRUE(text.isOk()) << text.status().toString();
  const std::vector<int32_t> ids =
      nlohmann::json::parse(*text)["cases"][0]["prompt_ids"].get<std::vector<int32_t>>();
  DecoderModelOptions options;
  options.product_codes = codes;
  auto plain = loadModel(dir, 512, 8, 2, options);
  auto quantizing = loadModel(dir, 512, 8, 2, options, std::make_unique<QuantizingCpu>());
  ASSERT_TRUE(plain.isOk() && quantizing.isOk())
      << plain.status().toString() << quantizing.status().toString();
  auto want = promptLogits(*plain, ids), got = promptLogits(*quantizing, ids);
  ASSERT_TRUE(want.isOk() && got.isOk());
  ASSERT_EQ(got->size(), want->size());
  size_t bad = 0;
  for (size_t i = 0; i < got->size(); ++i)
    if (!((*got)[i] == (*want)[i]) && bad++ < 3) ADD_FAILURE() << model << " at " << i;
  EXPECT_EQ(bad, 0u) << model;
  const ModelConfig& c = plain->config;
  const bool llama_style = c.decoder.norm == NormKind::kRmsNorm &&
                           c.decoder.residual == ResidualWiring::kSequential && c.decoder.num_experts == 0;
  const int writes = static_cast<QuantizingCpu&>(*quantizing->backend).quantized_writes;
  // Llama-style: every layer's two norms and its MLP activation.
  EXPECT_EQ(writes, llama_style ? 3 * c.num_hidden_layers : 0) << model;
}

TEST_P(Fp8Products, QuantizedInputsChangeNoLogit) {
  expectQuantizedInputsChangeNothing(GetParam(), DType::kF8E4M3);
}
TEST_P(Fp8Products, Int8QuantizedInputsChangeNoLogit) {
  expectQuantizedInputsChangeNothing(GetParam(), DType::kI8);
}

TEST_P(Fp8Products, LogitsStayNearTheReference) { expectNearTheReference(GetParam(), DType::kF8E4M3); }
TEST_P(Fp8Products, Int8LogitsStayNearTheReference) { expectNearTheReference(GetParam(), DType::kI8); }

INSTANTIATE_TEST_SUITE_P(Fixtures, Fp8Products, ::testing::ValuesIn(goldenModels()));
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Fp8Products);

}  // namespace
}  // namespace llmrt::test
