// Capacity policies, context chunking and KV reuse through the executor on the
// real tiny model: the schedule itself (iteration stats) and the outputs.
#include <map>
#include <set>
#include <thread>

#include "executor_test_util.h"

namespace llmrt {
namespace {

using namespace extest;

struct PolicyRun {
  std::vector<std::vector<TokenId>> outputs;
  std::vector<IterationStats> iters;
  LlmStats stats;
  ExecutorStats ex;
};

// 8 prompts of 10..24 tokens with 24..52 new tokens: 3 to 5 blocks of 16 per request.
std::vector<std::vector<TokenId>> policyPrompts() {
  std::vector<std::vector<TokenId>> p;
  for (int i = 0; i < 8; ++i) p.push_back(prompt(10 + 2 * i, i));
  return p;
}

PolicyRun runPolicy(CapacitySchedulerPolicy policy, int64_t kv_tokens) {
  EngineConfig c = baseConfig(kv_tokens);
  c.scheduler_config.capacity_scheduler_policy = policy;
  c.max_num_tokens = 64;
  auto llm = makeLlm(c);
  PolicyRun run;
  if (!llm) return run;
  std::vector<SamplingParams> sp;
  for (int i = 0; i < 8; ++i) sp.push_back(greedy(24 + 4 * i));
  auto outs = llm->generate(prompts(policyPrompts()), sp);
  EXPECT_TRUE(outs.isOk());
  if (!outs.isOk()) return run;
  for (const auto& o : *outs) {
    EXPECT_TRUE(o.status.isOk()) << o.status.toString();
    EXPECT_EQ(o.outputs.at(0).finish_reason, FinishReason::kLength);
    run.outputs.push_back(o.outputs.at(0).token_ids);
  }
  run.iters = llm->executor().getLatestIterationStats();
  run.stats = llm->stats();
  run.ex = llm->executor().stats();
  return run;
}

// request id -> (first, last) iteration it was scheduled in.
std::map<RequestId, std::pair<uint64_t, uint64_t>> spans(const std::vector<IterationStats>& iters) {
  std::map<RequestId, std::pair<uint64_t, uint64_t>> s;
  for (const auto& it : iters)
    for (const auto& e : it.scheduled) {
      auto [pos, inserted] = s.emplace(e.request_id, std::make_pair(it.iteration, it.iteration));
      if (!inserted) pos->second.second = it.iteration;
    }
  return s;
}

size_t maxConcurrent(const std::vector<IterationStats>& iters) {
  size_t m = 0;
  for (const auto& it : iters) m = std::max(m, it.scheduled.size());
  return m;
}

TEST(ExecutorPolicy, TightPoolEveryPolicyCompletesWithUnconstrainedOutputs) {
  LLMRT_REQUIRE_MODEL();
  const PolicyRun ref = runPolicy(CapacitySchedulerPolicy::kGuaranteedNoEvict, 4096);
  ASSERT_EQ(ref.outputs.size(), 8u);
  EXPECT_EQ(maxConcurrent(ref.iters), 8u);  // everything fits at once

  // 10 blocks for a demand of 31.
  const PolicyRun gne = runPolicy(CapacitySchedulerPolicy::kGuaranteedNoEvict, 160);
  EXPECT_EQ(gne.outputs, ref.outputs);
  EXPECT_EQ(gne.ex.pauses, 0u);
  EXPECT_EQ(maxConcurrent(gne.iters), 3u);  // requests 0-2 (3 blocks each) are guaranteed, a fourth is not
  for (const auto& it : gne.iters) EXPECT_TRUE(it.paused.empty());

  const PolicyRun mu = runPolicy(CapacitySchedulerPolicy::kMaxUtilization, 160);
  EXPECT_EQ(mu.outputs, ref.outputs);
  EXPECT_GT(mu.ex.pauses, 0u);
  EXPECT_EQ(mu.ex.resumes, mu.ex.pauses);
  EXPECT_GT(maxConcurrent(mu.iters), 3u);  // packs more than the guarantee allows
  // A paused request is out of the schedule until it is resumed.
  std::set<RequestId> paused;
  bool saw_resume = false;
  for (const auto& it : mu.iters) {
    for (RequestId r : it.resumed) {
      EXPECT_TRUE(paused.count(r));
      paused.erase(r);
      saw_resume = true;
    }
    for (const auto& e : it.scheduled) EXPECT_FALSE(paused.count(e.request_id)) << "paused request ran";
    for (RequestId r : it.paused) paused.insert(r);
  }
  EXPECT_TRUE(saw_resume);
  EXPECT_TRUE(paused.empty());

  const PolicyRun sb = runPolicy(CapacitySchedulerPolicy::kStaticBatch, 160);
  EXPECT_EQ(sb.outputs, ref.outputs);
  EXPECT_EQ(sb.ex.pauses, 0u);
  // Batches: requests first scheduled in the same iteration. A batch starts only
  // after every request of the earlier batches was scheduled for the last time.
  auto sp = spans(sb.iters);
  std::map<uint64_t, std::vector<RequestId>> batches;
  for (const auto& [id, s] : sp) batches[s.first].push_back(id);
  EXPECT_EQ(batches.size(), 4u);  // {0,1,2} {3,4} {5,6} {7} by their block needs
  for (const auto& [start, ids] : batches)
    for (const auto& [id, s] : sp)
      if (s.first < start) EXPECT_LT(s.second, start) << "request " << id << " still ran when a new batch started";
  // Under GUARANTEED_NO_EVICT a request is admitted as soon as another finishes: starts overlap.
  auto gsp = spans(gne.iters);
  bool overlap = false;
  for (const auto& [a, sa] : gsp)
    for (const auto& [b, sbb] : gsp)
      if (a != b && sa.first < sbb.first && sbb.first <= sa.second && sa.first != sbb.first) overlap = true;
  EXPECT_TRUE(overlap);
}

TEST(ExecutorPolicy, IdenticalConcurrentRequestsCompleteUnderEveryPolicy) {
  LLMRT_REQUIRE_MODEL();
  // Repeated prompts with greedy continuations compute identical blocks at once.
  // The KV manager swaps a sequence's duplicate for the cached twin (it references
  // the twin and frees its copy), so no cached block is ever locked without a
  // holder and GUARANTEED_NO_EVICT / STATIC_BATCH reservations stay exact: they
  // never fall short, i.e. never pause (each shortfall, Scheduler::numBrokenGuarantees,
  // pauses a request). MAX_UTILIZATION pauses by design. Every request completes.
  for (auto policy : {CapacitySchedulerPolicy::kGuaranteedNoEvict, CapacitySchedulerPolicy::kMaxUtilization,
                      CapacitySchedulerPolicy::kStaticBatch}) {
    EngineConfig c = baseConfig(512);
    c.scheduler_config.capacity_scheduler_policy = policy;
    auto llm = makeLlm(c);
    ASSERT_TRUE(llm);
    const char* starts[] = {"Once upon a time", "The dog", "Lily wanted", "Tom and Sue",
                            "One day, a bird", "The sun was", "A little cat", "Mom said"};
    const char* words[] = {"there", "was", "a", "big", "red", "ball"};
    std::vector<Prompt> ps;
    for (int i = 0; i < 64; ++i)
      ps.push_back(Prompt::fromText(std::string(starts[i % 8]) + " " + words[(i * 7 + i / 8) % 6]));
    auto outs = llm->generate(ps, {greedy(40)});
    ASSERT_TRUE(outs.isOk());
    for (const auto& o : *outs) {
      ASSERT_TRUE(o.status.isOk()) << toString(policy) << ": " << o.status.toString();
      EXPECT_EQ(o.outputs[0].token_ids.size(), 40u);
      EXPECT_EQ(o.outputs[0].finish_reason, FinishReason::kLength);
    }
    std::printf("[%s] pauses: %llu\n", std::string(toString(policy)).c_str(),
                static_cast<unsigned long long>(llm->stats().pauses));
    if (policy != CapacitySchedulerPolicy::kMaxUtilization) {
      EXPECT_EQ(llm->executor().stats().pauses, 0u) << toString(policy) << ": a reservation fell short";
      EXPECT_EQ(llm->executor().stats().resumes, 0u) << toString(policy);
    }
    EXPECT_EQ(llm->executor().stats().kv_used_blocks, 0);
  }
}

TEST(ExecutorPolicy, ChunkedAndUnchunkedContextGiveIdenticalTokens) {
  LLMRT_REQUIRE_MODEL();
  std::vector<std::vector<TokenId>> ps{prompt(70, 1), prompt(45, 2), prompt(90, 3)};
  EngineConfig whole = baseConfig();
  whole.scheduler_config.enable_chunked_context = false;
  whole.max_num_tokens = 256;
  whole.kv_cache_config.enable_block_reuse = false;
  EngineConfig chunked = whole;
  chunked.scheduler_config.enable_chunked_context = true;
  chunked.max_num_tokens = 32;
  auto a = makeLlm(whole);
  auto b = makeLlm(chunked);
  ASSERT_TRUE(a && b);
  auto oa = a->generate(prompts(ps), {greedy(12)});
  auto ob = b->generate(prompts(ps), {greedy(12)});
  ASSERT_TRUE(oa.isOk() && ob.isOk());
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_EQ((*oa)[i].outputs[0].token_ids, (*ob)[i].outputs[0].token_ids);
  // Unchunked: each prompt in one piece; chunked: pieces of whole blocks but the last.
  for (const auto& it : a->executor().getLatestIterationStats())
    for (const auto& e : it.scheduled)
      if (e.is_context) EXPECT_EQ(e.num_tokens, static_cast<int32_t>(ps[e.request_id - 1].size()));
  int chunks = 0;
  for (const auto& it : b->executor().getLatestIterationStats()) {
    EXPECT_LE(it.num_context_tokens + it.num_generation_tokens, 32);
    for (const auto& e : it.scheduled) chunks += e.is_context ? 1 : 0;
  }
  EXPECT_GE(chunks, 7);  // 70 + 45 + 90 tokens in pieces of at most 32
  // Without chunking, a prompt longer than max_num_tokens fails alone.
  EngineConfig small = whole;
  small.max_num_tokens = 64;
  auto c = makeLlm(small);
  ASSERT_TRUE(c);
  auto oc = c->generate(prompts({prompt(70, 1), prompt(20, 2)}), {greedy(4)});
  ASSERT_TRUE(oc.isOk());
  EXPECT_NE((*oc)[0].status.message().find("enable_chunked_context"), std::string::npos);
  EXPECT_TRUE((*oc)[1].status.isOk());
}

// Context tokens of each request per iteration, in order of iterations.
std::vector<std::vector<int32_t>> chunkSchedule(const std::vector<IterationStats>& iters, RequestId a, RequestId b) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& it : iters) {
    std::vector<int32_t> row{0, 0};
    for (const auto& e : it.scheduled)
      if (e.is_context) row[e.request_id == a ? 0 : 1] += e.request_id == a || e.request_id == b ? e.num_tokens : 0;
    if (row[0] || row[1]) out.push_back(row);
  }
  return out;
}

