#include "loader/model_directory.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/logging.h"
#include "llmrt/model_info.h"
#include "loader/config_parser.h"
#include "loader/decoder_weights.h"
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

TEST(DecoderWeights, ExpectedLlamaNamesAndShapes) {
  Json j = tinyConfig("llama");
  j["num_hidden_layers"] = 1;
  ModelConfig c = *parseModelConfig(j.dump());
  std::vector<std::string> names;
  for (const ExpectedTensor& e : expectedTensors(c)) names.push_back(e.name + " " + e.shape.toString());
  EXPECT_EQ(names, (std::vector<std::string>{
                       "model.embed_tokens.weight [32, 16]",
                       "model.layers.0.input_layernorm.weight [16]",
                       "model.layers.0.self_attn.q_proj.weight [16, 16]",
                       "model.layers.0.self_attn.k_proj.weight [8, 16]",
                       "model.layers.0.self_attn.v_proj.weight [8, 16]",
                       "model.layers.0.self_attn.o_proj.weight [16, 16]",
                       "model.layers.0.post_attention_layernorm.weight [16]",
                       "model.layers.0.mlp.gate_proj.weight [24, 16]",
                       "model.layers.0.mlp.up_proj.weight [24, 16]",
                       "model.layers.0.mlp.down_proj.weight [16, 24]",
                       "model.norm.weight [16]",
                       "lm_head.weight [32, 16]",
                   }));

  auto has = [](const std::vector<ExpectedTensor>& v, const std::string& n) {
    for (const auto& e : v)
      if (e.name == n) return true;
    return false;
  };
  // Qwen2: q/k/v biases, no o_proj bias.
  Json q = tinyConfig("qwen2");
  q["tie_word_embeddings"] = true;
  auto qt = expectedTensors(*parseModelConfig(q.dump()));
  EXPECT_TRUE(has(qt, "model.layers.1.self_attn.q_proj.bias"));
  EXPECT_TRUE(has(qt, "model.layers.1.self_attn.k_proj.bias"));
  EXPECT_TRUE(has(qt, "model.layers.1.self_attn.v_proj.bias"));
  EXPECT_FALSE(has(qt, "model.layers.1.self_attn.o_proj.bias"));
  EXPECT_FALSE(has(qt, "model.layers.1.mlp.up_proj.bias"));
  EXPECT_FALSE(has(qt, "lm_head.weight"));  // tied
  // Llama attention_bias: q/k/v/o; mlp_bias: gate/up/down.
  Json l = tinyConfig("llama");
  l["attention_bias"] = true;
  l["mlp_bias"] = true;
  auto lt = expectedTensors(*parseModelConfig(l.dump()));
  EXPECT_TRUE(has(lt, "model.layers.0.self_attn.o_proj.bias"));
  EXPECT_TRUE(has(lt, "model.layers.0.mlp.down_proj.bias"));
  for (const auto& e : lt) {
    if (e.name == "model.layers.0.mlp.down_proj.bias") EXPECT_EQ(e.shape, Shape{16});
    if (e.name == "model.layers.0.self_attn.k_proj.bias") EXPECT_EQ(e.shape, Shape{8});
  }
  EXPECT_EQ(lt.size(), 1 + 2 * (2 + 4 + 4 + 3 + 3) + 1 + 1u);
}

// The decoder weights in the model's layout, as the model reads them (src/model/decoder_model.cpp).
TEST(DecoderWeights, ShapesAndPresence) {
  ModelConfig q = *parseModelConfig(tinyConfig("qwen2").dump());
  EXPECT_EQ(decoderWeightName(DecoderWeight::kQkvBias, 3), "layers.3.qkv.bias");
  EXPECT_EQ(decoderWeightName(DecoderWeight::kLmHead, 3), "lm_head");
  EXPECT_EQ(decoderWeightShape(DecoderWeight::kQkv, q), (Shape{32, 16}));
  EXPECT_EQ(decoderWeightShape(DecoderWeight::kO, q), (Shape{16, 16}));
  EXPECT_EQ(decoderWeightShape(DecoderWeight::kUp, q), (Shape{48, 16}));
  EXPECT_EQ(decoderWeightShape(DecoderWeight::kDown, q), (Shape{16, 24}));
  EXPECT_EQ(decoderWeightShape(DecoderWeight::kQkvBias, q), (Shape{32}));
  EXPECT_TRUE(decoderWeightPresent(DecoderWeight::kQkvBias, q));
  EXPECT_FALSE(decoderWeightPresent(DecoderWeight::kOBias, q));
  EXPECT_FALSE(decoderWeightPresent(DecoderWeight::kUpBias, q));
  EXPECT_FALSE(decoderWeightPresent(DecoderWeight::kPosEmbed, q));
  EXPECT_TRUE(decoderWeightPresent(DecoderWeight::kLmHead, q));
  Json tied = tinyConfig("llama");
  tied["tie_word_embeddings"] = true;
  tied["mlp_bias"] = true;
  ModelConfig t = *parseModelConfig(tied.dump());
  EXPECT_FALSE(decoderWeightPresent(DecoderWeight::kLmHead, t));
  EXPECT_TRUE(decoderWeightPresent(DecoderWeight::kDownBias, t));
  EXPECT_FALSE(decoderWeightPresent(DecoderWeight::kQkvBias, t));
}

