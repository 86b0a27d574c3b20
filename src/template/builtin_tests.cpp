// jinja2's built-in tests (jinja2/tests.py 3.1): `x is defined`, `x is string`, ...
#include <cmath>
#include <unordered_map>

#include "template/interpreter.h"

namespace llmrt::tmpl {
namespace {

// ---- tests ----
bool tDefined(Interpreter&, const Value& v, const CallArgs&) { return !v.isUndefined(); }
bool tUndefined(Interpreter&, const Value& v, const CallArgs&) { return v.isUndefined(); }
bool tNone(Interpreter&, const Value& v, const CallArgs&) { return v.isNone(); }
bool tBoolean(Interpreter&, const Value& v, const CallArgs&) { return v.isBool(); }
bool tTrue(Interpreter&, const Value& v, const CallArgs&) { return v.isBool() && v.boolean(); }
bool tFalse(Interpreter&, const Value& v, const CallArgs&) { return v.isBool() && !v.boolean(); }
bool tInteger(Interpreter&, const Value& v, const CallArgs&) { return v.isInt(); }
bool tFloat(Interpreter&, const Value& v, const CallArgs&) { return v.isFloat(); }
bool tNumber(Interpreter&, const Value& v, const CallArgs&) { return v.isNumber(); }
bool tString(Interpreter&, const Value& v, const CallArgs&) { return v.isString(); }
bool tMapping(Interpreter&, const Value& v, const CallArgs&) { return v.isDict(); }
bool tIterable(Interpreter&, const Value& v, const CallArgs&) {
  return v.isUndefined() || v.isList() || v.isDict() || v.isString();
}
bool tSequence(Interpreter&, const Value& v, const CallArgs&) {
  return v.isUndefined() || (v.isList() && !v.isLazy()) || v.isDict() || v.isString();
}
bool tCallable(Interpreter&, const Value& v, const CallArgs&) { return v.isCallable() || v.isUndefined(); }
bool tEscaped(Interpreter&, const Value&, const CallArgs&) { return false; }
const Value& other(const CallArgs& a, const char* test) {
  const Value* o = a.get(0, "other");
  if (!o) typeError(std::string(test) + "() missing required argument");
  return *o;
}
bool tEq(Interpreter&, const Value& v, const CallArgs& a) { return equals(v, other(a, "eq")); }
bool tNe(Interpreter&, const Value& v, const CallArgs& a) { return !equals(v, other(a, "ne")); }
int cmp(const Value& v, const Value& o) {
  requireDefined(v);
  requireDefined(o);
  return compare(v, o);
}
bool tLt(Interpreter&, const Value& v, const CallArgs& a) { return cmp(v, other(a, "lt")) < 0; }
bool tLe(Interpreter&, const Value& v, const CallArgs& a) { return cmp(v, other(a, "le")) <= 0; }
bool tGt(Interpreter&, const Value& v, const CallArgs& a) { return cmp(v, other(a, "gt")) > 0; }
bool tGe(Interpreter&, const Value& v, const CallArgs& a) { return cmp(v, other(a, "ge")) >= 0; }
bool tIn(Interpreter&, const Value& v, const CallArgs& a) {
  const Value& seq = other(a, "in");
  if (seq.isString()) {
    if (!v.isString()) typeError("'in <string>' requires string as left operand");
    return seq.str().find(v.str()) != std::string::npos;
  }
  if (seq.isDict()) return seq.dict().find(v) != nullptr;
  for (const Value& x : iterate(seq))
    if (equals(x, v)) return true;
  return false;
}
bool modulo(const Value& v, int64_t m, int64_t want) {
  requireDefined(v);
  if (v.isFloat())
    return std::fmod(std::fmod(v.number(), static_cast<double>(m)) + m, static_cast<double>(m)) == want;
  if (!v.isInt() && !v.isBool())
    typeError(std::string("unsupported operand type(s) for %: '") + typeName(v) + "' and 'int'");
  int64_t r = v.integer() % m;
  if (r < 0) r += m < 0 ? -m : m;
  return r == want;
}
bool tOdd(Interpreter&, const Value& v, const CallArgs&) { return modulo(v, 2, 1); }
bool tEven(Interpreter&, const Value& v, const CallArgs&) { return modulo(v, 2, 0); }
bool tDivisibleby(Interpreter&, const Value& v, const CallArgs& a) {
  const Value* n = a.get(0, "num");
  if (!n) typeError("divisibleby() missing required argument 'num'");
  int64_t m = toInt(*n);
  if (m == 0) throwError("ZeroDivisionError", "integer division or modulo by zero");
  if (m == -1) return true;
  return modulo(v, m, 0);
}
bool tLower(Interpreter& in, const Value& v, const CallArgs&) {
  return callMethod(in, Value(toStr(v)), "islower", {}).boolean();
}
bool tUpper(Interpreter& in, const Value& v, const CallArgs&) {
  return callMethod(in, Value(toStr(v)), "isupper", {}).boolean();
}
bool tSameas(Interpreter&, const Value& v, const CallArgs& a) {
  const Value& o = other(a, "sameas");
  if (v.kind() != o.kind()) return false;
  if (v.isNone() || v.isUndefined()) return true;
  if (v.isBool()) return v.boolean() == o.boolean();
  if (v.isInt()) return v.integer() == o.integer() && v.integer() >= -5 && v.integer() <= 256;
  return v.object() && v.object() == o.object();
}
bool tFilter(Interpreter&, const Value& v, const CallArgs&) { return v.isString() && findFilter(v.str()); }
bool tTest(Interpreter&, const Value& v, const CallArgs&) { return v.isString() && findTest(v.str()); }

}  // namespace

TestFn findTest(std::string_view name) {
  static const std::unordered_map<std::string_view, TestFn> kTests = {
      {"defined", tDefined},
      {"undefined", tUndefined},
      {"none", tNone},
      {"boolean", tBoolean},
      {"true", tTrue},
      {"false", tFalse},
      {"integer", tInteger},
      {"float", tFloat},
      {"number", tNumber},
      {"string", tString},
      {"mapping", tMapping},
      {"iterable", tIterable},
      {"sequence", tSequence},
      {"callable", tCallable},
      {"escaped", tEscaped},
      {"eq", tEq},
      {"equalto", tEq},
      {"==", tEq},
      {"ne", tNe},
      {"!=", tNe},
      {"lt", tLt},
      {"lessthan", tLt},
      {"<", tLt},
      {"le", tLe},
      {"<=", tLe},
      {"gt", tGt},
      {"greaterthan", tGt},
      {">", tGt},
      {"ge", tGe},
      {">=", tGe},
      {"in", tIn},
      {"odd", tOdd},
      {"even", tEven},
      {"divisibleby", tDivisibleby},
      {"sameas", tSameas},
      {"filter", tFilter},
      {"test", tTest},
      {"lower", tLower},
      {"upper", tUpper},
  };
  auto it = kTests.find(name);
  return it == kTests.end() ? nullptr : it->second;
}

}  // namespace llmrt::tmpl
