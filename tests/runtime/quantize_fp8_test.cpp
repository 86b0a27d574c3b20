// `llmrt quantize --method fp8|int8` (quantizeCheckpoint) on the bundled model: every product matrix
// becomes float8 codes with one scale per row, within float8's rounding of the original; the
// output loads, is described as fp8, and predicts what the 16-bit model predicts; bad requests
// are one-line errors that leave nothing behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "../loader/loader_test_util.h"
#include "backend/cpu/cpu_backend.h"
#include "llmrt/llm.h"
#include "llmrt/quantize.h"
#include "llmrt/tokenizer.h"
#include "loader/decoder_weights.h"
#include "loader/kv_cache_scales.h"
#include "loader/model_directory.h"
#include "model/decoder_model.h"
#include "runtime/forward_batch.h"
#include "runtime/step_builder.h"
#include "test_models.h"

namespace llmrt {
namespace {

using testutil::TempDir;

std::vector<float> f32(const TensorView& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  convertToF32(t.data, t.dtype, v.data(), v.size());
  return v;
}

TEST(QuantizeFp8, ProductMatricesBecomeFloat8WithinItsRounding) {
  TempDir tmp;
  const std::string out = tmp.file("fp8");
  auto r = quantizeCheckpoint({.method = "fp8", .model = testmodels::bundledDir(), .output = out});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->quantized_tensors, 6 * 7);  // q, k, v, o, gate, up, down in 6 layers
  EXPECT_EQ(r->copied_tensors, 1 + 6 * 2 + 1);  // embeddings, two norms per layer, the final norm
  EXPECT_LT(r->bytes_out, r->bytes_in);
  auto src = ModelDirectory::open(testmodels::bundledDir());
  auto q = ModelDirectory::open(out);
  ASSERT_TRUE(src.isOk() && q.isOk()) << q.status().toString();
  EXPECT_EQ(q->config.weight_quantization, "fp8");
  EXPECT_EQ(q->config.fp8_block_rows, 0);
  EXPECT_TRUE(q->unused_tensors.empty());
  EXPECT_TRUE(std::filesystem::exists(out + "/tokenizer.json"));
  int64_t checked = 0;
  for (const ExpectedTensor& e : expectedTensors(src->config)) {
    const WeightEntry* w = q->weights.find(e.name);
    ASSERT_NE(w, nullptr) << e.name;
    if (!e.product_matrix) {
      EXPECT_NE(w->dtype, DType::kF8E4M3) << e.name;
      continue;
    }
    ASSERT_EQ(w->dtype, DType::kF8E4M3) << e.name;
    const std::vector<float> codes = f32(*q->weights.tensor(e.name));
    const std::vector<float> scale = f32(*q->weights.tensor(e.name + "_scale"));
    const std::vector<float> orig = f32(*src->weights.tensor(e.name));
    const int64_t rows = e.shape[0], cols = e.shape[1];
    ASSERT_EQ(scale.size(), static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i) {
      float amax = 0.0f, code_max = 0.0f;
      for (int64_t j = 0; j < cols; ++j) {
        amax = std::max(amax, std::abs(orig[static_cast<size_t>(i * cols + j)]));
        code_max = std::max(code_max, std::abs(codes[static_cast<size_t>(i * cols + j)]));
      }
      const float s = scale[static_cast<size_t>(i)];
      EXPECT_FLOAT_EQ(s, amax / 448.0f) << e.name << " row " << i;
      EXPECT_EQ(code_max, 448.0f) << e.name << " row " << i;  // the row's largest value uses the full range
      for (int64_t j = 0; j < cols; ++j) {
        const float w0 = orig[static_cast<size_t>(i * cols + j)];
        const float back = codes[static_cast<size_t>(i * cols + j)] * s;
        // e4m3: 3 mantissa bits (half a step: 2^-4 relative); subnormals below 2^-6 step by 2^-9.
        ASSERT_LE(std::abs(back - w0), std::max(std::abs(w0) / 16.0f, s * 0x1p-10f) * 1.0001f)
            << e.name << " [" << i << ", " << j << "]";
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 42);
}

// --method int8: symmetric int8 codes per row (scale = max|row| / 127, round to nearest), read
// back as an INT8 checkpoint, within half a step of the original, the row's largest value at
// +-127; the model (INT8 products, the checkpoint's own) predicts as the 16-bit one.
TEST(QuantizeInt8, ProductMatricesBecomeInt8WithinHalfAStepAndPredictAsBefore) {
  TempDir tmp;
  const std::string out = tmp.file("int8");
  auto r = quantizeCheckpoint({.method = "int8", .model = testmodels::bundledDir(), .output = out});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->quantized_tensors, 6 * 7);
  auto src = ModelDirectory::open(testmodels::bundledDir());
  auto q = ModelDirectory::open(out);
  ASSERT_TRUE(src.isOk() && q.isOk()) << q.status().toString();
  EXPECT_EQ(q->config.weight_quantization, "int8");
  EXPECT_TRUE(q->unused_tensors.empty());
  int64_t checked = 0;
  for (const ExpectedTensor& e : expectedTensors(src->config)) {
    if (!e.product_matrix) continue;
    const WeightEntry* w = q->weights.find(e.name);
    ASSERT_NE(w, nullptr) << e.name;
    ASSERT_EQ(w->dtype, DType::kI8) << e.name;
    const TensorView codes = *q->weights.tensor(e.name);
    const std::vector<float> scale = f32(*q->weights.tensor(e.name + "_scale"));
    const std::vector<float> orig = f32(*src->weights.tensor(e.name));
    const int64_t rows = e.shape[0], cols = e.shape[1];
    for (int64_t i = 0; i < rows; ++i) {
      const float s = scale[static_cast<size_t>(i)];
      int code_max = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const int c = static_cast<const int8_t*>(codes.data)[i * cols + j];
        code_max = std::max(code_max, std::abs(c));
        ASSERT_LE(std::abs(static_cast<float>(c) * s - orig[static_cast<size_t>(i * cols + j)]), s * 0.5001f)
            << e.name << " [" << i << ", " << j << "]";
      }
      EXPECT_EQ(code_max, 127) << e.name << " row " << i;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 42);
  auto next = [](const std::string& dir) {
    LlmArgs args;
    args.model = dir;
    args.backend = BackendKind::kCpu;
    args.num_threads = 2;
    auto llm = LLM::create(args);
    EXPECT_TRUE(llm.isOk()) << llm.status().toString();
    SamplingParams sp;
    sp.temperature = 0.0f;
    sp.max_tokens = 8;
    sp.ignore_eos = true;
    auto outs = (*llm)->generate({Prompt::fromText("Once upon a time")}, {sp});
    EXPECT_TRUE(outs.isOk());
    return (*outs)[0].outputs[0].token_ids;
  };
  const std::vector<TokenId> a = next(testmodels::bundledDir()), b = next(out);
  ASSERT_EQ(a.size(), b.size());
  size_t same = 0;
  for (size_t i = 0; i < a.size() && a[i] == b[i]; ++i) ++same;
  EXPECT_GE(same, 4u) << "int8 weights should keep the first greedy tokens";
}

// The quantized checkpoint predicts as the 32-bit model: its weights alone (quantization none:
// dequantized into 32-bit products) and with FP8 products (the default for it: activations
// quantized per token too, a little further off).
TEST(QuantizeFp8, TheQuantizedModelPredictsAsThe16BitOne) {
  TempDir tmp;
  const std::string out = tmp.file("fp8");
  ASSERT_TRUE(quantizeCheckpoint({.method = "fp8", .model = testmodels::bundledDir(), .output = out}).isOk());
  auto logits = [](const std::string& dir, Quantization q) {
    LlmArgs args;
    args.model = dir;
    args.backend = BackendKind::kCpu;
    args.num_threads = 2;
    args.quantization = q;
    auto llm = LLM::create(args);
    EXPECT_TRUE(llm.isOk()) << llm.status().toString();
    SamplingParams sp;
    sp.temperature = 0.0f;
    sp.max_tokens = 1;
    RequestOptions ro;
    ro.return_context_logits = true;
    auto outs = (*llm)->generate(
        {Prompt::fromText("The program reads the configuration file and prints the list of packages that "
                          "depend on it, one per line, sorted by name.")},
        {sp}, {ro});
    EXPECT_TRUE(outs.isOk());
    return std::make_pair((*outs)[0].context_logits, (*llm)->modelConfig().vocab_size);
  };
  const auto [a, vocab] = logits(testmodels::bundledDir(), Quantization::kAuto);
  struct Case {
    Quantization q;
    double same_share, l2;
  };
  for (const Case& c : {Case{Quantization::kNone, 0.9, 0.05}, Case{Quantization::kAuto, 0.8, 0.08}}) {
    const std::string what = "quantization " + std::string(toString(c.q));
    const auto [b, vocab_b] = logits(out, c.q);
    ASSERT_EQ(a.size(), b.size()) << what;
    ASSERT_FALSE(a.empty());
    const size_t rows = a.size() / static_cast<size_t>(vocab);
    size_t same = 0;
    double num = 0, den = 0;
    for (size_t r = 0; r < rows; ++r) {
      auto row = [&](const std::vector<float>& v) { return v.begin() + static_cast<std::ptrdiff_t>(r * vocab); };
      const auto ia = std::max_element(row(a), row(a) + vocab) - row(a);
      const auto ib = std::max_element(row(b), row(b) + vocab) - row(b);
      same += ia == ib;
    }
    for (size_t i = 0; i < a.size(); ++i) {
      num += (a[i] - b[i]) * (a[i] - b[i]);
      den += a[i] * a[i];
    }
    EXPECT_GE(static_cast<double>(same), c.same_share * static_cast<double>(rows)) << what << ": " << same << " of " << rows;
    EXPECT_LT(std::sqrt(num / den), c.l2) << what;  // relative L2 distance of the logits
    EXPECT_GT(num, 0.0) << what;
  }
}

// --kv-cache-scales: each layer's k_scale / v_scale is max |K| / 448 and max |V| / 448 over the
// calibration text — recomputed here from a float32 cache the 32-bit model fills with that text —,
// written where the loader reads them, with compressed-tensors' kv_cache_scheme
// (tests/cli/fp8_perplexity_test.sh runs an FP8 cache on them).
// AWQ's clipping search (QuantizeOptions::awq_clip) only ever narrows a group's range: against the
// same calibration without it, the value, gate, up, attention-output and down projections' group
// scales are never larger and some are smaller, while q and k (not clipped: their outputs meet in
// the attention scores) keep theirs exactly.
TEST(QuantizeAwq, ClippingNarrowsEveryMatrixButQAndK) {
  TempDir tmp;
  const std::string calib = tmp.file("calib.txt");
  testutil::writeFile(
      calib, "Once upon a time there was a little fox who liked to run in the woods. It ran and ran.");
  std::map<bool, std::string> out;
  for (bool clip : {true, false}) {
    out[clip] = tmp.file(clip ? "clipped" : "plain");
    auto r = quantizeCheckpoint({.method = "awq",
                                 .model = testmodels::bundledDir(),
                                 .output = out[clip],
                                 .calib_file = calib,
                                 .calib_size = 2,
                                 .awq_clip = clip,
                                 .num_threads = 2});
    ASSERT_TRUE(r.isOk()) << r.status().toString();
  }
  auto clipped = ModelDirectory::open(out[true]), plain = ModelDirectory::open(out[false]);
  ASSERT_TRUE(clipped.isOk() && plain.isOk());
  auto producer = [](const std::string& dir) {
    std::ifstream f(dir + "/config.json");
    return nlohmann::json::parse(f)["quantization_config"].value("producer", std::string());
  };
  EXPECT_NE(producer(out[true]).find("; 30 matrices clipped)"), std::string::npos) << producer(out[true]);
  EXPECT_NE(producer(out[false]).find("; 0 matrices clipped)"), std::string::npos) << producer(out[false]);
  for (int64_t l = 0; l < clipped->config.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const std::string m : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.o_proj", "mlp.down_proj",
                                "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj"}) {
      auto a = clipped->weights.tensor(p + m + ".scales"), b = plain->weights.tensor(p + m + ".scales");
      ASSERT_TRUE(a.isOk() && b.isOk()) << p + m;
      const std::vector<float> sa = f32(*a), sb = f32(*b);
      ASSERT_EQ(sa.size(), sb.size());
      const bool clips = m != "self_attn.q_proj" && m != "self_attn.k_proj";
      size_t smaller = 0, larger = 0;
      for (size_t i = 0; i < sa.size(); ++i) smaller += sa[i]<sb[i], larger += sa[i]> sb[i];
      EXPECT_EQ(larger, 0u) << p + m;
      if (clips)
        EXPECT_GT(smaller, 0u) << p + m << ": no group was clipped";
      else
        EXPECT_EQ(smaller, 0u) << p + m << " was clipped";
    }
  }
}

