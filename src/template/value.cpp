// Python semantics of template values: truthiness, equality, ordering, str/repr, json.dumps.
#include "template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace llmrt::tmpl {

void throwError(std::string kind, std::string message) {
  throw TemplateError(std::move(kind), std::move(message));
}

Value::Value(std::string s) : kind_(Kind::kString), obj_(std::make_shared<StringObj>(std::move(s))) {}
Value::Value(std::shared_ptr<const ListObj> l) : kind_(Kind::kList), obj_(std::move(l)) {}
Value::Value(std::shared_ptr<const DictObj> d) : kind_(Kind::kDict), obj_(std::move(d)) {}
Value::Value(std::shared_ptr<NamespaceObj> n) : kind_(Kind::kNamespace), obj_(std::move(n)) {}
Value::Value(std::shared_ptr<const Callable> c) : kind_(Kind::kCallable), obj_(std::move(c)) {}
Value::Value(std::shared_ptr<LoopObj> l) : kind_(Kind::kLoop), obj_(std::move(l)) {}

Value Value::undefined(std::string message) {
  Value v;
  v.obj_ = std::make_shared<UndefinedObj>(std::move(message));
  return v;
}

Value Value::list(std::vector<Value> items, bool is_tuple, bool lazy) {
  auto l = std::make_shared<ListObj>();
  int depth = 0;
  for (const Value& v : items) depth = std::max(depth, v.depth());
  if (depth + 1 > kMaxValueDepth) throwError("RuntimeError", "lists or dicts nested too deeply");
  l->depth = depth + 1;
  l->items = std::move(items);
  l->is_tuple = is_tuple;
  l->lazy = lazy;
  return Value(std::shared_ptr<const ListObj>(std::move(l)));
}

const std::string& Value::str() const { return static_cast<const StringObj*>(obj_.get())->value; }

const std::vector<Value>& Value::items() const { return listObj().items; }
bool Value::isTuple() const { return kind_ == Kind::kList && listObj().is_tuple; }
bool Value::isLazy() const { return kind_ == Kind::kList && listObj().lazy; }

std::string Value::undefinedMessage() const {
  if (kind_ == Kind::kUndefined && obj_) return static_cast<const UndefinedObj*>(obj_.get())->message;
  return "value is undefined";
}

int Value::depth() const {
  if (kind_ == Kind::kList) return listObj().depth;
  if (kind_ == Kind::kDict) return dict().depth;
  return 0;
}

const Value& emptyString() {
  static const Value kEmpty{std::string()};
  return kEmpty;
}

const Value* DictObj::find(std::string_view key) const {
  auto it = index.find(std::string(key));
  return it == index.end() ? nullptr : &entries[it->second].second;
}

const Value* DictObj::find(const Value& key) const {
  if (key.isString()) {
    auto it = index.find(key.str());
    return it == index.end() ? nullptr : &entries[it->second].second;
  }
  for (const auto& [k, v] : entries)
    if (!k.isString() && equals(k, key)) return &v;
  return nullptr;
}

