// Methods of str, dict and list values ("x".strip(), d.items(), ...) and the global
// functions of transformers' chat-template environment (range, namespace, dict,
// raise_exception, strftime_now, joiner).
#include <algorithm>
#include <ctime>

#include "template/interpreter.h"
#include "template/strings.h"

namespace llmrt::tmpl {
namespace {

const char* const kStrMethods[] = {
    "strip",        "lstrip",       "rstrip",  "split",      "rsplit",    "startswith", "endswith",
    "upper",        "lower",        "title",   "capitalize", "replace",   "find",       "rfind",
    "index",        "rindex",       "count",   "join",       "format",    "splitlines", "isdigit",
    "isalpha",      "isalnum",      "isspace", "islower",    "isupper",   "isnumeric",  "isdecimal",
    "center",       "ljust",        "rjust",   "zfill",      "partition", "rpartition", "casefold",
    "removeprefix", "removesuffix", "swapcase"};
const char* const kDictMethods[] = {"items", "keys", "values", "get", "copy"};
const char* const kListMethods[] = {"index", "count", "copy"};
// Mutating methods: ImmutableSandboxedEnvironment refuses them.
const char* const kUnsafe[] = {"append", "extend",  "insert", "pop",        "remove", "clear",
                               "sort",   "reverse", "update", "setdefault", "popitem"};

template <size_t N>
bool contains(const char* const (&list)[N], std::string_view name) {
  for (const char* m : list)
    if (name == m) return true;
  return false;
}

const Value& arg(const CallArgs& args, size_t i, const char* name, const std::string& method) {
  const Value* v = args.get(i, name);
  if (!v) typeError(method + "() missing required argument '" + name + "'");
  return *v;
}

const std::string& strArg(const CallArgs& args, size_t i, const char* name, const std::string& method) {
  const Value& v = arg(args, i, name, method);
  if (!v.isString()) typeError(method + "() argument must be str, not " + typeName(v));
  return v.str();
}

std::optional<std::string> optStr(const CallArgs& args, size_t i, const char* name) {
  const Value* v = args.get(i, name);
  if (!v || v->isNone()) return std::nullopt;
  if (!v->isString()) typeError(std::string("expected str argument, not ") + typeName(*v));
  return v->str();
}

int64_t optInt(const CallArgs& args, size_t i, const char* name, int64_t def) {
  const Value* v = args.get(i, name);
  if (!v || v->isNone()) return def;
  return toInt(*v);
}

Value strList(std::vector<std::string> parts, bool tuple = false) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (auto& p : parts) items.emplace_back(std::move(p));
  return Value::list(std::move(items), tuple);
}

template <typename Pred>
Value allChars(const std::string& s, Pred pred) {
  std::vector<uint32_t> cps = decodeUtf8(s);
  if (cps.empty()) return Value(false);
  return Value(std::all_of(cps.begin(), cps.end(), pred));
}

// str.format with {} / {0} / {name} fields (format specs and conversions are ignored).
Value strFormat(Interpreter& in, const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}')
        ++i;
      else
        throwError("ValueError", "Single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) throwError("ValueError", "Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    field = field.substr(0, std::min(field.find(':'), field.find('!')));
    const Value* v = nullptr;
    if (field.empty()) {
      v = auto_index < args.pos.size() ? &args.pos[auto_index] : nullptr;
      ++auto_index;
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      size_t k = std::stoul(field.substr(0, 9));
      v = k < args.pos.size() ? &args.pos[k] : nullptr;
    } else {
      for (const auto& [k, x] : args.kw)
        if (k == field) v = &x;
    }
    if (!v) throwError("IndexError", "Replacement index out of range for positional args tuple");
    appendStr(out, *v);
    in.checkSize(out.size());
    i = close;
  }
  return Value(std::move(out));
}

Value pad(const std::string& s, int64_t width, const std::string& fill, int where) {
  int64_t len = static_cast<int64_t>(codepointCount(s));
  if (width <= len) return Value(s);
  if (width > (int64_t{1} << 24)) throwError("RuntimeError", "padding width too large");
  int64_t total = width - len;
  int64_t left = where == 0 ? total / 2 + (total & width & 1) : where == 1 ? 0 : total;
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < total - left; ++i) out += fill;
  return Value(std::move(out));
}