TEST(ExecutorPolicy, ChunkingPoliciesOrderChunksAsSpecified) {
  LLMRT_REQUIRE_MODEL();
  std::vector<std::vector<TokenId>> ps{prompt(64, 11), prompt(64, 12)};
  std::vector<std::vector<TokenId>> outs[2];
  std::vector<std::vector<int32_t>> sched[2];
  for (int k = 0; k < 2; ++k) {
    EngineConfig c = baseConfig();
    c.max_num_tokens = 32;
    c.scheduler_config.context_chunking_policy =
        k == 0 ? ContextChunkingPolicy::kFirstComeFirstServed : ContextChunkingPolicy::kEqualProgress;
    auto llm = makeLlm(c);
    ASSERT_TRUE(llm);
    auto o = llm->generate(prompts(ps), {greedy(6)});
    ASSERT_TRUE(o.isOk());
    for (const auto& r : *o) outs[k].push_back(r.outputs[0].token_ids);
    sched[k] = chunkSchedule(llm->executor().getLatestIterationStats(), 1, 2);
  }
  EXPECT_EQ(outs[0], outs[1]);
  // FIRST_COME_FIRST_SERVED: both chunks of the first prompt, then the second's.
  // Once the first generates, 31 tokens are left per step: one block of the second.
  EXPECT_EQ(sched[0], (std::vector<std::vector<int32_t>>{{32, 0}, {32, 0}, {0, 16}, {0, 16}, {0, 16}, {0, 16}}));
  // EQUAL_PROGRESS: one block of each per step.
  EXPECT_EQ(sched[1], (std::vector<std::vector<int32_t>>{{16, 16}, {16, 16}, {16, 16}, {16, 16}}));
}

