// jinja2's built-in filters and tests (jinja2/filters.py, tests.py 3.1) that chat templates
// use, with transformers' tojson in place of jinja2's.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "template/interpreter.h"
#include "template/strings.h"

namespace llmrt::tmpl {
namespace {

const Value* opt(const CallArgs& a, size_t i, const char* name) {
  const Value* v = a.get(i, name);
  return v;
}
bool optBool(const CallArgs& a, size_t i, const char* name, bool def) {
  const Value* v = a.get(i, name);
  return v ? truthy(*v) : def;
}
const Value& need(const CallArgs& a, size_t i, const char* name, const char* filter) {
  const Value* v = a.get(i, name);
  if (!v) typeError(std::string(filter) + "() missing required argument '" + name + "'");
  return *v;
}

Value lazyList(std::vector<Value> items) { return Value::list(std::move(items), false, true); }

// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0.
Value getPath(Interpreter& in, Value item, const Value& attr, const Value* def = nullptr) {
  std::vector<Value> parts;
  if (attr.isString()) {
    const std::string& s = attr.str();
    size_t start = 0;
    for (;;) {
      size_t dot = s.find('.', start);
      std::string p = s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      bool digits =
          !p.empty() && std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (digits && p.size() < 18) {
        parts.emplace_back(static_cast<int64_t>(std::stoll(p)));
      } else {
        parts.emplace_back(std::move(p));
      }
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
  } else if (!attr.isNone()) {
    parts.push_back(attr);
  }
  for (const Value& p : parts) {
    item = in.getItem(item, p);
    if (def && !def->isNone() && item.isUndefined()) item = *def;
  }
  return item;
}

std::vector<Value> seqOf(const Value& v) { return iterate(v); }

// Lower-cased strings when not case-sensitive (jinja2's ignore_case).
Value sortKey(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.isString()) return Value(pyLower(v.str()));
  return v;
}

Value fLength(Interpreter&, const Value& v, const CallArgs&) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return Value(int64_t{0});
    case Kind::kString:
      return Value(static_cast<int64_t>(codepointCount(v.str())));
    case Kind::kList:
      if (v.isLazy()) typeError("object of type 'generator' has no len()");
      return Value(static_cast<int64_t>(v.items().size()));
    case Kind::kDict:
      return Value(static_cast<int64_t>(v.dict().entries.size()));
    default:
      typeError(std::string("object of type '") + typeName(v) + "' has no len()");
  }
}

Value fDefault(Interpreter&, const Value& v, const CallArgs& a) {
  bool boolean = optBool(a, 1, "boolean", false);
  if (v.isUndefined() || (boolean && !truthy(v))) {
    const Value* d = opt(a, 0, "default_value");
    return d ? *d : emptyString();
  }
  return v;
}

