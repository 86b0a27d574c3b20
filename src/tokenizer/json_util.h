// Helpers for reading tokenizer.json with nlohmann::json: typed field access
// whose errors name the source file, the JSON path and the offending value.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "llmrt/status.h"

namespace llmrt::tok {

using Json = nlohmann::json;

// Where a value sits: the file (or other source) and the JSON path in it.
struct JsonPath {
  std::string source;
  std::string path;  // "model.merges[3]"; empty for the root

  JsonPath key(std::string_view k) const;
  JsonPath index(size_t i) const;
};

// A compact rendering of `v` for error messages (long values are cut).
std::string jsonSnippet(const Json& v);

// "<source>: field '<path>' has value <v>; expected <expected>"
Status jsonError(const JsonPath& at, const Json& v, std::string_view expected);
Status jsonMissing(const JsonPath& at, std::string_view expected);

// Null and absent fields read as missing (nullptr).
const Json* jsonFind(const Json& obj, std::string_view key);

Result<std::string> jsonString(const Json& obj, std::string_view key, const JsonPath& at,
                               std::optional<std::string> fallback = std::nullopt);
Result<bool> jsonBool(const Json& obj, std::string_view key, const JsonPath& at,
                      std::optional<bool> fallback = std::nullopt);
Result<int64_t> jsonInt(const Json& obj, std::string_view key, const JsonPath& at,
                        std::optional<int64_t> fallback = std::nullopt);
// A string field that must hold exactly one character (a code point).
Result<char32_t> jsonChar(const Json& obj, std::string_view key, const JsonPath& at,
                          std::optional<char32_t> fallback = std::nullopt);

}  // namespace llmrt::tok
