// Randomized property test: tens of thousands of add / chunk / decode / step /
// finish / cancel / pause-resume / lookup / clock operations over small pools
// with random configs, retention configs and key extras. After every operation:
//  - the full invariant audit (reference counts equal holders, no block in two
//    places, free + used + cached = total in each pool, tree/heap/lock state);
//  - the simulated runner checks every attended position's KV before each step
//    and never writes a shared block (so wrong reuse or lost copies fail);
//  - every eviction decision is checked against a brute-force scan: the victim
//    is the (priority, last use) minimum among leaves, offload vs drop as specified;
//  - out-of-blocks answers only when the blocks are really not there.
// Duplicate prompts of running requests are added on purpose and, in greedy runs,
// decode tokens follow from the prefix, so identical requests compute identical
// blocks at the same time; markComputed and removeSequence must never lower
// free + reclaimable, and without a window no cached block may stay locked.
// At the end every sequence is removed: nothing stays referenced and the whole
// primary pool is obtainable again.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>

#include "kv/kv_cache_manager.h"
#include "kv_test_util.h"

namespace llmrt {
namespace {

using kvtest::runStep;
using kvtest::SimKvMemory;
using kvtest::SimSequence;

struct Live {
  SimSequence s;
  int32_t prompt_len = 0;
  int32_t target = 0;  // stop decoding at this many tokens
};

class PropertyRun {
 public:
  explicit PropertyRun(uint64_t seed) : seed_(seed), rng_(seed) {
    T_ = 1 << pick(0, 3);
    np_ = pick(4, 40);
    ns_ = coin(0.5) ? 0 : pick(1, 20);
    cfg_.tokens_per_block = T_;
    cfg_.enable_block_reuse = !coin(0.1);
    cfg_.enable_partial_reuse = coin(0.7);
    cfg_.onboard_blocks = coin(0.85);
    if (coin(0.35)) window_ = pick(T_, 4 * T_ + 3);
    const int32_t mins[] = {1, 35, 60};
    cfg_.secondary_offload_min_priority = mins[pick(0, 2)];
    cfg_.event_buffer_max_size = coin(0.5) ? 64 : 0;
    greedy_ = coin(0.5);
    mem_ = std::make_unique<SimKvMemory>(T_, np_, ns_);
    KvCacheManagerOptions o;
    o.copier = mem_.get();
    o.clock = &clock_;
    o.attention_window = window_.value_or(0);
    if (coin(0.2)) o.debug_hash_mask = 0x7;  // heavy hash collisions
    auto r = KvCacheManager::create(cfg_, np_, ns_, o);
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    m_ = std::move(r).value();
    m_->setEvictionObserver([this](const detail::EvictionRecord& e) { checkEviction(e); });
  }

  std::string describe() const {
    return strprintf(
        "seed %llu: T=%d primary=%d secondary=%d reuse=%d partial=%d onboard=%d window=%d min_prio=%d "
        "greedy=%d",
        (unsigned long long)seed_, T_, np_, ns_, cfg_.enable_block_reuse, cfg_.enable_partial_reuse,
        cfg_.onboard_blocks, window_.value_or(0), cfg_.secondary_offload_min_priority,
        greedy_);
  }

  // Returns the number of operations run (stops at the first failure).
  int run(int ops) {
    for (int i = 0; i < ops; ++i) {
      op();
      if (failed_ || ::testing::Test::HasFailure()) return i;
      check();
      if (failed_ || ::testing::Test::HasFailure()) return i;
    }
    finish();
    return ops;
  }

  uint64_t evictionsChecked() const { return evictions_checked_; }
  const KvCacheStats& finalStats() const { return final_stats_; }

 private:
  int32_t pick(int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng_); }
  bool coin(double p) { return std::bernoulli_distribution(p)(rng_); }
  void fail(const std::string& what) {
    if (!failed_) ADD_FAILURE() << describe() << ": " << what;
    failed_ = true;
  }
  std::optional<int32_t> window() const { return window_; }

  std::vector<TokenId> randomTokens(int32_t n) {
    std::vector<TokenId> v(n);
    for (auto& t : v) t = pick(0, 3);
    return v;
  }