Value fFirst(Interpreter&, const Value& v, const CallArgs&) {
  if (v.isList()) {
    if (v.items().empty()) return Value::undefined("No first item, sequence was empty.");
    return v.items().front();
  }
  std::vector<Value> items = seqOf(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value fLast(Interpreter&, const Value& v, const CallArgs&) {
  if (v.isLazy()) typeError("'generator' object is not reversible");
  if (v.isList()) {
    if (v.items().empty()) return Value::undefined("No last item, sequence was empty.");
    return v.items().back();
  }
  std::vector<Value> items = seqOf(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value fJoin(Interpreter& in, const Value& v, const CallArgs& a) {
  const Value* d = opt(a, 0, "d");
  const Value* attr = opt(a, 1, "attribute");
  std::string sep = d ? toStr(*d) : "";
  std::string out;
  bool first = true;
  for (const Value& x : seqOf(v)) {
    if (!first) out += sep;
    first = false;
    appendStr(out, attr ? getPath(in, x, *attr) : x);
    in.checkSize(out.size());
  }
  in.charge(out.size() / 64);
  return Value(std::move(out));
}

Value fToJson(Interpreter& in, const Value& v, const CallArgs& a) {
  JsonStyle style;
  if (const Value* ea = opt(a, 0, "ensure_ascii")) style.ensure_ascii = truthy(*ea);
  if (const Value* ind = opt(a, 1, "indent"); ind && !ind->isNone()) {
    style.has_indent = true;
    style.item_sep.assign(1, ',');
    if (ind->isString()) {
      style.indent = ind->str();
    } else {
      int64_t n = toInt(*ind);
      style.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(n, 0, 1 << 16)), ' ');
    }
  }
  if (const Value* sep = opt(a, 2, "separators"); sep && !sep->isNone()) {
    if (!sep->isList() || sep->items().size() != 2 || !sep->items()[0].isString() ||
        !sep->items()[1].isString())
      throwError("ValueError", "separators must be a (item_separator, key_separator) pair of strings");
    style.item_sep = sep->items()[0].str();
    style.key_sep = sep->items()[1].str();
  }
  style.sort_keys = optBool(a, 3, "sort_keys", false);
  std::string out;
  appendJson(out, v, style);
  in.checkSize(out.size());
  in.charge(out.size() / 64);
  return Value(std::move(out));
}

Value fTrim(Interpreter&, const Value& v, const CallArgs& a) {
  const Value* chars = opt(a, 0, "chars");
  std::optional<std::string> c;
  if (chars && !chars->isNone()) c = toStr(*chars);
  return Value(pyStrip(toStr(v), c, 0));
}

Value fUpper(Interpreter&, const Value& v, const CallArgs&) { return Value(pyUpper(toStr(v))); }
Value fLower(Interpreter&, const Value& v, const CallArgs&) { return Value(pyLower(toStr(v))); }
Value fCapitalize(Interpreter&, const Value& v, const CallArgs&) { return Value(pyCapitalize(toStr(v))); }

// jinja2's title: words start after '-', whitespace or an opening bracket.
Value fTitle(Interpreter&, const Value& v, const CallArgs&) {
  std::vector<uint32_t> cps = decodeUtf8(toStr(v));
  std::string out;
  bool start = true;
  for (uint32_t c : cps) {
    bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || isPySpace(c);
    std::string one;
    appendUtf8(one, c);
    if (sep) {
      out += one;
      start = true;
    } else {
      out += start ? pyUpper(one) : pyLower(one);
      start = false;
    }
  }
  return Value(std::move(out));
}

Value fReplace(Interpreter& in, const Value& v, const CallArgs& a) {
  std::string s = toStr(v);
  std::string old = toStr(need(a, 0, "old", "replace"));
  std::string repl = toStr(need(a, 1, "new", "replace"));
  const Value* count = opt(a, 2, "count");
  int64_t n = count && !count->isNone() ? toInt(*count) : -1;
  std::string out = pyReplace(s, old, repl, n, in.limits().max_output_bytes);
  in.charge(out.size() / 64);
  return Value(std::move(out));
}

Value fList(Interpreter& in, const Value& v, const CallArgs&) {
  if (v.isList() && !v.isTuple() && !v.isLazy()) return v;
  std::vector<Value> items = seqOf(v);
  in.charge(items.size());
  return Value::list(std::move(items));
}

Value fString(Interpreter&, const Value& v, const CallArgs&) { return v.isString() ? v : Value(toStr(v)); }

// Python's int(str): optional sign, digits with single '_' between them, surrounding spaces.
std::optional<int64_t> parseInt(const std::string& text, int base) {
  std::string s = pyStrip(text, std::nullopt, 0);
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  if (base == 16 && s.compare(i, 2, "0x") == 0) i += 2;
  if (i >= s.size()) return std::nullopt;
  __int128 v = 0;
  bool prev_digit = false;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c == '_' && prev_digit && i + 1 < s.size() && s[i + 1] != '_') {
      prev_digit = false;
      continue;
    }
    int d = c >= '0' && c <= '9'                     ? c - '0'
            : (c | 0x20) >= 'a' && (c | 0x20) <= 'z' ? (c | 0x20) - 'a' + 10
                                                     : 99;
    if (d >= base) return std::nullopt;
    v = v * base + d;
    if (v > static_cast<__int128>(INT64_MAX) + 1)
      throwError("OverflowError", "integer too large for 64 bits");
    prev_digit = true;
  }
  if (!prev_digit) return std::nullopt;
  if (neg) v = -v;
  if (v > INT64_MAX) throwError("OverflowError", "integer too large for 64 bits");
  return static_cast<int64_t>(v);
}

