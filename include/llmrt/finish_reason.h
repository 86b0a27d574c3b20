// FinishReason: why a generated sequence ended, as reported to clients
// (OpenAI / vLLM "finish_reason"). kNone means "still running"; front ends
// write it as null.
#pragma once

#include <string_view>

namespace llmrt {

enum class FinishReason {
  kNone,       // not finished
  kStop,       // an EOS id, a stop token id or a stop string ended it
  kLength,     // max_tokens (or the model's context length) was reached
  kCancelled,  // the client cancelled or disconnected
  kError,      // sampling or the model failed for this sequence
};

// "none", "stop", "length", "cancelled", "error".
constexpr std::string_view toString(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
  }
  return "error";
}

// True once a sequence has ended for any reason.
constexpr bool isFinished(FinishReason reason) { return reason != FinishReason::kNone; }

}  // namespace llmrt
