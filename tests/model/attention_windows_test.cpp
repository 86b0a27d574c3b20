// Attention windows: how KvCacheConfig::max_attention_window resolves against the model's own
// sliding windows (resolveAttentionWindows), and that the model applies the resolved window of
// every layer — windows set from the list give the bits of the same windows read from
// config.json, each layer's own window counts, and block tables whose blocks below the step's
// window were released (kNoKvBlock) give the bits of the full tables.
#include "model/attention_windows.h"

#include <gmock/gmock.h>

#include "model_test_util.h"

namespace llmrt::test {
namespace {

using ::testing::HasSubstr;

ModelConfig configOf(ModelArch arch, int64_t layers, std::optional<int64_t> window) {
  ModelConfig c;
  c.arch = arch;
  c.num_hidden_layers = layers;
  c.sliding_window = window;
  if (arch == ModelArch::kQwen2) c.use_sliding_window = window.has_value();
  return c;
}

std::vector<int32_t> perLayer(const Result<AttentionWindows>& r) {
  EXPECT_TRUE(r.isOk()) << r.status().toString();
  return r.isOk() ? r->per_layer : std::vector<int32_t>{};
}

TEST(AttentionWindows, EmptyListTakesTheModelsWindows) {
  auto llama = resolveAttentionWindows(configOf(ModelArch::kLlama, 3, std::nullopt), {}, 512);
  EXPECT_EQ(perLayer(llama), (std::vector<int32_t>{0, 0, 0}));
  EXPECT_EQ(llama->kv_window, 0);
  EXPECT_EQ(llama->toString(), "full");
  auto mistral = resolveAttentionWindows(configOf(ModelArch::kMistral, 2, 8), {}, 512);
  EXPECT_EQ(perLayer(mistral), (std::vector<int32_t>{8, 8}));
  EXPECT_EQ(mistral->kv_window, 8);
  EXPECT_EQ(mistral->toString(), "8 on every layer");
  // A model window that covers max_seq_len is full attention: nothing to release.
  auto wide = resolveAttentionWindows(configOf(ModelArch::kMistral, 2, 4096), {}, 4096);
  EXPECT_EQ(perLayer(wide), (std::vector<int32_t>{0, 0}));
  EXPECT_EQ(wide->kv_window, 0);
  // Qwen2's per-layer windows (layer_types): the KV cache keeps what the full layer reads.
  ModelConfig qwen = configOf(ModelArch::kQwen2, 2, 8);
  qwen.layer_types = {"sliding_attention", "full_attention"};
  auto q = resolveAttentionWindows(qwen, {}, 512);
  EXPECT_EQ(perLayer(q), (std::vector<int32_t>{8, 0}));
  EXPECT_EQ(q->kv_window, 0);
  EXPECT_EQ(q->toString(), "[8, full]");
}

TEST(AttentionWindows, OneValueOrAPatternRepeatedOverTheLayers) {
  const ModelConfig llama = configOf(ModelArch::kLlama, 4, std::nullopt);
  const std::vector<int32_t> one{16};
  auto r1 = resolveAttentionWindows(llama, one, 512);
  EXPECT_EQ(perLayer(r1), (std::vector<int32_t>{16, 16, 16, 16}));
  EXPECT_EQ(r1->kv_window, 16);
  const std::vector<int32_t> three{16, 32, 64};
  auto r3 = resolveAttentionWindows(llama, three, 512);
  EXPECT_EQ(perLayer(r3), (std::vector<int32_t>{16, 32, 64, 16}));
  EXPECT_EQ(r3->kv_window, 64);  // a block goes once it is outside every layer's window
  // A window of max_seq_len or more is full attention, and one full layer keeps every block.
  const std::vector<int32_t> mixed{16, 512};
  auto rm = resolveAttentionWindows(llama, mixed, 512);
  EXPECT_EQ(perLayer(rm), (std::vector<int32_t>{16, 0, 16, 0}));
  EXPECT_EQ(rm->kv_window, 0);
  EXPECT_EQ(rm->toString(), "[16, full, 16, full]");
  // Smaller than the model's window: fine, on every layer it applies to.
  const std::vector<int32_t> small{4};
  EXPECT_EQ(perLayer(resolveAttentionWindows(configOf(ModelArch::kMistral, 2, 8), small, 512)),
            (std::vector<int32_t>{4, 4}));
}

TEST(AttentionWindows, ErrorsNameTheEntryBothWindowsAndTheLayer) {
  const std::vector<int32_t> wide{16};
  auto r = resolveAttentionWindows(configOf(ModelArch::kMistral, 2, 8), wide, 512);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("max_attention_window[0]' has value 16"));
  EXPECT_THAT(r.status().message(), HasSubstr("at most 8"));
  EXPECT_THAT(r.status().message(), HasSubstr("layer 0"));
  // Per layer: only the sliding layer's limit counts (layer 1 attends fully in the model).
  ModelConfig qwen = configOf(ModelArch::kQwen2, 2, 8);
  qwen.layer_types = {"full_attention", "sliding_attention"};
  const std::vector<int32_t> pair{100, 6};
  EXPECT_EQ(perLayer(resolveAttentionWindows(qwen, pair, 512)), (std::vector<int32_t>{100, 6}));
  const std::vector<int32_t> pair_bad{6, 100};
  auto q = resolveAttentionWindows(qwen, pair_bad, 512);
  ASSERT_FALSE(q.isOk());
  EXPECT_THAT(q.status().message(), HasSubstr("max_attention_window[1]' has value 100"));
  EXPECT_THAT(q.status().message(), HasSubstr("at most 8, the model's own sliding window of layer 1"));
  // More entries than layers, a non-positive entry.
  const std::vector<int32_t> three{8, 8, 8};
  auto t = resolveAttentionWindows(configOf(ModelArch::kLlama, 2, std::nullopt), three, 512);
  ASSERT_FALSE(t.isOk());
  EXPECT_THAT(t.status().message(), HasSubstr("3 windows"));
  EXPECT_THAT(t.status().message(), HasSubstr("2 layers"));
  const std::vector<int32_t> zero{0};
  EXPECT_FALSE(resolveAttentionWindows(configOf(ModelArch::kLlama, 2, std::nullopt), zero, 512).isOk());
}

// ---- the model on the golden Mistral checkpoint (2 layers, MQA, head_dim 16) ----------------

std::string mistralDir() { return std::string(LLMRT_TEST_DATA) + "/golden/mistral_sliding_window"; }

// The checkpoint with config.json's sliding_window replaced by `window` (nullopt: full attention).
Result<LoadedModel> loadMistral(std::optional<int64_t> window, int64_t tpb = 4) {
  LoadedModel m;
  LLMRT_ASSIGN_OR_RETURN(m.config, loadModelConfig(mistralDir() + "/config.json"));
  m.config.sliding_window = window;
  LLMRT_ASSIGN_OR_RETURN(m.store, WeightStore::openDirectory(mistralDir()));
  m.backend = std::make_unique<CpuBackend>(2);
  const WeightStore* store = &m.store;
  LLMRT_ASSIGN_OR_RETURN(
      m.model, DecoderModel::load(
                   m.config, [store](const std::string& n) { return store->tensor(n); }, *m.backend));
  LLMRT_RETURN_IF_ERROR(
      m.backend->allocateKvPools(KvPoolGeometry{256, m.config.num_hidden_layers, m.config.num_key_value_heads,
                                                m.config.head_dim, tpb, DType::kF32},
                                 0));
  m.tokens_per_block = tpb;
  return m;
}

std::vector<int32_t> longPrompt(int n) {
  std::vector<int32_t> p{1};
  for (int i = 1; i < n; ++i) p.push_back(3 + (i * 37 + (i * i) % 53) % 300);
  return p;
}

// Every position's logits of a prompt in one step (empty, and the test failed, on an error).
std::vector<float> logitsOf(LoadedModel& m, const std::vector<int32_t>& ids) {
  auto l = promptLogits(m, ids);
  EXPECT_TRUE(l.isOk()) << l.status().toString();
  return l.isOk() ? *l : std::vector<float>{};
}

TEST(AttentionWindows, ModelWindowsFromTheListEqualTheConfigs) {
  const std::vector<int32_t> ids = longPrompt(40);
  auto windowed = loadMistral(12);
  auto full = loadMistral(std::nullopt);
  ASSERT_TRUE(windowed.isOk() && full.isOk()) << windowed.status().toString() << full.status().toString();
  EXPECT_EQ(windowed->model->attentionWindow(0), 12);
  EXPECT_EQ(full->model->attentionWindow(1), 0);
  const std::vector<float> ref = logitsOf(*windowed, ids);
  const std::vector<float> unwindowed = logitsOf(*full, ids);
  const std::vector<int32_t> twelve{12, 12};
  ASSERT_TRUE(full->model->setAttentionWindows(twelve).isOk());
  EXPECT_EQ(logitsOf(*full, ids), ref);  // the same bits
  EXPECT_NE(unwindowed, ref);                // and the window matters for a 40-token prompt

  // Each layer's own window: [12, 5] differs from [12, 12] and from [5, 5]; [12, full] from both.
  const std::vector<int32_t> mixed{12, 5}, five{5, 5}, half{12, 0}, bad{12};
  ASSERT_TRUE(full->model->setAttentionWindows(mixed).isOk());
  const std::vector<float> l_mixed = logitsOf(*full, ids);
  ASSERT_TRUE(full->model->setAttentionWindows(five).isOk());
  const std::vector<float> l_five = logitsOf(*full, ids);
  ASSERT_TRUE(full->model->setAttentionWindows(half).isOk());
  const std::vector<float> l_half = logitsOf(*full, ids);
  EXPECT_NE(l_mixed, ref);
  EXPECT_NE(l_mixed, l_five);
  EXPECT_NE(l_half, ref);
  EXPECT_NE(l_half, unwindowed);
  // Layer 1 only differs from [12, 12] in its second layer: the first 12 positions see the
  // same keys under both, so their logits agree.
  const size_t V = static_cast<size_t>(full->config.vocab_size);
  EXPECT_TRUE(std::equal(l_half.begin(), l_half.begin() + 12 * V, ref.begin()));
  EXPECT_FALSE(full->model->setAttentionWindows(bad).isOk());  // one per layer
}

// Decode steps whose tables hold kNoKvBlock below the widest window give the logits of the full
// tables (the step declares the widest window; attention reads nothing below it).
TEST(AttentionWindows, ReleasedBlocksGiveTheFullTablesLogits) {
  for (int64_t tpb : {4, 16}) {
    SCOPED_TRACE("tokens_per_block " + std::to_string(tpb));
    auto m = loadMistral(std::nullopt, tpb);
    ASSERT_TRUE(m.isOk()) << m.status().toString();
    const std::vector<int32_t> windows{10, 6};
    ASSERT_TRUE(m->model->setAttentionWindows(windows).isOk());
    const std::vector<int32_t> ids = longPrompt(60);
    const std::vector<int32_t> blocks = m->allocBlocks(60);
    // The prompt's first 30 tokens in one step, then one token a step with both tables.
    ForwardBatch pre;
    pre.add(ids.data(), 30, 0, blocks, LogitsMode::kNone);
    ASSERT_TRUE(m->forward(pre).isOk());
    int released_steps = 0;
    for (int64_t pos = 30; pos < 60; ++pos) {
      std::vector<int32_t> cut = blocks;
      for (int64_t b = 0; (b + 1) * tpb <= pos - 10 + 1; ++b) cut[static_cast<size_t>(b)] = kNoKvBlock;
      released_steps += cut[0] == kNoKvBlock;
      ForwardBatch a, r;
      a.add(&ids[static_cast<size_t>(pos)], 1, pos, blocks, LogitsMode::kLast);
      auto la = m->forward(a);
      ASSERT_TRUE(la.isOk()) << la.status().toString();
      const std::vector<float> full_logits = toVector(*la);
      r.add(&ids[static_cast<size_t>(pos)], 1, pos, cut, LogitsMode::kLast);
      auto lr = m->forward(r);
      ASSERT_TRUE(lr.isOk()) << "position " << pos << ": " << lr.status().toString();
      EXPECT_EQ(toVector(*lr), full_logits) << "position " << pos;
    }
    EXPECT_GT(released_steps, 10);
  }
}

}  // namespace
}  // namespace llmrt::test