std::optional<double> parseFloat(const std::string& text) {
  std::string s = pyStrip(text, std::nullopt, 0);
  std::string t;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] != '_') t += s[i];
  if (t.empty()) return std::nullopt;
  std::string lower = pyLower(t);
  const char* p = lower.c_str();
  if (*p == '+' || *p == '-') ++p;
  if (std::string_view(p) == "inf" || std::string_view(p) == "infinity" || std::string_view(p) == "nan") {
    double r = std::string_view(p) == "nan" ? NAN : INFINITY;
    return lower[0] == '-' ? -r : r;
  }
  for (const char* q = p; *q; ++q)
    if (!((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' || *q == '+' || *q == '-')) return std::nullopt;
  char* end = nullptr;
  double d = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size()) return std::nullopt;
  return d;
}

Value fInt(Interpreter&, const Value& v, const CallArgs& a) {
  const Value* def = opt(a, 0, "default");
  int base = 10;
  if (const Value* b = opt(a, 1, "base")) base = static_cast<int>(std::clamp<int64_t>(toInt(*b), 2, 36));
  Value fallback = def ? *def : Value(int64_t{0});
  if (v.isInt() || v.isBool()) return Value(v.integer());
  if (v.isFloat()) {
    double d = v.number();
    if (std::isnan(d) || std::isinf(d) || std::fabs(d) >= 9.2e18) return fallback;
    return Value(static_cast<int64_t>(d));
  }
  if (v.isString()) {
    if (auto i = parseInt(v.str(), base)) return Value(*i);
    if (auto f = parseFloat(v.str()); f && std::isfinite(*f) && std::fabs(*f) < 9.2e18)
      return Value(static_cast<int64_t>(*f));
  }
  return fallback;
}

Value fFloat(Interpreter&, const Value& v, const CallArgs& a) {
  const Value* def = opt(a, 0, "default");
  if (v.isNumber()) return Value(v.number());
  if (v.isString())
    if (auto f = parseFloat(v.str())) return Value(*f);
  return def ? *def : Value(0.0);
}

Value fAbs(Interpreter&, const Value& v, const CallArgs&) {
  requireDefined(v);
  if (v.isFloat()) return Value(std::fabs(v.number()));
  if (v.isInt() || v.isBool()) {
    if (v.integer() == INT64_MIN) throwError("OverflowError", "integer result too large for 64 bits");
    return Value(v.integer() < 0 ? -v.integer() : v.integer());
  }
  typeError(std::string("bad operand type for abs(): '") + typeName(v) + "'");
}

Value fRound(Interpreter&, const Value& v, const CallArgs& a) {
  int64_t precision = 0;
  if (const Value* p = opt(a, 0, "precision")) precision = toInt(*p);
  std::string method = "common";
  if (const Value* m = opt(a, 1, "method")) method = toStr(*m);
  if (method != "common" && method != "ceil" && method != "floor")
    throwError("FilterArgumentError", "method must be common, ceil or floor");
  requireDefined(v);
  if (!v.isNumber()) typeError(std::string("type ") + typeName(v) + " doesn't define __round__ method");
  precision = std::clamp<int64_t>(precision, -300, 300);
  if (method == "common") {
    if (!v.isFloat()) return Value(v.integer());
    double x = v.number();
    if (!std::isfinite(x)) return v;
    if (precision >= 0) {
      char buf[512];
      std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(std::min<int64_t>(precision, 340)), x);
      return Value(std::strtod(buf, nullptr));
    }
    double f = std::pow(10.0, static_cast<double>(-precision));
    return Value(std::nearbyint(x / f) * f);
  }
  double f = std::pow(10.0, static_cast<double>(precision));
  double x = v.number() * f;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / f);
}

Value fItems(Interpreter& in, const Value& v, const CallArgs&) {
  if (v.isUndefined()) return lazyList({});
  if (!v.isDict()) throwError("FilterArgumentError", "Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, x] : v.dict().entries) out.push_back(Value::list({k, x}, true));
  in.charge(out.size());
  return lazyList(std::move(out));
}

// Sorts `items` by `key(item)` with Python's stable sort and ordering.
template <typename KeyFn>
void sortBy(Interpreter& in, std::vector<Value>& items, KeyFn key, bool reverse) {
  std::vector<std::pair<Value, Value>> keyed;
  keyed.reserve(items.size());
  for (Value& x : items) keyed.emplace_back(key(x), std::move(x));
  in.charge(keyed.size() * 8);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& p, const auto& q) {
    return reverse ? compare(q.first, p.first) < 0 : compare(p.first, q.first) < 0;
  });
  for (size_t i = 0; i < items.size(); ++i) items[i] = std::move(keyed[i].second);
}

