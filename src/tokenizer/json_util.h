// Helpers for reading tokenizer.json with nlohmann::json: typed field access
// whose errors name the source file, the JSON path and the offending value
// (a bounded snippet from core/json.h: nothing here prints a whole value).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/json.h"
#include "llmrt/status.h"

namespace llmrt::tok {

using llmrt::Json;

// How deep Sequence normalizers / pre-tokenizers / post-processors / decoders
// may nest. HF's own files nest them at most two deep; the parsers recurse once
// per level, so the limit also bounds their stack use.
inline constexpr int kMaxSequenceNesting = 32;

// Where a value sits: the source (file) and the JSON path in it. A path is a
// chain of links to its parent (shared, so a child may outlive the parent
// object it was made from): a child costs its own key, never a copy of the
// parent's path, and the path string is only built for a message.
class JsonPath {
 public:
  explicit JsonPath(std::string source);

  JsonPath key(std::string_view k) const;
  JsonPath index(size_t i) const;

  const std::string& source() const { return *source_; }
  // "model.merges[3]"; "<root>" for the root. Each key is cut to 64 bytes and
  // control characters are escaped, so the path stays one bounded line.
  std::string path() const;
  // Number of keys / indices from the root.
  size_t depth() const { return node_ ? node_->depth : 0; }

 private:
  struct Node {
    std::shared_ptr<const Node> parent;
    std::string key;  // empty for an index
    size_t index = 0;
    bool is_index = false;
    size_t depth = 1;
  };
  JsonPath(std::shared_ptr<const std::string> source, std::shared_ptr<const Node> node)
      : source_(std::move(source)), node_(std::move(node)) {}

  std::shared_ptr<const std::string> source_;
  std::shared_ptr<const Node> node_;  // null for the root
};

// "<source>: field '<path>' has value <snippet of v>; expected <expected>"
Status jsonError(const JsonPath& at, const Json& v, std::string_view expected);
Status jsonMissing(const JsonPath& at, std::string_view expected);
// "<source>: field '<path>' <what>" (kParseError), for errors without one value to show.
Status jsonFieldError(const JsonPath& at, std::string_view what);
// The error for a Sequence nested more than kMaxSequenceNesting deep at `at`.
Status nestingError(const JsonPath& at, std::string_view component);

// Null and absent fields read as missing (nullptr): core's jsonMemberNonNull.
inline const Json* jsonFind(const Json& obj, std::string_view key) { return jsonMemberNonNull(obj, key); }

Result<std::string> jsonString(const Json& obj, std::string_view key, const JsonPath& at,
                               std::optional<std::string> fallback = std::nullopt);
Result<bool> jsonBool(const Json& obj, std::string_view key, const JsonPath& at,
                      std::optional<bool> fallback = std::nullopt);
Result<int64_t> jsonInt(const Json& obj, std::string_view key, const JsonPath& at,
                        std::optional<int64_t> fallback = std::nullopt);
// A string field that must hold exactly one character (a code point).
Result<char32_t> jsonChar(const Json& obj, std::string_view key, const JsonPath& at,
                          std::optional<char32_t> fallback = std::nullopt);

// A file's string made safe for a one-line message (core's printableText, 64 bytes by default).
inline std::string boundedText(std::string_view s, size_t max_bytes = 64) { return printableText(s, max_bytes); }

}  // namespace llmrt::tok
