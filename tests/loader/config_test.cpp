#include <gtest/gtest.h>

#include <random>

#include "loader/config_parser.h"
#include "loader_test_util.h"

namespace llmrt {
namespace {

using testutil::Json;
using testutil::tinyConfig;

Result<ModelConfig> parse(const Json& j) { return parseModelConfig(j.dump(), "config.json"); }

ModelConfig parseOk(const Json& j) {
  Result<ModelConfig> r = parse(j);
  EXPECT_TRUE(r.isOk()) << r.status().toString();
  return r.isOk() ? *r : ModelConfig{};
}

ModelConfig fixture(const std::string& name) {
  Result<ModelConfig> r = loadModelConfig(std::string(LLMRT_TEST_DATA) + "/loader/configs/" + name);
  EXPECT_TRUE(r.isOk()) << r.status().toString();
  return r.isOk() ? *r : ModelConfig{};
}

TEST(Config, TinyLlama) {
  ModelConfig c = parseOk(tinyConfig("llama"));
  EXPECT_EQ(c.arch, ModelArch::kLlama);
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.vocab_size, 32);
  EXPECT_EQ(c.hidden_size, 16);
  EXPECT_EQ(c.intermediate_size, 24);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 4);
  EXPECT_FALSE(c.head_dim_explicit);
  EXPECT_EQ(c.qSize(), 16);
  EXPECT_EQ(c.kvSize(), 8);
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kNone);
  EXPECT_EQ(c.max_position_embeddings, 64);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.o_proj_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_EQ(c.bos_token_ids, std::vector<int64_t>{1});
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{2});
  EXPECT_EQ(c.torch_dtype, "float32");
  EXPECT_FALSE(c.sliding_window.has_value());
  EXPECT_TRUE(c.layer_types.empty());
  EXPECT_FALSE(c.slidingWindowForLayer(0).has_value());
  EXPECT_EQ(ropeScalingTypeName(c.rope_scaling.type), "none");
  EXPECT_EQ(modelArchName(c.arch), "llama");
}

TEST(Config, RealLlama31) {
  ModelConfig c = fixture("llama3.1-8b-instruct.json");
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_EQ(c.bos_token_ids, std::vector<int64_t>{128000});
  EXPECT_EQ(c.torch_dtype, "bfloat16");
}

TEST(Config, RealLlama32Transformers5Spelling) {
  ModelConfig c = fixture("llama3.2-1b-tf5.json");
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_TRUE(c.head_dim_explicit);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);  // from rope_parameters
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.torch_dtype, "bfloat16");  // from `dtype`
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{128001});
}

TEST(Config, RealMistral) {
  ModelConfig v1 = fixture("mistral-7b-v0.1.json");
  EXPECT_EQ(v1.arch, ModelArch::kMistral);
  ASSERT_TRUE(v1.sliding_window.has_value());
  EXPECT_EQ(*v1.sliding_window, 4096);
  for (int64_t l : {0, 15, 31}) EXPECT_EQ(v1.slidingWindowForLayer(l), std::optional<int64_t>(4096)) << l;
  EXPECT_FALSE(v1.slidingWindowForLayer(32).has_value());  // out of range
  EXPECT_FALSE(v1.attention_bias);
  ModelConfig v2 = fixture("mistral-7b-instruct-v0.2.json");
  EXPECT_FALSE(v2.sliding_window.has_value());  // null: full attention
  EXPECT_FALSE(v2.slidingWindowForLayer(0).has_value());
  EXPECT_DOUBLE_EQ(v2.rope_theta, 1e6);
}