TEST(ExecutorPolicy, SharedPrefixComputesOnlyTheUnsharedTokens) {
  LLMRT_REQUIRE_MODEL();
  std::vector<TokenId> shared = prompt(48, 5);
  std::vector<TokenId> a = shared, b = shared;
  for (int i = 0; i < 10; ++i) {
    a.push_back(100 + i);
    b.push_back(200 + i);
  }
  EngineConfig c = baseConfig();
  auto llm = makeLlm(c);
  auto fresh = makeLlm(c);
  ASSERT_TRUE(llm && fresh);
  auto first = llm->generate({Prompt::fromIds(a)}, {greedy(8)});
  ASSERT_TRUE(first.isOk());
  EXPECT_EQ((*first)[0].cached_tokens, 0);
  const uint64_t before = llm->stats().context_tokens;
  auto second = llm->generate({Prompt::fromIds(b)}, {greedy(8)});
  ASSERT_TRUE(second.isOk());
  EXPECT_EQ((*second)[0].cached_tokens, 48);  // three full blocks of 16
  EXPECT_EQ(llm->stats().context_tokens - before, b.size() - 48);
  auto ref = fresh->generate({Prompt::fromIds(b)}, {greedy(8)});
  ASSERT_TRUE(ref.isOk());
  EXPECT_EQ((*second)[0].outputs[0].token_ids, (*ref)[0].outputs[0].token_ids);
}

