// Scheduler policies on a real KvCacheManager with no model: a simulated
// runner marks the scheduled tokens computed and "samples" fixed tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "kv/kv_backend.h"
#include "kv/kv_cache_manager.h"
#include "sched/scheduler.h"

namespace llmrt {
namespace {

struct SimReq {
  std::vector<TokenId> tokens;
  SchedRequest s;
};

struct StepLog {
  std::vector<std::pair<SequenceId, int32_t>> gen, ctx;  // (id, tokens)
  std::vector<SequenceId> admitted, paused, resumed, failed;
  std::set<SequenceId> in_flight_before;
};

class Sim {
 public:
  Sim(int32_t tpb, int32_t blocks, SchedulerOptions opts, bool reuse = true) {
    KvCacheConfig c;
    c.tokens_per_block = tpb;
    c.enable_block_reuse = reuse;
    KvCacheManagerOptions o;
    o.copier = &copier_;
    auto kv = KvCacheManager::create(c, blocks, 0, o);
    EXPECT_TRUE(kv.isOk()) << kv.status().toString();
    kv_ = std::move(*kv);
    sched_ = std::make_unique<Scheduler>(opts, *kv_);
  }

  SimReq& add(int32_t prompt_len, int32_t max_new, int32_t salt) {
    auto r = std::make_unique<SimReq>();
    for (int32_t i = 0; i < prompt_len; ++i) r->tokens.push_back(1 + (salt * 131 + i * 7) % 400);
    r->s.id = static_cast<SequenceId>(reqs_.size() + 1);
    r->s.arrival = r->s.id;
    r->s.tokens = r->tokens;
    r->s.prompt_len = prompt_len;
    r->s.max_new_tokens = max_new;
    reqs_.push_back(std::move(r));
    return *reqs_.back();
  }

  // One step; returns what was scheduled.
  StepLog step() {
    StepLog log;
    std::vector<SchedRequest*> ptrs;
    for (auto& r : reqs_) {
      ptrs.push_back(&r->s);
      if (r->s.holdsKv()) log.in_flight_before.insert(r->s.id);
    }
    auto plan = sched_->schedule(ptrs);
    EXPECT_TRUE(plan.isOk()) << plan.status().toString();
    if (!plan.isOk()) return log;
    EXPECT_TRUE(copier_.copyBlocks(plan->copies).isOk());  // the plan carries the step's copies
    EXPECT_FALSE(kv_->hasPendingCopies());
    bool seen_ctx = false;
    for (const ScheduledSequence& e : plan->sequences) {
      if (e.is_context) seen_ctx = true;
      else EXPECT_FALSE(seen_ctx) << "generation entries come first";
      (e.is_context ? log.ctx : log.gen).emplace_back(e.request->id, e.num_tokens);
      // The plan says what the runner computes: [num_cached, + num_tokens) with its block table.
      EXPECT_EQ(e.num_cached, kv_->numComputedTokens(e.request->id));
      EXPECT_EQ(e.num_cached + e.num_tokens, kv_->numAllocatedTokens(e.request->id));
      const auto table = kv_->blockTable(e.request->id);
      EXPECT_TRUE(std::equal(table.begin(), table.end(), e.block_table.begin(), e.block_table.end()));
      EXPECT_FALSE(e.fed_last);
    }
    for (auto* r : plan->admitted) log.admitted.push_back(r->id);
    for (auto* r : plan->paused) log.paused.push_back(r->id);
    for (auto* r : plan->resumed) log.resumed.push_back(r->id);
    for (auto& [r, st] : plan->failed) log.failed.push_back(r->id);
    // The step ran: the scheduler marks the KV computed and places each sample's placeholder.
    EXPECT_TRUE(sched_->onLaunched(*plan).isOk());
    for (const ScheduledSequence& e : plan->sequences) {
      EXPECT_EQ(kv_->numComputedTokens(e.request->id), e.num_cached + e.num_tokens);
      if (!e.sample) continue;
      SimReq& r = *reqs_[e.request->id - 1];
      EXPECT_EQ(e.token_pos, static_cast<int32_t>(r.s.tokens.size()) - 1);
      EXPECT_EQ(r.s.tokens.back(), kPendingToken);
      const TokenId tok = 450 + (r.s.numGenerated() - 1) % 50;
      EXPECT_TRUE(sched_->onTokenKnown(r.s, e.token_pos, tok).isOk());
      r.tokens.push_back(tok);
      EXPECT_EQ(r.s.tokens, r.tokens);
      if (r.s.numGenerated() >= r.s.max_new_tokens) EXPECT_TRUE(sched_->release(r.s).isOk());
    }
    EXPECT_TRUE(kv_->checkInvariants().isOk());
    return log;
  }

