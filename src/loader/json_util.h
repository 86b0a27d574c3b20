// Typed, non-throwing access to nlohmann::json values for the loader's file
// parsers. nlohmann throws; everything here catches at the call site and turns
// problems into Status values whose messages name the file, the field, the bad
// value and what was expected (fieldError).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "llmrt/status.h"

namespace llmrt::detail {

using Json = nlohmann::json;

// Parses `text` as JSON. Errors are ParseError "<where>: invalid JSON: <detail>".
Result<Json> parseJson(std::string_view text, std::string_view where);

// A short printable form of a JSON value for error messages (strings quoted,
// long values cut to about 80 characters, invalid UTF-8 replaced).
std::string jsonForMessage(const Json& v);

// Field readers. Each looks up `key` in the object `obj`; `field` is the name
// used in messages (e.g. "rope_scaling.factor"). An absent key or a JSON null
// leaves `*out` untouched and returns OK; a value of the wrong type or out of
// range returns fieldError(where, field, value, expected).
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

// The value of a JSON integer that fits in int64, or nullopt (floats, bools,
// strings and unsigned values beyond INT64_MAX are not integers here).
std::optional<int64_t> asInt64(const Json& v);

}  // namespace llmrt::detail
