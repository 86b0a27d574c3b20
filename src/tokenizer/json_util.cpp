#include "tokenizer/json_util.h"

#include <cstdio>
#include <vector>

#include "tokenizer/unicode.h"

namespace llmrt::tok {

JsonPath::JsonPath(std::string source) : source_(std::make_shared<const std::string>(std::move(source))) {}

JsonPath JsonPath::key(std::string_view k) const {
  auto n = std::make_shared<Node>();
  n->parent = node_;
  n->key = std::string(k);
  n->depth = depth() + 1;
  return JsonPath(source_, std::move(n));
}

JsonPath JsonPath::index(size_t i) const {
  auto n = std::make_shared<Node>();
  n->parent = node_;
  n->index = i;
  n->is_index = true;
  n->depth = depth() + 1;
  return JsonPath(source_, std::move(n));
}

std::string JsonPath::path() const {
  if (!node_) return "<root>";
  std::vector<const Node*> chain;
  for (const Node* n = node_.get(); n != nullptr; n = n->parent.get()) chain.push_back(n);
  std::string p;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const Node* n = *it;
    if (n->is_index) {
      p += '[';
      p += std::to_string(n->index);
      p += ']';
    } else {
      if (!p.empty()) p += '.';
      p += boundedText(n->key);
    }
  }
  return p;
}

Status jsonError(const JsonPath& at, const Json& v, std::string_view expected) {
  return jsonValueError(at.source(), at.path(), v, expected, StatusCode::kParseError);
}

Status jsonMissing(const JsonPath& at, std::string_view expected) {
  return Status(StatusCode::kParseError,
                at.source() + ": field '" + at.path() + "' is missing; expected " + std::string(expected));
}

Status jsonFieldError(const JsonPath& at, std::string_view what) {
  return Status(StatusCode::kParseError, at.source() + ": field '" + at.path() + "' " + std::string(what));
}

Status nestingError(const JsonPath& at, std::string_view component) {
  return jsonFieldError(at, "nests Sequence " + std::string(component) + " more than " +
                                std::to_string(kMaxSequenceNesting) + " levels deep; expected at most " +
                                std::to_string(kMaxSequenceNesting) + " nested Sequences");
}

Result<std::string> jsonString(const Json& obj, std::string_view key, const JsonPath& at,
                               std::optional<std::string> fallback) {
  const Json* v = jsonMemberNonNull(obj, key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return jsonMissing(at.key(key), "a string");
  }
  if (!v->is_string()) return jsonError(at.key(key), *v, "a string");
  return v->get<std::string>();
}

Result<bool> jsonBool(const Json& obj, std::string_view key, const JsonPath& at,
                      std::optional<bool> fallback) {
  const Json* v = jsonMemberNonNull(obj, key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return jsonMissing(at.key(key), "true or false");
  }
  if (!v->is_boolean()) return jsonError(at.key(key), *v, "true or false");
  return v->get<bool>();
}

Result<int64_t> jsonInt(const Json& obj, std::string_view key, const JsonPath& at,
                        std::optional<int64_t> fallback) {
  const Json* v = jsonMemberNonNull(obj, key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return jsonMissing(at.key(key), "an integer");
  }
  const std::optional<int64_t> i = jsonInt64(*v);
  if (!i) return jsonError(at.key(key), *v, "an integer that fits in 64 bits");
  return *i;
}

Result<char32_t> jsonChar(const Json& obj, std::string_view key, const JsonPath& at,
                          std::optional<char32_t> fallback) {
  const Json* v = jsonMemberNonNull(obj, key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return jsonMissing(at.key(key), "a one-character string");
  }
  if (v->is_string()) {
    const std::string& s = v->get_ref<const std::string&>();
    if (!s.empty() && isValidUtf8(s)) {
      size_t i = 0;
      char32_t c = decodeUtf8(s, i);
      if (i == s.size()) return c;
    }
  }
  return jsonError(at.key(key), *v, "a one-character string");
}

}  // namespace llmrt::tok