  std::vector<TokenId> makePrompt() {
    std::vector<TokenId> p;
    if (!history_.empty() && coin(0.75)) {
      const auto& h = history_[pick(0, static_cast<int32_t>(history_.size()) - 1)];
      p.assign(h.begin(), h.begin() + pick(0, static_cast<int32_t>(h.size())));
    }
    const int32_t extra = pick(p.empty() ? 1 : 0, 3 * T_ + 2);
    auto tail = randomTokens(extra);
    p.insert(p.end(), tail.begin(), tail.end());
    if (p.empty()) p.push_back(1);
    return p;
  }

  std::optional<KvCacheRetentionConfig> randomRetention(int32_t plen) {
    if (coin(0.4)) return std::nullopt;
    KvCacheRetentionConfig rc;
    int32_t at = 0;
    while (at < plen && coin(0.6)) {
      TokenRangeRetentionConfig r;
      r.token_start = at + pick(0, 2 * T_);
      if (r.token_start >= plen + T_) break;
      if (coin(0.2)) {
        rc.token_range_retention_configs.push_back(
            {r.token_start, std::nullopt, pick(1, 100),
             coin(0.3) ? std::optional<int64_t>(pick(1, 50)) : std::nullopt});
        break;
      }
      r.token_end = r.token_start + pick(1, 2 * T_);
      r.priority = pick(1, 100);
      if (coin(0.3)) r.duration_ms = pick(1, 50);
      at = *r.token_end;
      rc.token_range_retention_configs.push_back(r);
    }
    rc.decode_retention_priority = pick(1, 100);
    if (coin(0.3)) rc.decode_duration_ms = pick(1, 50);
    EXPECT_TRUE(rc.validate().isOk()) << rc.validate().toString();
    return rc;
  }

  SequenceKeyExtras randomExtras(int32_t plen) {
    SequenceKeyExtras e;
    if (coin(0.15)) e.lora_id = pick(1, 2);
    if (coin(0.15)) e.cache_salt = coin(0.5) ? "s" : "salt-two";
    if (coin(0.15)) {
      MultimodalInput mm;
      mm.hash = {static_cast<uint64_t>(pick(1, 2)), 0, 0, 7};
      mm.start = pick(0, plen - 1);
      mm.length = pick(1, plen - mm.start);
      e.multimodal.push_back(mm);
    }
    return e;
  }

  void op() {
    const int r = pick(0, 99);
    if (r < 18) {
      addNew();
    } else if (r < 70) {
      advance();
    } else if (r < 80) {
      removeOne(/*resume=*/false);
    } else if (r < 85) {
      removeOne(/*resume=*/true);
    } else if (r < 92) {
      lookup();
    } else {
      clock_.advanceMs(pick(0, 30));
    }
  }

  void addNew(std::optional<Live> resume = std::nullopt) {
    if (live_.size() >= 8 && !resume) return;
    Live l;
    if (resume) {
      l = std::move(*resume);
      l.prompt_len = static_cast<int32_t>(l.s.tokens.size());
    } else if (!live_.empty() && coin(0.25)) {
      // A duplicate of a running request's prompt (same extras, same length):
      // both compute identical blocks, possibly at the same time.
      const Live& twin = live_[pick(0, static_cast<int32_t>(live_.size()) - 1)];
      l.s.id = next_id_++;
      l.s.tokens.assign(twin.s.tokens.begin(), twin.s.tokens.begin() + twin.prompt_len);
      l.prompt_len = twin.prompt_len;
      l.s.extras = twin.s.extras;
      l.target = twin.target;
    } else {
      l.s.id = next_id_++;
      l.s.tokens = makePrompt();
      l.prompt_len = static_cast<int32_t>(l.s.tokens.size());
      l.s.extras = randomExtras(l.prompt_len);
      l.target = l.prompt_len + pick(0, 4 * T_);
    }
    l.s.refreshIds();
    AddSequenceOptions o;
    o.extras = l.s.extras;
    o.retention = randomRetention(l.prompt_len);
    o.max_new_tokens = std::max(0, l.target - l.prompt_len);
    if (coin(0.4)) o.num_tokens_to_allocate = pick(0, l.prompt_len);
    const PrefixMatch predicted = m_->lookupPrefix(l.s.tokens, l.s.extras);
    const KvCacheStats before = m_->stats();
    auto res = m_->addSequence(l.s.id, l.s.tokens, o);
    if (!res.isOk()) return fail("addSequence: " + res.status().toString());
    if (res->status == KvAllocStatus::kNoFreeBlocks) {
      const KvCacheStats after = m_->stats();
      if (m_->hasSequence(l.s.id)) return fail("failed add left the sequence behind");
      if (after.primary.free != before.primary.free || after.primary.cached != before.primary.cached ||
          after.secondary.cached != before.secondary.cached ||
          after.allocation_failures != before.allocation_failures + 1)
        return fail("failed add changed the pools");
      const int32_t R = predicted.num_reusable_tokens;
      const int32_t k = predicted.num_full_blocks;
      const int32_t partial = predicted.num_partial_tokens > 0;
      const int32_t c = std::min(o.num_tokens_to_allocate.value_or(l.prompt_len), l.prompt_len - R);
      const int32_t total = std::max((R + c + T_ - 1) / T_, k + partial);
      const int32_t need = predicted.num_secondary_blocks + total - k;
      // Pinning the matched primary blocks can only lower availability by their number.
      if (m_->numAvailableBlocks() >= need + k + partial)
        return fail(
            strprintf("add refused with %d available for a need of %d", m_->numAvailableBlocks(), need));
      if (resume) paused_.push_back(std::move(l));
      return;
    }
    if (res->num_reused_tokens != predicted.num_reusable_tokens)
      return fail(strprintf("lookupPrefix predicted %d reusable tokens, addSequence reused %d",
                            predicted.num_reusable_tokens, res->num_reused_tokens));
    if (res->num_reused_tokens > l.prompt_len - 1) return fail("reused the last prompt token");
    if (!cfg_.enable_block_reuse && res->num_reused_tokens != 0) return fail("reuse while disabled");
    history_.push_back(l.s.tokens);
    if (history_.size() > 24) history_.erase(history_.begin());
    live_.push_back(std::move(l));
  }