Value stringMethod(Interpreter& in, const std::string& s, const std::string& m, const CallArgs& args) {
  if (m == "strip" || m == "lstrip" || m == "rstrip")
    return Value(pyStrip(s, optStr(args, 0, "chars"), m == "strip" ? 0 : m == "lstrip" ? 1 : 2));
  if (m == "split" || m == "rsplit")
    return strList(pySplit(s, optStr(args, 0, "sep"), optInt(args, 1, "maxsplit", -1), m == "rsplit"));
  if (m == "startswith" || m == "endswith") {
    const Value& p = arg(args, 0, "prefix", m);
    std::string_view sv = s;
    int64_t start = optInt(args, 1, "start", 0);
    if (start > 0) sv = sv.substr(std::min(sv.size(), byteOffset(s, start)));
    auto test = [&](const Value& x) {
      if (!x.isString()) typeError(m + " first arg must be str or a tuple of str, not " + typeName(x));
      const std::string& t = x.str();
      if (m == "startswith") return sv.substr(0, t.size()) == t;
      return sv.size() >= t.size() && sv.substr(sv.size() - t.size()) == t;
    };
    if (p.isTuple()) {
      for (const Value& x : p.items())
        if (test(x)) return Value(true);
      return Value(false);
    }
    return Value(test(p));
  }
  if (m == "upper") return Value(pyUpper(s));
  if (m == "lower" || m == "casefold") return Value(pyLower(s));
  if (m == "title") return Value(pyTitle(s));
  if (m == "capitalize") return Value(pyCapitalize(s));
  if (m == "swapcase") {
    std::string out;
    for (uint32_t c : decodeUtf8(s)) {
      std::string one;
      appendUtf8(one, c);
      out += isPyUpper(c) ? pyLower(one) : isPyLower(c) ? pyUpper(one) : one;
    }
    return Value(std::move(out));
  }
  if (m == "replace")
    return Value(pyReplace(s, strArg(args, 0, "old", m), strArg(args, 1, "new", m),
                           optInt(args, 2, "count", -1), in.limits().max_output_bytes));
  if (m == "find" || m == "rfind" || m == "index" || m == "rindex" || m == "count") {
    const std::string& sub = strArg(args, 0, "sub", m);
    const int64_t len = static_cast<int64_t>(codepointCount(s));
    int64_t start = optInt(args, 1, "start", 0), end = optInt(args, 2, "end", len);
    if (start < 0) start = std::max<int64_t>(0, start + len);
    if (end < 0) end = std::max<int64_t>(0, end + len);
    end = std::min(end, len);
    int64_t found = -1;
    if (start <= end) {
      size_t b = byteOffset(s, start), e = byteOffset(s, end);
      std::string_view hay = std::string_view(s).substr(b, e - b);
      if (m == "count") {
        if (sub.empty()) return Value(static_cast<int64_t>(codepointCount(hay)) + 1);
        int64_t n = 0;
        for (size_t p = hay.find(sub); p != std::string_view::npos; p = hay.find(sub, p + sub.size())) ++n;
        return Value(n);
      }
      size_t p = (m == "find" || m == "index") ? hay.find(sub) : hay.rfind(sub);
      if (p != std::string_view::npos) found = cpIndex(s, b + p);
    } else if (m == "count") {
      return Value(int64_t{0});
    }
    if (found < 0 && (m == "index" || m == "rindex")) throwError("ValueError", "substring not found");
    return Value(found);
  }
  if (m == "join") {
    std::string out;
    size_t i = 0;
    for (const Value& x : iterate(arg(args, 0, "iterable", m))) {
      if (!x.isString())
        typeError("sequence item " + std::to_string(i) + ": expected str instance, " + typeName(x) +
                  " found");
      if (i++) out += s;
      out += x.str();
      in.checkSize(out.size());
    }
    return Value(std::move(out));
  }
  if (m == "format") return strFormat(in, s, args);
  if (m == "splitlines") {
    const Value* k = args.get(0, "keepends");
    return strList(pySplitlines(s, k && truthy(*k)));
  }
  if (m == "isdigit" || m == "isnumeric" || m == "isdecimal") return allChars(s, isPyDigit);
  if (m == "isalpha") return allChars(s, isPyAlpha);
  if (m == "isalnum") return allChars(s, isPyAlnum);
  if (m == "isspace") return allChars(s, isPySpace);
  if (m == "islower" || m == "isupper") {
    bool any = false, ok = true;
    for (uint32_t c : decodeUtf8(s)) {
      if (isPyLower(c)) any = true, ok = ok && m == "islower";
      if (isPyUpper(c)) any = true, ok = ok && m == "isupper";
    }
    return Value(any && ok);
  }
  if (m == "center" || m == "ljust" || m == "rjust" || m == "zfill") {
    int64_t width = toInt(arg(args, 0, "width", m));
    if (m == "zfill") {
      int64_t len = static_cast<int64_t>(codepointCount(s));
      if (width <= len) return Value(s);
      size_t sign = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
      return Value(s.substr(0, sign) +
                   std::string(static_cast<size_t>(std::min<int64_t>(width - len, 1 << 24)), '0') +
                   s.substr(sign));
    }
    std::optional<std::string> fill = optStr(args, 1, "fillchar");
    return pad(s, width, fill.value_or(" "), m == "center" ? 0 : m == "ljust" ? 1 : 2);
  }
  if (m == "partition" || m == "rpartition") {
    const std::string& sep = strArg(args, 0, "sep", m);
    if (sep.empty()) throwError("ValueError", "empty separator");
    size_t p = m == "partition" ? s.find(sep) : s.rfind(sep);
    if (p == std::string::npos)
      return m == "partition" ? strList({s, "", ""}, true) : strList({"", "", s}, true);
    return strList({s.substr(0, p), sep, s.substr(p + sep.size())}, true);
  }
  if (m == "removeprefix" || m == "removesuffix") {
    const std::string& a = strArg(args, 0, "affix", m);
    if (m == "removeprefix" && s.compare(0, a.size(), a) == 0) return Value(s.substr(a.size()));
    if (m == "removesuffix" && !a.empty() && s.size() >= a.size() &&
        s.compare(s.size() - a.size(), a.size(), a) == 0)
      return Value(s.substr(0, s.size() - a.size()));
    return Value(s);
  }
  typeError("str has no method '" + m + "'");
}

}  // namespace