TEST(Config, RealQwen2) {
  ModelConfig c = fixture("qwen2-0.5b-instruct.json");
  EXPECT_EQ(c.arch, ModelArch::kQwen2);
  EXPECT_EQ(c.head_dim, 64);  // 896 / 14
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.o_proj_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.use_sliding_window);
  EXPECT_FALSE(c.sliding_window.has_value());  // HF drops it when use_sliding_window is false
  EXPECT_EQ(c.max_window_layers, 24);
  ASSERT_EQ(c.layer_types.size(), 24u);
  for (int64_t l = 0; l < 24; ++l) EXPECT_FALSE(c.slidingWindowForLayer(l).has_value());
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-6);

  ModelConfig y = fixture("qwen2.5-7b-instruct-yarn.json");
  EXPECT_EQ(y.rope_scaling.type, RopeScalingType::kYarn);
  EXPECT_DOUBLE_EQ(y.rope_scaling.factor, 4.0);
  EXPECT_EQ(y.rope_scaling.original_max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(y.rope_scaling.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(y.rope_scaling.beta_slow, 1.0);
  EXPECT_TRUE(y.rope_scaling.truncate);
  EXPECT_FALSE(y.rope_scaling.attention_factor.has_value());
}

TEST(Config, Transformers5SpellingForEveryArch) {
  for (const char* type : {"llama", "mistral", "qwen2"}) {
    SCOPED_TRACE(type);
    Json j = tinyConfig(type);
    j.erase("rope_theta");
    j.erase("torch_dtype");
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}};
    j["dtype"] = "bfloat16";
    ModelConfig c = parseOk(j);
    EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
    EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kNone);
    EXPECT_EQ(c.torch_dtype, "bfloat16");
    EXPECT_EQ(c.model_type, type);

    j["rope_parameters"] = {{"rope_type", "linear"}, {"rope_theta", 5e5}, {"factor", 2.0}};
    c = parseOk(j);
    EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLinear);
    EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 2.0);
    EXPECT_DOUBLE_EQ(c.rope_theta, 5e5);
  }
  // 4.x: rope_theta at the top level, no dtype at all.
  Json j = tinyConfig("llama");
  j.erase("torch_dtype");
  j["rope_theta"] = 250000;  // an integer is a fine number
  ModelConfig c = parseOk(j);
  EXPECT_DOUBLE_EQ(c.rope_theta, 250000.0);
  EXPECT_EQ(c.torch_dtype, "");
  // `dtype` wins over `torch_dtype`.
  j["torch_dtype"] = "float32";
  j["dtype"] = "float16";
  EXPECT_EQ(parseOk(j).torch_dtype, "float16");
}

TEST(Config, RopeScalingVariants) {
  Json j = tinyConfig("llama");
  j["rope_scaling"] = nullptr;
  EXPECT_EQ(parseOk(j).rope_scaling.type, RopeScalingType::kNone);
  j["rope_scaling"] = Json::object();
  EXPECT_EQ(parseOk(j).rope_scaling.type, RopeScalingType::kNone);

  j["rope_scaling"] = {{"type", "linear"}, {"factor", 4}};
  ModelConfig c = parseOk(j);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 4.0);

  j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.5}};
  c = parseOk(j);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kDynamic);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 2.5);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 0);  // 0 = use max_position_embeddings
  j["rope_scaling"]["original_max_position_embeddings"] = 32;
  EXPECT_EQ(parseOk(j).rope_scaling.original_max_position_embeddings, 32);

  // rope_type wins over the legacy `type`.
  j["rope_scaling"] = {{"type", "linear"}, {"rope_type", "dynamic"}, {"factor", 2.0}};
  EXPECT_EQ(parseOk(j).rope_scaling.type, RopeScalingType::kDynamic);

  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  c = parseOk(j);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);

  // yarn with only the factor: HF 5.x fills original_max_position_embeddings.
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  c = parseOk(j);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kYarn);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 64);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_slow, 1.0);
  EXPECT_TRUE(c.rope_scaling.truncate);

  j["rope_scaling"] = {
      {"rope_type", "yarn"}, {"factor", 40.0},        {"original_max_position_embeddings", 4096},
      {"beta_fast", 0},      {"beta_slow", 2},        {"attention_factor", 1.25},
      {"mscale", 1.0},       {"mscale_all_dim", 0.7}, {"truncate", false}};
  c = parseOk(j);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 40.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_fast, 32.0);  // 0 means the default, as HF's `or 32`
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_slow, 2.0);
  EXPECT_EQ(c.rope_scaling.attention_factor, std::optional<double>(1.25));
  EXPECT_EQ(c.rope_scaling.mscale, std::optional<double>(1.0));
  EXPECT_EQ(c.rope_scaling.mscale_all_dim, std::optional<double>(0.7));
  EXPECT_FALSE(c.rope_scaling.truncate);

  // rope_scaling (4.x) wins over rope_parameters when both are present.
  j["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 3.0}, {"rope_theta", 7.0}};
  j["rope_scaling"] = {{"type", "dynamic"}, {"factor", 5.0}};
  c = parseOk(j);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kDynamic);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  j.erase("rope_scaling");
  c = parseOk(j);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_DOUBLE_EQ(c.rope_theta, 7.0);

  // transformers 5.x per-layer-type nesting with identical entries.
  j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1e6}}},
                          {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 1e6}}}};
  EXPECT_DOUBLE_EQ(parseOk(j).rope_theta, 1e6);
  j["rope_parameters"]["sliding_attention"]["rope_theta"] = 1e4;
  EXPECT_ERROR_CONTAINS(parse(j), "rope_parameters", "different RoPE parameters per layer type");
  EXPECT_EQ(parse(j).status().code(), StatusCode::kUnimplemented);

  // partial_rotary_factor at the top level.
  j.erase("rope_parameters");
  j["partial_rotary_factor"] = 0.5;
  EXPECT_DOUBLE_EQ(parseOk(j).partial_rotary_factor, 0.5);
}

