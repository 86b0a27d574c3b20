// `llmrt generate --input-file prompts.jsonl`: batch mode. Each input line is
// one JSON object: "prompt" (text) or "input_ids" (ids), plus optional
// per-request fields overriding the command's sampling flags — max_tokens,
// min_tokens, temperature, top_k, top_p, min_p, repetition_penalty,
// presence_penalty, frequency_penalty, seed, ignore_eos, stop, stop_token_ids,
// n, logprobs — and "kv_cache_retention_config" {"token_range_retention_configs":
// [{"token_start", "token_end", "priority", "duration_ms"}], "decode_retention_priority",
// "decode_duration_ms"}. All requests run together on the executor; results are
// written as JSON lines in input order ({"index", "output_ids", "text",
// "finish_reason", "cached_tokens"}, or {"index", "error"} for a failed request),
// then one {"stats": {...}} line.
#pragma once

#include <string>

#include "llmrt/llm.h"

namespace llmrt::cli {

// Reads `input_file`, runs it on `llm` and writes `output_file` ("" = stdout).
// Returns the process exit code; a malformed line stops everything with an
// error naming the file and the line.
int runGenerateBatch(LLM& llm, const SamplingParams& defaults, const std::string& input_file,
                     const std::string& output_file);

}  // namespace llmrt::cli