  // One scheduling/compute action for a random live sequence.
  void advance() {
    if (live_.empty()) return;
    Live& l = live_[pick(0, static_cast<int32_t>(live_.size()) - 1)];
    const SequenceId id = l.s.id;
    const int32_t alloc = m_->numAllocatedTokens(id);
    const int32_t comp = m_->numComputedTokens(id);
    if (alloc > comp) {
      const int32_t avail = m_->numAvailableBlocks();
      std::string err = runStep(*m_, *mem_, l.s, window());
      if (!err.empty()) return fail(err);
      // markComputed allocates nothing: it must not lock blocks (reservations rely on it).
      if (m_->numAvailableBlocks() < avail)
        return fail(strprintf("markComputed lowered free + reclaimable from %d to %d", avail,
                              m_->numAvailableBlocks()));
      return;
    }
    int32_t n = 0;
    Result<KvAllocStatus> st = KvAllocStatus::kOk;
    const size_t table_before = m_->blockTable(id).size();
    if (alloc < l.prompt_len) {
      n = pick(1, l.prompt_len - alloc);
      st = m_->allocatePromptTokens(id, n);
    } else if (static_cast<int32_t>(l.s.tokens.size()) < l.target) {
      n = 1;
      // Greedy runs: the next token is a function of the prefix, so duplicates generate alike.
      const TokenId t = greedy_ && !l.s.ids.empty() ? static_cast<TokenId>(l.s.ids.back() % 4) : pick(0, 3);
      st = m_->appendToken(id, t);
      if (st.isOk() && *st == KvAllocStatus::kOk) {
        l.s.tokens.push_back(t);
        l.s.refreshIds();
      }
    } else {
      return;  // done; waits for removal
    }
    if (!st.isOk()) return fail("allocation: " + st.status().toString());
    if (*st == KvAllocStatus::kNoFreeBlocks) {
      const int32_t need = (alloc + n + T_ - 1) / T_ - static_cast<int32_t>(table_before);
      if (m_->numAvailableBlocks() >= need)
        return fail(
            strprintf("extend refused with %d available for a need of %d", m_->numAvailableBlocks(), need));
    }
  }

