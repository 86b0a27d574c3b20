// Soak: thousands of random requests (lengths, sampling, stop ids, retention
// configs, n, invalid ones, cancellations at random moments) through a tight
// KV pool under each capacity policy. Every request must end exactly once with
// a valid finish reason, and an idle executor must hold no blocks.
// LLMRT_EXECUTOR_SOAK_REQUESTS=N changes the total (default 2000; 500 on the bundled model,
// which is ~15x slower than stories260K: 2000 requests would take 45 s there).
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "executor_test_util.h"

namespace llmrt {
namespace {

using namespace extest;
using std::chrono::milliseconds;

int soakRequests() {
  const char* e = std::getenv("LLMRT_EXECUTOR_SOAK_REQUESTS");
  return e ? std::max(3, std::atoi(e)) : model()->bundled ? 500 : 2000;
}

struct Outcome {
  int finals = 0;
  std::map<int, FinishReason> seq_finish;
  Status status;
  size_t tokens = 0;
  int n = 1;
  int max_tokens = 0;
  bool invalid = false;
};

void soak(CapacitySchedulerPolicy policy, int num_requests, uint32_t seed) {
  EngineConfig c = baseConfig(192);  // 24 blocks of 8 tokens
  c.kv_cache_config.tokens_per_block = 8;
  c.kv_cache_config.host_cache_size = (seed % 2) ? 6 * model()->kvBlockBytes(8) : 0;  // 6 blocks (float32)
  c.scheduler_config.capacity_scheduler_policy = policy;
  c.scheduler_config.context_chunking_policy =
      (seed % 3) ? ContextChunkingPolicy::kFirstComeFirstServed : ContextChunkingPolicy::kEqualProgress;
  c.max_num_tokens = 48;
  c.max_batch_size = 12;
  c.max_seq_len = 256;
  c.iter_stats_max_iterations = 0;
  auto created = Executor::create(c);
  ASSERT_TRUE(created.isOk()) << created.status().toString();
  Executor& ex = **created;

  std::mt19937 rng(seed);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<std::vector<TokenId>> prefixes;
  for (int i = 0; i < 6; ++i) prefixes.push_back(prompt(uni(4, 30), 1000 + i));

  std::mutex mu;
  std::map<RequestId, Outcome> outcomes;
  std::atomic<int> finals{0};
  auto callback = [&](const Response& r) {
    std::lock_guard<std::mutex> lock(mu);
    Outcome& o = outcomes[r.request_id];
    o.tokens += r.new_tokens.size();
    if (r.finish_reason != FinishReason::kNone) {
      EXPECT_FALSE(o.seq_finish.count(r.sequence_index)) << "sequence finished twice";
      o.seq_finish[r.sequence_index] = r.finish_reason;
    }
    if (!r.status.isOk()) o.status = r.status;
    if (r.is_final) {
      ++o.finals;
      ++finals;
    }
  };

  std::vector<RequestId> ids;
  int enqueued = 0;
  while (enqueued < num_requests) {
    const int burst = std::min(num_requests - enqueued, uni(1, 40));
    for (int b = 0; b < burst; ++b, ++enqueued) {
      Request r;
      const int kind = uni(0, 99);
      std::vector<TokenId> p = prefixes[static_cast<size_t>(uni(0, 5))];
      const int extra = uni(0, 40);
      for (int i = 0; i < extra; ++i) p.push_back(uni(3, 511));
      SamplingParams& sp = r.sampling_params;
      sp.max_tokens = uni(1, 6);
      sp.ignore_eos = uni(0, 1);
      sp.n = uni(0, 9) == 0 ? 2 : 1;
      if (uni(0, 1)) {
        sp.temperature = 0.0f;
      } else {
        sp.temperature = 0.5f + uni(0, 10) / 10.0f;
        sp.top_k = uni(0, 50);
        sp.top_p = 0.5f + uni(0, 5) / 10.0f;
        sp.seed = static_cast<uint64_t>(uni(0, 1 << 20));
      }
      if (uni(0, 4) == 0) sp.stop_token_ids = {uni(3, 511)};
      if (uni(0, 3) == 0) {
        KvCacheRetentionConfig rc;
        rc.token_range_retention_configs.push_back({0, uni(1, 16), uni(1, 100), std::nullopt});
        rc.decode_retention_priority = uni(1, 100);
        r.kv_cache_retention_config = rc;
      }
      bool invalid = false;
      if (kind < 3) {
        p.clear();  // empty
        invalid = true;
      } else if (kind < 5) {
        p.push_back(9999);  // outside the vocabulary
        invalid = true;
      } else if (kind < 7) {
        sp.top_p = 2.0f;
        invalid = true;
      } else if (kind < 8) {
        p.resize(200, 7);  // 200 + max_tokens tokens: more than the 24 blocks of 8 -> never fits
        sp.max_tokens = 6;
        sp.n = 1;
        invalid = true;
      }
      r.input_token_ids = std::move(p);
      r.streaming = uni(0, 1);
      r.callback = callback;
      const int n = sp.n, max_tokens = sp.max_tokens;
      auto id = ex.enqueueRequest(std::move(r));
      ASSERT_TRUE(id.isOk());
      {
        std::lock_guard<std::mutex> lock(mu);
        Outcome& o = outcomes[*id];
        o.n = n;
        o.max_tokens = max_tokens;
        o.invalid = invalid;
      }
      ids.push_back(*id);
    }
    // Cancel a few random requests at whatever state they are in.
    for (int k = uni(0, 3); k > 0; --k) ex.cancelRequest(ids[static_cast<size_t>(uni(0, static_cast<int>(ids.size()) - 1))]);
    if (uni(0, 3) == 0) std::this_thread::sleep_for(milliseconds(uni(0, 3)));
  }
  ASSERT_TRUE(ex.waitIdle(milliseconds(120000))) << "requests did not all finish";
  EXPECT_EQ(finals.load(), num_requests);
  std::lock_guard<std::mutex> lock(mu);
  int cancelled = 0, completed = 0;
  for (RequestId id : ids) {
    const Outcome& o = outcomes[id];
    EXPECT_EQ(o.finals, 1) << "request " << id;
    if (o.invalid) {
      EXPECT_FALSE(o.status.isOk()) << "request " << id << " should have failed";
      continue;
    }
    if (!o.status.isOk()) {
      ADD_FAILURE() << "request " << id << ": " << o.status.toString();
      continue;
    }
    EXPECT_EQ(static_cast<int>(o.seq_finish.size()), o.n) << "request " << id;
    for (const auto& [s, f] : o.seq_finish) {
      EXPECT_TRUE(f == FinishReason::kLength || f == FinishReason::kStop || f == FinishReason::kCancelled)
          << "request " << id << " finish " << toString(f);
      cancelled += f == FinishReason::kCancelled;
      completed += f != FinishReason::kCancelled;
    }
    EXPECT_LE(o.tokens, static_cast<size_t>(o.n * o.max_tokens));
  }
  EXPECT_GT(completed, 0);
  ExecutorStats st = ex.stats();
  EXPECT_EQ(st.kv_used_blocks, 0) << "blocks leaked";
  EXPECT_EQ(st.kv_num_sequences, 0) << "sequences leaked";
  EXPECT_TRUE(ex.checkKvInvariants().isOk());
  std::printf("[soak %s] %d requests, %d sequences completed, %d cancelled, %llu steps, %llu pauses, reuse hit %.2f\n",
              std::string(toString(policy)).c_str(), num_requests, completed, cancelled,
              static_cast<unsigned long long>(st.steps), static_cast<unsigned long long>(st.pauses),
              st.kv_reuse_hit_rate);
}

TEST(ExecutorSoak, RandomRequestsUnderEveryPolicy) {
  LLMRT_REQUIRE_MODEL();
  const int total = soakRequests();
  const int per = total / 3;
  soak(CapacitySchedulerPolicy::kGuaranteedNoEvict, per, 1);
  soak(CapacitySchedulerPolicy::kMaxUtilization, per, 2);
  soak(CapacitySchedulerPolicy::kStaticBatch, total - 2 * per, 3);
}

}  // namespace
}  // namespace llmrt
