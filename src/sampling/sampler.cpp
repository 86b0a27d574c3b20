#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/argmax.h"
#include "core/logging.h"
#include "core/philox.h"
#include "sampling/kernels.h"
#include "sampling/logits_processors.h"

namespace llmrt {
namespace {

using Candidate = Sampler::Candidate;

constexpr float kInf = std::numeric_limits<float>::infinity();

// The token order used by every truncation: logit descending, then id ascending.
inline bool before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Top-k alternatives through sorted insertion; k <= kMaxLogprobs so shifting is cheap.
struct TopList {
  std::array<Candidate, SamplingParams::kMaxLogprobs> items;
  int capacity = 0;
  int size = 0;

  void offer(float logit, int32_t id) {
    if (size == capacity && !(logit > items[static_cast<size_t>(size - 1)].logit)) return;
    int pos = size < capacity ? size++ : size - 1;
    // Earlier ids win ties, and ids arrive in ascending order, so move past equal logits.
    while (pos > 0 && items[static_cast<size_t>(pos - 1)].logit < logit) {
      items[static_cast<size_t>(pos)] = items[static_cast<size_t>(pos - 1)];
      --pos;
    }
    items[static_cast<size_t>(pos)] = {logit, 0.0f, id};
  }
};

// The smallest prefix of `c` (in `before` order) whose prob mass reaches
// `target`: a quickselect weighted by mass, O(n) expected. Reorders `c`; on
// return c[0, result) is that prefix (unordered). Keeps at least one token.
size_t topPPrefix(Candidate* c, size_t n, double target) {
  size_t lo = 0, hi = n;
  double cum = 0.0;  // mass of c[0, lo), all before c[lo, hi)
  while (hi - lo > 32) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(c + lo, c + mid, c + hi, before);
    double mass = 0.0;
    for (size_t j = lo; j <= mid; ++j) mass += c[j].prob;
    if (cum + mass >= target) {
      hi = mid + 1;
    } else {
      cum += mass;
      lo = mid + 1;
    }
  }
  std::sort(c + lo, c + hi, before);
  for (size_t j = lo; j < hi; ++j) {
    cum += c[j].prob;
    if (cum >= target) return j + 1;
  }
  return std::max<size_t>(hi, 1);  // rounding left the mass just short: keep everything considered
}

}  // namespace

Status badLogitError(size_t index, float value) {
  return invalidArgument(strprintf("Sampler::sample: logits[%zu] is %g; expected a finite number or -inf", index,
                                   static_cast<double>(value)));
}

Status allMaskedError() { return invalidArgument("Sampler::sample: every token is masked (all logits are -inf)"); }

float Sampler::probOf(float logit) const { return detail::fastExp((logit - max_logit_) * inv_temperature_); }

Status Sampler::prepare(const float* logits, int64_t vocab, const SamplingParams& params,
                        const SequenceSamplingState& state, std::span<const int32_t> eos_ids) {
  if (logits == nullptr) return invalidArgument("Sampler::sample: logits is null");
  if (vocab <= 0 || vocab > std::numeric_limits<int32_t>::max()) {
    return invalidArgument(strprintf("Sampler::sample: vocab is %lld; expected a size in [1, 2^31)",
                                     static_cast<long long>(vocab)));
  }
  if ((params.usesRepetitionPenalty() && !state.tracksPrompt()) ||
      (params.usesOutputPenalties() && !state.tracksOutput())) {
    return failedPrecondition(
        "Sampler::sample: the SamplingParams use penalties that the SequenceSamplingState does not track "
        "(build the state from the same SamplingParams)");
  }
  if (!params.isGreedy() && !std::isfinite(params.temperature)) {
    return invalidArgument(strprintf("Sampler::sample: temperature is %g; expected a finite number >= 0",
                                     static_cast<double>(params.temperature)));
  }
  vocab_ = vocab;
  const size_t v = static_cast<size_t>(vocab);
  probs_valid_ = false;
  explicit_ = false;
  kept_ = 0;
  w_ = logits;
  const bool penalties = penaltiesApply(params, state);
  const bool mask = minTokensMaskApplies(params, state, eos_ids);
  const bool bias = params.usesLogitBias();
  if (penalties || mask || bias) {
    if (processed_.size() < v) processed_.resize(v);
    std::memcpy(processed_.data(), logits, v * sizeof(float));
    const std::span<float> span(processed_.data(), v);
    if (penalties) applyPenalties(span, params, state);
    if (bias) applyLogitBias(span, params);
    if (mask) applyMinTokensMask(span, params, state, eos_ids);
    w_ = processed_.data();
  }

  const detail::MaxScan scan = detail::maxScan(w_, v);
  if (scan.invalid) {
    for (size_t i = 0; i < v; ++i) {
      if (!(w_[i] < kInf)) {
        return badLogitError(i, w_[i]);
      }
    }
  }
  if (scan.max == -kInf) return allMaskedError();
  max_logit_ = scan.max;
  return Status::ok();
}

