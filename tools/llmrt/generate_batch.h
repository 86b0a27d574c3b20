// `llmrt generate --input-file requests.jsonl`: batch mode.
//
// Input: a regular file of at most 1 GiB (kMaxTextFileBytes), or "-" for
// standard input (same limit), of UTF-8 JSON lines: one request object per
// line; blank lines are skipped. A request is "prompt" (text) or "input_ids"
// (ids), plus optional fields overriding the command's sampling flags —
// max_tokens, min_tokens, temperature, top_k, top_p, min_p,
// repetition_penalty, presence_penalty, frequency_penalty, seed, ignore_eos,
// stop, stop_token_ids, n, logprobs — and "kv_cache_retention_config"
// {"token_range_retention_configs": [{"token_start", "token_end", "priority",
// "duration_ms"}], "decode_retention_priority", "decode_duration_ms"}.
// Types and ranges are strict (llmrt/request_json.h): integers are JSON
// integers in the field's range (3.0 and 3.9 are errors), numbers finite,
// null is not a value, and an unknown or repeated key is an error naming it.
//
// Output: exactly one JSON line per request, in input order ("index" counts
// requests from 0, blank lines not included): the result schema of
// result_json.h plus "index",
//   {"index", "prompt_token_ids", "outputs": [{"index", "text", "token_ids",
//    "finish_reason"[, "logprobs"]}], "cached_tokens"}
// or, for a request that is malformed, invalid or fails when it runs,
//   {"index", "error": "<file>:<line>: <what is wrong>", "finish_reason": "error"}
// while every other request still runs. `--output-file F` is written
// atomically (a temporary file in F's directory renamed over F once all rows
// are written: a killed run leaves F as it was); without it, or with "-",
// rows go to standard output. F may not be the input file (compared by
// device and inode, so links count too) nor the stats file.
//
// Statistics (one JSON object: requests, failed_requests, steps, tokens,
// seconds, KV cache counters) go to `--stats-file` (written atomically),
// else to standard error as one line "llmrt: stats: {...}".
//
// Exit codes: 0 when the run completed, even when some requests failed (their
// rows say why; standard error says how many). 1 for a whole-run failure,
// with one line on standard error and no output file written: the input
// cannot be read (missing, a directory, FIFO or device, over the size limit),
// holds NUL bytes, has no requests, or has no line that is a JSON object (not
// a JSON-lines file); the engine fails; the output cannot be written.
// 2 for --output-file / --stats-file naming the input (or each other).
#pragma once

#include <string>

#include "llmrt/llm.h"

namespace llmrt::cli {

// Reads `input_file` ("-" = stdin), runs its requests on `llm` (fields not
// given take their values from `defaults`) and writes one result row per
// request to `output_file` ("" or "-" = stdout) and the statistics to
// `stats_file` ("" = stderr). Returns the process exit code (above).
int runGenerateBatch(LLM& llm, const SamplingParams& defaults, const std::string& input_file,
                     const std::string& output_file, const std::string& stats_file = "");

}  // namespace llmrt::cli
