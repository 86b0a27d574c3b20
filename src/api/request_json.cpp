// Strict reading of JSON requests (llmrt/request_json.h).
#include "llmrt/request_json.h"

#include <cmath>
#include <cstdio>

#include "core/json.h"

namespace llmrt {
namespace {

constexpr int32_t kMaxInt32 = std::numeric_limits<int32_t>::max();
constexpr double kFloatMax = static_cast<double>(std::numeric_limits<float>::max());

std::string numText(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

std::string integerRange(int64_t min, int64_t max) {
  return "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

std::string unsignedRange(uint64_t min, uint64_t max) {
  return "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

std::string numberRange(const JsonNumberRange& r) {
  const bool no_min = r.min <= -kFloatMax, no_max = r.max >= kFloatMax;
  if (no_min && no_max) return "a finite number";
  if (no_max) return std::string("a finite number ") + (r.min_exclusive ? "> " : ">= ") + numText(r.min);
  if (no_min) return std::string("a number ") + (r.max_exclusive ? "< " : "<= ") + numText(r.max);
  return std::string("a number in ") + (r.min_exclusive ? "(" : "[") + numText(r.min) + ", " +
         numText(r.max) + (r.max_exclusive ? ")" : "]");
}

// A key as it appears in messages: as it is when plain, else made printable and cut short, so a
// message stays on one line whatever the key holds.
std::string keyText(std::string_view key) { return printableText(key, 64); }

// The value of an integer JSON value when it is one within [min, max].
std::optional<int64_t> signedIn(const Json& v, int64_t min, int64_t max) {
  const std::optional<int64_t> s = jsonInt64(v);
  return s && *s >= min && *s <= max ? s : std::nullopt;
}

std::optional<uint64_t> unsignedIn(const Json& v, uint64_t min, uint64_t max) {
  const std::optional<uint64_t> u = jsonUint64(v);
  return u && *u >= min && *u <= max ? u : std::nullopt;
}

std::optional<double> numberIn(const Json& v, const JsonNumberRange& r) {
  const std::optional<double> d = jsonFiniteNumber(v);
  if (!d) return std::nullopt;
  if (r.min_exclusive ? !(*d > r.min) : !(*d >= r.min)) return std::nullopt;
  if (r.max_exclusive ? !(*d < r.max) : !(*d <= r.max)) return std::nullopt;
  return d;
}

// A parser's message made one line and cut to kMaxRequestErrorChars.
Status boundedMessage(const Status& s) { return Status(s.code(), printableText(s.message(), kMaxRequestErrorChars)); }

}  // namespace

// ---- JsonFieldReader -------------------------------------------------------

JsonFieldReader::JsonFieldReader(const Json& object, std::string_view where, std::string_view path)
    : object_(object), where_(where.empty() ? "request" : where), path_(path) {}

Status JsonFieldReader::checkIsObject(std::string_view what) const {
  if (object_.is_object()) return Status::ok();
  if (path_.empty())
    return invalidArgument(where_ + ": expected " + std::string(what) + ", got " + jsonSnippet(object_, 80));
  return valueError(path_, object_, what);
}

Status JsonFieldReader::checkKeys(std::initializer_list<std::string_view> known) const {
  if (!object_.is_object()) return checkIsObject("an object");
  for (auto it = object_.begin(); it != object_.end(); ++it) {
    bool found = false;
    for (std::string_view k : known) found = found || k == it.key();
    if (found) continue;
    std::string list;
    for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    return invalidArgument(where_ + ": unknown field '" + fieldPath(keyText(it.key())) +
                           "'; expected one of " + list);
  }
  return Status::ok();
}

bool JsonFieldReader::has(std::string_view key) const { return find(key) != nullptr; }

const Json* JsonFieldReader::find(std::string_view key) const { return jsonMember(object_, key); }

std::string JsonFieldReader::fieldPath(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

Status JsonFieldReader::valueError(std::string_view field, const Json& value,
                                   std::string_view expected) const {
  return jsonValueError(where_, field, value, expected);
}

Status JsonFieldReader::readSigned(std::string_view key, int64_t min, int64_t max,
                                   std::optional<int64_t>& out) const {
  const Json* v = find(key);
  if (v == nullptr) return Status::ok();
  out = signedIn(*v, min, max);
  if (!out) return valueError(fieldPath(key), *v, integerRange(min, max));
  return Status::ok();
}

Status JsonFieldReader::readUnsigned(std::string_view key, uint64_t min, uint64_t max,
                                     std::optional<uint64_t>& out) const {
  const Json* v = find(key);
  if (v == nullptr) return Status::ok();
  out = unsignedIn(*v, min, max);
  if (!out) return valueError(fieldPath(key), *v, unsignedRange(min, max));
  return Status::ok();
}

Status JsonFieldReader::readSignedArray(std::string_view key, int64_t min, int64_t max, bool non_empty,
                                        std::optional<std::vector<int64_t>>& out) const {
  const Json* v = find(key);
  if (v == nullptr) return Status::ok();
  if (!v->is_array() || (non_empty && v->empty())) {
    return valueError(fieldPath(key), *v,
                      std::string(non_empty ? "a non-empty" : "an") + " array of integers in [" +
                          std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  std::vector<int64_t> values;
  values.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    const Json& e = (*v)[i];
    const std::optional<int64_t> x = signedIn(e, min, max);
    if (!x) return valueError(fieldPath(key) + "[" + std::to_string(i) + "]", e, integerRange(min, max));
    values.push_back(*x);
  }
  out = std::move(values);
  return Status::ok();
}

Status JsonFieldReader::readNumber(std::string_view key, double& out, const JsonNumberRange& range) const {
  const Json* v = find(key);
  if (v == nullptr) return Status::ok();
  const std::optional<double> d = numberIn(*v, range);
  if (!d) return valueError(fieldPath(key), *v, numberRange(range));
  out = *d;
  return Status::ok();
}

Status JsonFieldReader::readNumber(std::string_view key, float& out, const JsonNumberRange& range) const {
  // A float cannot hold a value beyond its range: narrow the range to it.
  JsonNumberRange r = range;
  r.min = std::max(r.min, -kFloatMax);
  r.max = std::min(r.max, kFloatMax);
  double d = out;
  LLMRT_RETURN_IF_ERROR(readNumber(key, d, r));
  out = static_cast<float>(d);
  return Status::ok();
}

Status JsonFieldReader::readBool(std::string_view key, bool& out) const {
  const Json* v = find(key);
  if (v == nullptr) return Status::ok();
  if (!v->is_boolean()) return valueError(fieldPath(key), *v, "true or false");
  out = v->get<bool>();
  return Status::ok();
}

Status JsonFieldReader::readString(std::string_view key, std::string& out) const {
  const Json* v = find(key);
  if (v == nullptr) return Status::ok();
  if (!v->is_string()) return valueError(fieldPath(key), *v, "a string");
  out = v->get<std::string>();
  return Status::ok();
}

Status JsonFieldReader::readStrings(std::string_view key, std::vector<std::string>& out,
                                    bool non_empty_strings) const {
  const Json* v = find(key);
  if (v == nullptr) return Status::ok();
  const char* expected = non_empty_strings ? "a non-empty string or an array of non-empty strings"
                                           : "a string or an array of strings";
  if (v->is_string()) {
    if (non_empty_strings && v->get_ref<const std::string&>().empty())
      return valueError(fieldPath(key), *v, expected);
    out = {v->get<std::string>()};
    return Status::ok();
  }
  if (!v->is_array()) return valueError(fieldPath(key), *v, expected);
  std::vector<std::string> values;
  for (size_t i = 0; i < v->size(); ++i) {
    const Json& e = (*v)[i];
    if (!e.is_string() || (non_empty_strings && e.get_ref<const std::string&>().empty()))
      return valueError(fieldPath(key) + "[" + std::to_string(i) + "]", e,
                        non_empty_strings ? "a non-empty string" : "a string");
    values.push_back(e.get<std::string>());
  }
  out = std::move(values);
  return Status::ok();
}

// ---- Requests --------------------------------------------------------------

Result<KvCacheRetentionConfig> readKvCacheRetentionConfig(const Json& value, std::string_view where,
                                                          std::string_view path) {
  JsonFieldReader r(value, where, path);
  LLMRT_RETURN_IF_ERROR(r.checkIsObject("an object"));
  LLMRT_RETURN_IF_ERROR(
      r.checkKeys({"token_range_retention_configs", "decode_retention_priority", "decode_duration_ms"}));
  using Kv = KvCacheRetentionConfig;
  KvCacheRetentionConfig rc;
  if (const Json* ranges = r.find("token_range_retention_configs")) {
    const std::string at = r.fieldPath("token_range_retention_configs");
    if (!ranges->is_array()) return r.valueError(at, *ranges, "an array of token range objects");
    for (size_t i = 0; i < ranges->size(); ++i) {
      JsonFieldReader t((*ranges)[i], r.where(), at + "[" + std::to_string(i) + "]");
      LLMRT_RETURN_IF_ERROR(t.checkIsObject("a token range object"));
      LLMRT_RETURN_IF_ERROR(t.checkKeys({"token_start", "token_end", "priority", "duration_ms"}));
      TokenRangeRetentionConfig tr;
      LLMRT_RETURN_IF_ERROR(t.readInt("token_start", tr.token_start, 0, kMaxInt32));
      LLMRT_RETURN_IF_ERROR(t.readInt("token_end", tr.token_end, 1, kMaxInt32));
      LLMRT_RETURN_IF_ERROR(t.readInt("priority", tr.priority, Kv::kMinPriority, Kv::kMaxPriority));
      LLMRT_RETURN_IF_ERROR(t.readInt("duration_ms", tr.duration_ms, 1, kMaxRetentionDurationMs));
      rc.token_range_retention_configs.push_back(tr);
    }
  }
  LLMRT_RETURN_IF_ERROR(r.readInt("decode_retention_priority", rc.decode_retention_priority, Kv::kMinPriority,
                                  Kv::kMaxPriority));
  LLMRT_RETURN_IF_ERROR(r.readInt("decode_duration_ms", rc.decode_duration_ms, 1, kMaxRetentionDurationMs));
  return rc;
}

Result<JsonRequest> readJsonRequest(const Json& request, const SamplingParams& defaults,
                                    std::string_view where) {
  JsonFieldReader r(request, where);
  LLMRT_RETURN_IF_ERROR(r.checkIsObject("a JSON object (one request)"));
  LLMRT_RETURN_IF_ERROR(
      r.checkKeys({"prompt", "input_ids", "max_tokens", "min_tokens", "temperature", "top_k", "top_p",
                   "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty", "seed",
                   "ignore_eos", "stop", "stop_token_ids", "n", "logprobs", "kv_cache_retention_config"}));
  JsonRequest req;
  if (r.has("prompt") == r.has("input_ids"))
    return invalidArgument(r.where() + ": exactly one of 'prompt' or 'input_ids' is required");
  if (r.has("prompt")) {
    std::string text;
    LLMRT_RETURN_IF_ERROR(r.readString("prompt", text));
    req.prompt = Prompt::fromText(std::move(text));
  } else {
    std::vector<TokenId> ids;
    LLMRT_RETURN_IF_ERROR(r.readIntArray<TokenId>("input_ids", ids, 0, kMaxInt32, /*non_empty=*/true));
    req.prompt = Prompt::fromIds(std::move(ids));
  }

  SamplingParams& p = req.sampling_params;
  p = defaults;
  const JsonNumberRange non_negative{.min = 0.0};
  const JsonNumberRange positive{.min = 0.0, .min_exclusive = true};
  const JsonNumberRange penalty{.min = -SamplingParams::kMaxAbsPenalty,
                                .max = SamplingParams::kMaxAbsPenalty};
  LLMRT_RETURN_IF_ERROR(r.readInt("max_tokens", p.max_tokens, 1, kMaxInt32));
  LLMRT_RETURN_IF_ERROR(r.readInt("min_tokens", p.min_tokens, 0, kMaxInt32));
  LLMRT_RETURN_IF_ERROR(r.readNumber("temperature", p.temperature, non_negative));
  std::optional<int32_t> top_k;
  LLMRT_RETURN_IF_ERROR(r.readInt("top_k", top_k, -1, kMaxInt32));
  if (top_k) p.top_k = std::max(*top_k, 0);  // vLLM's -1 = disabled = our 0
  LLMRT_RETURN_IF_ERROR(r.readNumber("top_p", p.top_p, {.min = 0.0, .max = 1.0, .min_exclusive = true}));
  LLMRT_RETURN_IF_ERROR(r.readNumber("min_p", p.min_p, {.min = 0.0, .max = 1.0}));
  LLMRT_RETURN_IF_ERROR(r.readNumber("repetition_penalty", p.repetition_penalty, positive));
  LLMRT_RETURN_IF_ERROR(r.readNumber("presence_penalty", p.presence_penalty, penalty));
  LLMRT_RETURN_IF_ERROR(r.readNumber("frequency_penalty", p.frequency_penalty, penalty));
  std::optional<uint64_t> seed;
  LLMRT_RETURN_IF_ERROR(r.readInt("seed", seed));
  if (seed) p.seed = seed;
  LLMRT_RETURN_IF_ERROR(r.readBool("ignore_eos", p.ignore_eos));
  LLMRT_RETURN_IF_ERROR(r.readStrings("stop", p.stop, /*non_empty_strings=*/true));
  LLMRT_RETURN_IF_ERROR(r.readIntArray<int32_t>("stop_token_ids", p.stop_token_ids, 0, kMaxInt32));
  LLMRT_RETURN_IF_ERROR(r.readInt("n", p.n, 1, SamplingParams::kMaxN));
  std::optional<int> logprobs;
  LLMRT_RETURN_IF_ERROR(r.readInt("logprobs", logprobs, 0, SamplingParams::kMaxLogprobs));
  if (logprobs) p.logprobs = logprobs;

  if (const Json* rc = r.find("kv_cache_retention_config")) {
    LLMRT_ASSIGN_OR_RETURN(req.options.kv_cache_retention_config,
                           readKvCacheRetentionConfig(*rc, r.where(), "kv_cache_retention_config"));
  }
  return req;
}

Result<JsonRequest> parseJsonRequest(std::string_view text, const SamplingParams& defaults,
                                     std::string_view where) {
  const std::string at = where.empty() ? "request" : std::string(where);
  auto parsed =
      parseJson(text, at, JsonParseLimits{.max_depth = kMaxRequestJsonDepth, .reject_duplicate_keys = true});
  if (!parsed.isOk()) return boundedMessage(parsed.status());
  if (!parsed->is_object())
    return parseError(at + ": expected a JSON object (one request), got " + jsonSnippet(*parsed, 80));
  return readJsonRequest(*parsed, defaults, at);
}

Result<Json> parseJsonObject(std::string_view text, std::string_view where, int max_depth) {
  const std::string at = where.empty() ? "request" : std::string(where);
  auto parsed = parseJson(text, at, JsonParseLimits{.max_depth = max_depth, .reject_duplicate_keys = true});
  if (!parsed.isOk()) return boundedMessage(parsed.status());
  if (!parsed->is_object()) return parseError(at + ": expected a JSON object, got " + jsonSnippet(*parsed, 80));
  return std::move(*parsed);
}

Result<std::vector<JsonLineRequest>> parseJsonLinesRequests(std::string_view text,
                                                            const SamplingParams& defaults,
                                                            std::string_view name) {
  const std::string file = name.empty() ? "requests" : std::string(name);
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    return invalidArgument(file + ": NUL byte at offset " + std::to_string(nul) +
                           "; expected JSON lines (UTF-8 text)");
  std::vector<JsonLineRequest> lines;
  size_t objects = 0;
  size_t pos = 0;
  for (int lineno = 1; pos < text.size(); ++lineno) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;  // blank
    JsonLineRequest l;
    l.line = lineno;
    auto req = parseJsonRequest(line, defaults, file + ":" + std::to_string(lineno));
    if (req.isOk()) {
      l.request = std::move(req).value();
    } else {
      l.error = req.status();
    }
    if (l.error.code() != StatusCode::kParseError) ++objects;
    lines.push_back(std::move(l));
  }
  if (lines.empty()) return invalidArgument(file + ": no requests; expected one JSON object per line");
  if (objects == 0)
    return invalidArgument(file + ": not JSON lines: no line is a JSON object (one request per line); " +
                           lines[0].error.message());
  return lines;
}

}  // namespace llmrt