int32_t Sampler::argmax() const {
  // (prepare() has refused NaN, +inf and rows with nothing finite: there is a greedy token.)
  return static_cast<int32_t>(argmaxFinite(w_, vocab_));
}

void Sampler::selectTopKHeap(size_t k) {
  // A heap whose front is the worst of the best k so far.
  candidates_.clear();
  for (size_t i = 0; i < k; ++i) {
    candidates_.push_back({w_[i], 0.0f, static_cast<int32_t>(i)});
    std::push_heap(candidates_.begin(), candidates_.end(), before);
  }
  const size_t v = static_cast<size_t>(vocab_);
  // Only a strictly larger logit displaces the front: an equal one has a higher id.
  for (size_t i = detail::firstAbove(w_, k, v, candidates_.front().logit); i < v;
       i = detail::firstAbove(w_, i + 1, v, candidates_.front().logit)) {
    std::pop_heap(candidates_.begin(), candidates_.end(), before);
    candidates_.back() = {w_[i], 0.0f, static_cast<int32_t>(i)};
    std::push_heap(candidates_.begin(), candidates_.end(), before);
  }
}

bool Sampler::collectAbove(float floor, double target) {
  candidates_.clear();
  const size_t v = static_cast<size_t>(vocab_);
  double got = 0.0;
  for (size_t i = detail::firstAbove(probs_.data(), 0, v, floor); i < v;
       i = detail::firstAbove(probs_.data(), i + 1, v, floor)) {
    if (candidates_.size() == kMaxCollected) return false;
    candidates_.push_back({w_[i], probs_[i], static_cast<int32_t>(i)});
    got += probs_[i];
  }
  return got >= target;
}

Sampler::Cut Sampler::histogramCut(bool weighted, double target) {
  const size_t v = static_cast<size_t>(vocab_);
  const float m = max_logit_;
  const float range = m - detail::minFinite(w_, v);
  const float top = static_cast<float>(kBuckets - 1);
  const float scale = range > 0.0f ? top / range : 0.0f;
  // Bucket = how far below the max, in 1/(kBuckets-1) of the finite range; -inf
  // (and, with an empty range, NaN) goes to the last bucket. Monotone in the token order.
  if (buckets_.size() < v) buckets_.resize(v);
  detail::bucketize(w_, v, m, scale, kBuckets - 1, buckets_.data());
  // Four interleaved sub-histograms, so runs of one bucket do not serialise on memory.
  hist_count_.assign(4 * kBuckets, 0);
  hist_mass_.assign(4 * kBuckets, 0.0);
  const uint16_t* bucket = buckets_.data();
  if (weighted) {
    const float* p = probs_.data();
    size_t i = 0;
    for (; i + 4 <= v; i += 4) {
      for (size_t j = 0; j < 4; ++j) {
        const size_t h = j * kBuckets + bucket[i + j];
        ++hist_count_[h];
        hist_mass_[h] += p[i + j];
      }
    }
    for (; i < v; ++i) {
      ++hist_count_[bucket[i]];
      hist_mass_[bucket[i]] += p[i];
    }
  } else {
    size_t i = 0;
    for (; i + 4 <= v; i += 4) {
      for (size_t j = 0; j < 4; ++j) ++hist_count_[j * kBuckets + bucket[i + j]];
    }
    for (; i < v; ++i) ++hist_count_[bucket[i]];
  }
  for (size_t b = 0; b < static_cast<size_t>(kBuckets); ++b) {
    for (size_t j = 1; j < 4; ++j) {
      hist_count_[b] += hist_count_[j * kBuckets + b];
      hist_mass_[b] += hist_mass_[j * kBuckets + b];
    }
  }
  double cum = 0.0;
  int32_t crossing = -1;
  for (int32_t b = 0; b < kBuckets; ++b) {
    const double weight = weighted ? hist_mass_[static_cast<size_t>(b)] : hist_count_[static_cast<size_t>(b)];
    if (hist_count_[static_cast<size_t>(b)] > 0 && cum + weight >= target) {
      crossing = b;
      break;
    }
    cum += weight;
  }
  if (crossing < 0) return {};  // rounding left the total short of target: keep everything
  candidates_.clear();
  const uint16_t want = static_cast<uint16_t>(crossing);
  for (size_t i = detail::firstEqual(bucket, 0, v, want); i < v;
       i = detail::firstEqual(bucket, i + 1, v, want)) {
    candidates_.push_back({w_[i], weighted ? probs_[i] : 0.0f, static_cast<int32_t>(i)});
  }
  const double rest = target - cum;
  const Candidate* cut = nullptr;
  if (weighted) {
    const size_t n = topPPrefix(candidates_.data(), candidates_.size(), rest);
    cut = &candidates_[0];
    for (size_t j = 1; j < n; ++j) {
      if (before(*cut, candidates_[j])) cut = &candidates_[j];
    }
  } else {
    const size_t r = std::clamp<size_t>(static_cast<size_t>(std::ceil(rest)), 1, candidates_.size());
    std::nth_element(candidates_.begin(), candidates_.begin() + static_cast<ptrdiff_t>(r - 1),
                     candidates_.end(), before);
    cut = &candidates_[r - 1];
  }
  return {true, cut->logit, cut->id};
}

