// Requests as JSON objects, for front ends (the llmrt command's JSON-lines
// batch mode; an OpenAI-style server): one object becomes the Prompt,
// SamplingParams and RequestOptions of a request. Reading is strict, and the
// field readers are public so other request formats read their fields the
// same way:
//  - integers must be JSON integers (no fraction or exponent: 3, not 3.0,
//    3.9 or 3e0) within the range of the field (and so of its C++ type);
//  - numbers must be finite and within the field's range (integers allowed);
//  - booleans must be true/false, strings strings, arrays arrays;
//  - null is a wrong type like any other (leave a field out for its default);
//  - an unknown key, at any level, is an error naming it; a key given twice
//    is an error; nesting is limited to kMaxRequestJsonDepth.
// Errors are InvalidArgument (ParseError for text that is not one JSON
// object), on one line, in the form
//   "<where>: field 'kv_cache_retention_config.token_range_retention_configs[0].priority'
//    has value 100.7; expected an integer in [1, 100]".
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "llmrt/llm.h"

namespace llmrt {

// One parsed request.
struct JsonRequest {
  Prompt prompt;
  SamplingParams sampling_params;
  RequestOptions options;
};

// Deepest nesting accepted in a request's text; a request needs 4
// (request > kv_cache_retention_config > token_range_retention_configs > range).
inline constexpr int kMaxRequestJsonDepth = 16;
// Largest accepted retention duration (2^53 - 1 ms, the largest integer every
// JSON reader keeps exactly; far beyond any cache lifetime).
inline constexpr int64_t kMaxRetentionDurationMs = (int64_t{1} << 53) - 1;

// Parses `text` as one JSON request object (see readJsonRequest). Fails with
// ParseError when the text is not a JSON object (malformed, too deep, a
// duplicate key, another JSON type) and InvalidArgument for a bad field.
// Messages start with `where` (e.g. "requests.jsonl:3").
Result<JsonRequest> parseJsonRequest(std::string_view text, const SamplingParams& defaults,
                                     std::string_view where);

// Parses `text` as one JSON object for a request format of a front end (the server's bodies):
// nesting limited to `max_depth`, duplicate keys rejected. ParseError starting with `where`,
// bounded to kMaxRequestErrorChars, for malformed JSON or another JSON type.
Result<nlohmann::json> parseJsonObject(std::string_view text, std::string_view where, int max_depth = 64);

// One non-blank line of a JSON-lines request file.
struct JsonLineRequest {
  int line = 0;                        // 1-based line number in the text
  std::optional<JsonRequest> request;  // the request, when the line is a valid one
  Status error;                        // else why not (ParseError: the line is no JSON object)
};

// Largest error message a request's parse error is cut to (nlohmann's own
// messages quote the whole token, which may be a megabyte of text).
inline constexpr size_t kMaxRequestErrorChars = 400;

// Reads a JSON-lines request file's text (`name` names it in messages): one
// request object per line ("\n" or "\r\n" endings), blank lines skipped. Each
// non-blank line gives one entry, in order, with its request or its own error
// ("<name>:<line>: ..."), so one bad line does not stop the others. Fails as a
// whole (InvalidArgument) when the text holds a NUL byte (not text), has no
// non-blank line (no requests), or has no line that is a JSON object (not a
// JSON-lines file: the first line's error is quoted).
Result<std::vector<JsonLineRequest>> parseJsonLinesRequests(std::string_view text,
                                                            const SamplingParams& defaults,
                                                            std::string_view name);

// Reads a request object. Fields (every one optional except the prompt):
//   "prompt": string                 text, tokenized with special tokens added
//   "input_ids": [int, ...]          token ids in [0, 2^31), non-empty, used as they are
//                                    (exactly one of prompt / input_ids)
//   "max_tokens": int [1, 2^31)      "min_tokens": int [0, 2^31)
//   "temperature": number >= 0       "top_k": int [-1, 2^31) (-1 = 0 = disabled, as vLLM)
//   "top_p": number in (0, 1]        "min_p": number in [0, 1]
//   "repetition_penalty": number > 0
//   "presence_penalty", "frequency_penalty": number in [-2, 2]
//   "seed": int [0, 2^64)            "ignore_eos": bool
//   "stop": string or [string, ...]  (non-empty strings)
//   "stop_token_ids": [int [0, 2^31), ...]
//   "n": int [1, SamplingParams::kMaxN]
//   "logprobs": int [0, SamplingParams::kMaxLogprobs]
//   "kv_cache_retention_config": object (readKvCacheRetentionConfig)
// Fields left out keep their value from `defaults`. Checks that need the
// model (token ids against the vocabulary, min_tokens <= max_tokens after
// defaults) are left to SamplingParams::validate when the request runs.
Result<JsonRequest> readJsonRequest(const nlohmann::json& request, const SamplingParams& defaults,
                                    std::string_view where);

// Reads a KvCacheRetentionConfig object found at JSON path `path`:
//   "token_range_retention_configs": [{"token_start": int [0, 2^31) (default 0),
//       "token_end": int [1, 2^31) (default: the end of the prompt),
//       "priority": int [1, 100] (default 35),
//       "duration_ms": int [1, kMaxRetentionDurationMs] (default: none)}, ...]
//   "decode_retention_priority": int [1, 100]
//   "decode_duration_ms": int [1, kMaxRetentionDurationMs]
// Each field alone; how the ranges fit together (token_end > token_start,
// disjoint ranges) is KvCacheRetentionConfig::validate's, when the request
// runs (kept out of here so this reader needs no more than core).
Result<KvCacheRetentionConfig> readKvCacheRetentionConfig(
    const nlohmann::json& value, std::string_view where, std::string_view path = "kv_cache_retention_config");

// The allowed values of a number field.
struct JsonNumberRange {
  double min = -static_cast<double>(std::numeric_limits<float>::max());
  double max = static_cast<double>(std::numeric_limits<float>::max());
  bool min_exclusive = false;
  bool max_exclusive = false;
};

// Strict readers for the fields of one JSON object. A reader returns OK and
// leaves `out` unchanged when the key is absent; a present value of the wrong
// type or outside the range is InvalidArgument naming the field's JSON path,
// its value (bounded: jsonSnippet) and what was expected.
class JsonFieldReader {
 public:
  // `object` must outlive the reader. `where` starts every message; `path` is
  // the object's JSON path ("" for the root), prefixed to field names.
  JsonFieldReader(const nlohmann::json& object, std::string_view where, std::string_view path = "");

