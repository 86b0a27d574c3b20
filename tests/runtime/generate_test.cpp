// End to end through the LLM API on the real trained models (tests/test_models.h): text in, text out.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

#include "llmrt/llm.h"
#include "test_models.h"

namespace llmrt {
namespace {

using testmodels::TrainedModel;

// Every test runs on stories260K (../shared/testdata; skipped where absent) and on the bundled
// llmrt-tiny, each checked against its own reference outputs (tests/test_models.h).
class Generate : public ::testing::TestWithParam<std::string> {};

std::unique_ptr<LLM> makeLlm(const TrainedModel& m, LlmArgs args = {}) {
  args.model = m.dir;
  args.num_threads = 2;
  if (!args.kv_cache_config.max_tokens) args.kv_cache_config.max_tokens = 4096;
  args.kv_cache_config.tokens_per_block = 16;
  auto llm = LLM::create(args);
  EXPECT_TRUE(llm.isOk()) << llm.status().toString();
  return llm.isOk() ? std::move(*llm) : nullptr;
}

SamplingParams greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  return p;
}

TEST_P(Generate, TextPromptsMatchReferenceGreedyOutputs) {
  LLMRT_TRAINED_MODEL(m, GetParam());
  auto llm = makeLlm(m);
  ASSERT_NE(llm, nullptr);
  ASSERT_FALSE(m.cases.empty());
  std::vector<Prompt> prompts;
  for (const auto& c : m.cases) prompts.push_back(Prompt::fromText(c.prompt));
  // Neither reference ends early: llama2.c models end a story with BOS (1), not EOS, and
  // llmrt-tiny's references emit no EOS; generation runs to max_tokens.
  auto outs = llm->generate(prompts, {greedy(static_cast<int>(m.first().new_ids.size()))});
  ASSERT_TRUE(outs.isOk()) << outs.status().toString();
  ASSERT_EQ(outs->size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const RequestOutput& o = (*outs)[i];
    ASSERT_TRUE(o.status.isOk()) << o.status.toString();
    EXPECT_EQ(o.prompt_token_ids, m.cases[i].prompt_ids);
    EXPECT_EQ(o.outputs[0].token_ids, m.cases[i].new_ids) << i;
    EXPECT_EQ(o.outputs[0].finish_reason, FinishReason::kLength);
    EXPECT_EQ(o.prompt + o.outputs[0].text, m.cases[i].prompt + m.cases[i].new_text) << i;
  }
}

TEST_P(Generate, StreamingPiecesConcatenateToTheText) {
  LLMRT_TRAINED_MODEL(m, GetParam());
  auto llm = makeLlm(m);
  ASSERT_NE(llm, nullptr);
  std::vector<std::string> streamed(2);
  std::vector<int> finishes(2, 0);
  SamplingParams p = greedy(40);
  auto outs = llm->generate({Prompt::fromText("Once upon a time"), Prompt::fromText("The dog")}, {p}, {},
                            [&](size_t r, int, TokenId, const std::string& text, FinishReason f) {
                              streamed[r] += text;
                              if (f != FinishReason::kNone) finishes[r]++;
                            });
  ASSERT_TRUE(outs.isOk());
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_FALSE(streamed[r].empty());
    EXPECT_EQ(streamed[r], (*outs)[r].outputs[0].text);
    EXPECT_EQ(finishes[r], 1);
  }
}

TEST_P(Generate, StopStringsTrimTheOutput) {
  LLMRT_TRAINED_MODEL(m, GetParam());
  auto llm = makeLlm(m);
  ASSERT_NE(llm, nullptr);
  // The reference continuation, e.g. ", there was a little girl named Lily. She ..." with "Lily".
  const testmodels::ReferenceCase& ref = m.first();
  const size_t at = ref.new_text.find(m.stop_word);
  ASSERT_NE(at, std::string::npos) << m.stop_word << " not in " << ref.new_text;
  SamplingParams p = greedy(static_cast<int>(ref.new_ids.size()));
  p.stop = {m.stop_word};
  std::string streamed;
  auto outs = llm->generate({Prompt::fromText(ref.prompt)}, {p}, {},
                            [&](size_t, int, TokenId, const std::string& t, FinishReason) { streamed += t; });
  ASSERT_TRUE(outs.isOk());
  const CompletionOutput& c = (*outs)[0].outputs[0];
  EXPECT_EQ(c.text, ref.new_text.substr(0, at));
  EXPECT_EQ(c.finish_reason, FinishReason::kStop);
  EXPECT_EQ(streamed, c.text);  // the stop string never leaked into the stream
  p.include_stop_str_in_output = true;
  outs = llm->generate({Prompt::fromText(ref.prompt)}, {p});
  ASSERT_TRUE(outs.isOk());
  EXPECT_EQ((*outs)[0].outputs[0].text, ref.new_text.substr(0, at + m.stop_word.size()));
}

