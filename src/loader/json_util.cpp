#include "loader/json_util.h"

#include <cmath>
#include <limits>

namespace llmrt::detail {

Result<Json> parseJson(std::string_view text, std::string_view where) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const std::exception& e) {
    std::string m(where);
    m += ": invalid JSON: ";
    m += e.what();
    return parseError(std::move(m));
  }
}

std::string jsonForMessage(const Json& v) {
  std::string s;
  try {
    s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  } catch (const std::exception&) {
    s = "<unprintable>";
  }
  constexpr size_t kMax = 80;
  if (s.size() > kMax) {
    s.resize(kMax);
    s += "...";
  }
  return s;
}

std::optional<int64_t> asInt64(const Json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  return std::nullopt;
}

namespace {

const Json* lookup(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

}  // namespace

Status readInt(const Json& obj, std::string_view key, std::string_view field, std::string_view where,
               std::optional<int64_t>* out) {
  const Json* v = lookup(obj, key);
  if (v == nullptr) return Status::ok();
  std::optional<int64_t> i = asInt64(*v);
  if (!i) return fieldError(where, field, jsonForMessage(*v), "an integer");
  *out = *i;
  return Status::ok();
}

Status readDouble(const Json& obj, std::string_view key, std::string_view field, std::string_view where,
                  std::optional<double>* out) {
  const Json* v = lookup(obj, key);
  if (v == nullptr) return Status::ok();
  if (!v->is_number()) return fieldError(where, field, jsonForMessage(*v), "a number");
  const double d = v->get<double>();
  if (!std::isfinite(d)) return fieldError(where, field, jsonForMessage(*v), "a finite number");
  *out = d;
  return Status::ok();
}

Status readBool(const Json& obj, std::string_view key, std::string_view field, std::string_view where,
                std::optional<bool>* out) {
  const Json* v = lookup(obj, key);
  if (v == nullptr) return Status::ok();
  if (!v->is_boolean()) return fieldError(where, field, jsonForMessage(*v), "true or false");
  *out = v->get<bool>();
  return Status::ok();
}

Status readString(const Json& obj, std::string_view key, std::string_view field, std::string_view where,
                  std::optional<std::string>* out) {
  const Json* v = lookup(obj, key);
  if (v == nullptr) return Status::ok();
  if (!v->is_string()) return fieldError(where, field, jsonForMessage(*v), "a string");
  *out = v->get<std::string>();
  return Status::ok();
}

Status readIntOrIntList(const Json& obj, std::string_view key, std::string_view field, std::string_view where,
                        std::optional<std::vector<int64_t>>* out) {
  const Json* v = lookup(obj, key);
  if (v == nullptr) return Status::ok();
  std::vector<int64_t> ids;
  if (std::optional<int64_t> i = asInt64(*v)) {
    ids.push_back(*i);
  } else if (v->is_array()) {
    for (const Json& e : *v) {
      std::optional<int64_t> ei = asInt64(e);
      if (!ei) return fieldError(where, field, jsonForMessage(*v), "an integer or a list of integers");
      ids.push_back(*ei);
    }
  } else {
    return fieldError(where, field, jsonForMessage(*v), "an integer or a list of integers");
  }
  *out = std::move(ids);
  return Status::ok();
}

}  // namespace llmrt::detail