TEST(Config, RopeScalingErrors) {
  Json j = tinyConfig("llama");
  auto with = [&](Json rs) {
    j["rope_scaling"] = std::move(rs);
    return parse(j);
  };
  EXPECT_ERROR_CONTAINS(with({{"type", "linear"}}), "config.json", "'rope_scaling.factor'", "(missing)",
                        "required for rope_type 'linear'");
  EXPECT_ERROR_CONTAINS(with({{"type", "linear"}, {"factor", "2"}}), "'rope_scaling.factor' has value \"2\"",
                        "a number");
  EXPECT_ERROR_CONTAINS(with({{"type", "linear"}, {"factor", 0}}), "rope_scaling.factor", "has value 0",
                        "> 0");
  EXPECT_ERROR_CONTAINS(with({{"type", "ntk-magic"}, {"factor", 2}}),
                        "'rope_scaling.type' has value \"ntk-magic\"",
                        "one of default, linear, dynamic, llama3, yarn");
  auto longrope = with({{"rope_type", "longrope"}, {"short_factor", {1}}, {"long_factor", {1}}});
  EXPECT_ERROR_CONTAINS(longrope, "longrope", "not support");
  EXPECT_EQ(longrope.status().code(), StatusCode::kUnimplemented);
  EXPECT_ERROR_CONTAINS(with({{"rope_type", "llama3"},
                              {"factor", 8.0},
                              {"high_freq_factor", 4.0},
                              {"original_max_position_embeddings", 8192}}),
                        "'rope_scaling.low_freq_factor'", "(missing)", "llama3");
  EXPECT_ERROR_CONTAINS(
      with({{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0}}),
      "'rope_scaling.original_max_position_embeddings'", "(missing)");
  EXPECT_ERROR_CONTAINS(with({{"rope_type", "llama3"},
                              {"factor", 8.0},
                              {"low_freq_factor", 4.0},
                              {"high_freq_factor", 4.0},
                              {"original_max_position_embeddings", 8192}}),
                        "'rope_scaling.high_freq_factor' has value 4", "> low_freq_factor");
  EXPECT_ERROR_CONTAINS(
      with({{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 8.5}}),
      "'rope_scaling.original_max_position_embeddings' has value 8.5", "an integer");
  EXPECT_ERROR_CONTAINS(with({{"rope_type", "yarn"}, {"factor", 4.0}, {"truncate", "no"}}),
                        "'rope_scaling.truncate'", "true or false");
  EXPECT_ERROR_CONTAINS(with({{"rope_type", "yarn"}, {"factor", 4.0}, {"beta_slow", -1}}),
                        "rope_scaling.beta_slow", "> 0");
  EXPECT_ERROR_CONTAINS(with(Json::array({1, 2})), "'rope_scaling' has value [1,2]", "an object or null");
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", 3}};
  EXPECT_ERROR_CONTAINS(parse(j), "'rope_parameters.rope_type' has value 3", "a string");
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", -1}};  // named as written
  EXPECT_ERROR_CONTAINS(parse(j), "'rope_parameters.factor' has value -1", "> 0");
  j["rope_parameters"] = {{"rope_theta", -1.0}};
  EXPECT_ERROR_CONTAINS(parse(j), "'rope_theta' has value -1", "> 0");
  j.erase("rope_parameters");
  j["rope_theta"] = 0;
  EXPECT_ERROR_CONTAINS(parse(j), "'rope_theta' has value 0");
  j["rope_theta"] = 10000.0;
  j["partial_rotary_factor"] = 1.5;
  EXPECT_ERROR_CONTAINS(parse(j), "'partial_rotary_factor' has value 1.5", "(0, 1]");
  j["partial_rotary_factor"] = 0.25;  // head_dim 4 x 0.25 = 1 rotary dim
  EXPECT_ERROR_CONTAINS(parse(j), "'partial_rotary_factor'", "even rotary dimension");
}

