#include "sampling/stop_criteria.h"

#include <algorithm>

namespace llmrt {

FinishReason checkStopToken(int32_t token, int64_t num_generated, const SamplingParams& params,
                            std::span<const int32_t> eos_ids) {
  if (num_generated < params.min_tokens) return FinishReason::kNone;
  const auto& ids = params.stop_token_ids;
  if (std::find(ids.begin(), ids.end(), token) != ids.end()) return FinishReason::kStop;
  if (!params.ignore_eos && std::find(eos_ids.begin(), eos_ids.end(), token) != eos_ids.end()) {
    return FinishReason::kStop;
  }
  return FinishReason::kNone;
}

FinishReason checkLength(int64_t num_generated, const SamplingParams& params) {
  return num_generated >= params.max_tokens ? FinishReason::kLength : FinishReason::kNone;
}

FinishReason checkFinish(int32_t token, int64_t num_generated, const SamplingParams& params,
                         std::span<const int32_t> eos_ids) {
  const FinishReason r = checkStopToken(token, num_generated, params, eos_ids);
  if (r != FinishReason::kNone) return r;
  return checkLength(num_generated, params);
}

FinishReason checkFinish(int32_t token, const SequenceSamplingState& state, const SamplingParams& params,
                         std::span<const int32_t> eos_ids) {
  return checkFinish(token, state.numGenerated(), params, eos_ids);
}

}  // namespace llmrt
