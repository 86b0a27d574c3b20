// Scheduler policies on a real KvCacheManager with no model: a simulated
// runner marks the scheduled tokens computed and "samples" fixed tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>

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
    r->s.tokens = &r->tokens;
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
    EXPECT_TRUE(kv_->flushCopies().isOk());
    bool seen_ctx = false;
    for (const ScheduledSequence& e : plan->sequences) {
      if (e.is_context) seen_ctx = true;
      else EXPECT_FALSE(seen_ctx) << "generation entries come first";
      (e.is_context ? log.ctx : log.gen).emplace_back(e.request->id, e.num_tokens);
      EXPECT_EQ(kv_->numComputedTokens(e.request->id) + e.num_tokens, kv_->numAllocatedTokens(e.request->id));
      EXPECT_TRUE(kv_->markComputed(e.request->id, e.num_tokens).isOk());
    }
    for (auto* r : plan->admitted) log.admitted.push_back(r->id);
    for (auto* r : plan->paused) log.paused.push_back(r->id);
    for (auto* r : plan->resumed) log.resumed.push_back(r->id);
    for (auto& [r, st] : plan->failed) log.failed.push_back(r->id);
    sched_->onStepComplete(*plan);
    for (const ScheduledSequence& e : plan->sequences) {
      if (!e.sample) continue;
      SimReq& r = *reqs_[e.request->id - 1];
      r.tokens.push_back(450 + r.s.numGenerated() % 50);
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

}  // namespace
}  // namespace llmrt
