#include "runtime/device_sampling.h"

#include <algorithm>

#include "core/logging.h"
#include "sampling/logits_processors.h"

namespace llmrt {

static_assert(RowSample::kMaxTop == SamplingParams::kMaxLogprobs, "a row returns every logprob a request may ask for");

void DeviceSamplingBatch::clear() {
  rows_.clear();
  penalties_.clear();
  masked_.clear();
}

void DeviceSamplingBatch::add(const SamplingParams& params, const SequenceSamplingState& state,
                              std::span<const int32_t> eos_ids, int32_t pending_src) {
  RowSampling r;
  r.greedy = params.isGreedy();
  r.temperature = params.temperature;
  r.top_k = params.top_k;
  r.top_p = params.top_p;
  r.min_p = params.min_p;
  r.repetition_penalty = params.repetition_penalty;
  r.presence_penalty = params.presence_penalty;
  r.frequency_penalty = params.frequency_penalty;
  r.seed = state.seed();
  r.step = static_cast<uint64_t>(state.numGenerated());
  r.sample_index = state.sampleIndex();
  r.num_logprobs = params.logprobs ? *params.logprobs : -1;
  r.penalty_begin = static_cast<int32_t>(penalties_.size());
  if (penaltiesApply(params, state)) {
    for (const SequenceSamplingState::TokenStat& s : state.tokenStats())
      penalties_.push_back(PenaltyToken{s.token, s.generated_count, s.in_prompt ? 1 : 0, 0.0f});
  }
  // logit_bias: on the token's penalty entry when it has one, else an entry of its own (listed
  // tokens are distinct; a bias of 0 adds nothing).
  if (params.usesLogitBias()) {
    const size_t listed = penalties_.size();
    for (const auto& [id, bias] : params.logit_bias) {
      bool found = false;
      for (size_t j = static_cast<size_t>(r.penalty_begin); j < listed && !found; ++j)
        if (penalties_[j].token == id) {
          penalties_[j].bias = bias;
          found = true;
        }
      if (!found) penalties_.push_back(PenaltyToken{id, 0, 0, bias});
    }
  }
  r.penalty_count = static_cast<int32_t>(penalties_.size()) - r.penalty_begin;
  r.pending_src = params.usesPenalties() ? pending_src : -1;  // (only the penalties read the pending token's id)
  r.mask_begin = static_cast<int32_t>(masked_.size());
  if (minTokensMaskApplies(params, state, eos_ids)) appendMinTokensMaskIds(params, eos_ids, masked_);
  r.mask_count = static_cast<int32_t>(masked_.size()) - r.mask_begin;
  rows_.push_back(r);
}

Status DeviceSamplingBatch::run(Backend& backend, const TensorView& logits) {
  results_.assign(rows_.size(), RowSample{});
  return backend.sampleRows(logits, rows_, penalties_, masked_, results_);
}

Result<uint64_t> DeviceSamplingBatch::start(Backend& backend, const TensorView& logits) {
  return backend.sampleRowsAsync(logits, rows_, penalties_, masked_);
}

Status DeviceSamplingBatch::wait(Backend& backend, uint64_t ticket) {
  results_.assign(rows_.size(), RowSample{});
  return backend.waitSamples(ticket, results_);
}

Result<SampleResult> DeviceSamplingBatch::result(size_t i, int64_t vocab) const {
  const RowSample& o = results_.at(i);
  if (o.error == RowSample::kBadValue) return badLogitError(static_cast<size_t>(o.bad_index), o.bad_value);
  if (o.error == RowSample::kAllMasked) return allMaskedError();
  if (o.error != RowSample::kOk || o.token < 0 || o.token >= vocab)
    return internalError(strprintf("sampleRows: row %zu came back with token %d (error %d)", i, o.token, o.error));
  SampleResult r;
  r.token = o.token;
  if (rows_[i].num_logprobs >= 0) {
    r.logprob = o.logprob;
    r.rank = o.rank;
    r.num_top = std::min(o.num_top, SamplingParams::kMaxLogprobs);
    for (int j = 0; j < r.num_top; ++j)
      r.top[static_cast<size_t>(j)] = TokenLogprob{o.top_ids[j], o.top_logprobs[j]};
  }
  return r;
}

}  // namespace llmrt
