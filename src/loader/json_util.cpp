#include "loader/json_util.h"

#include <cmath>
#include <limits>

#include "core/logging.h"

namespace llmrt::detail {

Result<Json> parseInputJson(std::string_view text, std::string_view where, const JsonParseLimits& limits) {
  Result<Json> r = parseJson(text, where, limits);
  if (!r.isOk()) return Status(r.status().code(), printableText(r.status().message(), 600));
  return r;
}

Status readInt(const Json& obj, std::string_view key, std::string_view field, std::string_view where,
               std::optional<int64_t>* out) {
  const Json* v = jsonMemberNonNull(obj, key);
  if (v == nullptr) return Status::ok();
  std::optional<int64_t> i = jsonInt64(*v);
  if (!i) return jsonValueError(where, field, *v, "an integer");
  *out = *i;
  return Status::ok();
}

Status readDouble(const Json& obj, std::string_view key, std::string_view field, std::string_view where,
                  std::optional<double>* out) {
  const Json* v = jsonMemberNonNull(obj, key);
  if (v == nullptr) return Status::ok();
  if (!v->is_number()) return jsonValueError(where, field, *v, "a number");
  const std::optional<double> d = jsonFiniteNumber(*v);
  if (!d) return jsonValueError(where, field, *v, "a finite number");
  *out = *d;
  return Status::ok();
}

Status readBool(const Json& obj, std::string_view key, std::string_view field, std::string_view where,
                std::optional<bool>* out) {
  const Json* v = jsonMemberNonNull(obj, key);
  if (v == nullptr) return Status::ok();
  if (!v->is_boolean()) return jsonValueError(where, field, *v, "true or false");
  *out = v->get<bool>();
  return Status::ok();
}

Status readString(const Json& obj, std::string_view key, std::string_view field, std::string_view where,
                  std::optional<std::string>* out) {
  const Json* v = jsonMemberNonNull(obj, key);
  if (v == nullptr) return Status::ok();
  if (!v->is_string()) return jsonValueError(where, field, *v, "a string");
  *out = v->get<std::string>();
  return Status::ok();
}

Status readIntOrIntList(const Json& obj, std::string_view key, std::string_view field, std::string_view where,
                        std::optional<std::vector<int64_t>>* out) {
  const Json* v = jsonMemberNonNull(obj, key);
  if (v == nullptr) return Status::ok();
  std::vector<int64_t> ids;
  if (std::optional<int64_t> i = jsonInt64(*v)) {
    ids.push_back(*i);
  } else if (v->is_array()) {
    for (const Json& e : *v) {
      std::optional<int64_t> ei = jsonInt64(e);
      if (!ei) return jsonValueError(where, field, *v, "an integer or a list of integers");
      ids.push_back(*ei);
    }
  } else {
    return jsonValueError(where, field, *v, "an integer or a list of integers");
  }
  *out = std::move(ids);
  return Status::ok();
}

}  // namespace llmrt::detail