TEST_P(Generate, StopTokenIdsMinTokensAndIgnoreEos) {
  LLMRT_TRAINED_MODEL(m, GetParam());
  auto llm = makeLlm(m);
  ASSERT_NE(llm, nullptr);
  // The reference's first greedy token (432 = "," after "Once upon a time" on stories260K).
  const testmodels::ReferenceCase& ref = m.first();
  const TokenId first = ref.new_ids.at(0);
  SamplingParams p = greedy(20);
  p.stop_token_ids = {first};
  auto outs = llm->generate({Prompt::fromText(ref.prompt)}, {p});
  ASSERT_TRUE(outs.isOk());
  EXPECT_EQ((*outs)[0].outputs[0].token_ids, std::vector<TokenId>{first});
  EXPECT_EQ((*outs)[0].outputs[0].finish_reason, FinishReason::kStop);
  p.min_tokens = 3;  // the stop id is masked for the first 3 tokens
  outs = llm->generate({Prompt::fromText(ref.prompt)}, {p});
  ASSERT_TRUE(outs.isOk());
  const auto& ids = (*outs)[0].outputs[0].token_ids;
  ASSERT_GE(ids.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NE(ids[i], first);
}

TEST_P(Generate, SeededSamplingIsReproducibleAndNSamplesDiffer) {
  LLMRT_TRAINED_MODEL(m, GetParam());
  auto llm = makeLlm(m);
  ASSERT_NE(llm, nullptr);
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.95f;
  p.max_tokens = 24;
  p.seed = 1234;
  p.n = 3;
  auto a = llm->generate({Prompt::fromText("Once upon a time")}, {p});
  auto b = llm->generate({Prompt::fromText("Once upon a time")}, {p});
  ASSERT_TRUE(a.isOk() && b.isOk());
  ASSERT_EQ((*a)[0].outputs.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ((*a)[0].outputs[i].token_ids, (*b)[0].outputs[i].token_ids);
  EXPECT_NE((*a)[0].outputs[0].token_ids, (*a)[0].outputs[1].token_ids);
  p.seed = 99;
  auto c = llm->generate({Prompt::fromText("Once upon a time")}, {p});
  ASSERT_TRUE(c.isOk());
  EXPECT_NE((*c)[0].outputs[0].token_ids, (*a)[0].outputs[0].token_ids);
}

TEST_P(Generate, InvalidRequestsFailAloneOthersComplete) {
  LLMRT_TRAINED_MODEL(m, GetParam());
  auto llm = makeLlm(m);
  ASSERT_NE(llm, nullptr);
  SamplingParams good = greedy(8), bad_top_p = greedy(8), too_long = greedy(600);  // both have 512 positions
  bad_top_p.top_p = 1.5f;
  const TokenId bos = m.bos, outside = m.vocab_size + 1807;
  auto outs = llm->generate(
      {Prompt::fromIds({bos, 403, 407}), Prompt::fromIds({}), Prompt::fromIds({bos, outside}),
       Prompt::fromIds({bos, 403}), Prompt::fromIds({bos, 403}), Prompt::fromIds({bos, 403, 407})},
      {good, good, good, bad_top_p, too_long, good});
  ASSERT_TRUE(outs.isOk()) << outs.status().toString();
  EXPECT_TRUE((*outs)[0].status.isOk());
  EXPECT_NE((*outs)[1].status.message().find("empty"), std::string::npos);
  EXPECT_NE((*outs)[2].status.message().find(std::to_string(outside)), std::string::npos);
  EXPECT_NE((*outs)[3].status.message().find("top_p"), std::string::npos);
  EXPECT_NE((*outs)[4].status.message().find("max_seq_len"), std::string::npos);
  EXPECT_TRUE((*outs)[5].status.isOk());
  EXPECT_EQ((*outs)[0].outputs[0].token_ids, (*outs)[5].outputs[0].token_ids);
  EXPECT_EQ((*outs)[0].outputs[0].token_ids.size(), 8u);
  // Wrong number of sampling params is an error for the whole call.
  auto wrong = llm->generate({Prompt::fromIds({bos}), Prompt::fromIds({bos})}, {good, good, good});
  EXPECT_FALSE(wrong.isOk());
}

TEST_P(Generate, TinyKvCacheSerializesRequestsAndRejectsWhatCannotFit) {
  LLMRT_TRAINED_MODEL(m, GetParam());
  LlmArgs args;
  args.kv_cache_config.max_tokens = 64;  // 4 blocks of 16
  auto llm = makeLlm(m, args);
  ASSERT_NE(llm, nullptr);
  std::vector<Prompt> prompts(4, Prompt::fromText("Once upon a time"));  // 5 (stories) or 6 tokens
  auto outs = llm->generate(prompts, {greedy(40)});  // + 40 tokens = 3 blocks each: one at a time
  ASSERT_TRUE(outs.isOk());
  for (const auto& o : *outs) {
    ASSERT_TRUE(o.status.isOk()) << o.status.toString();
    EXPECT_EQ(o.outputs[0].token_ids, (*outs)[0].outputs[0].token_ids);
  }
  auto huge = llm->generate({Prompt::fromText("Once upon a time")}, {greedy(100)});
  ASSERT_TRUE(huge.isOk());
  EXPECT_EQ((*huge)[0].status.code(), StatusCode::kResourceExhausted);
  EXPECT_NE((*huge)[0].status.message().find("KV cache"), std::string::npos);
  // The engine still works afterwards.
  auto again = llm->generate({Prompt::fromText("Once upon a time")}, {greedy(10)});
  ASSERT_TRUE(again.isOk());
  EXPECT_TRUE((*again)[0].status.isOk());
}

TEST_P(Generate, PrefixReuseComputesOnlyTheUnsharedTokensAndKeepsOutput) {
  LLMRT_TRAINED_MODEL(m, GetParam());
  auto llm = makeLlm(m);
  ASSERT_NE(llm, nullptr);
  std::vector<TokenId> prompt{m.bos};
  for (int i = 0; i < 40; ++i) prompt.push_back(300 + (i * 7) % 200);
  auto first = llm->generate({Prompt::fromIds(prompt)}, {greedy(12)});
  ASSERT_TRUE(first.isOk());
  EXPECT_EQ((*first)[0].cached_tokens, 0);
  const uint64_t context_before = llm->stats().context_tokens;
  auto second = llm->generate({Prompt::fromIds(prompt)}, {greedy(12)});
  ASSERT_TRUE(second.isOk());
  // 41 prompt tokens, blocks of 16: two full blocks (32 tokens) are reused, plus
  // partial reuse of the third block up to the last prompt token (recomputed).
  EXPECT_GE((*second)[0].cached_tokens, 32);
  EXPECT_LE((*second)[0].cached_tokens, 40);
  EXPECT_EQ(llm->stats().context_tokens - context_before, 41u - static_cast<uint64_t>((*second)[0].cached_tokens));
  EXPECT_EQ((*second)[0].outputs[0].token_ids, (*first)[0].outputs[0].token_ids);
}

TEST_P(Generate, ChunkedContextAndContextLogitsMatchOnePiece) {
  LLMRT_TRAINED_MODEL(m, GetParam());
  std::vector<TokenId> prompt{m.bos};
  for (int i = 0; i < 50; ++i) prompt.push_back(260 + (i * 13) % 250);
  const size_t vocab = static_cast<size_t>(m.vocab_size);
  RequestOptions ro;
  ro.return_context_logits = true;
  LlmArgs whole_args;
  whole_args.kv_cache_config.enable_block_reuse = false;
  auto whole = makeLlm(m, whole_args);
  LlmArgs chunk_args = whole_args;
  chunk_args.max_num_tokens = 16;  // the 51-token prompt takes 4 steps
  auto chunked = makeLlm(m, chunk_args);
  ASSERT_TRUE(whole && chunked);
  auto a = whole->generate({Prompt::fromIds(prompt)}, {greedy(16)}, {ro});
  auto b = chunked->generate({Prompt::fromIds(prompt)}, {greedy(16)}, {ro});
  ASSERT_TRUE(a.isOk() && b.isOk());
  EXPECT_EQ((*a)[0].outputs[0].token_ids, (*b)[0].outputs[0].token_ids);
  ASSERT_EQ((*a)[0].context_logits.size(), prompt.size() * vocab);
  ASSERT_EQ((*b)[0].context_logits.size(), prompt.size() * vocab);
  double max_diff = 0;
  for (size_t i = 0; i < (*a)[0].context_logits.size(); ++i)
    max_diff = std::max<double>(max_diff, std::fabs((*a)[0].context_logits[i] - (*b)[0].context_logits[i]));
  EXPECT_LT(max_diff, 1e-4);
  EXPECT_GT(chunked->stats().steps, whole->stats().steps);

  // A step smaller than a KV block (3 tokens, blocks of 16): chunks cannot end on block
  // boundaries; the prompt still goes through, in 17 steps, with the same tokens.
  LlmArgs tiny_args = whole_args;
  tiny_args.max_num_tokens = 3;
  tiny_args.kv_cache_config.tokens_per_block = 16;
  auto tiny = makeLlm(m, tiny_args);
  ASSERT_TRUE(tiny);
  auto c = tiny->generate({Prompt::fromIds(prompt)}, {greedy(16)}, {ro});
  ASSERT_TRUE(c.isOk());
  EXPECT_EQ((*a)[0].outputs[0].token_ids, (*c)[0].outputs[0].token_ids);
  ASSERT_EQ((*c)[0].context_logits.size(), prompt.size() * vocab);
  for (size_t i = 0; i < (*a)[0].context_logits.size(); ++i)
    ASSERT_NEAR((*a)[0].context_logits[i], (*c)[0].context_logits[i], 1e-4) << i;
}

TEST_P(Generate, PromptLogprobsAgreeWithGreedyConfidence) {
  LLMRT_TRAINED_MODEL(m, GetParam());
  auto llm = makeLlm(m);
  ASSERT_NE(llm, nullptr);
  SamplingParams p = greedy(6);
  p.logprobs = 3;
  auto outs = llm->generate({Prompt::fromText("Once upon a time")}, {p});
  ASSERT_TRUE(outs.isOk());
  const CompletionOutput& c = (*outs)[0].outputs[0];
  ASSERT_EQ(c.logprobs.size(), 6u);
  std::vector<TokenId> seq = (*outs)[0].prompt_token_ids;
  seq.insert(seq.end(), c.token_ids.begin(), c.token_ids.end());
  auto lp = llm->promptLogprobs(seq);
  ASSERT_TRUE(lp.isOk());
  for (size_t t = 0; t < 6; ++t) {
    EXPECT_EQ(c.logprobs[t].chosen.token, c.token_ids[t]);
    EXPECT_EQ(c.logprobs[t].top.size(), 3u);
    EXPECT_EQ(c.logprobs[t].top[0].token, c.token_ids[t]);  // greedy: the top alternative
    EXPECT_NEAR((*lp)[(*outs)[0].prompt_token_ids.size() - 1 + t], c.logprobs[t].chosen.logprob, 1e-4);
  }
}

INSTANTIATE_TEST_SUITE_P(TrainedModels, Generate, ::testing::ValuesIn(testmodels::trainedModelNames()),
                         testmodels::paramName);

}  // namespace
}  // namespace llmrt

