// JSON reading for every parser in llmrt (config.json, generation_config.json,
// safetensors headers, tokenizer.json, JSON-lines requests): parsing with a
// nesting limit and optional duplicate-key rejection, and a bounded snippet of
// a value for error messages. nlohmann::json parses iteratively but prints
// recursively, so a value nested 75,000 deep must never be dumped whole: use
// jsonSnippet, which stops at a depth and a length.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "llmrt/status.h"
#include "llmrt/util.h"

namespace llmrt {

using Json = nlohmann::json;

struct JsonParseLimits {
  // Deepest nesting of arrays / objects accepted (the root object is depth 1).
  int max_depth = 128;
  // Reject an object that names the same key twice (HF tokenizers and safetensors do).
  bool reject_duplicate_keys = true;
};

// Parses `text`. Errors (ParseError) start with `where`: malformed JSON (with
// nlohmann's position), nesting beyond limits.max_depth, or a duplicate key
// (named with its JSON path).
Result<Json> parseJson(std::string_view text, std::string_view where, const JsonParseLimits& limits = {});

// printableText (declared in llmrt/util.h for front ends, implemented here): text from a file or a
// user made safe for a one-line message, bounded.

// ---- typed access (every JSON reader of llmrt: config files, tokenizer.json, requests) ----
// The member `key` of `obj`, or null when `obj` is not an object or has no such key.
const Json* jsonMember(const Json& obj, std::string_view key);
// The same, but a JSON null also reads as absent (HF's files write null for "not set").
const Json* jsonMemberNonNull(const Json& obj, std::string_view key);
// A JSON integer's value (no fraction or exponent, not a bool) when it fits the type; else nullopt.
std::optional<int64_t> jsonInt64(const Json& v);
std::optional<uint64_t> jsonUint64(const Json& v);
// A JSON number (integer or not) as a double when it is finite; else nullopt.
std::optional<double> jsonFiniteNumber(const Json& v);
// "<where>: field '<field>' has value <bounded snippet of v>; expected <expected>", with `code`.
Status jsonValueError(std::string_view where, std::string_view field, const Json& v, std::string_view expected,
                      StatusCode code = StatusCode::kInvalidArgument);

// A printable form of `v` for messages: compact JSON, strings quoted, invalid
// UTF-8 replaced, nesting beyond 8 levels shown as [...] / {...}, and the
// whole cut to about `max_chars` characters ("..." appended). Never recurses
// deeper than 8 levels, whatever the value.
std::string jsonSnippet(const Json& v, size_t max_chars = 120);

}  // namespace llmrt