Value fDictsort(Interpreter& in, const Value& v, const CallArgs& a) {
  if (!v.isDict()) requireDefined(v);
  bool cs = optBool(a, 0, "case_sensitive", false);
  std::string by = "key";
  if (const Value* b = opt(a, 1, "by")) by = toStr(*b);
  if (by != "key" && by != "value")
    throwError("FilterArgumentError", "You can only sort by either \"key\" or \"value\"");
  bool reverse = optBool(a, 2, "reverse", false);
  if (!v.isDict()) typeError(std::string("'") + typeName(v) + "' object has no attribute 'items'");
  std::vector<Value> items;
  for (const auto& [k, x] : v.dict().entries) items.push_back(Value::list({k, x}, true));
  size_t pos = by == "key" ? 0 : 1;
  sortBy(
      in, items, [&](const Value& p) { return sortKey(p.items()[pos], cs); }, reverse);
  return Value::list(std::move(items));
}

Value fSort(Interpreter& in, const Value& v, const CallArgs& a) {
  bool reverse = optBool(a, 0, "reverse", false);
  bool cs = optBool(a, 1, "case_sensitive", false);
  const Value* attr = opt(a, 2, "attribute");
  std::vector<Value> items = seqOf(v);
  sortBy(
      in, items, [&](const Value& x) { return sortKey(attr ? getPath(in, x, *attr) : x, cs); }, reverse);
  return Value::list(std::move(items));
}

Value fReverse(Interpreter&, const Value& v, const CallArgs&) {
  if (v.isString()) {
    std::vector<uint32_t> cps = decodeUtf8(v.str());
    std::reverse(cps.begin(), cps.end());
    return Value(encodeUtf8(cps, 0, cps.size()));
  }
  if (v.isList() || v.isDict()) {
    std::vector<Value> items = seqOf(v);
    std::reverse(items.begin(), items.end());
    return lazyList(std::move(items));
  }
  requireDefined(v);
  throwError("FilterArgumentError", "argument must be iterable");
}

Value fUnique(Interpreter& in, const Value& v, const CallArgs& a) {
  bool cs = optBool(a, 0, "case_sensitive", false);
  const Value* attr = opt(a, 1, "attribute");
  std::vector<Value> out, seen;
  for (const Value& x : seqOf(v)) {
    Value k = sortKey(attr ? getPath(in, x, *attr) : x, cs);
    in.charge(seen.size() / 8 + 1);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) continue;
    seen.push_back(k);
    out.push_back(x);
  }
  return lazyList(std::move(out));
}

Value fMinMax(Interpreter& in, const Value& v, const CallArgs& a, bool is_max) {
  bool cs = optBool(a, 0, "case_sensitive", false);
  const Value* attr = opt(a, 1, "attribute");
  std::vector<Value> items = seqOf(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = sortKey(attr ? getPath(in, items[0], *attr) : items[0], cs);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = sortKey(attr ? getPath(in, items[i], *attr) : items[i], cs);
    int c = compare(k, best_key);
    if (is_max ? c > 0 : c < 0) {
      best = i;
      best_key = k;
    }
  }
  return items[best];
}
Value fMin(Interpreter& in, const Value& v, const CallArgs& a) { return fMinMax(in, v, a, false); }
Value fMax(Interpreter& in, const Value& v, const CallArgs& a) { return fMinMax(in, v, a, true); }

Value fSum(Interpreter& in, const Value& v, const CallArgs& a) {
  const Value* attr = opt(a, 0, "attribute");
  const Value* start = opt(a, 1, "start");
  Value total = start ? *start : Value(int64_t{0});
  for (const Value& x : seqOf(v)) {
    Value y = attr ? getPath(in, x, *attr) : x;
    requireDefined(y);
    if (!total.isNumber() || !y.isNumber())
      typeError(std::string("unsupported operand type(s) for +: '") + typeName(total) + "' and '" +
                typeName(y) + "'");
    if ((total.isInt() || total.isBool()) && (y.isInt() || y.isBool())) {
      int64_t r;
      if (__builtin_add_overflow(total.integer(), y.integer(), &r))
        throwError("OverflowError", "integer overflow in sum");
      total = Value(r);
    } else {
      total = Value(total.number() + y.number());
    }
  }
  return total;
}