void DictObj::set(Value key, Value value) {
  depth = std::max(depth, std::max(key.depth(), value.depth()) + 1);
  if (depth > kMaxValueDepth) throwError("RuntimeError", "lists or dicts nested too deeply");
  if (key.isString()) {
    auto [it, inserted] = index.try_emplace(key.str(), entries.size());
    if (!inserted) {
      entries[it->second].second = std::move(value);
      return;
    }
    entries.emplace_back(std::move(key), std::move(value));
    return;
  }
  for (auto& [k, v] : entries) {
    if (!k.isString() && equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

const Value* NamespaceObj::find(std::string_view name) const {
  for (const auto& [k, v] : attrs)
    if (k == name) return &v;
  return nullptr;
}

void NamespaceObj::set(const std::string& name, Value value) {
  for (auto& [k, v] : attrs) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  attrs.emplace_back(name, std::move(value));
}

const Value* CallArgs::get(size_t index, std::string_view name) const {
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return index < pos.size() ? &pos[index] : nullptr;
}

const char* typeName(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return v.isLazy() ? "generator" : v.isTuple() ? "tuple" : "list";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kCallable:
      return "function";
    case Kind::kLoop:
      return "LoopContext";
  }
  return "object";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return v.boolean();
    case Kind::kInt:
      return v.integer() != 0;
    case Kind::kFloat:
      return v.number() != 0.0;
    case Kind::kString:
      return !v.str().empty();
    case Kind::kList:
      return v.isLazy() || !v.items().empty();
    case Kind::kDict:
      return !v.dict().entries.empty();
    default:
      return true;
  }
}

namespace {
void checkDepth(int depth) {
  if (depth > kMaxValueDepth)
    throwError("RecursionError", "maximum recursion depth exceeded comparing or printing values");
}
bool isIntLike(const Value& v) { return v.isInt() || v.isBool(); }
}  // namespace

bool equals(const Value& a, const Value& b, int depth) {
  checkDepth(depth);
  if (a.isNumber() && b.isNumber()) {
    if (isIntLike(a) && isIntLike(b)) return a.integer() == b.integer();
    return a.number() == b.number();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.str() == b.str();
    case Kind::kList: {
      if (a.isTuple() != b.isTuple() || a.isLazy() || b.isLazy()) return a.object() == b.object();
      const auto& x = a.items();
      const auto& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equals(x[i], y[i], depth + 1)) return false;
      return true;
    }
    case Kind::kDict: {
      const auto& x = a.dict();
      const auto& y = b.dict();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* o = y.find(k);
        if (!o || !equals(v, *o, depth + 1)) return false;
      }
      return true;
    }
    default:
      return a.object() == b.object();
  }
}

int compare(const Value& a, const Value& b, int depth) {
  checkDepth(depth);
  if (a.isNumber() && b.isNumber()) {
    if (isIntLike(a) && isIntLike(b))
      return a.integer() < b.integer() ? -1 : a.integer() > b.integer() ? 1 : 0;
    double x = a.number(), y = b.number();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.isString() && b.isString()) {
    int c = a.str().compare(b.str());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.isList() && b.isList() && a.isTuple() == b.isTuple()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i], depth + 1)) continue;
      return compare(x[i], y[i], depth + 1);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  typeError(std::string("'<' not supported between instances of '") + typeName(a) + "' and '" + typeName(b) +
            "'");
}

std::string formatFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci = [-]D[.DDD]e(+|-)XX
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t epos = sci.find('e');
  int exp = std::atoi(sci.c_str() + epos + 1);
  std::string digits;
  for (size_t i = 0; i < epos; ++i)
    if (sci[i] != '.') digits += sci[i];
  std::string out = neg ? "-" : "";
  int decpt = exp + 1;  // value = 0.DIGITS * 10^decpt
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<size_t>(-decpt), '0');
      out += digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out += digits;
      out.append(static_cast<size_t>(decpt) - digits.size(), '0');
      out += ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(decpt));
      out += '.';
      out += digits.substr(static_cast<size_t>(decpt));
    }
    return out;
  }
  out += digits[0];
  if (digits.size() > 1) {
    out += '.';
    out += digits.substr(1);
  }
  char e[16];
  std::snprintf(e, sizeof(e), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return out + e;
}

void appendStrRepr(std::string& out, std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char q = (has_single && !has_double) ? '"' : '\'';
  out += q;
  std::vector<uint32_t> cps = decodeUtf8(s);
  for (uint32_t c : cps) {
    if (c == static_cast<uint32_t>(q) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0)) {
      char b[16];
      std::snprintf(b, sizeof(b), "\\x%02x", c);
      out += b;
    } else if (c >= 0xd800 && c < 0xe000) {
      char b[16];
      std::snprintf(b, sizeof(b), "\\u%04x", c);
      out += b;
    } else {
      appendUtf8(out, c);
    }
  }
  out += q;
}