  std::vector<StepLog> runToEnd(int max_steps = 10000) {
    std::vector<StepLog> logs;
    while (!allDone() && static_cast<int>(logs.size()) < max_steps) logs.push_back(step());
    EXPECT_TRUE(allDone());
    return logs;
  }

  bool allDone() const {
    return std::all_of(reqs_.begin(), reqs_.end(), [](const auto& r) { return r->s.state == SchedState::kDone; });
  }
  KvCacheManager& kv() { return *kv_; }
  SimReq& req(size_t i) { return *reqs_[i]; }

 private:
  RecordingBlockCopier copier_;
  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<Scheduler> sched_;
  std::vector<std::unique_ptr<SimReq>> reqs_;
};

SchedulerOptions opts(CapacitySchedulerPolicy p, int32_t max_num_tokens = 64, int32_t max_batch = 16,
                      bool chunked = true, ContextChunkingPolicy c = ContextChunkingPolicy::kFirstComeFirstServed) {
  SchedulerOptions o;
  o.config.capacity_scheduler_policy = p;
  o.config.context_chunking_policy = c;
  o.config.enable_chunked_context = chunked;
  o.max_num_tokens = max_num_tokens;
  o.max_batch_size = max_batch;
  return o;
}

TEST(Scheduler, GuaranteedNoEvictNeverPausesAndReservesWholeLength) {
  // 10 blocks of 4 tokens; each request needs ceil((8 + 12) / 4) = 5 blocks: two at a time.
  Sim sim(4, 10, opts(CapacitySchedulerPolicy::kGuaranteedNoEvict));
  for (int i = 0; i < 6; ++i) sim.add(8, 12, i);
  auto logs = sim.runToEnd();
  size_t max_in_flight = 0;
  for (const auto& l : logs) {
    EXPECT_TRUE(l.paused.empty());
    max_in_flight = std::max(max_in_flight, l.gen.size() + l.ctx.size());
  }
  EXPECT_EQ(max_in_flight, 2u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(sim.req(i).s.numGenerated(), 12);
  EXPECT_EQ(sim.kv().stats().primary.used, 0);
}

TEST(Scheduler, MaxUtilizationPausesTheLatestStartedAndResumesIt) {
  Sim sim(4, 10, opts(CapacitySchedulerPolicy::kMaxUtilization));
  for (int i = 0; i < 4; ++i) sim.add(8, 12, i);
  auto logs = sim.runToEnd();
  size_t pauses = 0, resumes = 0, max_in_flight = 0;
  std::map<SequenceId, uint64_t> start;
  for (const auto& l : logs) {
    pauses += l.paused.size();
    resumes += l.resumed.size();
    max_in_flight = std::max(max_in_flight, l.gen.size() + l.ctx.size());
    for (SequenceId p : l.paused)
      for (SequenceId other : l.in_flight_before)
        if (std::find(l.paused.begin(), l.paused.end(), other) == l.paused.end())
          EXPECT_LT(sim.req(other - 1).s.start_order, sim.req(p - 1).s.start_order)
              << "paused " << p << " but kept the later-started " << other;
  }
  EXPECT_GT(pauses, 0u);
  EXPECT_EQ(resumes, pauses);
  EXPECT_GT(max_in_flight, 2u);  // packs more than GUARANTEED_NO_EVICT's 2
  for (int i = 0; i < 4; ++i) EXPECT_EQ(sim.req(i).s.numGenerated(), 12);
  EXPECT_EQ(sim.kv().stats().primary.used, 0);
}

TEST(Scheduler, StaticBatchAdmitsOnlyBetweenBatches) {
  Sim sim(4, 10, opts(CapacitySchedulerPolicy::kStaticBatch));
  sim.add(8, 4, 0);   // 3 blocks
  sim.add(8, 12, 1);  // 5 blocks
  sim.add(8, 4, 2);   // 3 blocks: does not fit next to the first two
  sim.add(8, 4, 3);
  auto logs = sim.runToEnd();
  int batches = 0;
  for (const auto& l : logs) {
    if (!l.admitted.empty()) {
      ++batches;
      EXPECT_TRUE(l.in_flight_before.empty()) << "admitted while a batch was running";
    }
  }
  EXPECT_EQ(batches, 2);
  // Request 0 finished long before request 1, yet 2 and 3 waited for the whole batch.
  EXPECT_EQ(logs[0].admitted, (std::vector<SequenceId>{1, 2}));
}

TEST(Scheduler, RequestThatCanNeverFitFailsInsteadOfWaiting) {
  Sim sim(4, 4, opts(CapacitySchedulerPolicy::kGuaranteedNoEvict));
  sim.add(8, 20, 0);  // 7 blocks > 4
  sim.add(4, 4, 1);
  auto logs = sim.runToEnd();
  ASSERT_FALSE(logs.empty());
  EXPECT_EQ(logs[0].failed, std::vector<SequenceId>{1});
  EXPECT_EQ(sim.req(1).s.numGenerated(), 4);
}

TEST(Scheduler, MaxBatchSizeBoundsSequencesInFlight) {
  Sim sim(4, 100, opts(CapacitySchedulerPolicy::kGuaranteedNoEvict, 64, 3));
  for (int i = 0; i < 7; ++i) sim.add(4, 5, i);
  auto logs = sim.runToEnd();
  for (const auto& l : logs) EXPECT_LE(l.gen.size() + l.ctx.size(), 3u);
}

TEST(Scheduler, GenerationIsScheduledBeforeNewContextUnderTheTokenBudget) {
  Sim sim(4, 100, opts(CapacitySchedulerPolicy::kGuaranteedNoEvict, 16));
  sim.add(4, 8, 0);
  sim.step();        // context of 0
  sim.add(40, 2, 1);  // a long prompt arrives while 0 generates
  StepLog l = sim.step();
  ASSERT_EQ(l.gen.size(), 1u);
  EXPECT_EQ(l.gen[0], (std::pair<SequenceId, int32_t>{1, 1}));
  ASSERT_EQ(l.ctx.size(), 1u);
  EXPECT_EQ(l.ctx[0].second, 12);  // 16 - 1 rounded down to whole blocks
}


// The tree blocks holding tokens[0, n * T) of a sequence, walked from the root by key
// tokens and parent hash (several requests share the generated tokens' ids).
std::vector<KvBlockInfo> cachedChain(const KvCacheManager& kv, const std::vector<TokenId>& tokens) {
  const int32_t T = kv.tokensPerBlock();
  const int32_t n_blocks = kv.stats().primary.total;
  std::vector<KvBlockInfo> chain;
  for (size_t i = 0; (i + 1) * T <= tokens.size(); ++i) {
    std::optional<KvBlockInfo> found;
    for (BlockId b = 0; b < n_blocks && !found; ++b) {
      KvBlockInfo info = kv.blockInfo(KvPool::kPrimary, b);
      if (!info.in_tree) continue;
      const std::optional<uint64_t> parent = chain.empty() ? std::nullopt : std::optional(chain.back().hash);
      if (info.parent_hash != parent) continue;
      if (std::equal(info.tokens.begin(), info.tokens.end(), tokens.begin() + static_cast<ptrdiff_t>(i * T)))
        found = info;
    }
    if (!found) break;
    chain.push_back(*found);
  }
  return chain;
}

TEST(Scheduler, ResumedSequenceKeepsDecodePriorityForItsGeneratedBlocks) {
  // Bug issue item 2: a resumed sequence re-enters the KV cache with all its tokens as "prompt";
  // its generated tokens' blocks then took the prompt range's priority (80) instead of
  // decode_retention_priority (10). The scheduler now passes the prompt length along.
  KvCacheRetentionConfig rc;
  rc.token_range_retention_configs = {{0, std::nullopt, 80, std::nullopt}};
  rc.decode_retention_priority = 10;
  Sim sim(4, 10, opts(CapacitySchedulerPolicy::kMaxUtilization));
  for (int i = 0; i < 4; ++i) sim.add(8, 12, i).s.add_options.retention = rc;
  std::map<SequenceId, int32_t> generated_at_pause;
  for (int step = 0; step < 1000 && !sim.allDone(); ++step) {
    StepLog l = sim.step();
    for (SequenceId id : l.paused) generated_at_pause[id] = sim.req(id - 1).s.numGenerated();
  }
  ASSERT_TRUE(sim.allDone());
  // A pause after 4 or more generated tokens resumes with a whole generated block (tokens 8-11)
  // inside the old "prompt".
  int checked = 0;
  for (auto [id, generated] : generated_at_pause) {
    if (generated < 4) continue;
    const SimReq& r = sim.req(id - 1);
    EXPECT_GT(r.s.num_pauses, 0);
    const auto chain = cachedChain(sim.kv(), r.tokens);
    for (size_t i = 0; i < chain.size(); ++i) {
      const bool prompt_block = static_cast<int32_t>(i) * 4 < r.s.prompt_len;
      EXPECT_EQ(chain[i].priority, prompt_block ? 80 : 10) << "request " << id << " block " << i;
      checked += prompt_block ? 0 : 1;
    }
  }
  EXPECT_GT(checked, 0) << "no generated block of a resumed request is left to check";
}

TEST(Scheduler, MaxNumTokensOfOneBlockStillAdvancesPromptsWhileOthersGenerate) {
  // Bug issue item 8: max_num_tokens = tokens_per_block = 32, 4 prompts of 66 tokens, 20 new
  // tokens each. Chunks had to end on block boundaries, and the generation tokens left fewer
  // than 32 tokens for contexts, so each prompt waited until every earlier request had finished
  // generating: 88 steps. Steps whose context budget is less than a block now cut chunks
  // anywhere: 29 steps. Blocks a later chunk completes are still stored for reuse.
  using CP = CapacitySchedulerPolicy;
  using CC = ContextChunkingPolicy;
  for (auto policy : {CP::kGuaranteedNoEvict, CP::kMaxUtilization})
    for (auto chunking : {CC::kFirstComeFirstServed, CC::kEqualProgress}) {
      SCOPED_TRACE(std::string(toString(policy)) + " " + std::string(toString(chunking)));
      Sim sim(32, 64, opts(policy, 32, 16, true, chunking));
      for (int i = 0; i < 4; ++i) sim.add(66, 20, i);
      auto logs = sim.runToEnd();
      EXPECT_EQ(logs.size(), 29u);
      int unaligned_chunks = 0;
      for (const auto& l : logs) {
        int32_t tokens = 0;
        for (const auto& g : l.gen) tokens += g.second;
        for (const auto& c : l.ctx) {
          tokens += c.second;
          unaligned_chunks += c.second % 32 != 0 ? 1 : 0;
        }
        EXPECT_LE(tokens, 32);
      }
      EXPECT_GT(unaligned_chunks, 4);  // more than each prompt's last chunk
      for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(sim.req(i).s.numGenerated(), 20);
        // Both full blocks were stored for reuse, though chunks ended inside them.
        EXPECT_EQ(cachedChain(sim.kv(), sim.req(i).tokens).size(), 2u) << "request " << i;
      }
    }
}

}  // namespace
}  // namespace llmrt