namespace llmrt {
namespace {

// The bundled model (models/llmrt-tiny, trained by scripts/model/train_tiny_llama.py):
// greedy continuations must equal HF transformers' (golden.json, made in the training run).
TEST(DefaultModel, GreedyMatchesTransformers) {
  const std::string dir = std::string(LLMRT_SOURCE_DIR) + "/models/llmrt-tiny";
  std::ifstream in(dir + "/golden.json");
  ASSERT_TRUE(in.good()) << "the bundled model is part of the repository: " << dir;
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json g = nlohmann::json::parse(ss.str());
  LlmArgs args;
  args.model = dir;
  args.num_threads = 2;
  auto llm = LLM::create(args);
  ASSERT_TRUE(llm.isOk()) << llm.status().toString();
  std::vector<Prompt> prompts;
  for (const auto& c : g["cases"]) prompts.push_back(Prompt::fromIds(c["prompt_ids"].get<std::vector<TokenId>>()));
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = g["max_new_tokens"].get<int>();
  p.ignore_eos = true;
  auto outs = (*llm)->generate(prompts, {p});
  ASSERT_TRUE(outs.isOk()) << outs.status().toString();
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& c = g["cases"][i];
    EXPECT_EQ((*outs)[i].outputs[0].token_ids, c["new_ids"].get<std::vector<TokenId>>()) << c["prompt"];
    // Text prompts tokenize to the same ids (BOS added by the template).
    auto prompt_ids = (*llm)->tokenizer()->encode(c["prompt"].get<std::string>(), true);
    ASSERT_TRUE(prompt_ids.isOk()) << prompt_ids.status().toString();
    EXPECT_EQ(*prompt_ids, c["prompt_ids"].get<std::vector<TokenId>>());
  }
}

}  // namespace
}  // namespace llmrt