TEST(Config, HeadDimAndKvHeads) {
  Json j = tinyConfig("llama");
  j["head_dim"] = 8;  // explicit, != hidden / heads
  ModelConfig c = parseOk(j);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_TRUE(c.head_dim_explicit);
  EXPECT_EQ(c.qSize(), 32);
  j["head_dim"] = nullptr;  // null: derived
  c = parseOk(j);
  EXPECT_EQ(c.head_dim, 4);
  EXPECT_FALSE(c.head_dim_explicit);
  j.erase("num_key_value_heads");  // absent: = heads
  EXPECT_EQ(parseOk(j).num_key_value_heads, 4);
  j["num_key_value_heads"] = nullptr;
  EXPECT_EQ(parseOk(j).num_key_value_heads, 4);
  // Explicit head_dim lifts the divisibility requirement (Mistral-Nemo style).
  j["hidden_size"] = 20;
  j["head_dim"] = 4;
  EXPECT_EQ(parseOk(j).head_dim, 4);
}

TEST(Config, TokenIds) {
  Json j = tinyConfig("llama");
  j["eos_token_id"] = {2, 7, 9};
  j["bos_token_id"] = nullptr;
  j["pad_token_id"] = 0;
  ModelConfig c = parseOk(j);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{2, 7, 9}));
  EXPECT_TRUE(c.bos_token_ids.empty());  // explicit null: none
  EXPECT_EQ(c.pad_token_id, std::optional<int64_t>(0));
  j.erase("bos_token_id");
  j.erase("eos_token_id");
  c = parseOk(j);
  EXPECT_EQ(c.bos_token_ids, std::vector<int64_t>{1});  // LlamaConfig defaults
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{2});
  Json q = tinyConfig("qwen2");
  q.erase("bos_token_id");
  q.erase("eos_token_id");
  c = parseOk(q);
  EXPECT_TRUE(c.bos_token_ids.empty());  // Qwen2Config has no defaults
  EXPECT_TRUE(c.eos_token_ids.empty());
  j["eos_token_id"] = "2";
  EXPECT_ERROR_CONTAINS(parse(j), "'eos_token_id' has value \"2\"", "an integer or a list of integers");
  j["eos_token_id"] = {1, "x"};
  EXPECT_ERROR_CONTAINS(parse(j), "'eos_token_id'", "an integer or a list of integers");
  j["eos_token_id"] = -1;
  EXPECT_ERROR_CONTAINS(parse(j), "'eos_token_id' has value -1");
  j["eos_token_id"] = 2;
  j["pad_token_id"] = 1.0;
  EXPECT_ERROR_CONTAINS(parse(j), "'pad_token_id' has value 1.0", "an integer");
}

TEST(Config, BiasesPerArchitecture) {
  Json l = tinyConfig("llama");
  l["attention_bias"] = true;
  l["mlp_bias"] = true;
  ModelConfig c = parseOk(l);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.o_proj_bias);  // Llama attention_bias covers o_proj too
  EXPECT_TRUE(c.mlp_bias);
  Json m = tinyConfig("mistral");
  m["attention_bias"] = true;  // MistralAttention has no biases whatever the config says
  m["mlp_bias"] = true;
  c = parseOk(m);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.o_proj_bias);
  EXPECT_FALSE(c.mlp_bias);
  c = parseOk(tinyConfig("qwen2"));
  EXPECT_TRUE(c.attention_bias);  // q/k/v biases always
  EXPECT_FALSE(c.o_proj_bias);
  EXPECT_FALSE(c.mlp_bias);
  l["attention_bias"] = 1;
  EXPECT_ERROR_CONTAINS(parse(l), "'attention_bias' has value 1", "true or false");
}