void appendRepr(std::string& out, const Value& v, int depth) {
  checkDepth(depth);
  switch (v.kind()) {
    case Kind::kUndefined:
      out += "Undefined";
      return;
    case Kind::kString:
      appendStrRepr(out, v.str());
      return;
    case Kind::kList: {
      const auto& items = v.items();
      if (v.isLazy()) {
        out += "<generator object>";
        return;
      }
      out += v.isTuple() ? '(' : '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        appendRepr(out, items[i], depth + 1);
      }
      if (v.isTuple() && items.size() == 1) out += ',';
      out += v.isTuple() ? ')' : ']';
      return;
    }
    case Kind::kDict: {
      out += '{';
      bool first = true;
      for (const auto& [k, x] : v.dict().entries) {
        if (!first) out += ", ";
        first = false;
        appendRepr(out, k, depth + 1);
        out += ": ";
        appendRepr(out, x, depth + 1);
      }
      out += '}';
      return;
    }
    case Kind::kNamespace: {
      out += "<Namespace {";
      bool first = true;
      for (const auto& [k, x] : v.ns().attrs) {
        if (!first) out += ", ";
        first = false;
        appendStrRepr(out, k);
        out += ": ";
        appendRepr(out, x, depth + 1);
      }
      out += "}>";
      return;
    }
    default:
      appendStr(out, v);
  }
}

std::string repr(const Value& v) {
  std::string out;
  appendRepr(out, v);
  return out;
}

void appendStr(std::string& out, const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return;
    case Kind::kNone:
      out += "None";
      return;
    case Kind::kBool:
      out += v.boolean() ? "True" : "False";
      return;
    case Kind::kInt:
      out += std::to_string(v.integer());
      return;
    case Kind::kFloat:
      out += formatFloat(v.number());
      return;
    case Kind::kString:
      out += v.str();
      return;
    case Kind::kCallable:
      out += "<function " + v.callable().name() + ">";
      return;
    case Kind::kLoop: {
      const LoopObj& l = v.loop();
      out +=
          "<LoopContext " + std::to_string(l.index0 + 1) + "/" + std::to_string(l.items->items.size()) + ">";
      return;
    }
    default:
      appendRepr(out, v);
      return;
  }
}

std::string toStr(const Value& v) {
  if (v.isString()) return v.str();
  std::string out;
  appendStr(out, v);
  return out;
}

namespace {

void appendJsonString(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  auto hex4 = [&](uint32_t c) {
    char b[16];
    std::snprintf(b, sizeof(b), "\\u%04x", c);
    out += b;
  };
  // json.dumps's escapes; true when `c` was one of them.
  auto escaped = [&](uint32_t c) {
    switch (c) {
      case '"': out += "\\\""; return true;
      case '\\': out += "\\\\"; return true;
      case '\n': out += "\\n"; return true;
      case '\r': out += "\\r"; return true;
      case '\t': out += "\\t"; return true;
      case '\b': out += "\\b"; return true;
      case '\f': out += "\\f"; return true;
      default: return false;
    }
  };
  if (!ensure_ascii) {
    for (char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      if (escaped(c)) continue;
      if (c < 0x20) hex4(c);
      else out += ch;
    }
  } else {
    for (uint32_t c : decodeUtf8(s)) {
      if (escaped(c)) continue;
      if (c >= 0x10000) {
        const uint32_t v = c - 0x10000;
        hex4(0xd800 + (v >> 10));
        hex4(0xdc00 + (v & 0x3ff));
      } else if (c < 0x20 || c > 0x7e) {
        hex4(c);
      } else {
        out += static_cast<char>(c);
      }
    }
  }
  out += '"';
}

void appendJsonFloat(std::string& out, double d) {
  if (std::isnan(d)) {
    out += "NaN";
  } else if (std::isinf(d)) {
    out += d < 0 ? "-Infinity" : "Infinity";
  } else {
    out += formatFloat(d);
  }
}

void newlineIndent(std::string& out, const JsonStyle& style, int level) {
  out += '\n';
  for (int i = 0; i < level; ++i) out += style.indent;
}

std::string jsonKey(const Value& k) {
  switch (k.kind()) {
    case Kind::kString:
      return k.str();
    case Kind::kInt:
      return std::to_string(k.integer());
    case Kind::kBool:
      return k.boolean() ? "true" : "false";
    case Kind::kNone:
      return "null";
    case Kind::kFloat: {
      std::string s;
      appendJsonFloat(s, k.number());
      return s;
    }
    default:
      typeError(std::string("keys must be str, int, float, bool or None, not ") + typeName(k));
  }
}

}  // namespace

