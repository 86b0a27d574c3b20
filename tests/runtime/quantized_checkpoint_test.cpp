// Quantized checkpoints read exactly: an engine on the quantized directory gives the same logits,
// to the bit, as one on a float32 checkpoint holding the dequantized weights.
// FP8 (float8 E4M3 linear weights with float scales; float(code) * scale), for each scale layout
// llmrt reads: block scales (`weight_scale_inv`, transformers' FineGrainedFP8Config, here with 8x8
// blocks so that edges are partial), per-output-row scales (`weight_scale` [rows, 1],
// compressed-tensors "channel") and one scale per tensor (`weight_scale` [], ModelOpt's
// hf_quant_config.json). AWQ (AutoAWQ GEMM: 4-bit codes packed 8 per int32 in AWQ's order, zero
// points, fp16 scales per group of inputs; float(code - zero) * scale), packed here as AutoAWQ's
// WQLinear_GEMM.from_linear packs. INT8 (compressed-tensors int-quantized: int8 codes, a scale per
// output channel). Bad scales or packing are one-line load errors naming the tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../loader/loader_test_util.h"
#include "llmrt/llm.h"
#include "backend/comm/in_process_communicator.h"
#include "backend/cpu/cpu_backend.h"
#include "loader/decoder_weights.h"
#include "loader/model_directory.h"
#include "model/decoder_model.h"

namespace llmrt {
namespace {

using testutil::CheckpointOptions;
using testutil::Json;
using testutil::StTensor;
using testutil::TempDir;

enum class Layout { kBlock, kChannel, kTensor, kInt8Channel };

// The float8 codes and scales of one linear weight, and the float32 weight they stand for.
struct Fp8Weight {
  std::string codes;        // F8_E4M3 bytes [rows, cols]
  std::vector<float> scale; // as stored
  std::vector<int64_t> scale_shape;
  std::vector<float> dequantized;  // float(code) * scale, row-major
};

Fp8Weight makeWeight(const Shape& shape, Layout layout, std::mt19937& rng) {
  const int64_t rows = shape[0], cols = shape[1], block = 8;
  std::normal_distribution<float> value(0.0f, 1.5f);
  std::uniform_real_distribution<float> scale(0.005f, 0.05f);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (float& x : v) x = value(rng);
  Fp8Weight w;
  w.codes.resize(v.size());
  std::vector<float> code(v.size());
  if (layout == Layout::kInt8Channel) {  // symmetric int8 codes in [-128, 127] (llm-compressor's reach -128)
    for (size_t i = 0; i < v.size(); ++i) {
      const auto c = static_cast<int8_t>(std::clamp(std::lround(v[i] * 40.0f), -128L, 127L));
      w.codes[i] = static_cast<char>(c);
      code[i] = static_cast<float>(c);
    }
  } else {
    convertFromF32(v.data(), w.codes.data(), DType::kF8E4M3, v.size());
    convertToF32(w.codes.data(), DType::kF8E4M3, code.data(), code.size());
  }
  if (layout == Layout::kBlock) w.scale_shape = {(rows + block - 1) / block, (cols + block - 1) / block};
  if (layout == Layout::kChannel || layout == Layout::kInt8Channel) w.scale_shape = {rows, 1};
  int64_t n = 1;
  for (int64_t d : w.scale_shape) n *= d;
  for (int64_t i = 0; i < n; ++i) w.scale.push_back(scale(rng));
  w.dequantized.resize(v.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const float s = layout == Layout::kBlock     ? w.scale[static_cast<size_t>((i / block) * w.scale_shape[1] + j / block)]
                      : layout != Layout::kTensor ? w.scale[static_cast<size_t>(i)]
                                                   : w.scale[0];
      w.dequantized[static_cast<size_t>(i * cols + j)] = code[static_cast<size_t>(i * cols + j)] * s;
    }
  return w;
}

// Two checkpoints of one tiny Llama: `fp8` with float8 linears and their scales (the other
// tensors bf16), `f32` with the dequantized linears (and the same bf16 tensors).
void writePair(Layout layout, const std::string& fp8, const std::string& f32) {
  Json j = testutil::tinyConfig("llama");
  j["max_position_embeddings"] = 64;
  const ModelConfig c = testutil::writeModelDir(f32, j);  // for the names and shapes
  std::mt19937 rng(7);
  CheckpointOptions q, plain;
  q.dtype = plain.dtype = DType::kBF16;
  for (const ExpectedTensor& e : expectedTensors(c)) {
    if (!testutil::isProjWeight(e.name)) continue;
    const Fp8Weight w = makeWeight(e.shape, layout, rng);
    q.skip.insert(e.name);
    plain.skip.insert(e.name);
    q.extra.push_back({e.name, layout == Layout::kInt8Channel ? "I8" : "F8_E4M3", testutil::dims(e.shape), w.codes});
    q.extra.push_back({e.name + (layout == Layout::kBlock ? "_scale_inv" : "_scale"), "F32", w.scale_shape,
                       testutil::bytesOf(w.scale)});
    plain.extra.push_back({e.name, "F32", testutil::dims(e.shape), testutil::bytesOf(w.dequantized)});
  }
  testutil::writeModelDir(f32, j, plain);
  Json jq = j;
  if (layout == Layout::kBlock)
    jq["quantization_config"] = {
        {"quant_method", "fp8"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {8, 8}}};
  if (layout == Layout::kChannel)
    jq["quantization_config"] = {
        {"quant_method", "compressed-tensors"},
        {"format", "float-quantized"},
        {"config_groups",
         {{"group_0",
           {{"targets", {"Linear"}},
            {"weights", {{"num_bits", 8}, {"type", "float"}, {"strategy", "channel"}, {"symmetric", true}}}}}}}};
  if (layout == Layout::kInt8Channel)  // llm-compressor's W8A8 INT8 (SmoothQuant + GPTQ recipes write this)
    jq["quantization_config"] = {
        {"quant_method", "compressed-tensors"},
        {"format", "int-quantized"},
        {"config_groups",
         {{"group_0",
           {{"targets", {"Linear"}},
            {"weights", {{"num_bits", 8}, {"type", "int"}, {"strategy", "channel"}, {"symmetric", true}}},
            {"input_activations",
             {{"num_bits", 8}, {"type", "int"}, {"strategy", "token"}, {"dynamic", true}, {"symmetric", true}}}}}}}};
  testutil::writeModelDir(fp8, jq, q);
  if (layout == Layout::kTensor)
    testutil::writeFile(fp8 + "/hf_quant_config.json",
                        R"({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8"}})");
}