bool hasMethod(const Value& obj, std::string_view name) {
  if (obj.isString()) return contains(kStrMethods, name);
  if (obj.isDict()) return contains(kDictMethods, name) || contains(kUnsafe, name);
  if (obj.isList() && !obj.isLazy()) return contains(kListMethods, name) || contains(kUnsafe, name);
  return false;
}

Value callMethod(Interpreter& in, const Value& obj, const std::string& name, const CallArgs& args) {
  in.charge(1);
  if (contains(kUnsafe, name))
    throwError("SecurityError",
               "access to attribute '" + name + "' of '" + typeName(obj) + "' object is unsafe.");
  if (obj.isString()) return stringMethod(in, obj.str(), name, args);
  if (obj.isDict()) {
    const DictObj& d = obj.dict();
    if (name == "get") {
      const Value* v = d.find(arg(args, 0, "key", name));
      if (v) return *v;
      const Value* def = args.get(1, "default");
      return def ? *def : Value::none();
    }
    if (name == "copy") return obj;
    std::vector<Value> out;
    out.reserve(d.entries.size());
    in.charge(d.entries.size());
    for (const auto& [k, v] : d.entries) {
      if (name == "items") {
        out.push_back(Value::list({k, v}, true));
      } else {
        out.push_back(name == "keys" ? k : v);
      }
    }
    return Value::list(std::move(out));
  }
  if (obj.isList()) {
    const auto& items = obj.items();
    if (name == "copy") return obj;
    const Value& x = arg(args, 0, "value", name);
    in.charge(items.size());
    if (name == "count")
      return Value(static_cast<int64_t>(
          std::count_if(items.begin(), items.end(), [&](const Value& y) { return equals(x, y); })));
    for (size_t i = 0; i < items.size(); ++i)
      if (equals(items[i], x)) return Value(static_cast<int64_t>(i));
    throwError("ValueError", repr(x) + " is not in list");
  }
  typeError(std::string("'") + typeName(obj) + "' object has no method '" + name + "'");
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return {};
    case Kind::kList:
      return v.items();
    case Kind::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.dict().entries.size());
      for (const auto& [k, x] : v.dict().entries) keys.push_back(k);
      return keys;
    }
    case Kind::kString: {
      std::vector<Value> out;
      const std::string& s = v.str();
      if (isAscii(s)) {
        for (char c : s) out.emplace_back(std::string(1, c));
      } else {
        std::vector<uint32_t> cps = decodeUtf8(s);
        for (size_t i = 0; i < cps.size(); ++i) out.emplace_back(encodeUtf8(cps, i, i + 1));
      }
      return out;
    }
    default:
      typeError(std::string("'") + typeName(v) + "' object is not iterable");
  }
}

int64_t toInt(const Value& v) {
  if (v.isInt() || v.isBool()) return v.integer();
  requireDefined(v);
  typeError(std::string("'") + typeName(v) + "' object cannot be interpreted as an integer");
}

// ---- globals ----
namespace {

class Builtin : public Callable {
 public:
  using Fn = Value (*)(Interpreter&, const CallArgs&);
  Builtin(std::string name, Fn fn) : name_(std::move(name)), fn_(fn) {}
  Value call(Interpreter& in, const CallArgs& args) const override { return fn_(in, args); }
  std::string name() const override { return name_; }

