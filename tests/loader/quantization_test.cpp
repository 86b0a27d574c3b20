// Quantized checkpoints: FP8 ones are read (their exactness: tests/runtime/fp8_checkpoint_test.cpp);
// the others are refused (Unimplemented, naming the method and a tensor) instead of running their
// codes as if they were weights. Tiny synthetic checkpoints in the layouts transformers, AutoGPTQ /
// AutoAWQ, bitsandbytes, compressed-tensors and ModelOpt write.
#include "loader/quantization.h"

#include <gtest/gtest.h>

#include <functional>

#include "llmrt/model_info.h"
#include "loader/config_parser.h"
#include "loader/decoder_weights.h"
#include "loader/model_directory.h"
#include "loader_test_util.h"

namespace llmrt {
namespace {

using testutil::CheckpointOptions;
using testutil::Json;
using testutil::StTensor;
using testutil::TempDir;
using testutil::tinyConfig;
using testutil::writeFile;
using testutil::writeModelDir;

// A bf16 checkpoint whose linear weights are replaced through `replace(name, shape, &extra)`.
template <typename Replace>
CheckpointOptions quantizedLinears(const Json& config, Replace replace) {
  CheckpointOptions o;
  o.dtype = DType::kBF16;
  const ModelConfig c = *parseModelConfig(Json(config).dump());
  for (const ExpectedTensor& e : expectedTensors(c)) {
    if (!testutil::isProjWeight(e.name)) continue;
    o.skip.insert(e.name);
    replace(e.name, e.shape, &o.extra);
  }
  return o;
}

// transformers' FineGrainedFP8Config: F8_E4M3 weights, one F32 scale per 128x128 block.
void fp8Linear(const std::string& name, const Shape& shape, std::vector<StTensor>* extra) {
  extra->push_back({name, "F8_E4M3", testutil::dims(shape), testutil::floatData(DType::kF8E4M3, shape.numel())});
  const int64_t rb = (shape[0] + 127) / 128, cb = (shape[1] + 127) / 128;
  extra->push_back({name + "_scale_inv", "F32", {rb, cb}, testutil::floatData(DType::kF32, rb * cb)});
}

Json fp8Config() {
  Json j = tinyConfig("llama");
  j["quantization_config"] = {
      {"quant_method", "fp8"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {128, 128}}};
  return j;
}

TEST(Quantization, Fp8CheckpointsAreReadWithTheirScales) {
  // compressed-tensors / ModelOpt float8: F8 weights with per-tensor scales (input scales ignored).
  auto f8_static = [](const std::string& name, const Shape& s, std::vector<StTensor>* x) {
    x->push_back({name, "F8_E4M3", testutil::dims(s), testutil::floatData(DType::kF8E4M3, s.numel())});
    x->push_back({name + "_scale", "F32", {}, testutil::floatData(DType::kF32, 1)});
    const std::string base = name.substr(0, name.size() - 6);
    x->push_back({base + "input_scale", "F32", {}, testutil::floatData(DType::kF32, 1)});
  };
  {
    SCOPED_TRACE("transformers' fp8, 128x128 blocks");
    TempDir tmp;
    const Json j = fp8Config();
    writeModelDir(tmp.path(), j, quantizedLinears(j, fp8Linear));
    auto m = ModelDirectory::open(tmp.path());
    ASSERT_TRUE(m.isOk()) << m.status().toString();
    EXPECT_EQ(m->config.weight_quantization, "fp8");
    EXPECT_EQ(m->config.fp8_block_rows, 128);
    EXPECT_EQ(m->config.fp8_block_cols, 128);
    EXPECT_TRUE(m->unused_tensors.empty());
  }
  {
    SCOPED_TRACE("ModelOpt's hf_quant_config.json, per-tensor scales");
    TempDir tmp;
    const Json j = tinyConfig("llama");
    writeModelDir(tmp.path(), j, quantizedLinears(j, f8_static));
    writeFile(tmp.file("hf_quant_config.json"), R"({"producer": {"name": "modelopt", "version": "0.19.0"},
           "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": null}})");
    auto m = ModelDirectory::open(tmp.path());
    ASSERT_TRUE(m.isOk()) << m.status().toString();
    EXPECT_EQ(m->config.weight_quantization, "fp8");
    EXPECT_EQ(m->config.fp8_block_rows, 0);
    // The activation scales are not used: activations stay in the compute dtype.
    EXPECT_EQ(m->unused_tensors.size(), 14u);  // 7 linears x 2 layers
  }
}