TEST(ModelDirectory, OpensEveryArchitectureSingleAndSharded) {
  for (const char* type : {"llama", "mistral", "qwen2"}) {
    for (int shards : {1, 3}) {
      for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
        SCOPED_TRACE(std::string(type) + " shards=" + std::to_string(shards) + " " +
                     std::string(dtypeName(dt)));
        TempDir tmp;
        CheckpointOptions o;
        o.dtype = dt;
        o.shards = shards;
        ModelConfig cfg = writeModelDir(tmp.path(), tinyConfig(type), o);
        auto m = ModelDirectory::open(tmp.path());
        ASSERT_TRUE(m.isOk()) << m.status().toString();
        EXPECT_EQ(m->config.arch, cfg.arch);
        EXPECT_EQ(m->weights.files().size(), static_cast<size_t>(shards));
        EXPECT_EQ(m->weights.size(), expectedTensors(cfg).size());
        EXPECT_TRUE(m->unused_tensors.empty());
        EXPECT_FALSE(m->generation.has_value());
        EXPECT_FALSE(m->tokenizer_json.has_value());
        EXPECT_EQ(checkpointDtype(m->weights), std::optional<DType>(dt));
        auto emb = m->weights.tensor("model.embed_tokens.weight");
        ASSERT_TRUE(emb.isOk());
        EXPECT_EQ(emb->dtype, dt);
        std::vector<float> v = testutil::toF32(*emb);
        // The fixture's first value, -31.99, as stored in `dt`.
        float want = 0.125f * -256 + 0.01f;
        uint32_t buf;  // aligned scratch
        convertFromF32(&want, &buf, dt, 1);
        convertToF32(&buf, dt, &want, 1);
        EXPECT_EQ(v[0], want) << "first embedding value";
      }
    }
  }
}