TEST(Config, MistralSlidingWindow) {
  Json j = tinyConfig("mistral");
  ModelConfig c = parseOk(j);  // absent: MistralConfig's default 4096
  EXPECT_EQ(c.sliding_window, std::optional<int64_t>(4096));
  EXPECT_EQ(c.max_position_embeddings, 64);
  j["sliding_window"] = 8;
  j["layer_types"] = {"full_attention", "full_attention"};  // ignored by Mistral, as in HF
  c = parseOk(j);
  EXPECT_EQ(c.slidingWindowForLayer(0), std::optional<int64_t>(8));
  EXPECT_EQ(c.slidingWindowForLayer(1), std::optional<int64_t>(8));
  EXPECT_TRUE(c.layer_types.empty());
  j["sliding_window"] = nullptr;
  c = parseOk(j);
  EXPECT_FALSE(c.slidingWindowForLayer(1).has_value());
  j["sliding_window"] = 0;
  EXPECT_ERROR_CONTAINS(parse(j), "'sliding_window' has value 0");
  j["sliding_window"] = 4.5;
  EXPECT_ERROR_CONTAINS(parse(j), "'sliding_window' has value 4.5", "an integer >= 1 or null");
  // Llama has no sliding window even when the key is present.
  Json l = tinyConfig("llama");
  l["sliding_window"] = 8;
  EXPECT_FALSE(parseOk(l).slidingWindowForLayer(1).has_value());
}

TEST(Config, Qwen2SlidingWindow) {
  Json j = tinyConfig("qwen2");
  j["num_hidden_layers"] = 4;
  j["sliding_window"] = 8;
  j["max_window_layers"] = 2;
  j["use_sliding_window"] = false;
  ModelConfig c = parseOk(j);
  EXPECT_FALSE(c.sliding_window.has_value());
  for (int l = 0; l < 4; ++l) EXPECT_FALSE(c.slidingWindowForLayer(l).has_value()) << l;

  j["use_sliding_window"] = true;
  c = parseOk(j);
  EXPECT_EQ(c.sliding_window, std::optional<int64_t>(8));
  EXPECT_EQ(c.layer_types, (std::vector<std::string>{"full_attention", "full_attention", "sliding_attention",
                                                     "sliding_attention"}));
  EXPECT_FALSE(c.slidingWindowForLayer(0).has_value());
  EXPECT_FALSE(c.slidingWindowForLayer(1).has_value());
  EXPECT_EQ(c.slidingWindowForLayer(2), std::optional<int64_t>(8));
  EXPECT_EQ(c.slidingWindowForLayer(3), std::optional<int64_t>(8));

  // Recent transformers: an explicit layer_types list decides.
  j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};
  c = parseOk(j);
  EXPECT_EQ(c.slidingWindowForLayer(0), std::optional<int64_t>(8));
  EXPECT_FALSE(c.slidingWindowForLayer(1).has_value());
  EXPECT_EQ(c.slidingWindowForLayer(2), std::optional<int64_t>(8));
  EXPECT_FALSE(c.slidingWindowForLayer(3).has_value());
  j["use_sliding_window"] = false;  // window dropped: sliding layers attend fully
  EXPECT_FALSE(parseOk(j).slidingWindowForLayer(0).has_value());

  j["use_sliding_window"] = true;
  j["layer_types"] = {"sliding_attention"};
  EXPECT_ERROR_CONTAINS(parse(j), "'layer_types' has value 1 entries", "one entry per layer",
                        "num_hidden_layers = 4");
  j["layer_types"] = {"sliding_attention", "chunked_attention", "full_attention", "full_attention"};
  EXPECT_ERROR_CONTAINS(parse(j), "'layer_types'", "chunked_attention");
  j["layer_types"] = "all";
  EXPECT_ERROR_CONTAINS(parse(j), "'layer_types' has value \"all\"");
  j.erase("layer_types");
  j.erase("max_window_layers");  // Qwen2Config default 28: no layer of 4 slides
  c = parseOk(j);
  EXPECT_EQ(c.max_window_layers, 28);
  EXPECT_FALSE(c.slidingWindowForLayer(3).has_value());
  j["max_window_layers"] = -1;
  EXPECT_ERROR_CONTAINS(parse(j), "'max_window_layers' has value -1");
  j["max_window_layers"] = 0;
  j["use_sliding_window"] = "true";
  EXPECT_ERROR_CONTAINS(parse(j), "'use_sliding_window' has value \"true\"", "true or false");
}

