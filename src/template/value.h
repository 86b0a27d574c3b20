// Values of the chat-template language: Python's types as a jinja2 template sees them
// (undefined, None, bool, int, float, str, list/tuple, dict, namespace, callables, the loop
// object), with Python's truthiness, equality, ordering, str() and repr(), and json.dumps as
// transformers' `tojson` filter calls it. Strings, lists and dicts are immutable and shared:
// copying a Value copies one pointer. Namespaces are the only mutable objects (as in jinja2's
// ImmutableSandboxedEnvironment).
//
// Errors inside the template engine travel as TemplateError exceptions; ChatTemplate::parse
// and render catch them at the library boundary and return a Status.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace llmrt::tmpl {

// A template error: what went wrong and the source line (0: not known yet; the interpreter
// fills in the line of the node being evaluated). `kind` is the Python exception class jinja2
// would raise ("UndefinedError", "TypeError", "TemplateError" for raise_exception, ...).
struct TemplateError : std::runtime_error {
  TemplateError(std::string kind_, std::string what, int line_ = 0)
      : std::runtime_error(std::move(what)), kind(std::move(kind_)), line(line_) {}
  std::string kind;
  int line;
  bool verbatim = false;  // raise_exception's message: reported as given
};

[[noreturn]] void throwError(std::string kind, std::string message);
[[noreturn]] inline void typeError(std::string message) { throwError("TypeError", std::move(message)); }

enum class Kind : uint8_t {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,  // list or tuple
  kDict,
  kNamespace,
  kCallable,
  kLoop,
};

struct Object {
  virtual ~Object() = default;
};
class Value;
struct StringObj;
struct ListObj;
struct DictObj;
struct NamespaceObj;
struct UndefinedObj;
struct LoopObj;
class Callable;

class Value {
 public:
  Value() = default;                                    // undefined, with no name
  Value(bool b) : kind_(Kind::kBool) { b_ = b; }        // NOLINT
  Value(int64_t i) : kind_(Kind::kInt) { i_ = i; }      // NOLINT
  Value(int i) : kind_(Kind::kInt) { i_ = i; }          // NOLINT
  Value(double f) : kind_(Kind::kFloat) { f_ = f; }     // NOLINT
  Value(std::string s);                                 // NOLINT
  Value(std::string_view s) : Value(std::string(s)) {}  // NOLINT
  Value(const char* s) : Value(std::string(s)) {}       // NOLINT
  Value(std::shared_ptr<const ListObj> l);              // NOLINT
  Value(std::shared_ptr<const DictObj> d);              // NOLINT
  Value(std::shared_ptr<NamespaceObj> n);               // NOLINT
  Value(std::shared_ptr<const Callable> c);             // NOLINT
  Value(std::shared_ptr<LoopObj> l);                    // NOLINT

  static Value none() {
    Value v;
    v.kind_ = Kind::kNone;
    return v;
  }
  // An undefined value whose use fails with `message` ("'x' is undefined").
  static Value undefined(std::string message);
  static Value list(std::vector<Value> items, bool is_tuple = false, bool lazy = false);

  Kind kind() const { return kind_; }
  bool isUndefined() const { return kind_ == Kind::kUndefined; }
  bool isNone() const { return kind_ == Kind::kNone; }
  bool isBool() const { return kind_ == Kind::kBool; }
  bool isInt() const { return kind_ == Kind::kInt; }
  bool isFloat() const { return kind_ == Kind::kFloat; }
  bool isNumber() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool isString() const { return kind_ == Kind::kString; }
  bool isList() const { return kind_ == Kind::kList; }
  bool isDict() const { return kind_ == Kind::kDict; }
  bool isNamespace() const { return kind_ == Kind::kNamespace; }
  bool isCallable() const { return kind_ == Kind::kCallable; }
  bool isLoop() const { return kind_ == Kind::kLoop; }

  bool boolean() const { return b_; }
  int64_t integer() const { return kind_ == Kind::kBool ? int64_t{b_} : i_; }
  double number() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(integer()); }
  const std::string& str() const;
  const ListObj& listObj() const;
  const std::vector<Value>& items() const;
  bool isTuple() const;
  bool isLazy() const;
  const DictObj& dict() const;
  NamespaceObj& ns() const;
  const Callable& callable() const;
  LoopObj& loop() const;
  // The message an undefined value fails with when used.
  std::string undefinedMessage() const;
  std::shared_ptr<const Object> object() const { return obj_; }
  // Nesting depth of lists and dicts (0 for scalars).
  int depth() const;

 private:
  Kind kind_ = Kind::kUndefined;
  union {
    bool b_;
    int64_t i_ = 0;
    double f_;
  };
  std::shared_ptr<const Object> obj_;
};