TEST(QuantizeFp8, KvCacheScalesAreTheCalibrationMaximaOver448) {
  TempDir tmp;
  const std::string out = tmp.file("fp8kv");
  const std::string calib = tmp.file("calib.txt");
  const std::string text = "Once upon a time there was a little fox who liked to run in the woods.";
  testutil::writeFile(calib, text);
  auto r = quantizeCheckpoint({.method = "fp8",
                               .model = testmodels::bundledDir(),
                               .output = out,
                               .calib_file = calib,
                               .calib_size = 1,
                               .kv_cache_scales = true,
                               .num_threads = 2});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  auto q = ModelDirectory::open(out);
  ASSERT_TRUE(q.isOk()) << q.status().toString();
  EXPECT_TRUE(q->unused_tensors.empty());
  const int64_t layers = q->config.num_hidden_layers;
  EXPECT_EQ(r->kv_cache_scales, 2 * layers);
  const WeightStore& store = q->weights;
  auto scales = checkpointKvCacheScales(q->config, [&](const std::string& n) { return store.tensor(n); });
  ASSERT_TRUE(scales.isOk()) << scales.status().toString();
  ASSERT_EQ(scales->size(), static_cast<size_t>(2 * layers));
  EXPECT_NE(store.find("model.layers.0.self_attn.k_scale"), nullptr);
  EXPECT_NE(store.find("model.layers.5.self_attn.v_scale"), nullptr);
  // The maxima: the 32-bit model's cache after the text's one sample (tokens without BOS).
  auto src = ModelDirectory::open(testmodels::bundledDir());
  ASSERT_TRUE(src.isOk());
  CpuBackend cpu(2);
  const WeightStore& src_store = src->weights;
  auto model = DecoderModel::load(
      src->config, [&](const std::string& n) { return src_store.tensor(n); }, cpu);
  ASSERT_TRUE(model.isOk()) << model.status().toString();
  auto tok = Tokenizer::fromDirectory(testmodels::bundledDir());
  ASSERT_TRUE(tok.isOk());
  auto ids = (*tok)->encode(text, false);
  ASSERT_TRUE(ids.isOk());
  const int64_t n = static_cast<int64_t>(ids->size()), tpb = 16, blocks = (n + tpb - 1) / tpb;
  const KvPoolGeometry g{blocks, layers,     (*model)->config().num_key_value_heads, src->config.head_dim,
                         tpb,    DType::kF32};
  ASSERT_TRUE(cpu.allocateKvPools(g, 0).isOk());
  std::vector<int32_t> table(static_cast<size_t>(blocks)), tokens(ids->begin(), ids->end());
  std::iota(table.begin(), table.end(), 0);
  ForwardBatch batch;
  batch.add(tokens.data(), n, 0, table, LogitsMode::kLast);
  StepBuilder steps;
  StepLayout step_layout;
  auto in = steps.build(batch, **model, cpu, &step_layout);
  ASSERT_TRUE(in.isOk()) << in.status().toString();
  ASSERT_TRUE((*model)->forward(*in, step_layout).isOk());
  std::vector<float> most(static_cast<size_t>(2 * layers), 0.0f),
      block(static_cast<size_t>(g.elementsPerBlock()));
  const int64_t per_kv = g.num_kv_heads * tpb * g.head_dim;  // [layer][K, V][heads][tpb][head_dim]
  for (int32_t b = 0; b < blocks; ++b) {
    ASSERT_TRUE(cpu.readKvBlock(KvPool::kPrimary, b, block.data()).isOk());
    for (int64_t i = 0; i < g.elementsPerBlock(); ++i)
      if (b * tpb + i / g.head_dim % tpb < n)
        most[static_cast<size_t>(i / per_kv)] =
            std::max(most[static_cast<size_t>(i / per_kv)], std::fabs(block[static_cast<size_t>(i)]));
  }
  for (size_t i = 0; i < most.size(); ++i)
    EXPECT_EQ((*scales)[i], most[i] / 448.0f) << "layer " << i / 2 << (i % 2 ? " V" : " K");
  std::ifstream config_file(out + "/config.json");
  const nlohmann::json config = nlohmann::json::parse(config_file);
  EXPECT_EQ(config["quantization_config"]["kv_cache_scheme"]["strategy"], "tensor");
  // Without the flag: no scales.
  auto plain =
      quantizeCheckpoint({.method = "fp8", .model = testmodels::bundledDir(), .output = tmp.file("fp8")});
  ASSERT_TRUE(plain.isOk());
  EXPECT_EQ(plain->kv_cache_scales, 0);
}