TEST(Config, AbsurdValues) {
  struct Case {
    const char* field;
    Json value;
    std::vector<std::string> fragments;
  };
  const std::vector<Case> cases = {
      {"num_attention_heads", 0, {"'num_attention_heads' has value 0", "between 1 and"}},
      {"num_attention_heads", 5, {"'num_attention_heads' has value 5", "a divisor of hidden_size (16)"}},
      {"num_attention_heads", -4, {"'num_attention_heads' has value -4"}},
      {"num_key_value_heads",
       3,
       {"'num_key_value_heads' has value 3", "a divisor of num_attention_heads (4)"}},
      {"num_key_value_heads", 8, {"'num_key_value_heads' has value 8", "between 1 and 4"}},
      {"num_key_value_heads", 0, {"'num_key_value_heads' has value 0"}},
      {"vocab_size", 0, {"'vocab_size' has value 0"}},
      {"vocab_size", -1, {"'vocab_size' has value -1"}},
      {"vocab_size", 32.0, {"'vocab_size' has value 32.0", "an integer"}},
      {"vocab_size", 3e10, {"'vocab_size' has value 30000000000.0", "an integer"}},
      {"vocab_size", "32", {"'vocab_size' has value \"32\"", "an integer"}},
      {"vocab_size", true, {"'vocab_size' has value true", "an integer"}},
      {"hidden_size", 0, {"'hidden_size' has value 0"}},
      {"hidden_size", int64_t{1} << 40, {"'hidden_size' has value 1099511627776"}},
      {"hidden_size",
       18446744073709551615ull,
       {"'hidden_size' has value 18446744073709551615", "an integer"}},
      {"intermediate_size", 0, {"'intermediate_size' has value 0"}},
      {"num_hidden_layers", 0, {"'num_hidden_layers' has value 0"}},
      {"num_hidden_layers", 1000000, {"'num_hidden_layers' has value 1000000"}},
      {"head_dim", 3, {"'head_dim' has value 3", "even"}},
      {"head_dim", 0, {"'head_dim' has value 0"}},
      {"head_dim", 4.0, {"'head_dim' has value 4.0", "an integer"}},
      {"rms_norm_eps", 0, {"'rms_norm_eps' has value 0", "(0, 1)"}},
      {"rms_norm_eps", -1e-5, {"'rms_norm_eps' has value -1"}},
      {"rms_norm_eps", "1e-5", {"'rms_norm_eps' has value \"1e-5\"", "a number"}},
      {"max_position_embeddings", 0, {"'max_position_embeddings' has value 0"}},
      {"tie_word_embeddings", "yes", {"'tie_word_embeddings' has value \"yes\"", "true or false"}},
      {"hidden_act", "tanh", {"'hidden_act' has value \"tanh\"", "silu"}},
      {"torch_dtype", 16, {"'torch_dtype' has value 16", "a string"}},
      {"architectures", "LlamaForCausalLM", {"'architectures' has value \"LlamaForCausalLM\"", "list"}},
      {"architectures",
       Json::array({"BloomForCausalLM"}),
       {"'architectures'", "BloomForCausalLM", "unsupported architecture"}},
      {"model_type", "qwen2", {"'model_type' has value \"qwen2\"", "\"llama\" to match architectures[0]"}},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(k.field) + " = " + k.value.dump());
    Json j = tinyConfig("llama");
    j[k.field] = k.value;
    auto r = parse(j);
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("config.json: field "), std::string::npos) << r.status().message();
    for (const std::string& f : k.fragments) {
      EXPECT_NE(r.status().message().find(f), std::string::npos)
          << "lacks \"" << f << "\": " << r.status().message();
    }
  }
}

