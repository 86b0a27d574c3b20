// Microbenchmarks of the KV cache manager (Google Benchmark). The goal is
// < 5 us of manager time per sequence per decode step, so scheduling never
// shows next to a GPU step. The world: T = 32, ~100k cached blocks in the radix
// tree (prompts sharing 16 system prompts), 256 live sequences, a primary pool
// tight enough that new blocks come from evicting cached ones.
//
//   llmrt_kv_bench                      all benchmarks
//   llmrt_kv_bench --benchmark_filter=DecodeStep
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace llmrt {
namespace {

constexpr int32_t kT = 32;
constexpr int32_t kLive = 256;
constexpr int32_t kCachedTarget = 100'000;
constexpr int32_t kSystemPrompts = 16;
constexpr int32_t kSystemBlocks = 8;      // 256-token system prompts
constexpr int32_t kPromptTokens = 1024;   // live prompts: system prompt + 768 own tokens
constexpr int32_t kPopulateBlocks = 100;  // cached prompts: 3200 tokens

class CountingCopier final : public KvBlockCopier {
 public:
  Status copyBlocks(std::span<const KvBlockCopy> copies) override {
    copies_ += copies.size();
    return Status::ok();
  }
  uint64_t copies_ = 0;
};

struct LiveSeq {
  SequenceId id = 0;
  int32_t len = 0;
  int32_t target = 0;
};

class World {
 public:
  explicit World(int32_t secondary_blocks) : rng_(42) {
    KvCacheConfig c;
    c.tokens_per_block = kT;
    if (secondary_blocks > 0) c.host_cache_size = 1;
    KvCacheManagerOptions o;
    o.copier = &copier_;
    // Cached blocks + what the live sequences hold at most (~2000 tokens each).
    const int32_t primary = kCachedTarget + kLive * (2048 / kT);
    m_ = std::move(KvCacheManager::create(c, primary, secondary_blocks, o)).value();
    for (int s = 0; s < kSystemPrompts; ++s) system_.push_back(randomTokens(kSystemBlocks * kT));
    // Populate the tree.
    while (m_->stats().primary.cached < kCachedTarget) {
      auto p = prompt(kPopulateBlocks * kT);
      const SequenceId id = next_id_++;
      auto r = m_->addSequence(id, p);
      if (!r.isOk() || r->status != KvAllocStatus::kOk) std::abort();  // the pool is sized for this
      (void)m_->markComputed(id, static_cast<int32_t>(p.size()) - r->num_reused_tokens);
      (void)m_->removeSequence(id);
      populated_.push_back(std::move(p));
    }
    (void)m_->flushCopies();
    // Live prompts for the decode benchmark, generated up front.
    for (int i = 0; i < 4096; ++i) live_prompts_.push_back(prompt(kPromptTokens));
    for (int i = 0; i < kLive; ++i) startLive();
    (void)m_->flushCopies();
  }

  std::vector<TokenId> randomTokens(int32_t n) {
    std::vector<TokenId> v(n);
    for (auto& t : v) t = static_cast<TokenId>(rng_() % 32000);
    return v;
  }
  std::vector<TokenId> prompt(int32_t n) {
    std::vector<TokenId> p = system_[rng_() % kSystemPrompts];
    auto tail = randomTokens(n - static_cast<int32_t>(p.size()));
    p.insert(p.end(), tail.begin(), tail.end());
    return p;
  }

  void startLive() {
    LiveSeq s;
    s.id = next_id_++;
    const auto& p = live_prompts_[next_prompt_++ % live_prompts_.size()];
    AddSequenceOptions o;
    o.max_new_tokens = 1024;
    auto r = m_->addSequence(s.id, p, o);
    if (!r.isOk() || r->status != KvAllocStatus::kOk) {
      ++failures_;
      return;
    }
    (void)m_->markComputed(s.id, kPromptTokens - r->num_reused_tokens);
    s.len = kPromptTokens;
    s.target = kPromptTokens + 64 + static_cast<int32_t>(rng_() % 960);
    live_.push_back(s);
  }

  // One decode step for every live sequence; finished ones are replaced.
  void decodeStep() {
    for (size_t i = 0; i < live_.size(); ++i) {
      LiveSeq& s = live_[i];
      token_ = token_ * 1103515245u + 12345u;
      auto r = m_->appendToken(s.id, static_cast<TokenId>((token_ >> 8) % 32000));
      if (!r.isOk() || *r != KvAllocStatus::kOk) {
        ++failures_;
        continue;
      }
      (void)m_->markComputed(s.id, 1);
      if (++s.len >= s.target) {
        (void)m_->removeSequence(s.id);
        live_[i] = live_.back();
        live_.pop_back();
        startLive();
        --i;  // the replacement sits at the end; the swapped-in one is revisited
      }
    }
    (void)m_->flushCopies();
  }

  KvCacheManager& m() { return *m_; }
  const std::vector<std::vector<TokenId>>& populated() const { return populated_; }
  std::mt19937_64& rng() { return rng_; }
  SequenceId nextId() { return next_id_++; }
  uint64_t failures() const { return failures_; }
  uint64_t copies() const { return copier_.copies_; }

 private:
  std::mt19937_64 rng_;
  CountingCopier copier_;
  std::unique_ptr<KvCacheManager> m_;
  std::vector<std::vector<TokenId>> system_;
  std::vector<std::vector<TokenId>> populated_;
  std::vector<std::vector<TokenId>> live_prompts_;
  std::vector<LiveSeq> live_;
  size_t next_prompt_ = 0;
  SequenceId next_id_ = 1;
  uint64_t failures_ = 0;
  uint32_t token_ = 1;
};

// One world per use, built on first use: decode churn evicts the cached prompts
// the lookup benchmarks need, so they get their own.
enum class WorldKind { kDecode, kDecodeOffload, kLookup };
World& world(WorldKind kind) {
  static std::unique_ptr<World> worlds[3];
  auto& w = worlds[static_cast<int>(kind)];
  if (!w) w = std::make_unique<World>(kind == WorldKind::kDecodeOffload ? 50'000 : 0);
  return *w;
}

void addCounters(benchmark::State& state, World& w) {
  const KvCacheStats s = w.m().stats();
  state.counters["cached_blocks"] = s.primary.cached;
  state.counters["evicted"] = static_cast<double>(s.evicted_primary_blocks);
  state.counters["offloaded"] = static_cast<double>(s.offloaded_blocks);
  state.counters["alloc_failures"] = static_cast<double>(w.failures());
}

// The scheduler's per-step work: append + markComputed for 256 sequences, with
// finished sequences removed and new ones added (prefix lookup, reuse, prefill
// allocation) as they come. Reported per sequence per step.
void BM_DecodeStep(benchmark::State& state) {
  World& w = world(state.range(0) > 0 ? WorldKind::kDecodeOffload : WorldKind::kDecode);
  for (auto _ : state) w.decodeStep();
  state.counters["per_seq_step"] =
      benchmark::Counter(kLive, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  addCounters(state, w);
}
BENCHMARK(BM_DecodeStep)->Arg(0)->Arg(50'000)->ArgName("host_blocks")->Unit(benchmark::kMicrosecond);

// One sequence's whole life next to 256 live ones: add (1024-token prompt,
// 256 reused), prefill commit, 128 decode steps, remove.
void BM_AddExtendFree(benchmark::State& state) {
  World& w = world(WorldKind::kDecode);
  std::vector<std::vector<TokenId>> prompts;
  for (int i = 0; i < 64; ++i) prompts.push_back(w.prompt(kPromptTokens));
  size_t k = 0;
  uint32_t tok = 7;
  for (auto _ : state) {
    const SequenceId id = w.nextId();
    auto r = w.m().addSequence(id, prompts[k++ % prompts.size()]);
    (void)w.m().markComputed(id, kPromptTokens - r->num_reused_tokens);
    for (int i = 0; i < 128; ++i) {
      tok = tok * 1103515245u + 12345u;
      (void)w.m().appendToken(id, static_cast<TokenId>((tok >> 8) % 32000));
      (void)w.m().markComputed(id, 1);
    }
    (void)w.m().removeSequence(id);
    (void)w.m().flushCopies();
  }
  state.counters["per_step"] =
      benchmark::Counter(129, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  addCounters(state, w);
}
BENCHMARK(BM_AddExtendFree)->Unit(benchmark::kMicrosecond);

// Prefix lookup of a cached 3200-token prompt (100 blocks) in the 100k-block tree.
void BM_PrefixLookupHit(benchmark::State& state) {
  World& w = world(WorldKind::kLookup);
  const auto& cached = w.populated();
  size_t k = cached.size() - 1;
  int64_t blocks = 0;
  for (auto _ : state) {
    PrefixMatch r = w.m().lookupPrefix(cached[k]);
    blocks += r.num_full_blocks;
    benchmark::DoNotOptimize(r);
    k = k == 0 ? cached.size() - 1 : k - 1;
  }
  state.counters["blocks_per_lookup"] = static_cast<double>(blocks) / static_cast<double>(state.iterations());
  state.counters["per_block"] = benchmark::Counter(static_cast<double>(blocks),
                                                   benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_PrefixLookupHit)->Unit(benchmark::kMicrosecond);

// A 1024-token prompt that shares only its system prompt: 8 hits, then a miss
// and a partial-match scan of the system prompt's children.
void BM_PrefixLookupMiss(benchmark::State& state) {
  World& w = world(WorldKind::kLookup);
  std::vector<std::vector<TokenId>> prompts;
  for (int i = 0; i < 64; ++i) prompts.push_back(w.prompt(kPromptTokens));
  size_t k = 0;
  for (auto _ : state) {
    PrefixMatch r = w.m().lookupPrefix(prompts[k++ % prompts.size()]);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_PrefixLookupMiss)->Unit(benchmark::kMicrosecond);

// addSequence of a cached 3200-token prompt (99 shared blocks, 31 tokens copied
// from the 100th) and its removal: what a multi-turn follow-up costs.
void BM_AddRemoveReused(benchmark::State& state) {
  World& w = world(WorldKind::kLookup);
  const auto& cached = w.populated();
  size_t k = cached.size() - 1;
  int64_t reused = 0;
  for (auto _ : state) {
    const SequenceId id = w.nextId();
    auto r = w.m().addSequence(id, cached[k]);
    reused += r->num_reused_tokens;
    (void)w.m().removeSequence(id);
    (void)w.m().flushCopies();
    k = k == 0 ? cached.size() - 1 : k - 1;
  }
  state.counters["reused_tokens"] = static_cast<double>(reused) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_AddRemoveReused)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace llmrt

BENCHMARK_MAIN();