RequestOutput run(const std::string& dir, Quantization quantization = Quantization::kAuto) {
  LlmArgs args;
  args.model = dir;
  args.quantization = quantization;
  args.backend = BackendKind::kCpu;
  args.num_threads = 1;
  auto llm = LLM::create(args);
  EXPECT_TRUE(llm.isOk()) << llm.status().toString();
  if (!llm.isOk()) return {};
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = 6;
  sp.ignore_eos = true;
  RequestOptions ro;
  ro.return_context_logits = true;
  ro.return_generation_logits = true;
  auto outs = (*llm)->generate({Prompt::fromIds({1, 5, 9, 2, 30, 17})}, {sp}, {ro});
  EXPECT_TRUE(outs.isOk()) << outs.status().toString();
  return outs.isOk() ? (*outs)[0] : RequestOutput{};
}

class Fp8Checkpoint : public ::testing::TestWithParam<Layout> {};

TEST_P(Fp8Checkpoint, LogitsEqualTheDequantizedFloat32Checkpoint) {
  TempDir tmp;
  const std::string fp8 = tmp.subdir("fp8"), f32 = tmp.subdir("f32");
  writePair(GetParam(), fp8, f32);
  auto m = ModelDirectory::open(fp8);
  ASSERT_TRUE(m.isOk()) << m.status().toString();
  EXPECT_EQ(m->config.weight_quantization, "fp8");
  EXPECT_EQ(m->config.fp8_block_rows, GetParam() == Layout::kBlock ? 8 : 0);
  EXPECT_TRUE(m->unused_tensors.empty()) << m->unused_tensors.front();  // every scale is read
  // quantization none: the codes dequantized into 32-bit products.
  const RequestOutput a = run(fp8, Quantization::kNone), b = run(f32);
  ASSERT_TRUE(a.status.isOk() && b.status.isOk());
  ASSERT_FALSE(a.context_logits.empty());
  EXPECT_EQ(a.context_logits, b.context_logits);
  ASSERT_EQ(a.outputs.size(), 1u);
  EXPECT_EQ(a.outputs[0].token_ids, b.outputs[0].token_ids);
  EXPECT_EQ(a.outputs[0].generation_logits, b.outputs[0].generation_logits);
}

