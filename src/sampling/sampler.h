// Sampler: picks one sequence's next token from its logits, following the
// semantics documented in llmrt/sampling_params.h (penalties, min_tokens mask,
// logprobs, greedy / temperature, top-k, top-p, min-p, seeded draw).
//
// Cost per call is a few vectorized linear passes over the vocabulary, never a
// full sort: top-k uses a heap (k <= 256) or a logit histogram that leaves one
// bucket to order; top-p a mass-weighted quickselect over the few tokens above
// 2^-10 of the top probability, or the histogram when those do not suffice.
// Working memory lives in the Sampler and is reused, so a warm Sampler does not
// allocate. A Sampler is not thread-safe: use one per thread.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "llmrt/logprobs.h"
#include "llmrt/sampling_params.h"
#include "llmrt/status.h"
#include "sampling/sequence_state.h"

namespace llmrt {

struct SampleResult {
  int32_t token = -1;
  // Filled only when params.logprobs is set:
  float logprob = 0.0f;  // log_softmax of the processed (penalised, pre-temperature) logits at `token`
  int32_t rank = 0;      // 1 + number of tokens with a strictly larger logprob
  int32_t num_top = 0;   // min(*params.logprobs, vocab)
  // The num_top most likely tokens, logprob descending (ties: lower id first).
  std::array<TokenLogprob, SamplingParams::kMaxLogprobs> top{};

  std::span<const TokenLogprob> topLogprobs() const { return {top.data(), static_cast<size_t>(num_top)}; }
};

struct TokenProb {
  int32_t token;
  double prob;
};

// The errors sample() reports for unusable logits (also used where the sampling
// runs on a backend and the row comes back with its error).
Status badLogitError(size_t index, float value);  // a NaN or +inf at `index`
Status allMaskedError();                          // every logit is -inf

class Sampler {
 public:
  Sampler() = default;

  // Samples the next token of the sequence `state` from `logits` (`vocab` float32
  // values in host memory, not modified). `eos_ids` are the model's EOS ids
  // (generation_config's eos_token_id may be a list); ids outside [0, vocab) are ignored.
  // The step is state.numGenerated(); `state` is not changed: call
  // state.accept(result.token) once the token is appended to the sequence.
  // `params` must have passed validate(vocab) and `state` must have been built
  // from the same params.
  // Fails with InvalidArgument when logits is null, vocab <= 0, a logit is NaN or
  // +inf, or every token is masked (-inf); with FailedPrecondition when params use
  // a penalty that `state` does not track.
  Result<SampleResult> sample(const float* logits, int64_t vocab, const SamplingParams& params,
                              const SequenceSamplingState& state, std::span<const int32_t> eos_ids);

  // The renormalised distribution sample() draws from at this step: the kept
  // tokens in ascending id order with their probabilities (summing to 1). For
  // greedy params, the argmax with probability 1. For tests and debugging
  // (allocates); fails as sample() does.
  Result<std::vector<TokenProb>> distribution(const float* logits, int64_t vocab,
                                              const SamplingParams& params,
                                              const SequenceSamplingState& state,
                                              std::span<const int32_t> eos_ids);

  // A candidate token during truncation (public for the helpers in sampler.cpp).
  struct Candidate {
    float logit;
    float prob;  // exp((logit - max) / temperature), not normalised
    int32_t id;
  };

 private:
  static constexpr size_t kHeapTopK = 256;       // larger top_k goes through histogramCut
  static constexpr size_t kMaxCollected = 4096;  // most candidates kept as an explicit list
  static constexpr float kCollectFloor = 0x1.0p-10f;
  static constexpr int32_t kBuckets = 1024;

  struct Cut {
    bool found = false;
    float logit = 0.0f;
    int32_t id = 0;
  };

  // Steps 1-2 and the max / validity scan; sets w_ and max_logit_.
  Status prepare(const float* logits, int64_t vocab, const SamplingParams& params,
                 const SequenceSamplingState& state, std::span<const int32_t> eos_ids);
  // Temperature and truncation: leaves the kept set either in candidates_[0, kept_)
  // (explicit_, sorted by id) or as probs_ with dropped tokens zeroed.
  void truncate(const SamplingParams& params);
  int32_t argmax() const;  // lowest id among the maxima
  void selectTopKHeap(size_t k);
  // Tokens with prob above `floor` into candidates_; false when more than
  // kMaxCollected or when they hold less than `target` mass.
  bool collectAbove(float floor, double target);
  // The first token, in (logit desc, id asc) order, at which the cumulative
  // weight reaches `target`; weight is probs_[i] (weighted) or 1 per token.
  // Buckets tokens by logit so only one bucket needs ordering.
  Cut histogramCut(bool weighted, double target);
  int32_t pick(double u);
  void fillLogprobs(const SamplingParams& params, SampleResult& result);

  float probOf(float logit) const;

  // Per-call view of the processed logits (the input, or processed_ when changed).
  const float* w_ = nullptr;
  int64_t vocab_ = 0;
  float max_logit_ = 0.0f;
  float inv_temperature_ = 1.0f;

  bool explicit_ = false;  // kept set is candidates_[0, kept_)
  size_t kept_ = 0;
  bool probs_valid_ = false;  // probs_ holds this call's probabilities
  double full_mass_ = 0.0;    // sum of probs_ before truncation
  double kept_mass_ = 0.0;    // sum of probs_ after truncation (when !explicit_)

  std::vector<float> processed_;
  std::vector<float> probs_;
  std::vector<Candidate> candidates_;
  std::vector<uint16_t> buckets_;
  std::vector<uint32_t> hist_count_;
  std::vector<double> hist_mass_;
};

}  // namespace llmrt