Value fIndent(Interpreter& in, const Value& v, const CallArgs& a) {
  std::string ind = "    ";
  if (const Value* w = opt(a, 0, "width")) {
    if (w->isString()) {
      ind = w->str();
    } else {
      ind = std::string(static_cast<size_t>(std::clamp<int64_t>(toInt(*w), 0, 1 << 16)), ' ');
    }
  }
  bool first = optBool(a, 1, "first", false);
  bool blank = optBool(a, 2, "blank", false);
  std::vector<std::string> lines = pySplitlines(toStr(v) + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += '\n';
      if (blank || !lines[i].empty()) out += ind;
    }
    out += lines[i];
    in.checkSize(out.size());
  }
  if (first) out = ind + out;
  return Value(std::move(out));
}

Value fSafe(Interpreter&, const Value& v, const CallArgs&) { return v.isString() ? v : Value(toStr(v)); }

Value fEscape(Interpreter&, const Value& v, const CallArgs&) {
  std::string out;
  for (char c : toStr(v)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return Value(std::move(out));
}

Value fWordcount(Interpreter&, const Value& v, const CallArgs&) {
  int64_t n = 0;
  bool in_word = false;
  for (uint32_t c : decodeUtf8(toStr(v))) {
    bool w = isPyAlnum(c) || c == '_';
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}

Value fBatch(Interpreter& in, const Value& v, const CallArgs& a) {
  int64_t n = toInt(need(a, 0, "linecount", "batch"));
  if (n <= 0) throwError("ValueError", "batch size must be positive");
  const Value* fill = opt(a, 1, "fill_with");
  std::vector<Value> items = seqOf(v), out, cur;
  in.charge(items.size());
  for (Value& x : items) {
    cur.push_back(std::move(x));
    if (static_cast<int64_t>(cur.size()) == n) out.push_back(Value::list(std::move(cur))), cur.clear();
  }
  if (!cur.empty()) {
    if (fill && !fill->isNone())
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(*fill);
    out.push_back(Value::list(std::move(cur)));
  }
  return lazyList(std::move(out));
}

// select / reject / selectattr / rejectattr
Value selectOrReject(Interpreter& in, const Value& v, const CallArgs& a, bool select, bool by_attr) {
  size_t off = 0;
  Value attr;
  if (by_attr) {
    if (a.pos.empty()) throwError("FilterArgumentError", "Missing parameter for attribute name");
    attr = a.pos[0];
    off = 1;
  }
  std::string test;
  CallArgs test_args;
  bool has_test = a.pos.size() > off;
  if (has_test) {
    test = toStr(a.pos[off]);
    test_args.pos.assign(a.pos.begin() + static_cast<long>(off) + 1, a.pos.end());
    test_args.kw = a.kw;
  }
  std::vector<Value> out;
  for (const Value& x : seqOf(v)) {
    in.charge(1);
    Value y = by_attr ? getPath(in, x, attr) : x;
    bool ok = has_test ? in.applyTest(test, y, test_args) : truthy(y);
    if (ok == select) out.push_back(x);
  }
  return lazyList(std::move(out));
}
Value fSelect(Interpreter& in, const Value& v, const CallArgs& a) {
  return selectOrReject(in, v, a, true, false);
}
Value fReject(Interpreter& in, const Value& v, const CallArgs& a) {
  return selectOrReject(in, v, a, false, false);
}
Value fSelectattr(Interpreter& in, const Value& v, const CallArgs& a) {
  return selectOrReject(in, v, a, true, true);
}
Value fRejectattr(Interpreter& in, const Value& v, const CallArgs& a) {
  return selectOrReject(in, v, a, false, true);
}

Value fMap(Interpreter& in, const Value& v, const CallArgs& a) {
  std::vector<Value> out;
  const Value* attr = nullptr;
  for (const auto& [k, x] : a.kw)
    if (k == "attribute") attr = &x;
  if (attr) {
    const Value* def = nullptr;
    for (const auto& [k, x] : a.kw)
      if (k == "default") def = &x;
    for (const Value& x : seqOf(v)) out.push_back(getPath(in, x, *attr, def));
    return lazyList(std::move(out));
  }
  if (a.pos.empty()) throwError("FilterArgumentError", "map requires a filter argument");
  std::string filter = toStr(a.pos[0]);
  CallArgs rest;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  rest.kw = a.kw;
  for (const Value& x : seqOf(v)) {
    in.charge(1);
    out.push_back(in.applyFilter(filter, x, rest));
  }
  return lazyList(std::move(out));
}

Value fAttr(Interpreter& in, const Value& v, const CallArgs& a) {
  std::string name = toStr(need(a, 0, "name", "attr"));
  if (v.isDict() && !hasMethod(v, name))
    return Value::undefined("'dict object' has no attribute '" + name + "'");
  return in.getAttr(v, name);
}

// printf-style formatting: value % args (the `format` filter and the % operator on str).
Value fFormat(Interpreter& in, const Value& v, const CallArgs& a) {
  const std::string fmt = toStr(v);
  std::string out;
  size_t next = 0;
  auto take = [&]() -> const Value& {
    if (next >= a.pos.size()) typeError("not enough arguments for format string");
    return a.pos[next++];
  };
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    size_t j = i + 1;
    std::string spec = "%";
    while (j < fmt.size() && std::string_view("-+ #0123456789.").find(fmt[j]) != std::string_view::npos &&
           spec.size() < 12)
      spec += fmt[j++];
    if (j >= fmt.size()) throwError("ValueError", "incomplete format");
    char conv = fmt[j];
    i = j;
    if (conv == '%') {
      out += '%';
      continue;
    }
    const Value& x = take();
    char buf[512];
    switch (conv) {
      case 's':
      case 'r': {
        std::string text = conv == 's' ? toStr(x) : repr(x);
        bool left = spec.find('-') != std::string::npos;
        const std::string flags = spec.substr(0, spec.find('.'));
        size_t digits = flags.find_first_of("123456789");
        int64_t width = digits == std::string::npos ? 0 : std::atoi(flags.c_str() + digits);
        int64_t fill = std::min<int64_t>(width, 1 << 20) - static_cast<int64_t>(codepointCount(text));
        if (fill > 0 && !left) out.append(static_cast<size_t>(fill), ' ');
        out += text;
        if (fill > 0 && left) out.append(static_cast<size_t>(fill), ' ');
        break;
      }
      case 'd':
      case 'i':
      case 'x':
      case 'X':
      case 'o': {
        if (!x.isNumber())
          typeError(std::string("%") + conv + " format: a number is required, not " + typeName(x));
        long long n = x.isFloat() ? static_cast<long long>(x.number()) : x.integer();
        std::snprintf(buf, sizeof(buf), (spec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(), n);
        out += buf;
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        if (!x.isNumber()) typeError(std::string("must be real number, not ") + typeName(x));
        std::snprintf(buf, sizeof(buf), (spec + conv).c_str(), x.number());
        out += buf;
        break;
      }
      default:
        throwError("ValueError", std::string("unsupported format character '") + conv + "'");
    }
    in.checkSize(out.size());
  }
  if (next < a.pos.size() && !(a.pos.size() == 1 && a.pos[0].isDict()))
    typeError("not all arguments converted during string formatting");
  return Value(std::move(out));
}

Value fCenter(Interpreter& in, const Value& v, const CallArgs& a) {
  CallArgs args;
  args.pos.push_back(a.get(0, "width") ? *a.get(0, "width") : Value(int64_t{80}));
  return callMethod(in, Value(toStr(v)), "center", args);
}

}  // namespace

FilterFn findFilter(std::string_view name) {
  static const std::unordered_map<std::string_view, FilterFn> kFilters = {
      {"abs", fAbs},
      {"attr", fAttr},
      {"batch", fBatch},
      {"capitalize", fCapitalize},
      {"center", fCenter},
      {"count", fLength},
      {"d", fDefault},
      {"default", fDefault},
      {"dictsort", fDictsort},
      {"e", fEscape},
      {"escape", fEscape},
      {"first", fFirst},
      {"float", fFloat},
      {"format", fFormat},
      {"indent", fIndent},
      {"int", fInt},
      {"items", fItems},
      {"join", fJoin},
      {"last", fLast},
      {"length", fLength},
      {"list", fList},
      {"lower", fLower},
      {"map", fMap},
      {"max", fMax},
      {"min", fMin},
      {"reject", fReject},
      {"rejectattr", fRejectattr},
      {"replace", fReplace},
      {"reverse", fReverse},
      {"round", fRound},
      {"safe", fSafe},
      {"select", fSelect},
      {"selectattr", fSelectattr},
      {"sort", fSort},
      {"string", fString},
      {"sum", fSum},
      {"title", fTitle},
      {"tojson", fToJson},
      {"trim", fTrim},
      {"unique", fUnique},
      {"upper", fUpper},
      {"wordcount", fWordcount},
  };
  auto it = kFilters.find(name);
  return it == kFilters.end() ? nullptr : it->second;
}

}  // namespace llmrt::tmpl