TEST(Config, MissingAndUnknown) {
  for (const char* key :
       {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"}) {
    Json j = tinyConfig("llama");
    j.erase(key);
    EXPECT_ERROR_CONTAINS(parse(j), "config.json", std::string("'") + key + "' has value (missing)",
                          "an integer >= 1");
    j[key] = nullptr;
    EXPECT_ERROR_CONTAINS(parse(j), std::string("'") + key + "' has value (missing)");
  }
  Json j = tinyConfig("llama");
  j.erase("architectures");
  EXPECT_EQ(parseOk(j).architecture, "LlamaForCausalLM");  // model_type alone is enough
  j["model_type"] = "bloom";
  EXPECT_ERROR_CONTAINS(parse(j), "'model_type' has value \"bloom\"", "one of llama, mistral, qwen2, gpt2");
  j.erase("model_type");
  EXPECT_ERROR_CONTAINS(parse(j), "'architectures' has value (missing)");
  j = tinyConfig("mistral");
  j.erase("model_type");
  EXPECT_EQ(parseOk(j).arch, ModelArch::kMistral);  // architectures alone is enough

  EXPECT_ERROR_CONTAINS(parseModelConfig("{\"vocab_size\": ", "my/config.json"), "my/config.json",
                        "invalid JSON");
  EXPECT_EQ(parseModelConfig("{", "config.json").status().code(), StatusCode::kParseError);
  EXPECT_ERROR_CONTAINS(parseModelConfig("[1]", "config.json"), "expected a JSON object");
  EXPECT_ERROR_CONTAINS(parseModelConfig("", "config.json"), "invalid JSON");

  testutil::TempDir tmp;
  auto missing = loadModelConfig(tmp.file("config.json"));
  EXPECT_ERROR_CONTAINS(missing, tmp.file("config.json"), "cannot open");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  testutil::writeFile(tmp.file("config.json"), "{\"model_type\": \"llama\", \"vocab_size\": 0}");
  EXPECT_ERROR_CONTAINS(loadModelConfig(tmp.file("config.json")), tmp.file("config.json"),
                        "'hidden_size' has value (missing)");
}

TEST(Config, ValidateDirectly) {
  ModelConfig c = parseOk(tinyConfig("llama"));
  EXPECT_TRUE(validateModelConfig(c).isOk());
  ModelConfig bad = c;
  bad.num_attention_heads = 0;
  EXPECT_ERROR_CONTAINS(validateModelConfig(bad, "x.json"),
                        "x.json: field 'num_attention_heads' has value 0");
  bad = c;
  bad.rope_scaling.type = RopeScalingType::kYarn;
  bad.rope_scaling.factor = 4;
  bad.rope_scaling.original_max_position_embeddings = 0;
  EXPECT_ERROR_CONTAINS(validateModelConfig(bad),
                        "rope_scaling.original_max_position_embeddings' has value 0");
  bad = c;
  bad.eos_token_ids = {int64_t{1} << 40};
  EXPECT_ERROR_CONTAINS(validateModelConfig(bad), "'eos_token_id' has value 1099511627776");
}

// `llmrt inspect` used to accept max_position_embeddings 2^34 that `generate`
// refused at 2^30: the one limit now lives in config validation.
TEST(Config, SequenceLengthLimitIsTheEngines) {
  EXPECT_EQ(kMaxSequenceLength, int64_t{1} << 30);
  Json j = tinyConfig("mistral");
  j["max_position_embeddings"] = int64_t{1} << 30;
  EXPECT_EQ(parseOk(j).max_position_embeddings, int64_t{1} << 30);
  const std::string expected = "an integer between 1 and 1073741824 (2^30, the longest sequence llmrt runs)";
  for (int64_t v : {(int64_t{1} << 30) + 1, int64_t{1} << 34}) {
    SCOPED_TRACE(v);
    j["max_position_embeddings"] = v;
    auto r = parse(j);
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), "config.json: field 'max_position_embeddings' has value " +
                                        std::to_string(v) + "; expected " + expected);
  }
  j["max_position_embeddings"] = 64;
  j["sliding_window"] = int64_t{1} << 31;
  EXPECT_ERROR_CONTAINS(parse(j), "'sliding_window' has value 2147483648", expected);
  Json y = tinyConfig("llama");
  y["rope_scaling"] = {
      {"rope_type", "yarn"}, {"factor", 2.0}, {"original_max_position_embeddings", int64_t{1} << 31}};
  EXPECT_ERROR_CONTAINS(parse(y), "'rope_scaling.original_max_position_embeddings' has value 2147483648",
                        expected);
  // The engine checks a user's max_seq_len with the same function and words.
  EXPECT_TRUE(checkSequenceLength("EngineOptions", "max_seq_len", 4096).isOk());
  EXPECT_EQ(checkSequenceLength("EngineOptions", "max_seq_len", int64_t{1} << 34).message(),
            "EngineOptions: field 'max_seq_len' has value 17179869184; expected " + expected);
  EXPECT_FALSE(checkSequenceLength("EngineOptions", "max_seq_len", 0).isOk());
}

