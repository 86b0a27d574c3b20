// The tree-walking interpreter that renders a parsed template: scopes as jinja2 has them
// (a for-loop iteration, a macro call and {% with %} open a scope; if does not), Undefined
// semantics of jinja2's default Undefined, and the limits (steps, output size, depth) that
// turn runaway templates into errors.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "template/ast.h"
#include "template/value.h"

namespace llmrt::tmpl {

struct Limits {
  size_t max_output_bytes = 16u << 20;
  int max_depth = 256;
  uint64_t max_steps = 50'000'000;
};

struct Frame {
  std::unordered_map<std::string, Value> vars;
  Frame* parent = nullptr;
};

class Interpreter {
 public:
  explicit Interpreter(const Limits& limits) : limits_(limits) {}
  ~Interpreter();

  // Renders `body` with `context` (a dict) as the top-level variables.
  std::string render(const Body& body, const Value& context);

  // ---- used by filters, tests, methods and globals ----
  Value call(const Value& fn, const CallArgs& args);
  Value getAttr(const Value& obj, const std::string& name);
  Value getItem(const Value& obj, const Value& key);
  Value applyFilter(const std::string& name, const Value& v, const CallArgs& args);
  bool applyTest(const std::string& name, const Value& v, const CallArgs& args);
  // Counts `n` units of work against max_steps.
  void charge(uint64_t n) {
    steps_ += n;
    if (steps_ > limits_.max_steps) stepLimit();
  }
  // Fails when a string of `bytes` would exceed the output limit.
  void checkSize(size_t bytes) const {
    if (bytes > limits_.max_output_bytes) sizeLimit(bytes);
  }
  void trackNamespace(const std::shared_ptr<NamespaceObj>& ns) { namespaces_.push_back(ns); }
  const Limits& limits() const { return limits_; }
  // strftime_now's time: a fixed one (tests) or null for the current local time.
  void setClock(const std::tm* clock) { clock_ = clock; }
  const std::tm* clock() const { return clock_; }

  // Runs a macro (called through its Callable).
  Value callMacro(const Node& macro, const CallArgs& args);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  [[noreturn]] void stepLimit() const;
  [[noreturn]] void sizeLimit(size_t bytes) const;

  Flow execBody(const Body& body, Frame& frame);
  Flow exec(const Node& n, Frame& frame);
  Flow execFor(const Node& n, Frame& frame);
  void assign(const Node& target, const Value& v, Frame& frame);
  std::string renderBody(const Body& body, Frame& frame);
  void write(std::string_view s);
  void writeValue(const Value& v);

  Value eval(const Node& n, Frame& frame);
  Value evalInner(const Node& n, Frame& frame);
  Value lookup(const std::string& name, Frame& frame);
  void evalArgs(const Node& n, size_t first, Frame& frame, CallArgs& args);
  Value evalBinary(Op op, const Value& a, const Value& b);
  bool evalCompare(Op op, const Value& a, const Value& b);
  Value slice(const Value& obj, const Node& s, Frame& frame);

  struct DepthGuard {
    DepthGuard(Interpreter& in, int limit);
    ~DepthGuard() { --in_.depth_; }
    Interpreter& in_;
  };

  Limits limits_;
  uint64_t steps_ = 0;
  int depth_ = 0;
  int macro_depth_ = 0;
  int line_ = 0;
  std::string* out_ = nullptr;
  Frame* root_ = nullptr;
  Value input_;  // the value a filter block / block set filters
  const std::tm* clock_ = nullptr;
  std::vector<std::shared_ptr<NamespaceObj>> namespaces_;
};

// Raises UndefinedError for an undefined operand.
[[noreturn]] void undefinedError(const Value& v);
inline void requireDefined(const Value& v) {
  if (v.isUndefined()) undefinedError(v);
}

// ---- builtins (builtins.cpp, methods.cpp) ----
using FilterFn = Value (*)(Interpreter&, const Value&, const CallArgs&);
using TestFn = bool (*)(Interpreter&, const Value&, const CallArgs&);
FilterFn findFilter(std::string_view name);
TestFn findTest(std::string_view name);
// The global functions: range, namespace, dict, raise_exception, strftime_now; undefined if none.
Value findGlobal(const std::string& name);
// Whether `obj` (a str, dict or list) has a method `name`, and calling it.
bool hasMethod(const Value& obj, std::string_view name);
Value callMethod(Interpreter& in, const Value& obj, const std::string& name, const CallArgs& args);
// Items a for loop / list() / a filter iterates: list items, dict keys, string characters;
// nothing for undefined; TypeError for the rest.
std::vector<Value> iterate(const Value& v);
// str(v) of each item, for join-like filters.
int64_t toInt(const Value& v);  // an int argument (bool counts), TypeError otherwise

}  // namespace llmrt::tmpl