  void removeOne(bool resume) {
    if (resume && !paused_.empty() && coin(0.5)) {
      Live l = std::move(paused_.back());
      paused_.pop_back();
      addNew(std::move(l));
      return;
    }
    if (live_.empty()) return;
    const size_t i = static_cast<size_t>(pick(0, static_cast<int32_t>(live_.size()) - 1));
    const int32_t avail = m_->numAvailableBlocks();
    Status st = m_->removeSequence(live_[i].s.id);
    if (!st.isOk()) return fail("remove: " + st.toString());
    if (m_->numAvailableBlocks() < avail)
      return fail(strprintf("removeSequence lowered free + reclaimable from %d to %d", avail,
                            m_->numAvailableBlocks()));
    if (m_->hasSequence(live_[i].s.id)) return fail("removed sequence still present");
    Live l = std::move(live_[i]);
    live_.erase(live_.begin() + i);
    if (resume && paused_.size() < 4) {
      // Pause: resume later with everything generated so far as the prompt.
      l.s.tokens.resize(std::max<size_t>(1, l.s.tokens.size()));
      paused_.push_back(std::move(l));
    }
  }

  void lookup() {
    const KvCacheStats before = m_->stats();
    auto p = makePrompt();
    const PrefixMatch r = m_->lookupPrefix(p, randomExtras(static_cast<int32_t>(p.size())));
    if (r.num_reusable_tokens > static_cast<int32_t>(p.size()) - 1 && r.num_reusable_tokens > 0)
      return fail("lookup offers the last prompt token");
    const KvCacheStats after = m_->stats();
    if (after.primary.free != before.primary.free || after.primary.cached != before.primary.cached)
      return fail("lookup changed state");
  }

  void check() {
    Status st = m_->checkInvariants();
    if (!st.isOk()) return fail(st.toString());
    const KvCacheStats s = m_->stats();
    for (const KvPoolStats* p : {&s.primary, &s.secondary})
      if (p->free + p->used + p->cached != p->total)
        return fail(
            strprintf("free %d + used %d + cached %d != total %d", p->free, p->used, p->cached, p->total));
    if (s.primary.reclaimable > s.primary.cached) return fail("more reclaimable than cached blocks");
    // Without a sliding window every sequence holds the whole chain above its tree
    // blocks, so a cached block is never locked: cached == reclaimable.
    if (!window() && s.primary.reclaimable != s.primary.cached)
      return fail(strprintf("%d cached primary blocks but only %d reclaimable (locked without a holder)",
                            s.primary.cached, s.primary.reclaimable));
    for (const Live& l : live_) {
      const int32_t a = m_->numAllocatedTokens(l.s.id);
      if (static_cast<int32_t>(m_->blockTable(l.s.id).size()) != (a + T_ - 1) / T_)
        return fail("block table size does not match allocated tokens");
    }
    if (cfg_.event_buffer_max_size > 0 && pick(0, 9) == 0) m_->drainEvents();
  }

  // Brute-force check of one eviction decision, made before any state change.
  void checkEviction(const detail::EvictionRecord& e) {
    ++evictions_checked_;
    if (e.action == detail::EvictionAction::kCascadeDrop) {
      if (e.pool != KvPool::kSecondary) fail("cascade drop of a primary block");
      return;
    }
    auto scan = [&](KvPool pool) {
      std::optional<KvBlockInfo> best;
      const int32_t n = pool == KvPool::kPrimary ? np_ : ns_;
      for (BlockId b = 0; b < n; ++b) {
        KvBlockInfo info = m_->blockInfo(pool, b);
        const bool leaf = pool == KvPool::kPrimary ? info.num_primary_children == 0 : info.num_children == 0;
        if (!info.in_tree || info.ref_count != 0 || !leaf) continue;
        if (!best ||
            std::make_pair(info.priority, info.last_used) < std::make_pair(best->priority, best->last_used))
          best = info;
      }
      return best;
    };
    const auto best = scan(e.pool);
    if (!best) return fail("evicted a block although no candidate exists");
    if (best->hash != e.hash || best->priority != e.priority || best->last_used != e.last_used)
      return fail(strprintf("evicted (prio %d, lru %llu) but the minimum candidate is (prio %d, lru %llu)",
                            e.priority, (unsigned long long)e.last_used, best->priority,
                            (unsigned long long)best->last_used));
    if (e.pool == KvPool::kSecondary) {
      if (e.priority > e.incoming_priority) fail("secondary eviction for a lower-priority newcomer");
      return;
    }
    const bool may_offload = ns_ > 0 && e.priority >= cfg_.secondary_offload_min_priority;
    if (e.action == detail::EvictionAction::kOffload && !may_offload)
      return fail("offloaded a low-priority block");
    if (e.action == detail::EvictionAction::kDrop && may_offload) {
      const KvCacheStats s = m_->stats();
      const auto sec = scan(KvPool::kSecondary);
      if (s.secondary.free > 0 || (sec && sec->priority <= e.priority))
        fail("dropped an offloadable block although the secondary pool had room");
    }
  }