void Sampler::truncate(const SamplingParams& params) {
  const size_t v = static_cast<size_t>(vocab_);
  inv_temperature_ = 1.0f / params.temperature;
  explicit_ = false;
  kept_ = 0;

  const bool top_k = params.top_k > 0 && static_cast<size_t>(params.top_k) < v;
  const bool top_p = params.top_p < 1.0f;
  double mass = 0.0;  // of the current kept set

  const size_t k = top_k ? static_cast<size_t>(params.top_k) : v;
  Cut k_cut;
  if (top_k && k <= kHeapTopK) {
    selectTopKHeap(k);
  } else if (top_k) {
    k_cut = histogramCut(false, static_cast<double>(k));
    if (k_cut.found && k <= kMaxCollected) {
      // Gather the k tokens at or before the cut: x >= cut logit, then the id test for ties.
      candidates_.clear();
      const float below = std::nextafter(k_cut.logit, -kInf);
      for (size_t i = detail::firstAbove(w_, 0, v, below); i < v;
           i = detail::firstAbove(w_, i + 1, v, below)) {
        if (w_[i] > k_cut.logit || static_cast<int32_t>(i) <= k_cut.id) {
          candidates_.push_back({w_[i], 0.0f, static_cast<int32_t>(i)});
        }
      }
    }
  }
  if (top_k && (k <= kHeapTopK || (k_cut.found && k <= kMaxCollected))) {
    for (Candidate& c : candidates_) {
      c.prob = probOf(c.logit);
      mass += c.prob;
    }
    explicit_ = true;
    kept_ = candidates_.size();
  } else {
    if (probs_.size() < v) probs_.resize(v);
    full_mass_ = detail::expStore(w_, v, max_logit_, inv_temperature_, probs_.data());
    probs_valid_ = true;
    mass = full_mass_;
    if (k_cut.found) mass = detail::maskProbs(w_, probs_.data(), v, true, k_cut.logit, k_cut.id, 0.0f);
  }

  if (top_p) {
    const double target = static_cast<double>(params.top_p) * mass;
    if (explicit_) {
      kept_ = topPPrefix(candidates_.data(), kept_, target);
    } else if (collectAbove(kCollectFloor, target)) {
      // Usual for LLM logits: the top-p set lies among a few tokens.
      explicit_ = true;
      kept_ = topPPrefix(candidates_.data(), candidates_.size(), target);
    } else {
      const Cut cut = histogramCut(true, target);
      if (cut.found) mass = detail::maskProbs(w_, probs_.data(), v, true, cut.logit, cut.id, 0.0f);
    }
  }

  if (params.min_p > 0.0f) {
    // The top token has prob exp(0) = 1, so "p >= min_p * p_max" is "p >= min_p".
    const float min_prob = std::min(params.min_p, 1.0f);
    if (explicit_) {
      const auto end =
          std::remove_if(candidates_.begin(), candidates_.begin() + static_cast<ptrdiff_t>(kept_),
                         [&](const Candidate& c) { return c.prob < min_prob; });
      kept_ = static_cast<size_t>(end - candidates_.begin());
    } else {
      mass = detail::maskProbs(w_, probs_.data(), v, false, 0.0f, 0, min_prob);
    }
  }

  if (explicit_) {
    std::sort(candidates_.begin(), candidates_.begin() + static_cast<ptrdiff_t>(kept_),
              [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
  } else {
    kept_mass_ = mass;
  }
}

int32_t Sampler::pick(double u) {
  // Inverse CDF in ascending id order: the first token whose cumulative mass exceeds u * total.
  if (!explicit_) {
    return static_cast<int32_t>(
        detail::inverseCdf(probs_.data(), static_cast<size_t>(vocab_), u * kept_mass_));
  }
  double total = 0.0;
  for (size_t j = 0; j < kept_; ++j) total += candidates_[j].prob;
  const double target = u * total;
  double cum = 0.0;
  int32_t last_positive = -1;
  for (size_t j = 0; j < kept_; ++j) {
    const Candidate& c = candidates_[j];
    if (c.prob <= 0.0f) continue;
    last_positive = c.id;
    cum += c.prob;
    if (cum > target) return c.id;
  }
  return last_positive;  // rounding can leave cum a hair below target
}

void Sampler::fillLogprobs(const SamplingParams& params, SampleResult& result) {
  const size_t v = static_cast<size_t>(vocab_);
  const float m = max_logit_;
  // probs_ was exp(w - max) before truncation when the temperature is 1.
  const double z = probs_valid_ && inv_temperature_ == 1.0f ? full_mass_ : detail::expSum(w_, v, m);
  const float log_z = static_cast<float>(std::log(z));
  const float chosen = w_[result.token];
  result.logprob = (chosen - m) - log_z;

  result.rank = static_cast<int32_t>(detail::countGreater(w_, v, chosen) + 1);
  TopList top;
  top.capacity = *params.logprobs;
  size_t i = 0;
  for (; i < v && top.size < top.capacity; ++i) top.offer(w_[i], static_cast<int32_t>(i));
  if (top.capacity > 0) {
    // Once full, only a strictly larger logit enters (equal ones have higher ids).
    for (i = detail::firstAbove(w_, i, v, top.items[static_cast<size_t>(top.size - 1)].logit); i < v;
         i = detail::firstAbove(w_, i + 1, v, top.items[static_cast<size_t>(top.size - 1)].logit)) {
      top.offer(w_[i], static_cast<int32_t>(i));
    }
  }
  result.num_top = top.size;
  for (int j = 0; j < top.size; ++j) {
    const Candidate& c = top.items[static_cast<size_t>(j)];
    result.top[static_cast<size_t>(j)] = {c.id, (c.logit - m) - log_z};
  }
}

Result<SampleResult> Sampler::sample(const float* logits, int64_t vocab, const SamplingParams& params,
                                     const SequenceSamplingState& state, std::span<const int32_t> eos_ids) {
  LLMRT_RETURN_IF_ERROR(prepare(logits, vocab, params, state, eos_ids));
  SampleResult result;
  if (params.isGreedy()) {
    result.token = argmax();
  } else {
    truncate(params);
    result.token =
        pick(philoxUniform(state.seed(), static_cast<uint64_t>(state.numGenerated()), state.sampleIndex()));
  }
  if (result.token < 0 || result.token >= vocab) {
    return internalError(strprintf("Sampler::sample: no token could be drawn (got %d)", result.token));
  }
  if (params.logprobs) {
    if (*params.logprobs < 0 || *params.logprobs > SamplingParams::kMaxLogprobs) {
      return invalidArgument(strprintf("Sampler::sample: logprobs is %d; expected [0, %d]", *params.logprobs,
                                       SamplingParams::kMaxLogprobs));
    }
    fillLogprobs(params, result);
  }
  return result;
}

Result<std::vector<TokenProb>> Sampler::distribution(const float* logits, int64_t vocab,
                                                     const SamplingParams& params,
                                                     const SequenceSamplingState& state,
                                                     std::span<const int32_t> eos_ids) {
  LLMRT_RETURN_IF_ERROR(prepare(logits, vocab, params, state, eos_ids));
  std::vector<TokenProb> out;
  if (params.isGreedy()) {
    out.push_back({argmax(), 1.0});
    return out;
  }
  truncate(params);
  double total = 0.0;
  if (explicit_) {
    for (size_t j = 0; j < kept_; ++j) {
      const Candidate& c = candidates_[j];
      if (c.prob > 0.0f) out.push_back({c.id, static_cast<double>(c.prob)});
      total += c.prob;
    }
  } else {
    for (size_t i = 0; i < static_cast<size_t>(vocab_); ++i) {
      if (probs_[i] > 0.0f) out.push_back({static_cast<int32_t>(i), static_cast<double>(probs_[i])});
      total += probs_[i];
    }
  }
  for (TokenProb& t : out) t.prob /= total;
  return out;
}

}  // namespace llmrt