void appendJson(std::string& out, const Value& v, const JsonStyle& style, int depth) {
  checkDepth(depth);
  switch (v.kind()) {
    case Kind::kNone:
      out += "null";
      return;
    case Kind::kBool:
      out += v.boolean() ? "true" : "false";
      return;
    case Kind::kInt:
      out += std::to_string(v.integer());
      return;
    case Kind::kFloat:
      appendJsonFloat(out, v.number());
      return;
    case Kind::kString:
      appendJsonString(out, v.str(), style.ensure_ascii);
      return;
    case Kind::kList: {
      const auto& items = v.items();
      if (v.isLazy()) typeError("Object of type generator is not JSON serializable");
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += style.item_sep;
        if (style.has_indent) newlineIndent(out, style, depth + 1);
        appendJson(out, items[i], style, depth + 1);
      }
      if (style.has_indent) newlineIndent(out, style, depth);
      out += ']';
      return;
    }
    case Kind::kDict: {
      const auto& entries = v.dict().entries;
      if (entries.empty()) {
        out += "{}";
        return;
      }
      std::vector<std::pair<std::string, const Value*>> kv;
      kv.reserve(entries.size());
      for (const auto& [k, x] : entries) kv.emplace_back(jsonKey(k), &x);
      if (style.sort_keys)
        std::stable_sort(kv.begin(), kv.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      out += '{';
      for (size_t i = 0; i < kv.size(); ++i) {
        if (i) out += style.item_sep;
        if (style.has_indent) newlineIndent(out, style, depth + 1);
        appendJsonString(out, kv[i].first, style.ensure_ascii);
        out += style.key_sep;
        appendJson(out, *kv[i].second, style, depth + 1);
      }
      if (style.has_indent) newlineIndent(out, style, depth);
      out += '}';
      return;
    }
    default:
      typeError(std::string("Object of type ") + typeName(v) + " is not JSON serializable");
  }
}

// ---- UTF-8 ----

std::vector<uint32_t> decodeUtf8(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    }
    int len = b0 >= 0xf0 && b0 <= 0xf4 ? 4 : b0 >= 0xe0 ? 3 : b0 >= 0xc2 && b0 < 0xe0 ? 2 : 0;
    if (b0 > 0xf4) len = 0;
    uint32_t cp = 0;
    bool ok = len > 0 && i + static_cast<size_t>(len) <= s.size();
    if (ok) {
      cp = b0 & (0x7f >> len);
      for (int k = 1; k < len; ++k) {
        auto b = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
        if ((b & 0xc0) != 0x80) {
          ok = false;
          break;
        }
        cp = (cp << 6) | (b & 0x3f);
      }
      if (ok) {
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp < 0xe000))
          ok = false;
      }
    }
    if (ok) {
      out.push_back(cp);
      i += static_cast<size_t>(len);
    } else {
      out.push_back(0xdc00 + b0);
      ++i;
    }
  }
  return out;
}

void appendUtf8(std::string& out, uint32_t cp) {
  if (cp >= 0xdc80 && cp <= 0xdcff) {  // an escaped invalid byte
    out += static_cast<char>(cp - 0xdc00);
  } else if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

std::string encodeUtf8(const std::vector<uint32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) appendUtf8(out, cps[i]);
  return out;
}

bool isAscii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

size_t codepointCount(std::string_view s) {
  if (isAscii(s)) return s.size();
  return decodeUtf8(s).size();
}

bool isPySpace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
         c == 0x3000;
}

}  // namespace llmrt::tmpl