TEST(ExecutorPolicy, EarlyReuseBetweenConcurrentRequests) {
  LLMRT_REQUIRE_MODEL();
  EngineConfig c = baseConfig();
  auto llm = makeLlm(c);
  ASSERT_TRUE(llm);
  std::vector<TokenId> p = prompt(64, 9);
  // A generates long enough to still be running when B arrives, even on a loaded machine or a GPU.
  auto a = llm->generateAsync(Prompt::fromIds(p), greedy(400));
  ASSERT_TRUE(a.isOk());
  StreamDelta d;
  ASSERT_TRUE((*a)->next(d));  // A's prompt is computed (its first token exists)
  auto b = llm->generate({Prompt::fromIds(p)}, {greedy(5)});
  ASSERT_TRUE(b.isOk());
  EXPECT_FALSE((*a)->finished()) << "A should still be running when B reuses its blocks";
  EXPECT_GE((*b)[0].cached_tokens, 48);
  RequestOutput ra = (*a)->result();
  ASSERT_EQ(ra.outputs[0].token_ids.size(), 400u);
  EXPECT_EQ(std::vector<TokenId>(ra.outputs[0].token_ids.begin(), ra.outputs[0].token_ids.begin() + 5),
            (*b)[0].outputs[0].token_ids);
}

