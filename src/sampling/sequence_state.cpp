#include "sampling/sequence_state.h"

#include <atomic>
#include <chrono>
#include <random>

namespace llmrt {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t entropySeed() {
  uint64_t s = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  try {
    std::random_device rd;
    s ^= (static_cast<uint64_t>(rd()) << 32) ^ rd();
  } catch (...) {
    // No entropy device: the clock alone still gives distinct seeds per process.
  }
  return s;
}

size_t slotOf(int32_t token, size_t mask) {
  uint32_t x = static_cast<uint32_t>(token) * 0x9E3779B1u;
  return (x ^ (x >> 16)) & mask;
}

}  // namespace

uint64_t requestSeed(const SamplingParams& params) {
  if (params.seed) return *params.seed;
  static std::atomic<uint64_t> counter{entropySeed()};
  return splitmix64(counter.fetch_add(0x9E3779B97F4A7C15ull, std::memory_order_relaxed));
}

SequenceSamplingState::SequenceSamplingState(const SamplingParams& params, std::span<const int32_t> prompt,
                                             uint64_t seed, uint32_t sample_index)
    : seed_(seed),
      sample_index_(sample_index),
      track_prompt_(params.usesRepetitionPenalty()),
      track_output_(params.usesPenalties()) {
  if (track_output_) rehash(64);
  if (track_prompt_) {
    for (int32_t t : prompt) findOrInsert(t).in_prompt = true;
  }
}

void SequenceSamplingState::accept(int32_t token) {
  acceptPending();
  resolvePending(token);
}

void SequenceSamplingState::resolvePending(int32_t token) {
  if (track_output_) ++findOrInsert(token).generated_count;
}

int32_t SequenceSamplingState::generatedCount(int32_t token) const {
  const int32_t i = find(token);
  return i < 0 ? 0 : stats_[static_cast<size_t>(i)].generated_count;
}

int32_t SequenceSamplingState::find(int32_t token) const {
  if (slots_.empty()) return -1;
  const size_t mask = slots_.size() - 1;
  for (size_t s = slotOf(token, mask);; s = (s + 1) & mask) {
    const int32_t i = slots_[s];
    if (i < 0) return -1;
    if (stats_[static_cast<size_t>(i)].token == token) return i;
  }
}

SequenceSamplingState::TokenStat& SequenceSamplingState::findOrInsert(int32_t token) {
  if ((stats_.size() + 1) * 2 > slots_.size()) rehash(slots_.empty() ? 64 : slots_.size() * 2);
  const size_t mask = slots_.size() - 1;
  size_t s = slotOf(token, mask);
  for (;; s = (s + 1) & mask) {
    const int32_t i = slots_[s];
    if (i < 0) break;
    if (stats_[static_cast<size_t>(i)].token == token) return stats_[static_cast<size_t>(i)];
  }
  slots_[s] = static_cast<int32_t>(stats_.size());
  stats_.push_back({token, 0, false});
  return stats_.back();
}

void SequenceSamplingState::rehash(size_t capacity) {
  slots_.assign(capacity, -1);
  const size_t mask = capacity - 1;
  for (size_t i = 0; i < stats_.size(); ++i) {
    size_t s = slotOf(stats_[i].token, mask);
    while (slots_[s] >= 0) s = (s + 1) & mask;
    slots_[s] = static_cast<int32_t>(i);
  }
}

std::vector<SequenceSamplingState> makeSequenceStates(const SamplingParams& params,
                                                      std::span<const int32_t> prompt) {
  const uint64_t seed = requestSeed(params);
  const int n = params.n < 1 ? 1 : params.n;
  std::vector<SequenceSamplingState> states;
  states.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) states.emplace_back(params, prompt, seed, static_cast<uint32_t>(i));
  return states;
}

}  // namespace llmrt
