// Typed, non-throwing access to nlohmann::json values for the loader's file
// parsers. nlohmann throws; everything here catches at the call site and turns
// problems into Status values whose messages name the file, the field, the bad
// value and what was expected (fieldError). Parsing (with a nesting limit) and
// the bounded snippets of values in messages come from core/json.h: nothing in
// the loader prints a whole JSON value, which may be nested 75,000 deep.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "llmrt/status.h"

namespace llmrt::detail {

using llmrt::Json;

// core's parseJson, with the error message kept to one line of at most about
// 600 bytes: nlohmann's messages quote the token read, which may be a megabyte
// long, and a JSON path may hold keys with newlines in them.
Result<Json> parseInputJson(std::string_view text, std::string_view where, const JsonParseLimits& limits);

// Field readers for HF's config files (core/json.h's typed access with HF's leniency: a JSON
// null means "not set"). Each looks up `key` in the object `obj`; `field` is the name used in
// messages (e.g. "rope_scaling.factor"). An absent key or a JSON null leaves `*out` untouched
// and returns OK; a value of the wrong type or out of range returns jsonValueError.
Status readInt(const Json& obj, std::string_view key, std::string_view field, std::string_view where,
               std::optional<int64_t>* out);
Status readDouble(const Json& obj, std::string_view key, std::string_view field, std::string_view where,
                  std::optional<double>* out);
Status readBool(const Json& obj, std::string_view key, std::string_view field, std::string_view where,
                std::optional<bool>* out);
Status readString(const Json& obj, std::string_view key, std::string_view field, std::string_view where,
                  std::optional<std::string>* out);
// An int or a list of ints (token ids: bos/eos); null or absent leaves `*out` untouched.
Status readIntOrIntList(const Json& obj, std::string_view key, std::string_view field, std::string_view where,
                        std::optional<std::vector<int64_t>>* out);

}  // namespace llmrt::detail
