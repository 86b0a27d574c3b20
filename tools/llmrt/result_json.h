// The one JSON schema of a request's result, shared by `llmrt generate --json` and the rows of
// batch mode (`--input-file`), named as TensorRT-LLM's RequestOutput / CompletionOutput:
//
//   {"prompt_token_ids": [1, 2, 3],
//    "outputs": [{"index": 0, "text": "...", "token_ids": [4, 5], "finish_reason": "length",
//                 "logprobs": [{"token": 4, "logprob": -0.1, "top": [[4, -0.1], [9, -2.3]]}]}],
//    "cached_tokens": 0}
//
// "logprobs" appears only when asked for. Batch rows add "index" (the input line's request
// number); a failed request is {"index": i, "error": "...", "finish_reason": "error"}.
// `--json` adds "timing" {time_to_first_token_ms, total_ms, decode_tokens_per_s, steps}.
#pragma once

#include <nlohmann/json.hpp>

#include "llmrt/llm.h"

namespace llmrt::cli {

nlohmann::json completionJson(const CompletionOutput& c);
nlohmann::json resultJson(const RequestOutput& r);
// One line of JSON (invalid UTF-8 in texts replaced by U+FFFD) and a newline.
std::string jsonLine(const nlohmann::json& j);

}  // namespace llmrt::cli
