#include "tokenizer/json_util.h"

#include "tokenizer/unicode.h"

namespace llmrt::tok {

JsonPath JsonPath::key(std::string_view k) const {
  return {source, path.empty() ? std::string(k) : path + "." + std::string(k)};
}

JsonPath JsonPath::index(size_t i) const { return {source, path + "[" + std::to_string(i) + "]"}; }

std::string jsonSnippet(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > 120) s = s.substr(0, 117) + "...";
  return s;
}

Status jsonError(const JsonPath& at, const Json& v, std::string_view expected) {
  return Status(StatusCode::kParseError, fieldError(at.source, at.path, jsonSnippet(v), expected).message());
}

Status jsonMissing(const JsonPath& at, std::string_view expected) {
  return Status(StatusCode::kParseError,
                at.source + ": field '" + at.path + "' is missing; expected " + std::string(expected));
}

const Json* jsonFind(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

Result<std::string> jsonString(const Json& obj, std::string_view key, const JsonPath& at,
                               std::optional<std::string> fallback) {
  const Json* v = jsonFind(obj, key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return jsonMissing(at.key(key), "a string");
  }
  if (!v->is_string()) return jsonError(at.key(key), *v, "a string");
  return v->get<std::string>();
}

Result<bool> jsonBool(const Json& obj, std::string_view key, const JsonPath& at,
                      std::optional<bool> fallback) {
  const Json* v = jsonFind(obj, key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return jsonMissing(at.key(key), "true or false");
  }
  if (!v->is_boolean()) return jsonError(at.key(key), *v, "true or false");
  return v->get<bool>();
}

Result<int64_t> jsonInt(const Json& obj, std::string_view key, const JsonPath& at,
                        std::optional<int64_t> fallback) {
  const Json* v = jsonFind(obj, key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return jsonMissing(at.key(key), "an integer");
  }
  if (!v->is_number_integer()) return jsonError(at.key(key), *v, "an integer");
  return v->get<int64_t>();
}

Result<char32_t> jsonChar(const Json& obj, std::string_view key, const JsonPath& at,
                          std::optional<char32_t> fallback) {
  const Json* v = jsonFind(obj, key);
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
