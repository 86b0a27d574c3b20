// The architecture table and the decoder weight reader: each family's config.json maps onto the
// description it should, and every packed q/k/v layout is rearranged into [q heads | k heads |
// v heads] (rotary features in the half layout) with every checkpoint element used exactly once.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "loader/arch_table.h"
#include "loader/config_parser.h"
#include "loader/decoder_weights.h"

namespace llmrt {
namespace {

using Json = nlohmann::json;

ModelConfig parse(const Json& j) {
  Result<ModelConfig> c = parseModelConfig(j.dump());
  EXPECT_TRUE(c.isOk()) << c.status().toString();
  return c.isOk() ? *c : ModelConfig{};
}

Json gpt2Style(const char* arch, const char* type) {
  return {{"architectures", {arch}}, {"model_type", type}, {"vocab_size", 50}, {"n_embd", 16}, {"n_head", 4},
          {"n_layer", 2}, {"n_positions", 32}};
}

Json hfStyle(const char* arch, const char* type) {
  return {{"architectures", {arch}},  {"model_type", type},   {"vocab_size", 50},
          {"hidden_size", 16},        {"num_hidden_layers", 2}, {"num_attention_heads", 4},
          {"intermediate_size", 24}, {"max_position_embeddings", 64}};
}

TEST(ArchTable, EachFamilyMapsOntoTheDescription) {
  ModelConfig g = parse(gpt2Style("GPT2LMHeadModel", "gpt2"));
  EXPECT_EQ(g.decoder.norm, NormKind::kLayerNorm);
  EXPECT_TRUE(g.decoder.norm_bias);
  EXPECT_EQ(g.decoder.positions, PositionEncoding::kLearned);
  EXPECT_FALSE(g.decoder.mlp_gated);
  EXPECT_EQ(g.decoder.activation, Activation::kGeluTanh);  // gelu_new by default
  EXPECT_EQ(g.intermediate_size, 64);                       // n_inner null: 4 x n_embd
  EXPECT_TRUE(g.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(g.norm_eps, 1e-5);

  ModelConfig bc = parse(gpt2Style("GPTBigCodeForCausalLM", "gpt_bigcode"));
  EXPECT_EQ(bc.num_key_value_heads, 1);  // multi_query by default
  EXPECT_EQ(qkvPacking(bc), QkvPacking::kConcatenated);

  Json j = gpt2Style("GPTJForCausalLM", "gptj");
  j["rotary_dim"] = 2;
  ModelConfig gj = parse(j);
  EXPECT_EQ(gj.decoder.residual, ResidualWiring::kParallel);
  EXPECT_EQ(gj.decoder.rotary_layout, RotaryLayout::kInterleaved);
  EXPECT_DOUBLE_EQ(gj.partial_rotary_factor, 0.5);  // 2 of head_dim 4
  EXPECT_TRUE(gj.decoder.lm_head_bias);

  Json n = hfStyle("GPTNeoXForCausalLM", "gpt_neox");
  n["rotary_pct"] = 0.5;
  ModelConfig neox = parse(n);
  EXPECT_EQ(neox.decoder.residual, ResidualWiring::kParallelTwoNorms);
  EXPECT_DOUBLE_EQ(neox.partial_rotary_factor, 0.5);
  EXPECT_EQ(qkvPacking(neox), QkvPacking::kPerHead);
  n["use_parallel_residual"] = false;
  EXPECT_EQ(parse(n).decoder.residual, ResidualWiring::kSequential);

  Json f = hfStyle("FalconForCausalLM", "falcon");
  f.erase("intermediate_size");
  ModelConfig f7 = parse(f);  // 7B style: multi-query, parallel attention, one norm
  EXPECT_EQ(f7.num_key_value_heads, 1);
  EXPECT_EQ(f7.decoder.residual, ResidualWiring::kParallel);
  EXPECT_EQ(f7.intermediate_size, 64);
  f["new_decoder_architecture"] = true;
  f["num_kv_heads"] = 2;
  ModelConfig f40 = parse(f);
  EXPECT_EQ(f40.num_key_value_heads, 2);
  EXPECT_EQ(f40.decoder.residual, ResidualWiring::kParallelTwoNorms);
  EXPECT_EQ(qkvPacking(f40), QkvPacking::kGrouped);
  f["alibi"] = true;
  ModelConfig fa = parse(f);  // ALiBi added before the 1/sqrt(head_dim) scaling: slopes scaled by it
  EXPECT_EQ(fa.decoder.positions, PositionEncoding::kAlibi);
  EXPECT_DOUBLE_EQ(fa.decoder.alibi_slope_multiplier, 0.5);

  Json ge = hfStyle("Gemma2ForCausalLM", "gemma2");
  ge["head_dim"] = 8;
  ge["query_pre_attn_scalar"] = 16;
  ge["sliding_window"] = 4;
  ModelConfig gemma = parse(ge);
  EXPECT_EQ(gemma.decoder.residual, ResidualWiring::kSandwich);
  EXPECT_TRUE(gemma.decoder.norm_weight_offset_one);
  EXPECT_DOUBLE_EQ(gemma.decoder.attention_scale, 0.25);
  EXPECT_DOUBLE_EQ(gemma.decoder.attn_logit_softcap, 50.0);
  EXPECT_DOUBLE_EQ(gemma.decoder.final_logit_softcap, 30.0);
  EXPECT_DOUBLE_EQ(gemma.decoder.embedding_multiplier, 4.0);
  EXPECT_EQ(gemma.slidingWindowForLayer(0), std::optional<int64_t>(4));
  EXPECT_EQ(gemma.slidingWindowForLayer(1), std::nullopt);
  ge["final_logit_softcapping"] = nullptr;
  EXPECT_DOUBLE_EQ(parse(ge).decoder.final_logit_softcap, 0.0);

  ModelConfig glm = parse(hfStyle("GlmForCausalLM", "glm"));
  EXPECT_DOUBLE_EQ(glm.partial_rotary_factor, 0.5);
  EXPECT_EQ(glm.decoder.rotary_layout, RotaryLayout::kInterleaved);
  EXPECT_TRUE(glm.attention_bias);
  EXPECT_FALSE(glm.o_proj_bias);

  ModelConfig phi = parse(hfStyle("Phi3ForCausalLM", "phi3"));
  EXPECT_EQ(qkvPacking(phi), QkvPacking::kConcatenated);
  EXPECT_EQ(phi.decoder.residual, ResidualWiring::kSequential);
}

TEST(ArchTable, RemoteCodeFamiliesMapOntoTheDescription) {
  Json i = hfStyle("InternLM2ForCausalLM", "internlm2");
  i["num_key_value_heads"] = 2;
  ModelConfig il = parse(i);
  EXPECT_TRUE(il.attention_bias);  // InternLM2Config's default `bias` is true
  EXPECT_EQ(qkvPacking(il), QkvPacking::kGrouped);
  i["bias"] = false;
  EXPECT_FALSE(parse(i).o_proj_bias);

  Json b = hfStyle("BaichuanForCausalLM", "baichuan");
  ModelConfig b13 = parse(b);  // hidden_size != 4096 under this spelling: the 13B ALiBi variant
  EXPECT_EQ(b13.decoder.positions, PositionEncoding::kAlibi);
  EXPECT_FALSE(b13.decoder.lm_head_normalized);
  b["architectures"] = {"BaiChuanForCausalLM"};
  b["vocab_size"] = 125696;
  ModelConfig b7 = parse(b);  // Baichuan-7B spelling: rotary; Baichuan2's vocabulary: NormHead
  EXPECT_EQ(b7.decoder.positions, PositionEncoding::kRotary);
  EXPECT_TRUE(b7.decoder.lm_head_normalized);
  EXPECT_EQ(qkvPacking(b7), QkvPacking::kConcatenated);

  Json q = hfStyle("QWenLMHeadModel", "qwen");
  q["kv_channels"] = 4;
  q["intermediate_size"] = 48;
  q["layer_norm_epsilon"] = 1e-6;
  q["rotary_emb_base"] = 500.0;
  q["seq_length"] = 32;
  q["use_dynamic_ntk"] = true;
  ModelConfig qw = parse(q);
  EXPECT_EQ(qw.intermediate_size, 24);  // w1 / w2 are half of intermediate_size
  EXPECT_DOUBLE_EQ(qw.rope_theta, 500.0);
  EXPECT_EQ(qw.max_position_embeddings, 32);  // dynamic NTK would start past seq_length
  EXPECT_TRUE(qw.attention_bias);
  EXPECT_FALSE(qw.o_proj_bias);
  q["kv_channels"] = 8;
  EXPECT_FALSE(parseModelConfig(q.dump()).isOk());

  Json g = {{"architectures", {"ChatGLMModel"}}, {"model_type", "chatglm"}, {"padded_vocab_size", 50},
            {"hidden_size", 16}, {"num_layers", 2}, {"num_attention_heads", 4}, {"kv_channels", 4},
            {"ffn_hidden_size", 24}, {"seq_length", 64}, {"layernorm_epsilon", 1e-5},
            {"multi_query_attention", true}, {"multi_query_group_num", 2}, {"add_qkv_bias", true},
            {"rope_ratio", 4.0}};
  ModelConfig glm3 = parse(g);
  EXPECT_EQ(glm3.num_key_value_heads, 2);
  EXPECT_EQ(glm3.vocab_size, 50);
  EXPECT_EQ(glm3.max_position_embeddings, 64);
  EXPECT_DOUBLE_EQ(glm3.partial_rotary_factor, 0.5);
  EXPECT_EQ(glm3.decoder.rotary_layout, RotaryLayout::kInterleaved);
  EXPECT_DOUBLE_EQ(glm3.rope_theta, 40000.0);  // ChatGLM3: rope_ratio scales the base
  g["_name_or_path"] = "THUDM/chatglm2-6b-32k";
  ModelConfig glm2 = parse(g);  // ChatGLM2: rope_ratio divides the positions
  EXPECT_DOUBLE_EQ(glm2.rope_theta, 10000.0);
  EXPECT_EQ(glm2.rope_scaling.type, RopeScalingType::kLinear);
  g["apply_residual_connection_post_layernorm"] = true;
  EXPECT_FALSE(parseModelConfig(g.dump()).isOk());
}

TEST(DecoderWeights, Baichuan2HeadRowsAreNormalized) {
  Json b = hfStyle("BaiChuanForCausalLM", "baichuan");
  b["vocab_size"] = 125696;
  ModelConfig c = parse(b);
  std::vector<float> w(static_cast<size_t>(125696 * 16), 0.0f);
  w[0] = 3.0f, w[1] = 4.0f;           // row 0: norm 5
  w[16 * 7 + 2] = -0.5f;              // row 7: norm 0.5
  WeightSource src = [&](const std::string& n) -> Result<TensorView> {
    if (n != "lm_head.weight") return notFound(n);
    return TensorView(w.data(), DType::kF32, Shape{125696, 16});
  };
  DecoderWeightReader reader(c, src);
  Result<std::vector<TensorView>> p = reader.parts(DecoderWeight::kLmHead, 0);
  ASSERT_TRUE(p.isOk()) << p.status().toString();
  const float* h = (*p)[0].as<const float>();
  EXPECT_FLOAT_EQ(h[0], 0.6f);
  EXPECT_FLOAT_EQ(h[1], 0.8f);
  EXPECT_FLOAT_EQ(h[16 * 7 + 2], -1.0f);
  EXPECT_EQ(h[16 * 9], 0.0f);  // an all-zero row stays zero (eps 1e-12)
}

// A checkpoint whose every element is distinct: value = tensor * 1e6 + row * 1000 + col.
struct FakeCheckpoint {
  std::map<std::string, std::vector<float>> data;
  std::map<std::string, Shape> shapes;
  void add(const std::string& name, const Shape& s) {
    const int64_t rows = s[0], cols = s.rank() > 1 ? s[1] : 1;
    std::vector<float> v(static_cast<size_t>(rows * cols));
    const auto id = static_cast<float>(data.size() + 1);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) v[static_cast<size_t>(r * cols + c)] = id * 1e6f + r * 1000.0f + c;
    data[name] = std::move(v);
    shapes[name] = s;
  }
  WeightSource source() {
    return [this](const std::string& n) -> Result<TensorView> {
      auto it = data.find(n);
      if (it == data.end()) return notFound("no tensor " + n);
      return TensorView(it->second.data(), DType::kF32, shapes[n]);
    };
  }
};

// The fused q/k/v rows the reader gives, as floats [rows][cols].
std::vector<std::vector<float>> fusedRows(DecoderWeightReader& r, DecoderWeight w, int64_t layer) {
  Result<std::vector<TensorView>> parts = r.parts(w, layer);
  EXPECT_TRUE(parts.isOk()) << parts.status().toString();
  std::vector<std::vector<float>> rows;
  if (!parts.isOk()) return rows;
  for (const TensorView& p : *parts) {
    const int64_t n = p.shape[0], cols = p.shape.rank() > 1 ? p.shape[1] : 1;
    for (int64_t i = 0; i < n; ++i) {
      const float* row = p.as<const float>() + i * cols;
      rows.emplace_back(row, row + cols);
    }
  }
  return rows;
}

TEST(DecoderWeights, NeoXPerHeadPackingBecomesQkvWithHalfRotary) {
  Json n = hfStyle("GPTNeoXForCausalLM", "gpt_neox");
  n["rotary_pct"] = 1.0;
  ModelConfig c = parse(n);  // 4 heads x head_dim 4
  FakeCheckpoint ck;
  ck.add("gpt_neox.layers.0.attention.query_key_value.weight", Shape{48, 16});
  DecoderWeightReader reader(c, ck.source());
  auto rows = fusedRows(reader, DecoderWeight::kQkv, 0);
  ASSERT_EQ(rows.size(), 48u);
  // HF: view(heads, 3 * head_dim): head h's q rows are 12h..12h+3, k 12h+4.., v 12h+8..
  for (int64_t part = 0; part < 3; ++part)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t f = 0; f < 4; ++f)
        EXPECT_EQ(rows[static_cast<size_t>(part * 16 + h * 4 + f)][0], 1e6f + (12 * h + 4 * part + f) * 1000.0f);
}

TEST(DecoderWeights, FalconGroupedPackingKeepsEachGroupsHeads) {
  Json f = hfStyle("FalconForCausalLM", "falcon");
  f["new_decoder_architecture"] = true;
  f["num_kv_heads"] = 2;
  ModelConfig c = parse(f);  // 4 q heads in 2 groups, head_dim 4
  FakeCheckpoint ck;
  ck.add("transformer.h.1.self_attention.query_key_value.weight", Shape{32, 16});
  DecoderWeightReader reader(c, ck.source());
  auto rows = fusedRows(reader, DecoderWeight::kQkv, 1);
  ASSERT_EQ(rows.size(), 32u);
  // Rows [group][q0, q1, k, v][head_dim]: q head h is group h/2, slot h%2.
  for (int64_t h = 0; h < 4; ++h)
    EXPECT_EQ(rows[static_cast<size_t>(h * 4)][0], 1e6f + ((h / 2) * 16 + (h % 2) * 4) * 1000.0f);
  for (int64_t g = 0; g < 2; ++g) {
    EXPECT_EQ(rows[static_cast<size_t>(16 + g * 4)][0], 1e6f + (g * 16 + 8) * 1000.0f);   // k
    EXPECT_EQ(rows[static_cast<size_t>(24 + g * 4)][0], 1e6f + (g * 16 + 12) * 1000.0f);  // v
  }
}

TEST(DecoderWeights, Gpt2Conv1DIsTransposed) {
  ModelConfig c = parse(gpt2Style("GPT2LMHeadModel", "gpt2"));
  FakeCheckpoint ck;
  ck.add("transformer.h.0.attn.c_attn.weight", Shape{16, 48});
  ck.add("h.0.attn.c_proj.weight", Shape{16, 16});  // an older checkpoint without "transformer."
  DecoderWeightReader reader(c, ck.source());
  auto rows = fusedRows(reader, DecoderWeight::kQkv, 0);
  ASSERT_EQ(rows.size(), 48u);
  ASSERT_EQ(rows[0].size(), 16u);
  for (int64_t o = 0; o < 48; o += 7)
    for (int64_t i = 0; i < 16; i += 5) EXPECT_EQ(rows[static_cast<size_t>(o)][static_cast<size_t>(i)], 1e6f + i * 1000.0f + o);
  auto o_rows = fusedRows(reader, DecoderWeight::kO, 0);
  ASSERT_EQ(o_rows.size(), 16u);
  EXPECT_EQ(o_rows[3][5], 2e6f + 5 * 1000.0f + 3);
  EXPECT_FALSE(reader.lastPartsBorrowable());  // a transposed copy: the backend must copy it
}

TEST(DecoderWeights, InterleavedRotaryRowsArePermutedToTheHalfLayout) {
  Json j = gpt2Style("GPTJForCausalLM", "gptj");
  j["n_embd"] = 32;
  j["rotary_dim"] = 4;  // of head_dim 8
  ModelConfig c = parse(j);
  FakeCheckpoint ck;
  for (const char* p : {"q", "k", "v"}) ck.add(std::string("transformer.h.0.attn.") + p + "_proj.weight", Shape{32, 32});
  DecoderWeightReader reader(c, ck.source());
  auto rows = fusedRows(reader, DecoderWeight::kQkv, 0);
  ASSERT_EQ(rows.size(), 96u);
  // Within each q and k head: features 0,1 <- 0,2 (pair firsts), 2,3 <- 1,3, the rest unrotated.
  const int64_t from[8] = {0, 2, 1, 3, 4, 5, 6, 7};
  std::vector<float> all;
  for (int64_t part = 0; part < 3; ++part)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t f = 0; f < 8; ++f) {
        const float want = static_cast<float>(part + 1) * 1e6f + (h * 8 + (part < 2 ? from[f] : f)) * 1000.0f;
        EXPECT_EQ(rows[static_cast<size_t>(part * 32 + h * 8 + f)][0], want);
      }
  for (const auto& r : rows) all.insert(all.end(), r.begin(), r.end());
  std::vector<float> src;
  for (const auto& [name, v] : ck.data) src.insert(src.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  std::sort(src.begin(), src.end());
  EXPECT_EQ(all, src);  // every checkpoint element exactly once
}

TEST(DecoderWeights, GemmaNormsAreOnePlusW) {
  Json ge = hfStyle("Gemma2ForCausalLM", "gemma2");
  ModelConfig c = parse(ge);
  std::vector<float> w(16, 0.25f);
  WeightSource src = [&](const std::string& n) -> Result<TensorView> {
    if (n != "model.layers.0.pre_feedforward_layernorm.weight") return notFound(n);
    return TensorView(w.data(), DType::kF32, Shape{16});
  };
  DecoderWeightReader reader(c, src);
  Result<std::vector<TensorView>> p = reader.parts(DecoderWeight::kPreMlpNorm, 0);
  ASSERT_TRUE(p.isOk()) << p.status().toString();
  EXPECT_EQ((*p)[0].as<const float>()[7], 1.25f);
  EXPECT_EQ(w[7], 0.25f);  // the checkpoint is untouched
}

TEST(DecoderWeights, ExpectedTensorsNameEachFamilysLayout) {
  auto names = [](const ModelConfig& c) {
    std::vector<std::string> v;
    for (const ExpectedTensor& e : expectedTensors(c)) v.push_back(e.name + " " + e.shape.toString());
    return v;
  };
  Json g = gpt2Style("GPT2LMHeadModel", "gpt2");
  g["n_layer"] = 1;
  EXPECT_EQ(names(parse(g)), (std::vector<std::string>{
                                 "transformer.wte.weight [50, 16]", "transformer.wpe.weight [32, 16]",
                                 "transformer.h.0.ln_1.weight [16]", "transformer.h.0.ln_1.bias [16]",
                                 "transformer.h.0.attn.c_attn.weight [16, 48]", "transformer.h.0.attn.c_attn.bias [48]",
                                 "transformer.h.0.attn.c_proj.weight [16, 16]", "transformer.h.0.attn.c_proj.bias [16]",
                                 "transformer.h.0.ln_2.weight [16]", "transformer.h.0.ln_2.bias [16]",
                                 "transformer.h.0.mlp.c_fc.weight [16, 64]", "transformer.h.0.mlp.c_fc.bias [64]",
                                 "transformer.h.0.mlp.c_proj.weight [64, 16]", "transformer.h.0.mlp.c_proj.bias [16]",
                                 "transformer.ln_f.weight [16]", "transformer.ln_f.bias [16]"}));
  Json f = hfStyle("FalconForCausalLM", "falcon");
  f["num_hidden_layers"] = 1;
  f["new_decoder_architecture"] = true;
  f["num_kv_heads"] = 2;
  std::vector<std::string> fn = names(parse(f));
  EXPECT_NE(std::find(fn.begin(), fn.end(), "transformer.h.0.ln_mlp.bias [16]"), fn.end());
  EXPECT_NE(std::find(fn.begin(), fn.end(), "transformer.h.0.self_attention.query_key_value.weight [32, 16]"),
            fn.end());
}

}  // namespace
}  // namespace llmrt
