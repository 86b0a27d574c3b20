// The Executor API on the real tiny model: enqueue / await, streaming (pull
// and callback), invalid requests, cancellation in every state, shutdown, stats.
#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "executor_test_util.h"

namespace llmrt {
namespace {

using namespace extest;
using std::chrono::milliseconds;

std::unique_ptr<Executor> makeExecutor(const EngineConfig& c) {
  auto ex = Executor::create(c);
  EXPECT_TRUE(ex.isOk()) << ex.status().toString();
  return ex.isOk() ? std::move(*ex) : nullptr;
}

Request req(std::vector<TokenId> ids, int max_tokens, bool streaming = false) {
  Request r;
  r.input_token_ids = std::move(ids);
  r.sampling_params = greedy(max_tokens);
  r.streaming = streaming;
  return r;
}

// Once `ex` is idle: nothing is left in its KV cache; returns how many steps it overlapped.
uint64_t overlappedStepsWhenIdle(Executor& ex) {
  EXPECT_TRUE(ex.waitIdle(milliseconds(10000)));
  ExecutorStats st = ex.stats();
  EXPECT_EQ(st.kv_used_blocks, 0);
  EXPECT_TRUE(ex.checkKvInvariants().isOk());
  return st.overlapped_steps;
}

// Every response of `id` until the final one.
std::vector<Response> collect(Executor& ex, RequestId id) {
  std::vector<Response> all;
  for (int guard = 0; guard < 100000; ++guard) {
    auto rs = ex.awaitResponses(id, milliseconds(20000));
    if (rs.empty()) break;
    for (auto& r : rs) all.push_back(std::move(r));
    if (all.back().is_final) break;
  }
  return all;
}

std::vector<TokenId> tokensOf(const std::vector<Response>& rs) {
  std::vector<TokenId> t;
  for (const auto& r : rs) t.insert(t.end(), r.new_tokens.begin(), r.new_tokens.end());
  return t;
}

TEST(Executor, ConfigValidationNamesTheField) {
  EngineConfig c = baseConfig();
  c.max_batch_size = 0;
  EXPECT_NE(c.validate().message().find("max_batch_size"), std::string::npos);
  c = baseConfig();
  c.scheduler_config.enable_chunked_context = false;
  c.max_num_tokens = 16;
  c.max_input_len = 64;
  EXPECT_NE(c.validate().message().find("max_input_len"), std::string::npos);
  c = baseConfig();
  c.overlap = static_cast<OverlapMode>(7);  // not a mode: validate() says which field
  EXPECT_NE(c.validate().message().find("overlap"), std::string::npos) << c.validate().message();
  c = baseConfig();
  c.model.clear();
  EXPECT_FALSE(Executor::create(c).isOk());
}

TEST(Executor, EnqueueAwaitStreamingAndNonStreamingAgree) {
  LLMRT_REQUIRE_MODEL();
  auto ex = makeExecutor(baseConfig());
  ASSERT_TRUE(ex);
  const testmodels::ReferenceCase& ref = reference();  // its greedy continuation, EOS ignored
  ASSERT_GE(ref.new_ids.size(), 12u);
  const std::vector<TokenId> want(ref.new_ids.begin(), ref.new_ids.begin() + 12);
  std::vector<Request> two;
  two.push_back(req(ref.prompt_ids, 12, false));
  two.push_back(req(ref.prompt_ids, 12, true));
  auto ids = ex->enqueueRequests(std::move(two));  // together: both land in the first step
  ASSERT_TRUE(ids.isOk());
  auto ra = collect(*ex, (*ids)[0]);
  auto rb = collect(*ex, (*ids)[1]);
  ASSERT_EQ(ra.size(), 1u);
  ASSERT_EQ(rb.size(), 12u);  // one response per token
  EXPECT_TRUE(ra[0].is_final);
  EXPECT_EQ(ra[0].finish_reason, FinishReason::kLength);
  EXPECT_EQ(ra[0].new_tokens, want);
  EXPECT_EQ(tokensOf(rb), ra[0].new_tokens);
  std::string text;
  for (const auto& r : rb) text += r.text;
  EXPECT_EQ(text, ra[0].text);
  EXPECT_FALSE(ra[0].text.empty());
  EXPECT_EQ(ref.new_text.rfind(ra[0].text, 0), 0u) << ra[0].text;  // the first 12 tokens' text
  ASSERT_TRUE(ra[0].stats.has_value());
  EXPECT_LE(ra[0].stats->queue_time_s, ra[0].stats->time_to_first_token_s);
  EXPECT_LE(ra[0].stats->time_to_first_token_s, ra[0].stats->total_time_s);
  EXPECT_EQ(ra[0].stats->num_generated_tokens, 12);
  EXPECT_EQ(ra[0].stats->num_prompt_tokens, static_cast<int>(ref.prompt_ids.size()));
  auto iters = ex->getLatestIterationStats();
  ASSERT_FALSE(iters.empty());
  // Both prompts in the first step.
  EXPECT_EQ(iters[0].num_context_tokens, 2 * static_cast<int>(ref.prompt_ids.size()));
  EXPECT_EQ(iters[0].num_context_requests, 2);
  EXPECT_GT(iters[0].kv_total_blocks, 0);
  EXPECT_TRUE(ex->waitIdle(milliseconds(10000)));
  ExecutorStats st = ex->stats();
  EXPECT_EQ(st.generated_tokens, 24u);
  EXPECT_EQ(st.requests_completed, 2u);
  EXPECT_EQ(st.kv_used_blocks, 0);
}

TEST(Executor, CallbackStreamingAndAwaitAll) {
  LLMRT_REQUIRE_MODEL();
  auto ex = makeExecutor(baseConfig());
  ASSERT_TRUE(ex);
  std::mutex mu;
  std::vector<TokenId> seen;
  std::atomic<int> finals{0};
  Request r = req(prompt(20, 3), 9, true);
  r.callback = [&](const Response& resp) {
    std::lock_guard<std::mutex> lock(mu);
    seen.insert(seen.end(), resp.new_tokens.begin(), resp.new_tokens.end());
    if (resp.is_final) ++finals;
  };
  auto id = ex->enqueueRequest(std::move(r));
  auto id2 = ex->enqueueRequest(req(prompt(20, 3), 9));
  ASSERT_TRUE(id.isOk() && id2.isOk());
  std::vector<Response> all;
  while (all.empty() || !all.back().is_final) {
    auto rs = ex->awaitResponses(milliseconds(20000));
    ASSERT_FALSE(rs.empty());
    for (auto& x : rs) all.push_back(std::move(x));
  }
  ASSERT_TRUE(ex->waitIdle(milliseconds(10000)));
  EXPECT_EQ(finals.load(), 1);
  EXPECT_EQ(all.size(), 1u);  // the callback request never queues
  EXPECT_EQ(all[0].request_id, *id2);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(seen, all[0].new_tokens);
}

TEST(Executor, InvalidRequestsFailAloneWithClearErrors) {
  LLMRT_REQUIRE_MODEL();
  EngineConfig c = baseConfig(256);  // 16 blocks of 16
  c.max_input_len = 100;
  c.max_seq_len = 300;
  auto ex = makeExecutor(c);
  ASSERT_TRUE(ex);
  std::vector<Request> rs;
  rs.push_back(req(prompt(8, 1), 6));                 // 0 ok
  rs.push_back(req({}, 6));                            // 1 empty
  rs.push_back(req(prompt(120, 1), 6));               // 2 > max_input_len
  rs.push_back(req(prompt(90, 1), 250));              // 3 > max_seq_len
  const TokenId outside = model()->vocab_size + 88;
  rs.push_back(req({bos(), outside}, 6));             // 4 outside the vocabulary
  rs.push_back(req(prompt(8, 1), 6));
  rs.back().sampling_params.top_p = 0.0f;              // 5 bad sampling value
  rs.push_back(req(prompt(8, 1), 6));                 // 6 overlapping retention ranges
  rs.back().kv_cache_retention_config = KvCacheRetentionConfig{};
  rs.back().kv_cache_retention_config->token_range_retention_configs = {{0, 5, 80, {}}, {3, 8, 20, {}}};
  rs.push_back(req(prompt(90, 1), 200));              // 7 needs 19 blocks > 16: never fits
  rs.push_back(req(prompt(8, 1), 6));                 // 8 ok
  auto ids = ex->enqueueRequests(std::move(rs));
  ASSERT_TRUE(ids.isOk());
  std::vector<std::vector<Response>> out;
  for (RequestId id : *ids) out.push_back(collect(*ex, id));
  auto err = [&](size_t i) { return out[i].back().status.message(); };
  EXPECT_TRUE(out[0].back().status.isOk());
  EXPECT_TRUE(out[8].back().status.isOk());
  EXPECT_EQ(out[0].back().new_tokens, out[8].back().new_tokens);
  EXPECT_NE(err(1).find("empty"), std::string::npos) << err(1);
  EXPECT_NE(err(2).find("max_input_len"), std::string::npos) << err(2);
  EXPECT_NE(err(3).find("max_seq_len"), std::string::npos) << err(3);
  EXPECT_NE(err(4).find(std::to_string(outside)), std::string::npos) << err(4);
  EXPECT_NE(err(5).find("top_p"), std::string::npos) << err(5);
  EXPECT_NE(err(6).find("overlap"), std::string::npos) << err(6);
  EXPECT_NE(err(7).find("never fit"), std::string::npos) << err(7);
  EXPECT_EQ(out[7].back().status.code(), StatusCode::kResourceExhausted);
  for (size_t i = 1; i <= 7; ++i) {
    EXPECT_TRUE(out[i].back().is_final);
    EXPECT_EQ(out[i].back().finish_reason, FinishReason::kError);
  }
  EXPECT_EQ(ex->stats().requests_failed, 7u);
}

TEST(Executor, CancelWhileGeneratingFromOwnCallback) {
  LLMRT_REQUIRE_MODEL();
  auto ex = makeExecutor(baseConfig());
  ASSERT_TRUE(ex);
  Executor* exp = ex.get();
  std::atomic<int> tokens{0};
  std::atomic<RequestId> self{0};
  std::mutex mu;
  std::vector<Response> got;
  Request r = req(prompt(10, 4), 50, true);
  r.callback = [&](const Response& resp) {
    {
      std::lock_guard<std::mutex> lock(mu);
      got.push_back(resp);
    }
    tokens += static_cast<int>(resp.new_tokens.size());
    if (tokens == 3) exp->cancelRequest(resp.request_id);
  };
  auto id = ex->enqueueRequest(std::move(r));
  ASSERT_TRUE(id.isOk());
  ASSERT_TRUE(ex->waitIdle(milliseconds(20000)));
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_FALSE(got.empty());
  EXPECT_TRUE(got.back().is_final);
  EXPECT_EQ(got.back().finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(tokens.load(), 3);  // the cancel lands before the next step
  EXPECT_EQ(ex->stats().requests_cancelled, 1u);
  EXPECT_EQ(ex->stats().kv_used_blocks, 0);
  EXPECT_TRUE(ex->checkKvInvariants().isOk());
}

TEST(Executor, CancelQueuedAndMidContextChunkFreesBlocks) {
  LLMRT_REQUIRE_MODEL();
  EngineConfig c = baseConfig(160);  // 10 blocks
  c.max_num_tokens = 32;
  auto ex = makeExecutor(c);
  ASSERT_TRUE(ex);
  Executor* exp = ex.get();
  // Enqueued together on a fresh executor, the ids are 1 (B), 2 (A), 3 (C).
  // B (short, streaming) cancels A (a 110-token prompt computed 16 tokens per
  // step next to B) and C (8 blocks: cannot be admitted next to A's 8 and B's 1,
  // so it is queued) at B's first token, i.e. after the first step.
  Request b = req(prompt(5, 1), 4, true);
  std::atomic<bool> fired{false};
  b.callback = [&](const Response&) {
    if (!fired.exchange(true)) {
      exp->cancelRequest(2);
      exp->cancelRequest(3);
    }
  };
  std::vector<Request> rs;
  rs.push_back(std::move(b));
  rs.push_back(req(prompt(110, 2), 4));
  rs.push_back(req(prompt(100, 3), 20));
  auto ids = ex->enqueueRequests(std::move(rs));
  ASSERT_TRUE(ids.isOk());
  ASSERT_EQ(*ids, (std::vector<RequestId>{1, 2, 3}));
  const RequestId ida = 2, idc = 3;
  auto ra = collect(*ex, ida);
  auto rc = collect(*ex, idc);
  ASSERT_TRUE(ex->waitIdle(milliseconds(20000)));
  ASSERT_FALSE(ra.empty());
  ASSERT_FALSE(rc.empty());
  EXPECT_EQ(ra.back().finish_reason, FinishReason::kCancelled);
  EXPECT_TRUE(ra.back().new_tokens.empty());
  EXPECT_EQ(rc.back().finish_reason, FinishReason::kCancelled);
  // A was in its context phase: scheduled as context, never generating.
  bool a_context = false;
  for (const auto& it : ex->getLatestIterationStats())
    for (const auto& e : it.scheduled)
      if (e.request_id == ida) {
        EXPECT_TRUE(e.is_context);
        EXPECT_LT(e.num_tokens, 110);
        a_context = true;
      }
  EXPECT_TRUE(a_context);
  ExecutorStats st = ex->stats();
  EXPECT_EQ(st.kv_used_blocks, 0);
  EXPECT_EQ(st.kv_num_sequences, 0);
  EXPECT_TRUE(ex->checkKvInvariants().isOk());
}

TEST(Executor, CancelPausedRequestUnderMaxUtilization) {
  LLMRT_REQUIRE_MODEL();
  EngineConfig c = baseConfig(160);
  c.scheduler_config.capacity_scheduler_policy = CapacitySchedulerPolicy::kMaxUtilization;
  auto ex = makeExecutor(c);
  ASSERT_TRUE(ex);
  std::vector<RequestId> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(*ex->enqueueRequest(req(prompt(12, i), 50)));
  // Cancel the first request reported paused, as soon as it is.
  RequestId victim = 0;
  for (int spin = 0; spin < 20000 && victim == 0; ++spin) {
    for (const auto& it : ex->getLatestIterationStats())
      if (!it.paused.empty() && victim == 0) victim = it.paused.front();
    if (victim == 0) std::this_thread::sleep_for(milliseconds(1));
  }
  ASSERT_NE(victim, 0u) << "nothing was paused";
  ex->cancelRequest(victim);
  ASSERT_TRUE(ex->waitIdle(milliseconds(30000)));
  for (RequestId id : ids) {
    auto rs = collect(*ex, id);
    ASSERT_FALSE(rs.empty());
    EXPECT_EQ(rs.back().finish_reason, id == victim ? FinishReason::kCancelled : FinishReason::kLength);
  }
  EXPECT_EQ(ex->stats().kv_used_blocks, 0);
  EXPECT_TRUE(ex->checkKvInvariants().isOk());
}

// Overlap scheduling launches step N+1 before step N's tokens are back. Whatever mix of
// requests comes (greedy steps overlap; sampled, logprobs and min_tokens steps wait; stops by
// id, string, max_tokens and max_seq_len; streaming; n > 1), every output equals the
// step-by-step run's, generated blocks are keyed by their real tokens (a later request reuses
// them), and nothing is left in the KV cache.
TEST(Executor, OverlapGivesTheStepByStepOutputs) {
  LLMRT_REQUIRE_MODEL();
  struct Out {
    std::vector<TokenId> tokens;
    std::string text;
    FinishReason finish = FinishReason::kNone;
    int32_t cached = 0;
  };
  auto run = [](OverlapMode overlap, uint64_t* overlapped) {
    EngineConfig c = baseConfig();
    c.overlap = overlap;
    c.max_seq_len = 96;
    c.kv_cache_config.enable_block_reuse = true;
    auto ex = makeExecutor(c);
    std::vector<Out> outs;
    auto runAll = [&](std::vector<Request> rs) {
      auto ids = ex->enqueueRequests(std::move(rs));
      EXPECT_TRUE(ids.isOk());
      for (RequestId id : *ids) {
        std::map<int, Out> by_seq;
        for (const Response& r : collect(*ex, id)) {
          Out& o = by_seq[r.sequence_index];
          EXPECT_TRUE(r.status.isOk()) << r.status.toString();
          o.tokens.insert(o.tokens.end(), r.new_tokens.begin(), r.new_tokens.end());
          o.text += r.text;
          if (r.finish_reason != FinishReason::kNone) o.finish = r.finish_reason;
        }
        for (auto& [i, o] : by_seq) outs.push_back(o);
      }
    };
    // Greedy requests only: every step after the first can overlap.
    std::vector<Request> rs;
    for (int i = 0; i < 6; ++i) rs.push_back(req(prompt(10 + 3 * i, i), 8 + 7 * i, i % 2 == 1));
    Request by_id = req(prompt(9, 20), 60);
    by_id.sampling_params.ignore_eos = false;
    by_id.sampling_params.stop_token_ids = model()->punctuation_ids;
    rs.push_back(by_id);
    Request by_text = req(reference().prompt_ids, 60);
    by_text.sampling_params.stop = {model()->stop_word};
    rs.push_back(by_text);
    rs.push_back(req(prompt(7, 23), 1));    // ends with its first token
    rs.push_back(req(prompt(80, 24), 16));  // ends at max_seq_len (96) too
    Request greedy_n = req(prompt(12, 25), 10);
    greedy_n.sampling_params.n = 2;
    rs.push_back(greedy_n);
    runAll(std::move(rs));
    // Mixed with steps that wait for their results.
    rs.clear();
    Request min_tokens = by_id;
    min_tokens.sampling_params.min_tokens = 4;  // stop ids masked for 4 tokens
    rs.push_back(min_tokens);
    Request sampled = req(prompt(14, 21), 25);
    sampled.sampling_params.temperature = 0.8f;
    sampled.sampling_params.seed = 7;
    sampled.sampling_params.n = 2;
    rs.push_back(sampled);
    Request with_logprobs = req(prompt(11, 22), 12);
    with_logprobs.sampling_params.logprobs = 2;
    rs.push_back(with_logprobs);
    rs.push_back(req(prompt(15, 26), 40, true));  // greedy: overlaps once the others are done
    runAll(std::move(rs));
    // A second wave whose prompt is the first request's prompt and output: the generated
    // tokens' full blocks are found in the cache (their keys hold the real tokens).
    std::vector<TokenId> longer = prompt(10, 0);
    longer.insert(longer.end(), outs[0].tokens.begin(), outs[0].tokens.end());
    auto id2 = ex->enqueueRequest(req(longer, 3));
    EXPECT_TRUE(id2.isOk());
    auto last = collect(*ex, *id2);
    EXPECT_FALSE(last.empty());
    Out o;
    for (const Response& r : last) {
      o.tokens.insert(o.tokens.end(), r.new_tokens.begin(), r.new_tokens.end());
      if (r.is_final) o.cached = r.num_cached_tokens;
    }
    outs.push_back(o);
    *overlapped = overlappedStepsWhenIdle(*ex);
    return outs;
  };
  uint64_t overlapped_off = 0, overlapped_on = 0;
  const std::vector<Out> off = run(OverlapMode::kOff, &overlapped_off);
  const std::vector<Out> on = run(OverlapMode::kOn, &overlapped_on);
  EXPECT_EQ(overlapped_off, 0u);
  EXPECT_GT(overlapped_on, 40u);  // (58 when written)
  ASSERT_EQ(off.size(), on.size());
  for (size_t i = 0; i < off.size(); ++i) {
    EXPECT_EQ(on[i].tokens, off[i].tokens) << "output " << i;
    EXPECT_EQ(on[i].text, off[i].text) << "output " << i;
    EXPECT_EQ(on[i].finish, off[i].finish) << "output " << i;
  }
  EXPECT_EQ(off[2].finish, FinishReason::kLength);
  EXPECT_EQ(off[2].tokens.size(), 22u);
  EXPECT_EQ(off[6].finish, FinishReason::kStop);
  EXPECT_EQ(off[7].finish, FinishReason::kStop);
  EXPECT_EQ(off[8].tokens.size(), 1u);
  EXPECT_EQ(off[9].tokens.size(), 16u);  // 80 prompt tokens + 16 = max_seq_len
  // The prompt of the second wave is 10 + 8 tokens: its first (18 - 1) / 16 blocks come from the cache.
  EXPECT_EQ(off.back().cached, 16);
  EXPECT_EQ(on.back().cached, 16);
}

// Penalties under overlap: a step is launched before the previous step's token is known, so a
// sequence's penalty list lacks its newest token; where the backend samples, it counts that
// token from the previous step's result on the device (RowSampling::pending_src), and where the
// host samples, the runner waits for it. Either way every output equals the step-by-step run's,
// and on a backend that samples (the GPU) the penalized steps overlap. (On the CPU, which samples
// every row on the host and so runs each such step to completion, the comparison only shows
// that `overlap on` changes nothing there; the pending paths run in the GPU runs of this test.)
TEST(Executor, OverlapWithPenaltiesGivesTheStepByStepOutputs) {
  LLMRT_REQUIRE_MODEL();
  auto run = [](OverlapMode overlap, uint64_t* overlapped) {
    EngineConfig c = baseConfig();
    c.overlap = overlap;
    auto ex = makeExecutor(c);
    std::vector<Request> rs;
    Request rep = req(prompt(12, 30), 40);  // greedy with a repetition penalty (prompt + output)
    rep.sampling_params.repetition_penalty = 1.3f;
    rs.push_back(rep);
    Request freq = req(prompt(9, 31), 40);  // greedy with output penalties only
    freq.sampling_params.frequency_penalty = 0.7f;
    freq.sampling_params.presence_penalty = 0.4f;
    rs.push_back(freq);
    Request sampled = req(prompt(14, 32), 40);  // sampled, every penalty, n = 2
    sampled.sampling_params.temperature = 0.9f;
    sampled.sampling_params.top_k = 20;
    sampled.sampling_params.seed = 11;
    sampled.sampling_params.n = 2;
    sampled.sampling_params.repetition_penalty = 1.2f;
    sampled.sampling_params.frequency_penalty = 0.3f;
    sampled.sampling_params.presence_penalty = 0.2f;
    rs.push_back(sampled);
    // Top-p alone with penalties, the longest: its last steps run alone. (A GPU samples such a lone
    // row on the device with the row-group kernel; with LLMRT_CUDA_DISABLE=rowgroup it samples it
    // on the host, which then waits for the pending token of the step before.)
    Request top_p = req(prompt(10, 33), 56);
    top_p.sampling_params.temperature = 0.8f;
    top_p.sampling_params.top_p = 0.9f;
    top_p.sampling_params.seed = 5;
    top_p.sampling_params.repetition_penalty = 1.15f;
    rs.push_back(top_p);
    rs.push_back(req(prompt(12, 30), 40));  // plain greedy on the first request's prompt
    std::vector<std::vector<TokenId>> outs;
    auto ids = ex->enqueueRequests(std::move(rs));
    EXPECT_TRUE(ids.isOk());
    for (RequestId id : *ids) {
      std::map<int, std::vector<TokenId>> by_seq;
      for (const Response& r : collect(*ex, id)) {
        EXPECT_TRUE(r.status.isOk()) << r.status.toString();
        by_seq[r.sequence_index].insert(by_seq[r.sequence_index].end(), r.new_tokens.begin(), r.new_tokens.end());
      }
      for (auto& [i, t] : by_seq) outs.push_back(t);
    }
    *overlapped = overlappedStepsWhenIdle(*ex);
    return outs;
  };
  uint64_t overlapped_off = 0, overlapped_on = 0;
  const auto off = run(OverlapMode::kOff, &overlapped_off);
  const auto on = run(OverlapMode::kOn, &overlapped_on);
  EXPECT_EQ(overlapped_off, 0u);
  if (testBackend() == "cuda") EXPECT_GT(overlapped_on, 20u);
  ASSERT_EQ(off.size(), on.size());
  ASSERT_EQ(off.size(), 6u);
  for (size_t i = 0; i < off.size(); ++i) {
    EXPECT_EQ(on[i], off[i]) << "output " << i;
    EXPECT_FALSE(off[i].empty()) << "output " << i;
  }
  // The repetition penalty took effect: plain greedy on the same prompt gives other tokens.
  EXPECT_NE(off[0], off[5]);
}

TEST(Executor, ShutdownCancelsWhatIsInFlight) {
  LLMRT_REQUIRE_MODEL();
  auto ex = makeExecutor(baseConfig());
  ASSERT_TRUE(ex);
  std::vector<RequestId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(*ex->enqueueRequest(req(prompt(30, i), 400)));
  std::this_thread::sleep_for(milliseconds(20));
  ex->shutdown();
  for (RequestId id : ids) {
    auto rs = ex->awaitResponses(id, milliseconds(1000));
    ASSERT_FALSE(rs.empty());
    EXPECT_TRUE(rs.back().is_final);
    EXPECT_EQ(rs.back().finish_reason, FinishReason::kCancelled);
  }
  EXPECT_FALSE(ex->enqueueRequest(req({bos()}, 1)).isOk());
  ex->shutdown();  // idempotent
}

}  // namespace
}  // namespace llmrt