// Without the flag an FP8 checkpoint runs FP8 products (W8A8), not the 32-bit products (the
// activations are quantized too). Block scales are re-expressed per row: the weights requantized
// per row from the dequantized values, exactly what `quantization fp8` makes of the dequantized
// float32 checkpoint. Per-tensor and per-channel ones keep the checkpoint's codes (below).
TEST_P(Fp8Checkpoint, RunsFp8Products) {
  TempDir tmp;
  const std::string fp8 = tmp.subdir("fp8"), f32 = tmp.subdir("f32");
  writePair(GetParam(), fp8, f32);
  const RequestOutput a = run(fp8), b = run(f32, Quantization::kFp8), plain = run(f32);
  ASSERT_TRUE(a.status.isOk() && b.status.isOk() && plain.status.isOk());
  ASSERT_FALSE(a.context_logits.empty());
  if (GetParam() == Layout::kBlock) {
    EXPECT_EQ(a.context_logits, b.context_logits);
    EXPECT_EQ(a.outputs[0].generation_logits, b.outputs[0].generation_logits);
  }
  float max_ref = 0.0f, max_diff = 0.0f;
  for (size_t i = 0; i < a.context_logits.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(plain.context_logits[i]));
    max_diff = std::max(max_diff, std::fabs(a.context_logits[i] - plain.context_logits[i]));
  }
  EXPECT_GT(max_diff, 0.0f);
  EXPECT_LT(max_diff, 0.1f * max_ref) << "FP8 products stray far from the 32-bit ones";
}

// A checkpoint matrix's 8-bit codes (bytes) and one scale per row (a per-tensor scale repeated).
struct StoredCodes {
  std::string codes;
  std::vector<float> scales;
  int64_t cols = 0;
};
StoredCodes storedCodes(const WeightStore& store, const std::string& tensor) {
  auto w = store.tensor(tensor);
  auto sc = store.tensor(tensor + "_scale");
  EXPECT_TRUE(w.isOk() && sc.isOk()) << tensor;
  if (!w.isOk() || !sc.isOk()) return {};
  StoredCodes out{std::string(static_cast<const char*>(w->data), static_cast<size_t>(w->numel())),
                  std::vector<float>(static_cast<size_t>(sc->numel())), w->shape[1]};
  convertToF32(sc->data, sc->dtype, out.scales.data(), out.scales.size());
  if (out.scales.size() == 1) out.scales.assign(static_cast<size_t>(w->shape[0]), out.scales[0]);
  return out;
}

// A CPU backend that keeps what loadQuantizedWeight was given, by weight name.
class RecordingBackend final : public CpuBackend {
 public:
  RecordingBackend() : CpuBackend(1) {}
  struct Seen {
    std::string codes;
    std::vector<float> scales;
  };
  std::map<std::string, Seen> seen;
  Result<TensorView> loadQuantizedWeight(const TensorView& codes, const TensorView& scales,
                                         const std::string& name) override {
    const auto* s = static_cast<const float*>(scales.data);
    seen[name] = {std::string(static_cast<const char*>(codes.data), static_cast<size_t>(codes.numel())),
                  std::vector<float>(s, s + scales.numel())};
    return CpuBackend::loadQuantizedWeight(codes, scales, name);
  }
};