  // InvalidArgument unless `object` is a JSON object (named `what`, e.g. "a request object").
  Status checkIsObject(std::string_view what) const;
  // InvalidArgument for the first key not in `known`, naming it and the known keys.
  Status checkKeys(std::initializer_list<std::string_view> known) const;

  bool has(std::string_view key) const;
  // The value of `key`, or null when absent.
  const nlohmann::json* find(std::string_view key) const;
  // "<path>.<key>" (or "<key>" at the root).
  std::string fieldPath(std::string_view key) const;
  // "<where>: field '<field>' has value <snippet of value>; expected <expected>".
  Status valueError(std::string_view field, const nlohmann::json& value, std::string_view expected) const;
  const std::string& where() const { return where_; }

  template <typename Int>
  Status readInt(std::string_view key, Int& out,
                 std::type_identity_t<Int> min = std::numeric_limits<Int>::min(),
                 std::type_identity_t<Int> max = std::numeric_limits<Int>::max()) const {
    static_assert(std::is_integral_v<Int> && !std::is_same_v<Int, bool>);
    if constexpr (std::is_signed_v<Int>) {
      std::optional<int64_t> v;
      LLMRT_RETURN_IF_ERROR(readSigned(key, min, max, v));
      if (v) out = static_cast<Int>(*v);
    } else {
      std::optional<uint64_t> v;
      LLMRT_RETURN_IF_ERROR(readUnsigned(key, min, max, v));
      if (v) out = static_cast<Int>(*v);
    }
    return Status::ok();
  }
  template <typename Int>
  Status readInt(std::string_view key, std::optional<Int>& out,
                 std::type_identity_t<Int> min = std::numeric_limits<Int>::min(),
                 std::type_identity_t<Int> max = std::numeric_limits<Int>::max()) const {
    Int v{};
    if (!has(key)) return Status::ok();
    LLMRT_RETURN_IF_ERROR(readInt(key, v, min, max));
    out = v;
    return Status::ok();
  }
  // An array of integers, each in [min, max]; `non_empty` rejects [].
  template <typename Int>
  Status readIntArray(std::string_view key, std::vector<Int>& out, std::type_identity_t<Int> min,
                      std::type_identity_t<Int> max, bool non_empty = false) const {
    static_assert(std::is_integral_v<Int> && std::is_signed_v<Int>);
    std::optional<std::vector<int64_t>> v;
    LLMRT_RETURN_IF_ERROR(readSignedArray(key, min, max, non_empty, v));
    if (v) out.assign(v->begin(), v->end());
    return Status::ok();
  }
  // A finite number (JSON integer or float) in `range`, stored as float or double.
  Status readNumber(std::string_view key, float& out, const JsonNumberRange& range) const;
  Status readNumber(std::string_view key, double& out, const JsonNumberRange& range) const;
  Status readBool(std::string_view key, bool& out) const;
  Status readString(std::string_view key, std::string& out) const;
  // A string or an array of strings; `non_empty_strings` rejects "".
  Status readStrings(std::string_view key, std::vector<std::string>& out, bool non_empty_strings) const;

 private:
  Status readSigned(std::string_view key, int64_t min, int64_t max, std::optional<int64_t>& out) const;
  Status readUnsigned(std::string_view key, uint64_t min, uint64_t max, std::optional<uint64_t>& out) const;
  Status readSignedArray(std::string_view key, int64_t min, int64_t max, bool non_empty,
                         std::optional<std::vector<int64_t>>& out) const;

  const nlohmann::json& object_;
  std::string where_;
  std::string path_;
};

}  // namespace llmrt
