// Token-level stop checks, run by the runtime after each accepted token
// (stop strings are matched separately, on detokenized text).
#pragma once

#include <cstdint>
#include <span>

#include "llmrt/finish_reason.h"
#include "llmrt/sampling_params.h"
#include "sampling/sequence_state.h"

namespace llmrt {

// kStop when `token` is one of params.stop_token_ids, or one of `eos_ids`
// (the model's EOS ids) unless params.ignore_eos, and `num_generated` (tokens
// generated so far, this one included) >= params.min_tokens; else kNone.
FinishReason checkStopToken(int32_t token, int64_t num_generated, const SamplingParams& params,
                            std::span<const int32_t> eos_ids);

// kLength when `num_generated` >= params.max_tokens; else kNone.
FinishReason checkLength(int64_t num_generated, const SamplingParams& params);

// After state.accept(token): checkStopToken, then checkLength, so a stop token
// sampled at the last allowed step reports kStop (as vLLM does).
FinishReason checkFinish(int32_t token, const SequenceSamplingState& state, const SamplingParams& params,
                         std::span<const int32_t> eos_ids);
// The same with the count given (overlapped steps: the state already counts later tokens).
FinishReason checkFinish(int32_t token, int64_t num_generated, const SamplingParams& params,
                         std::span<const int32_t> eos_ids);

}  // namespace llmrt