// Per-tensor and per-channel FP8 checkpoints and INT8 ones (codes down to -128, rows whose largest
// code is below the type's maximum: requantizing would change them) hand the backend their own
// codes and scales, bit for bit, the fused q/k/v rows included (as vLLM runs them).
TEST(QuantizedCheckpoint, ProductsKeepTheCheckpointsCodesAndScales) {
  for (const Layout layout : {Layout::kChannel, Layout::kTensor, Layout::kInt8Channel}) {
    TempDir tmp;
    const std::string q = tmp.subdir("q"), f32 = tmp.subdir("f32");
    writePair(layout, q, f32);
    auto m = ModelDirectory::open(q);
    ASSERT_TRUE(m.isOk()) << m.status().toString();
    RecordingBackend backend;
    DecoderModelOptions o;
    o.product_codes = layout == Layout::kInt8Channel ? DType::kI8 : DType::kF8E4M3;
    const WeightStore& store = m->weights;
    auto model = DecoderModel::load(m->config, [&](const std::string& n) { return store.tensor(n); }, backend, o);
    ASSERT_TRUE(model.isOk()) << model.status().toString();
    auto expect = [&](const std::string& seen_name, const std::vector<std::string>& tensors) {
      std::string codes;
      std::vector<float> scales;
      for (const std::string& t : tensors) {
        const StoredCodes m = storedCodes(store, t);
        codes += m.codes;
        scales.insert(scales.end(), m.scales.begin(), m.scales.end());
      }
      ASSERT_TRUE(backend.seen.count(seen_name)) << seen_name;
      EXPECT_TRUE(backend.seen[seen_name].codes == codes) << seen_name;
      EXPECT_EQ(backend.seen[seen_name].scales, scales) << seen_name;
    };
    const std::string p = "model.layers.0.";
    expect("layers.0.o", {p + "self_attn.o_proj.weight"});
    expect("layers.0.qkv", {p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight", p + "self_attn.v_proj.weight"});
    expect("layers.1.down", {"model.layers.1.mlp.down_proj.weight"});
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, Fp8Checkpoint, ::testing::Values(Layout::kBlock, Layout::kChannel, Layout::kTensor),
                         [](const auto& info) {
                           return std::string(info.param == Layout::kBlock     ? "block"
                                              : info.param == Layout::kChannel ? "channel"
                                                                               : "tensor");
                         });

// Tensor-parallel ranks keep the checkpoint's codes and scales too: a column shard (o, down) has
// every row's scale and the rank's columns of its codes; a row shard (q/k/v, gate|up) a subset of
// the checkpoint's rows, each with its own codes and scale. (W8A8 ranks are not TP=1 within
// reduction order: each rank quantizes its slice of a row-parallel product's input per token.)
TEST(QuantizedCheckpoint, RanksKeepTheCheckpointsCodesAndScales) {
  TempDir tmp;
  const std::string q = tmp.subdir("q"), f32 = tmp.subdir("f32");
  writePair(Layout::kInt8Channel, q, f32);
  auto m = ModelDirectory::open(q);
  ASSERT_TRUE(m.isOk()) << m.status().toString();
  const WeightStore& store = m->weights;
  auto group = makeInProcessGroup(2);
  ASSERT_TRUE(group.isOk());
  RecordingBackend backends[2];
  std::vector<Status> st(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      DecoderModelOptions o;
      o.product_codes = DType::kI8;
      o.comm = (*group)[static_cast<size_t>(r)].get();
      st[static_cast<size_t>(r)] =
          DecoderModel::load(m->config, [&](const std::string& n) { return store.tensor(n); }, backends[r], o).status();
    });
  for (std::thread& t : ranks) t.join();
  for (const Status& x : st) ASSERT_TRUE(x.isOk()) << x.toString();
  for (const auto& [seen, tensor] : {std::pair<std::string, std::string>{"layers.0.o", "model.layers.0.self_attn.o_proj.weight"},
                                     {"layers.1.down", "model.layers.1.mlp.down_proj.weight"}}) {
    const auto [codes, scales, cols] = storedCodes(store, tensor);
    const int64_t half = cols / 2;
    for (int r = 0; r < 2; ++r) {
      std::string want;
      for (size_t i = 0; i < scales.size(); ++i) want += codes.substr(i * static_cast<size_t>(cols) + static_cast<size_t>(r * half), static_cast<size_t>(half));
      ASSERT_TRUE(backends[r].seen.count(seen)) << seen;
      EXPECT_TRUE(backends[r].seen[seen].codes == want) << seen << " rank " << r;
      EXPECT_EQ(backends[r].seen[seen].scales, scales) << seen << " rank " << r;
    }
  }
  // Row shards: every row the rank holds is a checkpoint row, codes and scale.
  std::map<std::string, float> rows;  // codes of a row -> its scale
  for (const char* t : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj"}) {
    const auto [codes, scales, cols] = storedCodes(store, std::string("model.layers.0.") + t + ".weight");
    for (size_t i = 0; i < scales.size(); ++i) rows[codes.substr(i * static_cast<size_t>(cols), static_cast<size_t>(cols))] = scales[i];
  }
  for (int r = 0; r < 2; ++r)
    for (const char* seen : {"layers.0.qkv", "layers.0.up"}) {
      const RecordingBackend::Seen& got = backends[r].seen[seen];
      ASSERT_FALSE(got.scales.empty()) << seen;
      const size_t cols = got.codes.size() / got.scales.size();
      for (size_t i = 0; i < got.scales.size(); ++i) {
        auto it = rows.find(got.codes.substr(i * cols, cols));
        ASSERT_TRUE(it != rows.end()) << seen << " rank " << r << " row " << i << ": not a checkpoint row";
        EXPECT_EQ(it->second, got.scales[i]) << seen << " rank " << r << " row " << i;
      }
    }
}

// compressed-tensors int-quantized (W8A8 INT8: symmetric int8 weights, one scale per output
// channel; as llm-compressor's SmoothQuant recipes and `llmrt quantize --method int8|smoothquant`
// write them): read exactly, float(code) * scale. Without a flag they run INT8 products on the
// checkpoint's codes and scales; with `quantization none`, the dequantized weights in 32-bit products.
TEST(Int8Checkpoint, RunsInt8ProductsOrTheDequantizedFloat32Weights) {
  TempDir tmp;
  const std::string int8 = tmp.subdir("int8"), f32 = tmp.subdir("f32");
  writePair(Layout::kInt8Channel, int8, f32);
  auto m = ModelDirectory::open(int8);
  ASSERT_TRUE(m.isOk()) << m.status().toString();
  EXPECT_EQ(m->config.weight_quantization, "int8");
  EXPECT_TRUE(m->unused_tensors.empty()) << m->unused_tensors.front();  // every scale is read
  // INT8 products on the checkpoint's own codes and scales (ProductsKeepTheCheckpointsCodesAndScales),
  // so not what requantizing the dequantized float32 weights per row gives (rows here reach
  // -128, or stop short of 127).
  const RequestOutput a = run(int8), b = run(f32, Quantization::kInt8);
  ASSERT_TRUE(a.status.isOk() && b.status.isOk());
  ASSERT_FALSE(a.context_logits.empty());
  EXPECT_NE(a.context_logits, b.context_logits);
  const RequestOutput c = run(int8, Quantization::kNone), d = run(f32);
  ASSERT_TRUE(c.status.isOk() && d.status.isOk());
  EXPECT_EQ(c.context_logits, d.context_logits);
  EXPECT_NE(a.context_logits, c.context_logits);  // the activations really are quantized

  // Asymmetric int8 (zero points) is another scheme: refused, naming the method, not misread.
  const std::string config = int8 + "/config.json";
  Json j = Json::parse(testutil::readFile(config));
  j["quantization_config"]["config_groups"]["group_0"]["weights"]["symmetric"] = false;
  testutil::writeFile(config, j.dump());
  auto asymmetric = ModelDirectory::open(int8);
  ASSERT_FALSE(asymmetric.isOk());
  EXPECT_EQ(asymmetric.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(asymmetric.status().message().find("compressed-tensors"), std::string::npos)
      << asymmetric.status().toString();
}

TEST(Fp8CheckpointErrors, BadScalesAreOneLineErrorsNamingTheTensor) {
  const std::string down = "model.layers.1.mlp.down_proj.weight";
  struct Case {
    const char* what;
    std::string drop;       // a tensor left out
    StTensor replace;       // a tensor written instead of the good one (empty name: none)
    Json block;             // weight_block_size
    StatusCode code;
    std::string fragment;
  };
  const std::vector<Case> cases{
      {"missing scale", down + "_scale_inv", {}, {8, 8}, StatusCode::kNotFound,
       "tensor '" + down + "_scale_inv' is missing; expected the scales of F8_E4M3 tensor '" + down +
           "': shape [2, 3] (one float per 8x8 block, weight_block_size)"},
      {"scale of the wrong shape", down + "_scale_inv",
       {down + "_scale_inv", "F32", {3, 3}, testutil::floatData(DType::kF32, 9)}, {8, 8},
       StatusCode::kInvalidArgument, "tensor '" + down + "_scale_inv' is F32 [3, 3]; expected F32/BF16/F16 shape [2, 3]"},
      {"float8 scale", down + "_scale_inv",
       {down + "_scale_inv", "F8_E4M3", {2, 3}, testutil::floatData(DType::kF8E4M3, 6)}, {8, 8},
       StatusCode::kInvalidArgument, "is F8_E4M3 [2, 3]; expected F32/BF16/F16"},
      {"bad weight_block_size", "", {}, {8, 0}, StatusCode::kInvalidArgument,
       "quantization_config.weight_block_size has value [8,0]; expected two integers in [1, 65536]"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    TempDir tmp;
    const std::string fp8 = tmp.subdir("fp8"), f32 = tmp.subdir("f32");
    writePair(Layout::kBlock, fp8, f32);
    // Rewrite the FP8 directory's config / weights for the case.
    Json j = Json::parse(testutil::readFile(fp8 + "/config.json"));
    j["quantization_config"]["weight_block_size"] = k.block;
    testutil::writeFile(fp8 + "/config.json", j.dump());
    if (!k.drop.empty()) {
      // Re-write the checkpoint without the dropped tensor (and with its replacement).
      ModelDirectoryOptions opts;
      opts.check_weights = false;
      opts.reject_quantized = false;
      auto m = ModelDirectory::open(fp8, opts);
      ASSERT_TRUE(m.isOk()) << m.status().toString();
      std::vector<StTensor> all;
      for (const WeightEntry& w : m->weights.entries()) {
        if (w.name == k.drop) continue;
        auto t = m->weights.tensor(w.name);
        ASSERT_TRUE(t.isOk());
        all.push_back({w.name, std::string(dtypeName(w.dtype)), testutil::dims(w.shape),
                       std::string(static_cast<const char*>(t->data), static_cast<size_t>(t->nbytes()))});
      }
      if (!k.replace.name.empty()) all.push_back(k.replace);
      testutil::writeFile(fp8 + "/model.safetensors", testutil::makeSafetensors(all));
    }
    auto m = ModelDirectory::open(fp8);
    ASSERT_FALSE(m.isOk());
    EXPECT_EQ(m.status().code(), k.code) << m.status().toString();
    EXPECT_NE(m.status().message().find(k.fragment), std::string::npos) << m.status().message();
    EXPECT_EQ(m.status().message().find('\n'), std::string::npos);
  }
}

// AutoAWQ's packing of a [rows (out), cols (in)] weight with group size g along the inputs:
// codes and zeros in [0, 15], scales fp16; qweight [in, out / 8], qzeros [in / g, out / 8],
// scales [in / g, out]; 8 consecutive output columns per int32, column order_map[i] in nibble i.
struct AwqMatrix {
  std::vector<int32_t> qweight, qzeros;
  std::string scales;  // F16 bytes
  std::vector<float> dequantized;  // [out, in]
};

AwqMatrix packAwq(int64_t out, int64_t in, int64_t g, std::mt19937& rng) {
  static constexpr int kOrderMap[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  std::uniform_int_distribution<int> code(0, 15);
  std::uniform_real_distribution<float> scale(0.01f, 0.08f);
  const int64_t groups = in / g;
  std::vector<int> q(static_cast<size_t>(in * out)), z(static_cast<size_t>(groups * out));  // [in][out], [group][out]
  for (int& v : q) v = code(rng);
  for (int& v : z) v = code(rng);
  std::vector<float> s(static_cast<size_t>(groups * out));
  for (float& v : s) v = scale(rng);
  AwqMatrix m;
  m.scales.resize(s.size() * 2);
  convertFromF32(s.data(), m.scales.data(), DType::kF16, s.size());
  convertToF32(m.scales.data(), DType::kF16, s.data(), s.size());  // the stored fp16 values
  auto pack = [&](const std::vector<int>& v, int64_t rows) {
    std::vector<int32_t> packed(static_cast<size_t>(rows * (out / 8)), 0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t col = 0; col < out / 8; ++col)
        for (int i = 0; i < 8; ++i) {
          const auto bits = static_cast<uint32_t>(v[static_cast<size_t>(r * out + col * 8 + kOrderMap[i])]);
          packed[static_cast<size_t>(r * (out / 8) + col)] =
              static_cast<int32_t>(static_cast<uint32_t>(packed[static_cast<size_t>(r * (out / 8) + col)]) | (bits << (4 * i)));
        }
    return packed;
  };
  m.qweight = pack(q, in);
  m.qzeros = pack(z, groups);
  m.dequantized.resize(static_cast<size_t>(out * in));
  for (int64_t r = 0; r < in; ++r)
    for (int64_t c = 0; c < out; ++c) {
      const size_t gz = static_cast<size_t>((r / g) * out + c);
      m.dequantized[static_cast<size_t>(c * in + r)] =
          static_cast<float>(q[static_cast<size_t>(r * out + c)] - z[gz]) * s[gz];
    }
  return m;
}

// An AWQ checkpoint of the tiny Llama (group size 8), or of the model config.json `j` describes,
// and its float32 twin.
// `plain_matrix`: a matrix the AWQ checkpoint keeps unquantized (as F32 .weight; modules_to_not_convert).
void writeAwqPair(const std::string& awq, const std::string& f32, int64_t group = 8, Json j = nullptr,
                  const std::string& plain_matrix = "") {
  if (j.is_null()) {
    j = testutil::tinyConfig("llama");
    j["max_position_embeddings"] = 64;
  }
  const ModelConfig c = testutil::writeModelDir(f32, j);
  std::mt19937 rng(11);
  CheckpointOptions q, plain;
  q.dtype = plain.dtype = DType::kBF16;
  for (const ExpectedTensor& e : expectedTensors(c)) {
    if (!testutil::isProjWeight(e.name)) continue;
    const AwqMatrix m = packAwq(e.shape[0], e.shape[1], group, rng);
    const std::string base = e.name.substr(0, e.name.size() - 6);
    q.skip.insert(e.name);
    plain.skip.insert(e.name);
    plain.extra.push_back({e.name, "F32", testutil::dims(e.shape), testutil::bytesOf(m.dequantized)});
    if (e.name == plain_matrix) {
      q.extra.push_back({e.name, "F32", testutil::dims(e.shape), testutil::bytesOf(m.dequantized)});
      continue;
    }
    q.extra.push_back({base + "qweight", "I32", {e.shape[1], e.shape[0] / 8}, testutil::bytesOf(m.qweight)});
    q.extra.push_back({base + "qzeros", "I32", {e.shape[1] / group, e.shape[0] / 8}, testutil::bytesOf(m.qzeros)});
    q.extra.push_back({base + "scales", "F16", {e.shape[1] / group, e.shape[0]}, m.scales});
  }
  testutil::writeModelDir(f32, j, plain);
  j["quantization_config"] = {
      {"quant_method", "awq"}, {"bits", 4}, {"group_size", group}, {"version", "gemm"}, {"zero_point", true}};
  testutil::writeModelDir(awq, j, q);
}

TEST(AwqCheckpoint, LogitsEqualTheDequantizedFloat32Checkpoint) {
  TempDir tmp;
  const std::string awq = tmp.subdir("awq"), f32 = tmp.subdir("f32");
  writeAwqPair(awq, f32);
  auto m = ModelDirectory::open(awq);
  ASSERT_TRUE(m.isOk()) << m.status().toString();
  EXPECT_EQ(m->config.weight_quantization, "awq");
  EXPECT_EQ(m->config.awq_group_size, 8);
  EXPECT_TRUE(m->unused_tensors.empty()) << m->unused_tensors.front();
  const RequestOutput a = run(awq), b = run(f32);
  ASSERT_TRUE(a.status.isOk() && b.status.isOk());
  ASSERT_FALSE(a.context_logits.empty());
  EXPECT_EQ(a.context_logits, b.context_logits);
  EXPECT_EQ(a.outputs[0].token_ids, b.outputs[0].token_ids);
  EXPECT_EQ(a.outputs[0].generation_logits, b.outputs[0].generation_logits);
}

// Under quantization auto the matrices reach the backend as codes, scales and zero points
// (DecoderModelOptions::int4_products), each rearranged as the matrix would be: packed q/k/v and
// gate|up (Phi-3), interleaved partial rotary rows permuted (GLM). The CPU backend dequantizes
// them: the float32 twin's logits exactly, as with quantization none (the dequantized matrices).
TEST(AwqCheckpoint, ComponentsFollowPackedAndInterleavedLayouts) {
  for (const char* name : {"phi3_packed", "glm_partial_interleaved"}) {
    TempDir tmp;
    const std::string awq = tmp.subdir("awq"), f32 = tmp.subdir("f32");
    Json j = Json::parse(testutil::readFile(std::string(LLMRT_TEST_DATA) + "/golden/" + name + "/config.json"));
    j["torch_dtype"] = "float32";
    writeAwqPair(awq, f32, 8, j);
    const RequestOutput a = run(awq), b = run(f32), c = run(awq, Quantization::kNone);
    ASSERT_TRUE(a.status.isOk() && b.status.isOk() && c.status.isOk()) << name << ": " << a.status.toString();
    ASSERT_FALSE(a.context_logits.empty());
    EXPECT_EQ(a.context_logits, b.context_logits) << name;
    EXPECT_EQ(c.context_logits, b.context_logits) << name;
  }
}

// A matrix kept unquantized (a plain .weight beside the AWQ ones) loads as it is.
TEST(AwqCheckpoint, UnquantizedMatricesLoadAsTheyAre) {
  TempDir tmp;
  const std::string awq = tmp.subdir("awq"), f32 = tmp.subdir("f32");
  writeAwqPair(awq, f32, 8, nullptr, "model.layers.1.self_attn.o_proj.weight");
  const RequestOutput a = run(awq), b = run(f32);
  ASSERT_TRUE(a.status.isOk() && b.status.isOk()) << a.status.toString();
  ASSERT_FALSE(a.context_logits.empty());
  EXPECT_EQ(a.context_logits, b.context_logits);
}

TEST(AwqCheckpoint, UnsupportedVariantsAndBadPackingAreOneLineErrors) {
  TempDir tmp;
  const std::string awq = tmp.subdir("awq"), f32 = tmp.subdir("f32");
  writeAwqPair(awq, f32);
  const Json good = Json::parse(testutil::readFile(awq + "/config.json"));
  auto openWith = [&](const Json& qc) {
    Json j = good;
    j["quantization_config"] = qc;
    testutil::writeFile(awq + "/config.json", j.dump());
    return ModelDirectory::open(awq);
  };
  const Json base = good["quantization_config"];
  for (const auto& [key, value] : std::vector<std::pair<std::string, Json>>{
           {"version", "gemv"}, {"bits", 8}, {"zero_point", false}, {"group_size", 0}}) {
    SCOPED_TRACE(key);
    Json qc = base;
    qc[key] = value;
    auto m = openWith(qc);
    ASSERT_FALSE(m.isOk());
    EXPECT_EQ(m.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(m.status().message().find("llmrt reads AWQ version gemm, 4 bits"), std::string::npos)
        << m.status().message();
  }
  Json qc = base;
  qc["group_size"] = 4;  // the scales written are per 8 inputs
  auto m = openWith(qc);
  ASSERT_FALSE(m.isOk());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("qzeros' is I32 [2, 2]; expected I32 [4, 2] (AWQ, group_size 4)"),
            std::string::npos)
      << m.status().message();
  EXPECT_EQ(m.status().message().find('\n'), std::string::npos);
}

TEST(Fp8Products, AnAwqCheckpointRefusesQuantizationFp8) {
  TempDir tmp;
  const std::string awq = tmp.subdir("awq"), f32 = tmp.subdir("f32");
  writeAwqPair(awq, f32);
  LlmArgs args;
  args.model = awq;
  args.backend = BackendKind::kCpu;
  args.quantization = Quantization::kFp8;
  auto llm = LLM::create(args);
  ASSERT_FALSE(llm.isOk());
  EXPECT_NE(llm.status().message().find("quantization"), std::string::npos) << llm.status().toString();
  EXPECT_NE(llm.status().message().find("AWQ"), std::string::npos) << llm.status().toString();
}

}  // namespace
}  // namespace llmrt
