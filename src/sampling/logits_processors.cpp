#include "sampling/logits_processors.h"

#include <limits>

namespace llmrt {
namespace {

void maskIds(std::span<float> logits, std::span<const int32_t> ids) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int32_t id : ids) {
    if (id >= 0 && static_cast<size_t>(id) < logits.size()) logits[static_cast<size_t>(id)] = kNegInf;
  }
}

}  // namespace

bool penaltiesApply(const SamplingParams& params, const SequenceSamplingState& state) {
  return params.usesPenalties() && !state.tokenStats().empty();
}

bool minTokensMaskApplies(const SamplingParams& params, const SequenceSamplingState& state,
                          std::span<const int32_t> eos_ids) {
  if (state.numGenerated() >= params.min_tokens) return false;
  return !params.stop_token_ids.empty() || (!params.ignore_eos && !eos_ids.empty());
}

void applyPenalties(std::span<float> logits, const SamplingParams& params,
                    const SequenceSamplingState& state) {
  const bool repetition = params.usesRepetitionPenalty();
  const float rep = params.repetition_penalty;
  const float freq = params.frequency_penalty;
  const float pres = params.presence_penalty;
  const bool output = params.usesOutputPenalties();
  for (const SequenceSamplingState::TokenStat& s : state.tokenStats()) {
    if (s.token < 0 || static_cast<size_t>(s.token) >= logits.size()) continue;
    float& x = logits[static_cast<size_t>(s.token)];
    if (repetition && (s.in_prompt || s.generated_count > 0)) x = x > 0.0f ? x / rep : x * rep;
    if (output && s.generated_count > 0) x -= freq * static_cast<float>(s.generated_count) + pres;
  }
}

void applyLogitBias(std::span<float> logits, const SamplingParams& params) {
  for (const auto& [id, bias] : params.logit_bias)
    if (id >= 0 && static_cast<size_t>(id) < logits.size()) logits[static_cast<size_t>(id)] += bias;
}

void applyMinTokensMask(std::span<float> logits, const SamplingParams& params,
                        const SequenceSamplingState& state, std::span<const int32_t> eos_ids) {
  if (state.numGenerated() >= params.min_tokens) return;
  maskIds(logits, params.stop_token_ids);
  if (!params.ignore_eos) maskIds(logits, eos_ids);
}

void appendMinTokensMaskIds(const SamplingParams& params, std::span<const int32_t> eos_ids,
                            std::vector<int32_t>& out) {
  out.insert(out.end(), params.stop_token_ids.begin(), params.stop_token_ids.end());
  if (!params.ignore_eos) out.insert(out.end(), eos_ids.begin(), eos_ids.end());
}

}  // namespace llmrt