 private:
  std::string name_;
  Fn fn_;
};

class Joiner : public Callable {
 public:
  explicit Joiner(std::string sep) : sep_(std::move(sep)) {}
  Value call(Interpreter&, const CallArgs&) const override {
    if (!used_) {
      used_ = true;
      return emptyString();
    }
    return Value(sep_);
  }
  std::string name() const override { return "joiner"; }

 private:
  std::string sep_;
  mutable bool used_ = false;
};

Value rangeFn(Interpreter& in, const CallArgs& args) {
  if (args.pos.empty() || args.pos.size() > 3) typeError("range expected 1 to 3 arguments");
  int64_t start = 0, stop, step = 1;
  if (args.pos.size() == 1) {
    stop = toInt(args.pos[0]);
  } else {
    start = toInt(args.pos[0]);
    stop = toInt(args.pos[1]);
    if (args.pos.size() == 3) step = toInt(args.pos[2]);
  }
  if (step == 0) throwError("ValueError", "range() arg 3 must not be zero");
  // jinja2's sandbox refuses ranges over MAX_RANGE (100000) items.
  __int128 n = step > 0 ? (static_cast<__int128>(stop) - start + step - 1) / step
                        : (static_cast<__int128>(start) - stop - step - 1) / -step;
  if (n < 0) n = 0;
  if (n > 100000)
    throwError("OverflowError", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  in.charge(static_cast<uint64_t>(n));
  std::vector<Value> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) out.emplace_back(start + i * step);
  return Value::list(std::move(out));
}

Value namespaceFn(Interpreter& in, const CallArgs& args) {
  auto ns = std::make_shared<NamespaceObj>();
  for (const Value& a : args.pos) {
    if (!a.isDict()) typeError("namespace() positional argument must be a dict");
    for (const auto& [k, v] : a.dict().entries)
      if (k.isString()) ns->set(k.str(), v);
  }
  for (const auto& [k, v] : args.kw) ns->set(k, v);
  in.trackNamespace(ns);
  return Value(ns);
}

Value dictFn(Interpreter&, const CallArgs& args) {
  auto d = std::make_shared<DictObj>();
  for (const Value& a : args.pos) {
    if (a.isDict()) {
      for (const auto& [k, v] : a.dict().entries) d->set(k, v);
    } else {
      for (const Value& pair : iterate(a)) {
        if (!pair.isList() || pair.items().size() != 2)
          throwError("ValueError", "dictionary update sequence element has wrong length");
        d->set(pair.items()[0], pair.items()[1]);
      }
    }
  }
  for (const auto& [k, v] : args.kw) d->set(Value(k), v);
  return Value(std::shared_ptr<const DictObj>(std::move(d)));
}

Value raiseFn(Interpreter&, const CallArgs& args) {
  TemplateError e("TemplateError", args.pos.empty() ? std::string() : toStr(args.pos[0]));
  e.verbatim = true;
  throw e;
}

Value strftimeFn(Interpreter& in, const CallArgs& args) {
  const Value* f = args.get(0, "format");
  if (!f || !f->isString()) typeError("strftime_now() argument must be str");
  std::tm tm{};
  if (in.clock()) {
    tm = *in.clock();
  } else {
    std::time_t now = std::time(nullptr);
    localtime_r(&now, &tm);
  }
  if (f->str().empty()) return emptyString();
  std::string buf(256, '\0');
  for (int tries = 0; tries < 8; ++tries) {
    size_t n = std::strftime(buf.data(), buf.size(), f->str().c_str(), &tm);
    if (n > 0) {
      buf.resize(n);
      return Value(std::move(buf));
    }
    if (buf.size() > f->str().size() * 64 + 4096) break;
    buf.resize(buf.size() * 4);
  }
  return emptyString();
}

Value joinerFn(Interpreter&, const CallArgs& args) {
  const Value* sep = args.get(0, "sep");
  return Value(std::shared_ptr<const Callable>(std::make_shared<Joiner>(sep ? toStr(*sep) : ", ")));
}

}  // namespace

Value findGlobal(const std::string& name) {
  static const std::vector<std::pair<std::string, Value>> kGlobals = [] {
    std::vector<std::pair<std::string, Value>> g;
    auto add = [&](const char* n, Builtin::Fn fn) {
      g.emplace_back(n, Value(std::shared_ptr<const Callable>(std::make_shared<Builtin>(n, fn))));
    };
    add("range", rangeFn);
    add("namespace", namespaceFn);
    add("dict", dictFn);
    add("raise_exception", raiseFn);
    add("strftime_now", strftimeFn);
    add("joiner", joinerFn);
    return g;
  }();
  for (const auto& [n, v] : kGlobals)
    if (n == name) return v;
  return Value();
}

}  // namespace llmrt::tmpl
