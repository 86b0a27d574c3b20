// SequenceSamplingState: what the sampler remembers about one sequence across
// decode steps: how many tokens it has generated (the RNG step and the
// min_tokens / max_tokens counter), its seed stream (seed, sample index), and,
// when the request uses penalties, the distinct token ids of the prompt and
// generated text with their generated counts. Memory is O(distinct tokens),
// never O(vocabulary).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "llmrt/sampling_params.h"

namespace llmrt {

// The seed a request samples with: params.seed, or, without one, a fresh
// random 64-bit seed (thread-safe; call once per request and share it among
// the request's n sequences).
uint64_t requestSeed(const SamplingParams& params);

class SequenceSamplingState {
 public:
  // One distinct token id seen in the prompt or generated text.
  struct TokenStat {
    int32_t token;
    int32_t generated_count;  // occurrences in the generated text
    bool in_prompt;
  };

  // A state with no penalty tracking, seed 0, sample index 0.
  SequenceSamplingState() = default;
  // Sequence `sample_index` (0..n-1) of a request. The prompt's ids are recorded
  // only when `params` uses repetition_penalty; generated ids only when it uses
  // any penalty.
  SequenceSamplingState(const SamplingParams& params, std::span<const int32_t> prompt, uint64_t seed,
                        uint32_t sample_index = 0);

  // Records a token appended to the sequence; advances the step.
  void accept(int32_t token);
  // Overlapped steps: advances the step for a token that is still being sampled (the RNG step
  // and min_tokens count include it, as they would once it is accepted), then records its id
  // once known. accept(t) == acceptPending(); resolvePending(t).
  void acceptPending() { ++num_generated_; }
  void resolvePending(int32_t token);

  int64_t numGenerated() const { return num_generated_; }
  uint64_t seed() const { return seed_; }
  uint32_t sampleIndex() const { return sample_index_; }
  bool tracksPrompt() const { return track_prompt_; }
  bool tracksOutput() const { return track_output_; }

  // Distinct tracked ids in first-seen order (empty when nothing is tracked).
  std::span<const TokenStat> tokenStats() const { return stats_; }
  // Generated count of `token` (0 when not tracked or never generated).
  int32_t generatedCount(int32_t token) const;
  // Whether `token` appeared in the (tracked) prompt or generated text.
  bool seen(int32_t token) const { return find(token) >= 0; }

 private:
  int32_t find(int32_t token) const;       // index into stats_, or -1
  TokenStat& findOrInsert(int32_t token);  // inserts {token, 0, false}
  void rehash(size_t capacity);

  uint64_t seed_ = 0;
  uint32_t sample_index_ = 0;
  int64_t num_generated_ = 0;
  bool track_prompt_ = false;
  bool track_output_ = false;
  std::vector<TokenStat> stats_;
  std::vector<int32_t> slots_;  // open addressing: index into stats_ or -1; size is a power of 2
};

// The n states of one request: sample indices 0..n-1, all with requestSeed(params).
std::vector<SequenceSamplingState> makeSequenceStates(const SamplingParams& params,
                                                      std::span<const int32_t> prompt);

}  // namespace llmrt