TEST(QuantizeFp8, BadRequestsAreOneLineErrorsAndLeaveNothing) {
  TempDir tmp;
  const std::string bundled = testmodels::bundledDir();
  auto expectError = [](const Result<QuantizeReport>& r, StatusCode code, const std::string& fragment) {
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), code) << r.status().toString();
    EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  };
  expectError(quantizeCheckpoint({.method = "int3", .model = bundled, .output = tmp.file("a")}),
              StatusCode::kInvalidArgument, "--method has value 'int3'; expected fp8");
  EXPECT_FALSE(std::filesystem::exists(tmp.file("a")));
  testutil::writeFile(tmp.file("taken"), "x");
  expectError(quantizeCheckpoint({.method = "fp8", .model = bundled, .output = tmp.file("taken")}),
              StatusCode::kInvalidArgument, "exists and is not an empty directory");
  expectError(quantizeCheckpoint({.method = "fp8", .model = tmp.file("nothing"), .output = tmp.file("b")}),
              StatusCode::kNotFound, "not a directory");
  EXPECT_FALSE(std::filesystem::exists(tmp.file("b")));
  ASSERT_TRUE(quantizeCheckpoint({.method = "fp8", .model = bundled, .output = tmp.file("fp8")}).isOk());
  expectError(quantizeCheckpoint({.method = "fp8", .model = tmp.file("fp8"), .output = tmp.file("again")}),
              StatusCode::kInvalidArgument, "is already quantized");
}

}  // namespace
}  // namespace llmrt
