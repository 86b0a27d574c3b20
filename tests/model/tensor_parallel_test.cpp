// The tensor-parallel sharding plan (model/tensor_parallel.h): over every golden architecture and
// Llama-3-8B / 70B shapes at 1-16 ranks, every element of every split weight is owned by exactly
// one rank (a KV head shared by tp / num_key_value_heads ranks when there are fewer KV heads than
// ranks), ranks hold equal shares, and uneven splits are refused naming the field.
#include <gtest/gtest.h>

#include <filesystem>

#include "loader/config_parser.h"
#include "model/tensor_parallel.h"

namespace llmrt {
namespace {

using W = DecoderWeight;
constexpr W kWeights[] = {W::kEmbed,     W::kPosEmbed,      W::kFinalNorm,    W::kLmHead,     W::kLmHeadBias,
                          W::kAttnNorm,  W::kQkv,           W::kQkvBias,      W::kO,          W::kOBias,
                          W::kUp,        W::kUpBias,        W::kDown,         W::kDownBias,   W::kRouter,
                          W::kExpertsGateUp, W::kExpertsDown, W::kSharedUp, W::kSharedDown, W::kSharedGate};

// Checks the plan's ownership property for every weight of `c` at `tp` ranks.
void expectEveryElementOwnedOnce(const ModelConfig& c, int tp, const std::string& what) {
  auto plan = planTensorParallel(c, tp);
  ASSERT_TRUE(plan.isOk()) << what << ": " << plan.status().toString();
  for (W w : kWeights) {
    const Shape shape = decoderWeightShape(w, c);
    const std::string name = what + " " + decoderWeightName(w, 0) + " tp " + std::to_string(tp);
    std::vector<WeightShard> shards;
    for (int r = 0; r < tp; ++r) shards.push_back(weightShard(*plan, c, w, r));
    if (shards[0].axis == ShardAxis::kReplicated) {
      for (const WeightShard& s : shards) EXPECT_EQ(s.axis, ShardAxis::kReplicated) << name;
      continue;
    }
    const int axis = shards[0].axis == ShardAxis::kRows ? 0 : 1;
    ASSERT_LT(axis, shape.rank()) << name;
    std::vector<int> owners(static_cast<size_t>(shape[axis]), 0);
    int64_t first_share = -1;
    for (const WeightShard& s : shards) {
      ASSERT_EQ(s.axis, shards[0].axis) << name;
      int64_t held = 0;
      for (const IndexRange& r : s.ranges) {
        ASSERT_TRUE(r.begin >= 0 && r.begin <= r.end && r.end <= shape[axis]) << name;
        for (int64_t i = r.begin; i < r.end; ++i) ++owners[static_cast<size_t>(i)];
        held += r.size();
      }
      if (first_share < 0) first_share = held;
      EXPECT_EQ(held, first_share) << name << ": ranks hold different shares";
    }
    const bool qkv = w == W::kQkv || w == W::kQkvBias;
    for (int64_t i = 0; i < shape[axis]; ++i) {
      // With fewer KV heads than ranks, each k / v row is held by tp / num_key_value_heads ranks.
      const bool kv_row = qkv && i >= c.qSize();
      const int want = kv_row && plan->kv_replicated ? tp / static_cast<int>(c.num_key_value_heads) : 1;
      ASSERT_EQ(owners[static_cast<size_t>(i)], want) << name << ": index " << i;
    }
  }
}

ModelConfig llama(int64_t layers, int64_t hidden, int64_t heads, int64_t kv, int64_t inter, int64_t vocab) {
  ModelConfig c;
  c.num_hidden_layers = layers;
  c.hidden_size = hidden;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv;
  c.head_dim = hidden / heads;
  c.intermediate_size = inter;
  c.vocab_size = vocab;
  c.max_position_embeddings = 8192;
  return c;
}

TEST(TensorParallel, LlamaShapesSplitOverOneToSixteenRanks) {
  const ModelConfig l8 = llama(32, 4096, 32, 8, 14336, 128256), l70 = llama(80, 8192, 64, 8, 28672, 128256);
  for (int tp : {1, 2, 4, 8}) expectEveryElementOwnedOnce(l8, tp, "llama-3-8b");
  for (int tp : {2, 8, 16}) expectEveryElementOwnedOnce(l70, tp, "llama-3-70b");
  auto p = planTensorParallel(l70, 16);
  ASSERT_TRUE(p.isOk());
  EXPECT_TRUE(p->kv_replicated);
  EXPECT_EQ(p->q_heads, 4);
  // Ranks 0 and 1 use KV head 0, ranks 14 and 15 KV head 7 (q heads 56-63 of groups of 8).
  const IndexRange k0 = weightShard(*p, l70, W::kQkv, 1).ranges[1], k7 = weightShard(*p, l70, W::kQkv, 15).ranges[1];
  EXPECT_EQ(k0.begin, l70.qSize());
  EXPECT_EQ(k7.begin, l70.qSize() + 7 * l70.head_dim);
}

TEST(TensorParallel, UnevenSplitsAreRefusedNamingTheField) {
  const ModelConfig l8 = llama(32, 4096, 32, 8, 14336, 128256);
  auto p = planTensorParallel(l8, 3);
  ASSERT_FALSE(p.isOk());
  EXPECT_EQ(p.status().message(),
            "tensor_parallel_size 3: num_attention_heads 32 is not a multiple of it; choose a tensor_parallel_size "
            "that divides it");
  ModelConfig odd_kv = llama(2, 768, 12, 3, 3072, 32000);
  p = planTensorParallel(odd_kv, 4);  // 12 heads split, 3 KV heads neither divide 4 nor split in 4
  ASSERT_FALSE(p.isOk());
  EXPECT_NE(p.status().message().find("num_key_value_heads 3"), std::string::npos) << p.status().toString();
  ModelConfig odd_vocab = llama(2, 768, 12, 12, 3072, 50257);
  p = planTensorParallel(odd_vocab, 2);
  ASSERT_FALSE(p.isOk());
  EXPECT_NE(p.status().message().find("vocab_size 50257"), std::string::npos) << p.status().toString();
  EXPECT_FALSE(planTensorParallel(l8, 0).isOk());
}

// Every golden architecture (MQA, MHA, GQA, plain and gated MLPs, biases, experts, shared experts)
// at the rank counts its shapes allow.
TEST(TensorParallel, GoldenArchitecturesSplitWhereTheirShapesAllow) {
  const std::string dir = std::string(LLMRT_TEST_DATA) + "/golden";
  int checked = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (!std::filesystem::exists(e.path() / "config.json")) continue;
    auto c = loadModelConfig((e.path() / "config.json").string());
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    for (int tp : {1, 2, 4}) {
      if (!planTensorParallel(*c, tp).isOk()) continue;
      expectEveryElementOwnedOnce(*c, tp, e.path().filename().string());
      ++checked;
    }
  }
  EXPECT_GE(checked, 40) << "(architecture, rank count) pairs checked";
}

}  // namespace
}  // namespace llmrt
