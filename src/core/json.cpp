#include "core/json.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace llmrt {

namespace {

// Builds the DOM through nlohmann's SAX interface, checking the nesting depth
// and duplicate keys as it goes. (nlohmann's parser callback is not used: its
// DOM builder scans the parent container each time a child container closes,
// which is quadratic: 16,000 tensor entries in a 1 MB safetensors header took
// 30 s, and tokenizer.json's 150,000 merges pairs far longer.)
class LimitedDomBuilder {
 public:
  LimitedDomBuilder(Json& root, const JsonParseLimits& limits) : root_(root), limits_(limits) {}

  const std::string& error() const { return error_; }

  bool null() { return put(Json(nullptr)); }
  bool boolean(bool v) { return put(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return put(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return put(Json(v)); }
  bool number_float(Json::number_float_t v, const Json::string_t&) { return put(Json(v)); }
  bool string(Json::string_t& v) { return put(Json(v)); }
  bool binary(Json::binary_t& v) { return put(Json::binary(std::move(v))); }

  bool start_object(std::size_t) { return open(Json::object()); }
  bool start_array(std::size_t) { return open(Json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(Json::string_t& k) {
    Frame& f = frames_.back();
    if (limits_.reject_duplicate_keys && f.value->contains(k)) {
      f.key = k;
      error_ = "duplicate key '" + path() + "'";
      return false;
    }
    f.key = k;
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    error_ = std::string("invalid JSON: ") + e.what();
    return false;
  }

 private:
  struct Frame {
    Json* value;
    std::string key;  // objects: the key being read
  };

  // Stores `v` where the parser is: the root, the next array element or the current key's value
  // (a key given twice keeps its last value, as Python's json does).
  Json* place(Json&& v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = frames_.back();
    if (f.value->is_array()) {
      f.value->push_back(std::move(v));
      return &f.value->back();
    }
    Json& slot = (*f.value)[f.key];
    slot = std::move(v);
    return &slot;
  }
  bool put(Json&& v) {
    place(std::move(v));
    return true;
  }
  bool open(Json&& v) {
    if (static_cast<int>(frames_.size()) >= limits_.max_depth) {
      error_ = "nesting deeper than " + std::to_string(limits_.max_depth) + " levels at " + path();
      return false;
    }
    frames_.push_back({place(std::move(v)), {}});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return true;
  }

  // The JSON path of the value being read, e.g. "model.vocab" or "list[1].x", cut to about 200 characters.
  std::string path() const {
    std::string p;
    for (size_t i = 0; i < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      if (f.value->is_object()) {
        if (i + 1 < frames_.size() || !f.key.empty()) {
          if (!p.empty()) p += '.';
          p += f.key;
        }
      } else if (!f.value->empty()) {
        p += '[';
        p += std::to_string(f.value->size() - 1);
        p += ']';
      }
      if (p.size() > 200) break;
    }
    return p.empty() ? "<root>" : printableText(p, 200);
  }

  Json& root_;
  const JsonParseLimits& limits_;
  std::vector<Frame> frames_;
  std::string error_;

};

void appendSnippet(const Json& v, int depth, size_t budget, std::string& out) {
  if (out.size() > budget) return;
  switch (v.type()) {
    case Json::value_t::object: {
      if (depth >= 8) {
        out += v.empty() ? "{}" : "{...}";
        return;
      }
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (out.size() > budget) return;
        if (!first) out += ',';
        first = false;
        // Only as much of a long key as can still show.
        const size_t room = budget >= out.size() ? budget - out.size() + 4 : 4;
        const std::string& k = it.key();
        out += Json(k.size() > room ? k.substr(0, room) : k).dump(-1, ' ', false, Json::error_handler_t::replace);
        out += ':';
        appendSnippet(it.value(), depth + 1, budget, out);
      }
      out += '}';
      return;
    }
    case Json::value_t::array: {
      if (depth >= 8) {
        out += v.empty() ? "[]" : "[...]";
        return;
      }
      out += '[';
      bool first = true;
      for (const Json& e : v) {
        if (out.size() > budget) return;
        if (!first) out += ',';
        first = false;
        appendSnippet(e, depth + 1, budget, out);
      }
      out += ']';
      return;
    }
    case Json::value_t::string: {
      const std::string& s = v.get_ref<const std::string&>();
      // Only as much of a long string as can still show.
      const size_t room = budget >= out.size() ? budget - out.size() + 4 : 4;
      Json cut = s.size() > room ? Json(s.substr(0, room)) : v;
      out += cut.dump(-1, ' ', false, Json::error_handler_t::replace);
      return;
    }
    default:
      out += v.dump(-1, ' ', false, Json::error_handler_t::replace);
  }
}

}  // namespace

Result<Json> parseJson(std::string_view text, std::string_view where, const JsonParseLimits& limits) {
  Json root;
  LimitedDomBuilder builder(root, limits);
  bool ok = false;
  try {
    ok = Json::sax_parse(text.begin(), text.end(), &builder);
  } catch (const std::exception& e) {  // bad_alloc; nlohmann reports its own errors through parse_error
    return parseError(std::string(where) + ": invalid JSON: " + printableText(e.what(), 300));
  }
  // nlohmann's messages quote the token read ("last read: '...'"), which may be a megabyte long.
  if (!ok) return parseError(std::string(where) + ": " + printableText(builder.error(), 400));
  return root;
}

std::string printableText(std::string_view s, size_t max_bytes) {
  static const char* hex = "0123456789abcdef";
  auto escape = [&](std::string& out, unsigned char c) {
    out += "\\x";
    out += hex[c >> 4];
    out += hex[c & 15];
  };
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (out.size() >= max_bytes) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n' || c == '\r' || c == '\t') {
      out += c == '\n' ? "\\n" : c == '\r' ? "\\r" : "\\t";
      ++i;
      continue;
    }
    if (c < 0x20 || c == 0x7f) {
      escape(out, c);
      ++i;
      continue;
    }
    // A whole UTF-8 character (shortest form, no surrogates), else the byte escaped.
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 0x2;
    if (ok && n > 1) {
      uint32_t cp = c & (0x7F >> n);
      for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
      ok = (n == 2 && cp >= 0x80) || (n == 3 && cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) ||
           (n == 4 && cp >= 0x10000 && cp <= 0x10FFFF);
    }
    if (!ok) {
      escape(out, c);
      ++i;
      continue;
    }
    out.append(s, i, n);
    i += n;
  }
  return out;
}

const Json* jsonMember(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

const Json* jsonMemberNonNull(const Json& obj, std::string_view key) {
  const Json* v = jsonMember(obj, key);
  return v == nullptr || v->is_null() ? nullptr : v;
}

std::optional<int64_t> jsonInt64(const Json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  return std::nullopt;
}

std::optional<uint64_t> jsonUint64(const Json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) {  // (values built in code may be signed)
    const int64_t s = v.get<int64_t>();
    if (s >= 0) return static_cast<uint64_t>(s);
  }
  return std::nullopt;
}

std::optional<double> jsonFiniteNumber(const Json& v) {
  if (!v.is_number()) return std::nullopt;
  const double d = v.get<double>();
  return std::isfinite(d) ? std::optional<double>(d) : std::nullopt;
}

Status jsonValueError(std::string_view where, std::string_view field, const Json& v, std::string_view expected,
                      StatusCode code) {
  return Status(code, fieldError(where, field, jsonSnippet(v, 80), expected).message());
}

std::string jsonSnippet(const Json& v, size_t max_chars) {
  std::string out;
  appendSnippet(v, 0, max_chars, out);
  if (out.size() > max_chars) {
    out.resize(max_chars);
    out += "...";
  }
  return out;
}

}  // namespace llmrt