struct StringObj : Object {
  explicit StringObj(std::string s) : value(std::move(s)) {}
  std::string value;
};

struct ListObj : Object {
  std::vector<Value> items;
  bool is_tuple = false;
  // A generator / iterator in Python (what select, map, reverse, ... return): always true,
  // no len(), not subscriptable, printed as <generator object>.
  bool lazy = false;
  int depth = 1;
};

// Insertion-ordered dict. String keys are indexed; other keys are found by equality.
struct DictObj : Object {
  std::vector<std::pair<Value, Value>> entries;
  std::unordered_map<std::string, size_t> index;
  int depth = 1;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  // Inserts or replaces (Python dict assignment: the first position is kept).
  void set(Value key, Value value);
};

struct NamespaceObj : Object {
  std::vector<std::pair<std::string, Value>> attrs;
  const Value* find(std::string_view name) const;
  void set(const std::string& name, Value value);
};

struct UndefinedObj : Object {
  explicit UndefinedObj(std::string m) : message(std::move(m)) {}
  std::string message;
};

// The `loop` variable of a for loop.
struct LoopObj : Object {
  std::shared_ptr<const ListObj> items;
  int64_t index0 = 0;
  int depth0 = 0;
};

class Interpreter;

// Arguments of a call: positional, then keyword.
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // The keyword `name`, or the positional argument at `index` when given so; else nullptr.
  const Value* get(size_t index, std::string_view name) const;
};

class Callable : public Object {
 public:
  virtual Value call(Interpreter& in, const CallArgs& args) const = 0;
  virtual std::string name() const = 0;
};

inline const ListObj& Value::listObj() const { return *static_cast<const ListObj*>(obj_.get()); }
inline const DictObj& Value::dict() const { return *static_cast<const DictObj*>(obj_.get()); }
inline NamespaceObj& Value::ns() const {
  return *static_cast<NamespaceObj*>(const_cast<Object*>(obj_.get()));
}
inline const Callable& Value::callable() const { return *static_cast<const Callable*>(obj_.get()); }
inline LoopObj& Value::loop() const { return *static_cast<LoopObj*>(const_cast<Object*>(obj_.get())); }

// The shared empty-string value.
const Value& emptyString();

// ---- Python semantics ----
const char* typeName(const Value& v);  // "str", "int", "dict", ...
bool truthy(const Value& v);
bool equals(const Value& a, const Value& b, int depth = 0);
// <0, 0, >0 like Python's ordering; throws TypeError for unorderable types.
int compare(const Value& a, const Value& b, int depth = 0);
// str(v) appended to `out` (undefined renders as nothing).
void appendStr(std::string& out, const Value& v);
std::string toStr(const Value& v);
std::string repr(const Value& v);
void appendRepr(std::string& out, const Value& v, int depth = 0);
// Python's repr of a float: 1.0, 0.1, 1e-05, 1e+16, inf, nan.
std::string formatFloat(double d);
// Python's repr of a str (quotes chosen as Python chooses them).
void appendStrRepr(std::string& out, std::string_view s);

struct JsonStyle {
  std::string indent;  // used when has_indent
  bool has_indent = false;
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
// json.dumps(v) as transformers' tojson calls it; throws TypeError for undefined, namespaces
// and callables, as json.dumps does.
void appendJson(std::string& out, const Value& v, const JsonStyle& style, int depth = 0);

// Largest nesting of lists / dicts a value may have (deeper is an error, so that recursive
// printing, comparison and destruction stay bounded).
inline constexpr int kMaxValueDepth = 512;

// ---- UTF-8 (strings index by code point, as Python's str) ----
// Decodes `s`; an invalid byte b becomes the lone surrogate 0xDC00+b (Python's
// surrogateescape) so encoding gives back the same bytes.
std::vector<uint32_t> decodeUtf8(std::string_view s);
void appendUtf8(std::string& out, uint32_t cp);
std::string encodeUtf8(const std::vector<uint32_t>& cps, size_t begin, size_t end);
bool isAscii(std::string_view s);
size_t codepointCount(std::string_view s);
bool isPySpace(uint32_t cp);

}  // namespace llmrt::tmpl
