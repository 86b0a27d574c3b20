// In-place logits processors that run before temperature (steps 1-2 of the
// semantics in llmrt/sampling_params.h). They touch only the few ids they
// concern, never the whole vocabulary.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "llmrt/sampling_params.h"
#include "sampling/sequence_state.h"

namespace llmrt {

// Whether applyPenalties / applyMinTokensMask would change any logit.
bool penaltiesApply(const SamplingParams& params, const SequenceSamplingState& state);
bool minTokensMaskApplies(const SamplingParams& params, const SequenceSamplingState& state,
                          std::span<const int32_t> eos_ids);

// Repetition penalty over the prompt and generated ids (x > 0 ? x / p : x * p),
// then frequency and presence penalties over generated ids
// (x -= frequency * count + presence). Ids outside `logits` are ignored.
void applyPenalties(std::span<float> logits, const SamplingParams& params,
                    const SequenceSamplingState& state);

// Adds params.logit_bias to the listed ids (after applyPenalties). Ids outside `logits` are ignored.
void applyLogitBias(std::span<float> logits, const SamplingParams& params);

// While state.numGenerated() < params.min_tokens: sets the logits of
// params.stop_token_ids and of `eos_ids` (unless params.ignore_eos) to -inf.
void applyMinTokensMask(std::span<float> logits, const SamplingParams& params,
                        const SequenceSamplingState& state, std::span<const int32_t> eos_ids);

// The ids applyMinTokensMask sets to -inf while the mask applies, appended to `out`
// (for sampling that runs elsewhere, e.g. on a backend).
void appendMinTokensMaskIds(const SamplingParams& params, std::span<const int32_t> eos_ids,
                            std::vector<int32_t>& out);

}  // namespace llmrt