TEST(Quantization, EveryKnownLayoutIsRefused) {
  struct Case {
    std::string name;
    Json quantization_config;  // null: none in config.json
    std::string side_file;     // "" or "quantize_config.json" / "hf_quant_config.json"
    std::string side_text;
    std::function<void(const std::string&, const Shape&, std::vector<StTensor>*)> linear;
    std::vector<std::string> fragments;
  };
  auto i32 = [](int64_t n) { return testutil::bytesOf(std::vector<int32_t>(static_cast<size_t>(n), 7)); };
  // AutoAWQ / AutoGPTQ: packed int4 codes in I32, F16 scales, no `.weight`.
  auto packed = [&](const std::string& name, const Shape& s, std::vector<StTensor>* x) {
    const std::string base = name.substr(0, name.size() - 6);  // strip "weight"
    x->push_back({base + "qweight", "I32", {s[1], s[0] / 8}, i32(s[1] * (s[0] / 8))});
    x->push_back({base + "qzeros", "I32", {1, s[0] / 8}, i32(s[0] / 8)});
    x->push_back({base + "scales", "F16", {1, s[0]}, testutil::floatData(DType::kF16, s[0])});
  };
  // bitsandbytes nf4: U8 codes [n/2, 1] and the quant state tensors.
  auto nf4 = [](const std::string& name, const Shape& s, std::vector<StTensor>* x) {
    const int64_t n = s.numel() / 2;
    x->push_back({name, "U8", {n, 1}, std::string(static_cast<size_t>(n), '\x11')});
    x->push_back({name + ".absmax", "F32", {1}, testutil::floatData(DType::kF32, 1)});
    x->push_back({name + ".quant_map", "F32", {16}, testutil::floatData(DType::kF32, 16)});
    x->push_back({name + ".quant_state.bitsandbytes__nf4", "U8", {4}, "abcd"});
  };
  // compressed-tensors / ModelOpt float8: F8 weights with per-tensor scales.
  auto f8_static = [](const std::string& name, const Shape& s, std::vector<StTensor>* x) {
    x->push_back({name, "F8_E4M3", testutil::dims(s), testutil::floatData(DType::kF8E4M3, s.numel())});
    x->push_back({name + "_scale", "F32", {}, testutil::floatData(DType::kF32, 1)});
    const std::string base = name.substr(0, name.size() - 6);
    x->push_back({base + "input_scale", "F32", {}, testutil::floatData(DType::kF32, 1)});
  };
  // int8 weights with no scales at all (still codes, not weights).
  auto int8 = [](const std::string& name, const Shape& s, std::vector<StTensor>* x) {
    x->push_back({name, "I8", testutil::dims(s), std::string(static_cast<size_t>(s.numel()), '\x03')});
  };
  const std::vector<Case> cases = {
      {"awq gemv (llmrt reads gemm)",
       Json{{"quant_method", "awq"},
            {"bits", 4},
            {"group_size", 128},
            {"version", "gemv"},
            {"zero_point", true}},
       "",
       "",
       packed,
       {"config.json: quantization_config.quant_method 'awq' (bits 4, group_size 128, zero_point true, "
        "version gemv) is not supported yet (llmrt reads AWQ version gemm, 4 bits"}},
      {"gptq side file",
       nullptr,
       "quantize_config.json",
       R"({"bits": 4, "group_size": 128, "desc_act": false, "sym": true, "quant_method": "gptq"})",
       packed,
       {"quantize_config.json: quant_method 'gptq' (bits 4, group_size 128, desc_act false, sym true) is not "
        "supported yet",
        "'model.layers.0.mlp.down_proj.qweight'"}},
      {"bitsandbytes",
       Json{{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}, {"bnb_4bit_quant_type", "nf4"}},
       "",
       "",
       nf4,
       {"quantization_config.quant_method 'bitsandbytes' (load_in_4bit true, bnb_4bit_quant_type nf4)",
        "tensor 'model.layers.0.mlp.down_proj.weight' is U8 (quantized codes)"}},
      {"compressed-tensors",
       Json{{"quant_method", "compressed-tensors"},
            {"format", "float-quantized"},
            {"config_groups", Json::object()}},
       "",
       "",
       f8_static,
       {"quantization_config.quant_method 'compressed-tensors' (format float-quantized)",
        "'model.layers.0.mlp.down_proj.input_scale' (F32 []) holds quantization data"}},
      {"modelopt side file, int4 AWQ",
       nullptr,
       "hf_quant_config.json",
       R"({"producer": {"name": "modelopt", "version": "0.19.0"},
           "quantization": {"quant_algo": "W4A16_AWQ", "kv_cache_quant_algo": null}})",
       packed,
       {"hf_quant_config.json: quantization.quant_algo 'W4A16_AWQ' is not supported yet",
        "'model.layers.0.mlp.down_proj.qweight'"}},
      {"int8 weights, no config",
       nullptr,
       "",
       "",
       int8,
       {"model.safetensors: tensor 'model.layers.0.mlp.down_proj.weight' is I8 (quantized codes): quantized "
        "checkpoints are not supported yet; use a bf16/fp16/fp32 checkpoint"}},
      {"fp8 weights and scales, no config",
       nullptr,
       "",
       "",
       fp8Linear,
       {"model.safetensors: tensor 'model.layers.0.mlp.down_proj.weight' is F8_E4M3",
        "quantized checkpoints are not supported yet"}},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    TempDir tmp;
    Json j = tinyConfig("llama");
    if (!k.quantization_config.is_null()) j["quantization_config"] = k.quantization_config;
    writeModelDir(tmp.path(), j, quantizedLinears(j, k.linear));
    if (!k.side_file.empty()) writeFile(tmp.file(k.side_file), k.side_text);
    auto m = ModelDirectory::open(tmp.path());
    ASSERT_FALSE(m.isOk());
    EXPECT_EQ(m.status().code(), StatusCode::kUnimplemented) << m.status().toString();
    EXPECT_ERROR_CONTAINS(m, "use a bf16/fp16/fp32 checkpoint");
    for (const std::string& f : k.fragments) EXPECT_ERROR_CONTAINS(m, f);
    EXPECT_EQ(m.status().message().find('\n'), std::string::npos);
  }
}