TEST(ModelDirectory, GenerationConfigAndTokenizer) {
  TempDir tmp;
  writeModelDir(tmp.path(), tinyConfig("llama"));
  writeFile(tmp.file("generation_config.json"),
            R"({"bos_token_id": 1, "eos_token_id": [2, 3], "temperature": 0.7})");
  writeFile(tmp.file("tokenizer.json"), "{}");
  auto m = ModelDirectory::open(tmp.path());
  ASSERT_TRUE(m.isOk()) << m.status().toString();
  ASSERT_TRUE(m->generation.has_value());
  EXPECT_EQ(m->generation->eos_token_ids, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(m->generation->temperature, std::optional<double>(0.7));
  EXPECT_EQ(m->tokenizer_json, std::optional<std::string>(tmp.file("tokenizer.json")));

  writeFile(tmp.file("generation_config.json"), R"({"top_k": "many"})");
  EXPECT_ERROR_CONTAINS(ModelDirectory::open(tmp.path()), "generation_config.json", "'top_k'", "\"many\"");
}

TEST(ModelDirectory, MissingPieces) {
  TempDir tmp;
  EXPECT_ERROR_CONTAINS(ModelDirectory::open(tmp.file("nope")), "nope", "not a directory");
  EXPECT_EQ(ModelDirectory::open(tmp.file("nope")).status().code(), StatusCode::kNotFound);
  auto no_config = ModelDirectory::open(tmp.path());
  EXPECT_ERROR_CONTAINS(no_config, "config.json", "missing");
  EXPECT_EQ(no_config.status().code(), StatusCode::kNotFound);
  writeFile(tmp.file("config.json"), tinyConfig("llama").dump());
  auto no_weights = ModelDirectory::open(tmp.path());
  EXPECT_ERROR_CONTAINS(no_weights, "no model.safetensors or model.safetensors.index.json");
  EXPECT_EQ(no_weights.status().code(), StatusCode::kNotFound);
  Json bad = tinyConfig("llama");
  bad["num_attention_heads"] = 0;
  writeFile(tmp.file("config.json"), bad.dump());
  EXPECT_ERROR_CONTAINS(ModelDirectory::open(tmp.path()), tmp.file("config.json"),
                        "'num_attention_heads' has value 0");
}

TEST(ModelDirectory, TiedEmbeddings) {
  TempDir tmp;
  Json j = tinyConfig("llama");
  j["tie_word_embeddings"] = true;
  writeModelDir(tmp.path(), j);
  EXPECT_FALSE(testutil::readFile(tmp.file("model.safetensors")).find("lm_head") != std::string::npos);
  auto m = ModelDirectory::open(tmp.path());
  ASSERT_TRUE(m.isOk()) << m.status().toString();
  EXPECT_FALSE(m->weights.contains("lm_head.weight"));

  // A tied checkpoint that still ships lm_head.weight: accepted, reported unused.
  TempDir tmp2;
  CheckpointOptions o;
  o.extra.push_back({"lm_head.weight", "F32", {32, 16}, testutil::floatData(DType::kF32, 32 * 16)});
  o.extra.push_back(
      {"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {2}, testutil::floatData(DType::kF32, 2)});
  writeModelDir(tmp2.path(), j, o);
  auto m2 = ModelDirectory::open(tmp2.path());
  ASSERT_TRUE(m2.isOk()) << m2.status().toString();
  EXPECT_EQ(m2->unused_tensors,
            (std::vector<std::string>{"lm_head.weight", "model.layers.0.self_attn.rotary_emb.inv_freq"}));

  // Untied but lm_head.weight missing: an error naming it.
  TempDir tmp3;
  j["tie_word_embeddings"] = false;
  CheckpointOptions skip;
  skip.skip = {"lm_head.weight"};
  writeModelDir(tmp3.path(), j, skip);
  auto m3 = ModelDirectory::open(tmp3.path());
  EXPECT_ERROR_CONTAINS(m3, "model.safetensors", "tensor 'lm_head.weight' is missing", "[32, 16]",
                        "tie_word_embeddings is false");
  EXPECT_EQ(m3.status().code(), StatusCode::kNotFound);
}

TEST(ModelDirectory, WeightCheckErrors) {
  Json j = tinyConfig("qwen2");
  {
    SCOPED_TRACE("missing bias");
    TempDir tmp;
    CheckpointOptions o;
    o.skip = {"model.layers.1.self_attn.k_proj.bias"};
    writeModelDir(tmp.path(), j, o);
    EXPECT_ERROR_CONTAINS(ModelDirectory::open(tmp.path()),
                          "tensor 'model.layers.1.self_attn.k_proj.bias' is missing", "expected shape [8]",
                          "[num_key_value_heads*head_dim]", "Qwen2ForCausalLM");
    // Without the check the directory opens (e.g. for inspection).
    ModelDirectoryOptions no_check;
    no_check.check_weights = false;
    EXPECT_TRUE(ModelDirectory::open(tmp.path(), no_check).isOk());
  }
  {
    SCOPED_TRACE("misshapen");
    TempDir tmp;
    CheckpointOptions o;
    o.skip = {"model.layers.0.mlp.down_proj.weight"};
    o.extra.push_back(
        {"model.layers.0.mlp.down_proj.weight", "F32", {24, 16}, testutil::floatData(DType::kF32, 24 * 16)});
    writeModelDir(tmp.path(), j, o);
    auto m = ModelDirectory::open(tmp.path());
    EXPECT_ERROR_CONTAINS(m, "model.safetensors",
                          "tensor 'model.layers.0.mlp.down_proj.weight' has shape [24, 16]",
                          "expected [16, 24]", "[hidden_size, intermediate_size]");
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  }
  {
    SCOPED_TRACE("wrong rank");
    TempDir tmp;
    CheckpointOptions o;
    o.skip = {"model.norm.weight"};
    o.extra.push_back({"model.norm.weight", "F32", {1, 16}, testutil::floatData(DType::kF32, 16)});
    writeModelDir(tmp.path(), j, o);
    EXPECT_ERROR_CONTAINS(ModelDirectory::open(tmp.path()), "'model.norm.weight' has shape [1, 16]",
                          "expected [16]");
  }
  {
    SCOPED_TRACE("integer dtype");
    TempDir tmp;
    CheckpointOptions o;
    o.skip = {"model.layers.0.input_layernorm.weight"};
    o.extra.push_back({"model.layers.0.input_layernorm.weight",
                       "I32",
                       {16},
                       testutil::bytesOf(std::vector<int32_t>(16, 1))});
    writeModelDir(tmp.path(), j, o);
    EXPECT_ERROR_CONTAINS(ModelDirectory::open(tmp.path()),
                          "'model.layers.0.input_layernorm.weight' has dtype I32", "floating-point");
  }
  {
    SCOPED_TRACE("config has more layers than the checkpoint");
    TempDir tmp;
    writeModelDir(tmp.path(), j);
    Json more = j;
    more["num_hidden_layers"] = 3;
    writeFile(tmp.file("config.json"), more.dump());
    EXPECT_ERROR_CONTAINS(ModelDirectory::open(tmp.path()),
                          "'model.layers.2.input_layernorm.weight' is missing");
  }
  {
    SCOPED_TRACE("o_proj bias for llama attention_bias");
    TempDir tmp;
    Json l = tinyConfig("llama");
    l["attention_bias"] = true;
    CheckpointOptions o;
    o.skip = {"model.layers.1.self_attn.o_proj.bias"};
    writeModelDir(tmp.path(), l, o);
    EXPECT_ERROR_CONTAINS(ModelDirectory::open(tmp.path()),
                          "'model.layers.1.self_attn.o_proj.bias' is missing", "[hidden_size]");
  }
}

TEST(ModelDirectory, KvBytesAndCheckpointDtype) {
  ModelConfig c = *parseModelConfig(tinyConfig("llama").dump());
  EXPECT_EQ(kvBytesPerToken(c, DType::kF32), 2u * 2u * 2u * 4u * 4u);
  EXPECT_EQ(kvBytesPerToken(c, DType::kBF16), 2u * 2u * 2u * 4u * 2u);
  // Mixed dtypes: the floating dtype with the most bytes wins; integer tensors never do.
  TempDir tmp;
  writeFile(tmp.file("model.safetensors"),
            testutil::makeSafetensors({{"big", "BF16", {64}, testutil::floatData(DType::kBF16, 64)},
                                       {"small", "F32", {4}, testutil::floatData(DType::kF32, 4)},
                                       {"ids", "I64", {100}, std::string(800, '\0')}}));
  auto s = WeightStore::openDirectory(tmp.path());
  ASSERT_TRUE(s.isOk());
  EXPECT_EQ(checkpointDtype(*s), std::optional<DType>(DType::kBF16));
}

TEST(ModelInfo, InspectTinyModel) {
  TempDir tmp;
  Json j = tinyConfig("qwen2");
  j["num_hidden_layers"] = 4;
  j["use_sliding_window"] = true;
  j["sliding_window"] = 16;
  j["max_window_layers"] = 2;
  j["tie_word_embeddings"] = true;
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 16}};
  CheckpointOptions o;
  o.dtype = DType::kBF16;
  ModelConfig cfg = writeModelDir(tmp.path(), j, o);
  writeFile(tmp.file("tokenizer.json"), "{}");
  writeFile(tmp.file("generation_config.json"),
            R"({"do_sample": true, "top_p": 0.8, "eos_token_id": [2, 5]})");

  auto info = inspectModel(tmp.path());
  ASSERT_TRUE(info.isOk()) << info.status().toString();
  int64_t params = 0;
  for (const auto& e : expectedTensors(cfg)) params += e.shape.numel();
  EXPECT_EQ(info->parameter_count, params);
  EXPECT_EQ(info->weights_bytes, static_cast<uint64_t>(params) * 2u);
  EXPECT_EQ(info->dtype, "BF16");
  EXPECT_EQ(info->kv_dtype, "BF16");
  EXPECT_EQ(info->kv_bytes_per_token, 4u * 2u * 2u * 4u * 2u);
  EXPECT_TRUE(info->weights_valid) << info->weights_error;
  EXPECT_TRUE(info->has_tokenizer_json);
  ASSERT_TRUE(info->generation.has_value());
  EXPECT_EQ(info->weight_files.size(), 1u);

  const std::string text = formatModelInfo(*info);
  for (const char* frag :
       {"architecture:",
        "Qwen2ForCausalLM (model_type qwen2)",
        "parameters:",
        "dtype:",
        "BF16",
        "layers:",
        "4\n",
        "heads:",
        "4 query, 2 kv, head_dim 4 (derived)",
        "intermediate size:",
        "24 (silu)",
        "vocab size:",
        "32\n",
        "max positions:",
        "64\n",
        "theta 10000, yarn scaling (factor 4, original_max_position_embeddings 16, beta_fast 32",
        "sliding window:",
        "16 tokens on 2 of 4 layers (first: 2)",
        "tied embeddings:",
        "yes",
        "biases:",
        "q,k,v\n",
        "weights memory:",
        "KV cache / token:",
        "128 bytes = 4 layers x 2 (K,V) x 2 kv heads x 4 head_dim x 2 bytes; BF16, the checkpoint dtype",
        "tokenizer:",
        "tokenizer.json present",
        "generation config:",
        "do_sample true, top_p 0.8, eos 2,5",
        "weights check:",
        "OK"}) {
    EXPECT_NE(text.find(frag), std::string::npos) << "lacks \"" << frag << "\" in:\n" << text;
  }
  EXPECT_EQ(text.back(), '\n');

  const std::string js = modelInfoToJson(*info);
  auto parsed = nlohmann::json::parse(js);
  EXPECT_EQ(parsed["architecture"], "Qwen2ForCausalLM");
  EXPECT_EQ(parsed["parameters"], params);
  EXPECT_EQ(parsed["dtype"], "BF16");
  EXPECT_EQ(parsed["kv_bytes_per_token"], 128);
  EXPECT_EQ(parsed["num_key_value_heads"], 2);
  EXPECT_EQ(parsed["head_dim"], 4);
  EXPECT_EQ(parsed["rope"]["scaling"], "yarn");
  EXPECT_EQ(parsed["rope"]["factor"], 4.0);
  EXPECT_EQ(parsed["sliding_window"], 16);
  EXPECT_EQ(parsed["sliding_window_layers"], nlohmann::json::array({2, 3}));
  EXPECT_EQ(parsed["tie_word_embeddings"], true);
  EXPECT_EQ(parsed["generation_config"]["top_p"], 0.8);
  EXPECT_EQ(parsed["tokenizer_json"], tmp.file("tokenizer.json"));
  EXPECT_EQ(parsed["weights_valid"], true);
}

TEST(ModelInfo, ReportsWeightProblemsWithoutFailing) {
  TempDir tmp;
  CheckpointOptions o;
  o.skip = {"model.norm.weight"};
  writeModelDir(tmp.path(), tinyConfig("mistral"), o);
  auto info = inspectModel(tmp.path());
  ASSERT_TRUE(info.isOk()) << info.status().toString();
  EXPECT_FALSE(info->weights_valid);
  EXPECT_NE(info->weights_error.find("'model.norm.weight' is missing"), std::string::npos)
      << info->weights_error;
  EXPECT_NE(formatModelInfo(*info).find("weights check:"), std::string::npos);
  EXPECT_NE(formatModelInfo(*info).find("FAILED: "), std::string::npos);
  EXPECT_NE(formatModelInfo(*info).find("4096 tokens on all layers"), std::string::npos)
      << formatModelInfo(*info);
  EXPECT_EQ(nlohmann::json::parse(modelInfoToJson(*info))["weights_valid"], false);
  // A bad config still fails the inspection.
  EXPECT_ERROR_CONTAINS(inspectModel(tmp.file("missing")), "missing", "not a directory");
}

TEST(ModelInfo, ParameterCountFormat) {
  EXPECT_EQ(formatParameterCount(0), "0");
  EXPECT_EQ(formatParameterCount(999), "999");
  EXPECT_EQ(formatParameterCount(260032), "260.0K");
  EXPECT_EQ(formatParameterCount(260200), "260.2K");
  EXPECT_EQ(formatParameterCount(999960), "1.00M");
  EXPECT_EQ(formatParameterCount(1240000), "1.24M");
  EXPECT_EQ(formatParameterCount(8030261248), "8.03B");
  EXPECT_EQ(formatParameterCount(70553706496), "70.55B");
  EXPECT_EQ(formatParameterCount(1200000000000), "1.20T");
}

}  // namespace
}  // namespace llmrt