  void finish() {
    for (const Live& l : live_) {
      Status st = m_->removeSequence(l.s.id);
      if (!st.isOk()) return fail(st.toString());
    }
    live_.clear();
    final_stats_ = m_->stats();
    Status st = m_->checkInvariants();
    if (!st.isOk()) return fail(st.toString());
    const KvCacheStats s = m_->stats();
    if (s.primary.used != 0 || s.secondary.used != 0)
      return fail("blocks still referenced after all sequences ended");
    if (s.primary.free + s.primary.reclaimable != s.primary.total) return fail("primary blocks leaked");
    if (!cfg_.enable_block_reuse && s.primary.free != s.primary.total)
      return fail("cached blocks without reuse");
    // Everything can be taken again.
    std::vector<TokenId> all(static_cast<size_t>(np_) * T_, 9);
    auto r = m_->addSequence(next_id_++, all);
    if (!r.isOk() || r->status != KvAllocStatus::kOk) return fail("could not reclaim the whole primary pool");
    if (m_->stats().primary.used != np_) return fail("whole-pool request does not hold every block");
    st = m_->checkInvariants();
    if (!st.isOk()) return fail(st.toString());
  }

  uint64_t seed_;
  std::mt19937_64 rng_;
  int32_t T_ = 4, np_ = 8, ns_ = 0;
  KvCacheConfig cfg_;
  std::optional<int32_t> window_;  // the manager's sliding window (KvCacheManagerOptions::attention_window)
  ManualKvClock clock_;
  std::unique_ptr<SimKvMemory> mem_;
  std::unique_ptr<KvCacheManager> m_;
  std::vector<Live> live_;
  std::vector<Live> paused_;
  std::vector<std::vector<TokenId>> history_;
  SequenceId next_id_ = 1;
  bool failed_ = false;
  bool greedy_ = false;  // decode tokens follow from the prefix (identical requests stay identical)
  uint64_t evictions_checked_ = 0;
  KvCacheStats final_stats_;
};

TEST(KvPropertyTest, RandomOperationsKeepEveryInvariant) {
  // LLMRT_KV_PROPERTY_SEEDS=N runs N seeds instead of the default (longer soak runs).
  int seeds = 24;
  if (const char* env = std::getenv("LLMRT_KV_PROPERTY_SEEDS")) seeds = std::max(1, std::atoi(env));
  constexpr int kOpsPerSeed = 2500;
  uint64_t total_ops = 0, evictions = 0, reused = 0, partial = 0, offloads = 0, onboards = 0, failures = 0;
  for (uint64_t seed = 1; seed <= static_cast<uint64_t>(seeds); ++seed) {
    PropertyRun run(seed);
    const int done = run.run(kOpsPerSeed);
    total_ops += done;
    ASSERT_EQ(done, kOpsPerSeed) << run.describe();
    evictions += run.evictionsChecked();
    const KvCacheStats& s = run.finalStats();
    reused += s.reused_tokens;
    partial += s.partial_reused_blocks;
    offloads += s.offloaded_blocks;
    onboards += s.onboarded_blocks;
    failures += s.allocation_failures;
  }
  EXPECT_EQ(total_ops, static_cast<uint64_t>(seeds) * kOpsPerSeed);
  // The random workload must actually exercise every mechanism.
  if (seeds >= 24) {
    EXPECT_GT(evictions, 1000u);
    EXPECT_GT(reused, 1000u);
    EXPECT_GT(partial, 100u);
    EXPECT_GT(offloads, 100u);
    EXPECT_GT(onboards, 10u);
    EXPECT_GT(failures, 100u);
  }
  RecordProperty("operations", std::to_string(total_ops));
  RecordProperty("evictions_checked", std::to_string(evictions));
  RecordProperty("reused_tokens", std::to_string(reused));
  RecordProperty("partial_reused_blocks", std::to_string(partial));
  RecordProperty("offloads", std::to_string(offloads));
  RecordProperty("onboards", std::to_string(onboards));
  RecordProperty("allocation_failures", std::to_string(failures));
}

}  // namespace
}  // namespace llmrt