TEST(Quantization, ConfigAloneOrAScaleTensorAloneIsEnough) {
  {
    SCOPED_TRACE("a refused method with unquantized weights");
    TempDir tmp;
    Json j = tinyConfig("llama");
    j["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}};
    writeModelDir(tmp.path(), j);
    auto m = ModelDirectory::open(tmp.path());
    EXPECT_EQ(m.status().code(), StatusCode::kUnimplemented);
    EXPECT_EQ(m.status().message(), tmp.file("config.json") +
                                        ": quantization_config.quant_method 'gptq' (bits 4) is not supported "
                                        "yet; use a bf16/fp16/fp32 checkpoint");
  }
  {
    SCOPED_TRACE("an fp8 config whose weights all stayed 16-bit");
    TempDir tmp;
    writeModelDir(tmp.path(), fp8Config());
    auto m = ModelDirectory::open(tmp.path());
    ASSERT_TRUE(m.isOk()) << m.status().toString();
    EXPECT_EQ(m->config.weight_quantization, "fp8");
  }
  {
    SCOPED_TRACE("a config naming no method");
    TempDir tmp;
    Json j = tinyConfig("qwen2");
    j["quantization_config"] = {{"bits", 8}};
    writeModelDir(tmp.path(), j);
    EXPECT_ERROR_CONTAINS(ModelDirectory::open(tmp.path()),
                          "quantization_config without a quant_method (bits 8) is not supported yet");
  }
  {
    SCOPED_TRACE("compression_config (older compressed-tensors)");
    TempDir tmp;
    Json j = tinyConfig("mistral");
    j["compression_config"] = {{"quant_method", "compressed-tensors"}};
    writeModelDir(tmp.path(), j);
    EXPECT_ERROR_CONTAINS(ModelDirectory::open(tmp.path()),
                          "compression_config.quant_method 'compressed-tensors' is not supported yet");
  }
  {
    SCOPED_TRACE("an unreadable side file");
    TempDir tmp;
    writeModelDir(tmp.path(), tinyConfig("llama"));
    writeFile(tmp.file("quantize_config.json"), "{not json");
    auto m = ModelDirectory::open(tmp.path());
    EXPECT_EQ(m.status().code(), StatusCode::kUnimplemented);
    EXPECT_ERROR_CONTAINS(m, "quantize_config.json: a quantization config (unreadable) is not supported yet");
  }
  {
    SCOPED_TRACE("one scale tensor in a bf16 checkpoint");
    TempDir tmp;
    CheckpointOptions o;
    o.dtype = DType::kBF16;
    o.extra.push_back(
        {"model.layers.1.self_attn.k_proj.weight_scale", "F32", {}, testutil::floatData(DType::kF32, 1)});
    writeModelDir(tmp.path(), tinyConfig("llama"), o);
    auto m = ModelDirectory::open(tmp.path());
    EXPECT_EQ(m.status().code(), StatusCode::kUnimplemented);
    EXPECT_EQ(m.status().message(),
              tmp.file("model.safetensors") +
                  ": tensor 'model.layers.1.self_attn.k_proj.weight_scale' (F32 []) holds "
                  "quantization data (scales, zero points or packed weights): quantized "
                  "checkpoints are not supported yet; use a bf16/fp16/fp32 checkpoint");
  }
  {
    SCOPED_TRACE("null quantization_config: an ordinary checkpoint");
    TempDir tmp;
    Json j = tinyConfig("llama");
    j["quantization_config"] = nullptr;
    writeModelDir(tmp.path(), j);
    auto m = ModelDirectory::open(tmp.path());
    ASSERT_TRUE(m.isOk()) << m.status().toString();
    EXPECT_FALSE(m->quantization.has_value());
  }
}

TEST(Quantization, QuantizedDtypesFailTheWeightCheckToo) {
  // With the quantization check off, checkWeights still refuses codes as weights.
  for (const char* dt : {"F8_E4M3", "I8", "U8"}) {
    SCOPED_TRACE(dt);
    TempDir tmp;
    CheckpointOptions o;
    o.skip = {"model.layers.0.self_attn.q_proj.weight"};
    o.extra.push_back({"model.layers.0.self_attn.q_proj.weight", dt, {16, 16}, std::string(256, '\x01')});
    writeModelDir(tmp.path(), tinyConfig("llama"), o);
    ModelDirectoryOptions opts;
    opts.reject_quantized = false;
    auto m = ModelDirectory::open(tmp.path(), opts);
    ASSERT_FALSE(m.isOk());
    EXPECT_EQ(m.status().code(), StatusCode::kUnimplemented);
    EXPECT_ERROR_CONTAINS(m, "tensor 'model.layers.0.self_attn.q_proj.weight' has dtype " + std::string(dt),
                          "quantized codes, which are not supported yet");
  }
}

TEST(Quantization, InspectDescribesFp8AndSaysWhatRuns) {
  TempDir tmp;
  const Json j = fp8Config();
  writeModelDir(tmp.path(), j, quantizedLinears(j, fp8Linear));
  auto info = inspectModel(tmp.path());
  ASSERT_TRUE(info.isOk()) << info.status().toString();
  EXPECT_TRUE(info->weights_valid) << info->weights_error;
  EXPECT_EQ(info->bytes_by_dtype.size(), 3u);  // BF16 norms and embeddings, F8_E4M3 linears, F32 scales
  EXPECT_EQ(info->dtype, "BF16");             // the codes are not the compute dtype
  const std::string text = formatModelInfo(*info);
  EXPECT_NE(text.find("fp8 (block scales 128x128); runs as FP8 products"), std::string::npos) << text;
  EXPECT_NE(text.find("F8_E4M3"), std::string::npos) << text;
  auto js = nlohmann::json::parse(modelInfoToJson(*info));
  EXPECT_EQ(js["weights_valid"], true);
  EXPECT_EQ(js["weight_quantization"], "fp8");
  EXPECT_EQ(js["fp8_block"], nlohmann::json({128, 128}));
}

TEST(Quantization, InspectSaysARefusedMethodCannotRun) {
  TempDir tmp;
  Json j = tinyConfig("llama");
  j["quantization_config"] = {{"quant_method", "awq"}, {"bits", 4}};
  writeModelDir(tmp.path(), j);
  auto info = inspectModel(tmp.path());
  ASSERT_TRUE(info.isOk()) << info.status().toString();
  EXPECT_FALSE(info->weights_valid);
  const std::string text = formatModelInfo(*info);
  EXPECT_NE(text.find("FAILED: " + tmp.file("config.json") + ": quantization_config.quant_method 'awq'"),
            std::string::npos)
      << text;
  auto js = nlohmann::json::parse(modelInfoToJson(*info));
  EXPECT_EQ(js["weights_valid"], false);
  EXPECT_NE(js["weights_error"].get<std::string>().find("not supported yet"), std::string::npos);
}

TEST(Quantization, DescribeFormats) {
  QuantizationConfig q{"c.json", "quant_method", "gptq", "bits 4"};
  EXPECT_EQ(q.describe(), "quant_method 'gptq' (bits 4)");
  q.details.clear();
  EXPECT_EQ(q.describe(), "quant_method 'gptq'");
  auto from = quantizationFromConfig(nlohmann::json::parse(R"({"quantization_config": {"quant_method": "fp8",
          "weight_block_size": [128, 128, 1, 2, 3, 4, 5, 6, 7, 8], "activation_scheme": "dynamic\nx"}})"),
                                     "c.json");
  ASSERT_TRUE(from.has_value());
  EXPECT_EQ(from->describe(),
            "quantization_config.quant_method 'fp8' (weight_block_size [128, 128, 1, 2, 3, 4, 5, 6, ...], "
            "activation_scheme dynamic\\nx)");
  EXPECT_FALSE(
      quantizationFromConfig(nlohmann::json::parse(R"({"quantization_config": null})"), "c").has_value());
  EXPECT_FALSE(quantizationFromConfig(nlohmann::json::parse("[1]"), "c").has_value());
}

}  // namespace
}  // namespace llmrt