TEST(ExecutorPolicy, GenerateAsyncStreamsAndAbortsAndRetentionListsAreChecked) {
  LLMRT_REQUIRE_MODEL();
  auto llm = makeLlm(baseConfig());
  ASSERT_TRUE(llm);
  const testmodels::ReferenceCase& ref = reference();
  auto h = llm->generate_async(Prompt::fromText(ref.prompt), greedy(200));
  ASSERT_TRUE(h.isOk());
  StreamDelta d;
  ASSERT_TRUE((*h)->next(d));
  EXPECT_EQ(d.token_ids, std::vector<TokenId>{ref.new_ids.at(0)});
  EXPECT_FALSE(d.text.empty());
  EXPECT_EQ(ref.new_text.rfind(d.text, 0), 0u) << d.text;
  (*h)->abort();
  RequestOutput out = (*h)->result();
  EXPECT_TRUE((*h)->finished());
  EXPECT_EQ(out.outputs[0].finish_reason, FinishReason::kCancelled);
  EXPECT_LT(out.outputs[0].token_ids.size(), 200u);
  // One retention config per prompt, or one for all; another count is an error.
  KvCacheRetentionConfig rc;
  auto bad = llm->generate(prompts({prompt(8, 1), prompt(8, 2)}), {greedy(2)}, std::vector<KvCacheRetentionConfig>{rc, rc, rc});
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("kv_cache_retention_config"), std::string::npos);
  auto good = llm->generate(prompts({prompt(8, 1), prompt(8, 2)}), {greedy(2)}, std::vector<KvCacheRetentionConfig>{rc, rc});
  ASSERT_TRUE(good.isOk());
  EXPECT_TRUE((*good)[1].status.isOk());
}

// A 16-token system prompt, then pressure from unrelated prompts that need
// nearly the whole pool, then the system prompt again.
int32_t cachedAfterPressure(bool high_priority, bool host_offload, std::vector<TokenId>* out_tokens,
                            LlmStats* stats) {
  EngineConfig c = baseConfig(128);  // 8 blocks of 16
  if (host_offload) c.kv_cache_config.host_cache_size = 51 * model()->kvBlockBytes(16);  // 51 float32 blocks
  auto llm = makeLlm(c);
  if (!llm) return -1;
  std::vector<TokenId> sys = prompt(16, 42);
  std::vector<TokenId> q1 = sys, q2 = sys;
  for (int i = 0; i < 6; ++i) {
    q1.push_back(300 + i);
    q2.push_back(310 + i);
  }
  KvCacheRetentionConfig keep;
  keep.token_range_retention_configs.push_back({0, 16, 100, std::nullopt});
  KvCacheRetentionConfig none;
  auto r1 = llm->generate({Prompt::fromIds(q1)}, {greedy(4)}, {high_priority ? keep : none});
  EXPECT_TRUE(r1.isOk() && (*r1)[0].status.isOk());
  for (int k = 0; k < 4; ++k) {
    auto p = llm->generate({Prompt::fromIds(prompt(100, 70 + k))}, {greedy(8)});  // 7 blocks
    EXPECT_TRUE(p.isOk() && (*p)[0].status.isOk());
  }
  auto r2 = llm->generate({Prompt::fromIds(q2)}, {greedy(6)}, {high_priority ? keep : none});
  EXPECT_TRUE(r2.isOk() && (*r2)[0].status.isOk());
  if (out_tokens) *out_tokens = (*r2)[0].outputs[0].token_ids;
  if (stats) *stats = llm->stats();
  return (*r2)[0].cached_tokens;
}

TEST(ExecutorPolicy, HighPrioritySystemPromptSurvivesPressure) {
  LLMRT_REQUIRE_MODEL();
  std::vector<TokenId> kept, dropped;
  LlmStats s;
  EXPECT_EQ(cachedAfterPressure(true, false, &kept, &s), 16);
  EXPECT_GT(s.evicted_blocks, 0u);
  EXPECT_LT(cachedAfterPressure(false, false, &dropped, nullptr), 16);  // (BOS may match partially)
  EXPECT_EQ(kept, dropped);
}

TEST(ExecutorPolicy, HostOffloadBringsEvictedBlocksBackByOnboarding) {
  LLMRT_REQUIRE_MODEL();
  std::vector<TokenId> offloaded, recomputed;
  LlmStats s;
  EXPECT_EQ(cachedAfterPressure(false, true, &offloaded, &s), 16);
  EXPECT_GT(s.offloaded_blocks, 0u);
  EXPECT_GE(s.onboarded_blocks, 1u);
  EXPECT_LT(cachedAfterPressure(false, false, &recomputed, nullptr), 16);
  EXPECT_EQ(offloaded, recomputed);
}

}  // namespace
}  // namespace llmrt