TEST(Config, MutatedConfigsNeverCrash) {
  std::string good = tinyConfig("qwen2").dump();
  std::mt19937 rng(99);
  int ok = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    std::string m = good;
    for (int e = 0; e < 1 + static_cast<int>(rng() % 3); ++e) {
      const size_t pos = rng() % m.size();
      switch (rng() % 3) {
        case 0:
          m[pos] = "0123456789-.eE\"{}[],:ntf "[rng() % 25];
          break;
        case 1:
          m.erase(pos, 1 + rng() % 4);
          break;
        case 2:
          m.insert(pos, 1, "09-.\"]}"[rng() % 7]);
          break;
      }
      if (m.empty()) break;
    }
    auto r = parseModelConfig(m, "config.json");
    if (r.isOk()) {
      ++ok;
      EXPECT_TRUE(validateModelConfig(*r).isOk());
    } else {
      EXPECT_FALSE(r.status().message().empty());
    }
  }
  EXPECT_GT(ok, 0);
}

TEST(GenerationConfig, ParsesDefaults) {
  auto g = parseGenerationConfig(R"({"bos_token_id": 1, "eos_token_id": [2, 32000], "pad_token_id": 0,
    "do_sample": true, "temperature": 0.6, "top_k": 50, "top_p": 0.9, "min_p": 0.05,
    "repetition_penalty": 1.1, "max_new_tokens": 256, "max_length": 4096, "transformers_version": "4.40.0"})");
  ASSERT_TRUE(g.isOk()) << g.status().toString();
  EXPECT_EQ(g->bos_token_ids, std::vector<int64_t>{1});
  EXPECT_EQ(g->eos_token_ids, (std::vector<int64_t>{2, 32000}));
  EXPECT_EQ(g->pad_token_id, std::optional<int64_t>(0));
  EXPECT_EQ(g->do_sample, std::optional<bool>(true));
  EXPECT_EQ(g->temperature, std::optional<double>(0.6));
  EXPECT_EQ(g->top_k, std::optional<int64_t>(50));
  EXPECT_EQ(g->top_p, std::optional<double>(0.9));
  EXPECT_EQ(g->min_p, std::optional<double>(0.05));
  EXPECT_EQ(g->repetition_penalty, std::optional<double>(1.1));
  EXPECT_EQ(g->max_new_tokens, std::optional<int64_t>(256));
  EXPECT_EQ(g->max_length, std::optional<int64_t>(4096));

  auto empty = parseGenerationConfig(R"({"temperature": null})");
  ASSERT_TRUE(empty.isOk());
  EXPECT_FALSE(empty->temperature.has_value());
  EXPECT_FALSE(empty->do_sample.has_value());
  EXPECT_TRUE(empty->eos_token_ids.empty());
}

TEST(GenerationConfig, RejectsBadValues) {
  EXPECT_ERROR_CONTAINS(parseGenerationConfig(R"({"temperature": "hot"})"),
                        "generation_config.json: field 'temperature' has value \"hot\"", "a number");
  EXPECT_ERROR_CONTAINS(parseGenerationConfig(R"({"temperature": -1})"), "'temperature' has value -1",
                        ">= 0");
  EXPECT_ERROR_CONTAINS(parseGenerationConfig(R"({"top_p": 0})"), "'top_p' has value 0", "(0, 1]");
  EXPECT_ERROR_CONTAINS(parseGenerationConfig(R"({"top_p": 1.5})"), "'top_p' has value 1.5");
  EXPECT_ERROR_CONTAINS(parseGenerationConfig(R"({"top_k": 5.5})"), "'top_k' has value 5.5", "an integer");
  EXPECT_ERROR_CONTAINS(parseGenerationConfig(R"({"top_k": -1})"), "'top_k' has value -1");
  EXPECT_ERROR_CONTAINS(parseGenerationConfig(R"({"do_sample": "false"})"), "'do_sample'", "true or false");
  EXPECT_ERROR_CONTAINS(parseGenerationConfig(R"({"eos_token_id": [2, -3]})"), "'eos_token_id' has value -3");
  EXPECT_ERROR_CONTAINS(parseGenerationConfig(R"({"repetition_penalty": 0})"),
                        "'repetition_penalty' has value 0");
  EXPECT_ERROR_CONTAINS(parseGenerationConfig("{,}"), "generation_config.json", "invalid JSON");
  EXPECT_ERROR_CONTAINS(parseGenerationConfig("3"), "expected a JSON object");
}

}  // namespace
}  // namespace llmrt
