// Python's binary operators and comparisons on template values (+ - * / // % **, ==, <, in, ...).
#include <algorithm>
#include <cmath>

#include "template/interpreter.h"

namespace llmrt::tmpl {
namespace {

bool checkedAdd(int64_t a, int64_t b, int64_t& r) { return !__builtin_add_overflow(a, b, &r); }
bool checkedSub(int64_t a, int64_t b, int64_t& r) { return !__builtin_sub_overflow(a, b, &r); }
bool checkedMul(int64_t a, int64_t b, int64_t& r) { return !__builtin_mul_overflow(a, b, &r); }
[[noreturn]] void overflow() { throwError("OverflowError", "integer result too large for 64 bits"); }

std::string opSymbol(Op op) {
  static const char* kSym[] = {
      "+", "-", "*", "/", "//", "%", "**", "==", "!=", "<", "<=", ">", ">=", "in", "not in"};
  return kSym[static_cast<int>(op)];
}

[[noreturn]] void unsupported(Op op, const Value& a, const Value& b) {
  typeError("unsupported operand type(s) for " + opSymbol(op) + ": '" + typeName(a) + "' and '" +
            typeName(b) + "'");
}

}  // namespace

Value Interpreter::evalBinary(Op op, const Value& a, const Value& b) {
  requireDefined(a);
  requireDefined(b);
  const bool ints = (a.isInt() || a.isBool()) && (b.isInt() || b.isBool());
  const bool nums = a.isNumber() && b.isNumber();
  switch (op) {
    case Op::kAdd: {
      int64_t r;
      if (ints) return checkedAdd(a.integer(), b.integer(), r) ? Value(r) : (overflow(), Value());
      if (nums) return Value(a.number() + b.number());
      if (a.isString() && b.isString()) {
        checkSize(a.str().size() + b.str().size());
        charge((a.str().size() + b.str().size()) / 64);
        return Value(a.str() + b.str());
      }
      if (a.isList() && b.isList() && a.isTuple() == b.isTuple()) {
        std::vector<Value> items = a.items();
        items.insert(items.end(), b.items().begin(), b.items().end());
        charge(items.size());
        return Value::list(std::move(items), a.isTuple());
      }
      if (a.isString())
        typeError(std::string("can only concatenate str (not \"") + typeName(b) + "\") to str");
      if (a.isList())
        typeError(std::string("can only concatenate ") + typeName(a) + " (not \"" + typeName(b) + "\") to " +
                  typeName(a));
      unsupported(op, a, b);
    }
    case Op::kSub: {
      int64_t r;
      if (ints) return checkedSub(a.integer(), b.integer(), r) ? Value(r) : (overflow(), Value());
      if (nums) return Value(a.number() - b.number());
      unsupported(op, a, b);
    }
    case Op::kMul: {
      int64_t r;
      if (ints) return checkedMul(a.integer(), b.integer(), r) ? Value(r) : (overflow(), Value());
      if (nums) return Value(a.number() * b.number());
      const Value* seq = (b.isInt() || b.isBool()) ? &a : (a.isInt() || a.isBool()) ? &b : nullptr;
      const Value* count = seq == &a ? &b : &a;
      if (seq && (seq->isString() || seq->isList())) {
        int64_t n = std::max<int64_t>(count->integer(), 0);
        if (seq->isString()) {
          const std::string& s = seq->str();
          if (n > 0 && s.size() > 0 && static_cast<uint64_t>(n) > limits_.max_output_bytes / s.size())
            sizeLimit(static_cast<size_t>(-1));
          std::string out;
          out.reserve(s.size() * static_cast<size_t>(n));
          for (int64_t i = 0; i < n; ++i) out += s;
          charge(out.size() / 64);
          return Value(std::move(out));
        }
        const auto& items = seq->items();
        if (n > 0 && items.size() > 0 && static_cast<uint64_t>(n) > limits_.max_steps / items.size())
          stepLimit();
        charge(items.size() * static_cast<uint64_t>(n));
        std::vector<Value> out;
        for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
        return Value::list(std::move(out), seq->isTuple());
      }
      unsupported(op, a, b);
    }
    case Op::kDiv:
      if (!nums) unsupported(op, a, b);
      if (b.number() == 0) throwError("ZeroDivisionError", "division by zero");
      return Value(a.number() / b.number());
    case Op::kFloorDiv:
    case Op::kMod: {
      if (a.isString() && op == Op::kMod) {
        CallArgs args;
        if (b.isTuple()) {
          args.pos = b.items();
        } else {
          args.pos.push_back(b);
        }
        return applyFilter("format", a, args);
      }
      if (!nums) unsupported(op, a, b);
      if (ints) {
        int64_t x = a.integer(), y = b.integer();
        if (y == 0) throwError("ZeroDivisionError", "integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) {
          if (op == Op::kMod) return Value(int64_t{0});
          overflow();
        }
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          --q;
          m += y;
        }
        return Value(op == Op::kFloorDiv ? q : m);
      }
      double x = a.number(), y = b.number();
      if (y == 0)
        throwError("ZeroDivisionError", op == Op::kMod ? "float modulo" : "float floor division by zero");
      if (op == Op::kFloorDiv) return Value(std::floor(x / y));
      double m = std::fmod(x, y);
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value(m);
    }
    case Op::kPow: {
      if (!nums) unsupported(op, a, b);
      if (ints && b.integer() >= 0) {
        int64_t base = a.integer(), e = b.integer(), r = 1;
        while (e > 0) {
          if (e & 1)
            if (!checkedMul(r, base, r)) overflow();
          e >>= 1;
          if (e > 0 && !checkedMul(base, base, base)) overflow();
        }
        return Value(r);
      }
      if (a.number() == 0 && b.number() < 0)
        throwError("ZeroDivisionError", "0.0 cannot be raised to a negative power");
      return Value(std::pow(a.number(), b.number()));
    }
    default:
      unsupported(op, a, b);
  }
}

bool Interpreter::evalCompare(Op op, const Value& a, const Value& b) {
  switch (op) {
    case Op::kEq:
      return equals(a, b);
    case Op::kNe:
      return !equals(a, b);
    case Op::kIn:
    case Op::kNotIn: {
      bool found = false;
      if (b.isString()) {
        requireDefined(a);
        if (!a.isString())
          typeError(std::string("'in <string>' requires string as left operand, not ") + typeName(a));
        found = b.str().find(a.str()) != std::string::npos;
      } else if (b.isDict()) {
        found = b.dict().find(a) != nullptr;
      } else if (b.isList()) {
        for (const Value& x : b.items())
          if (equals(x, a)) {
            found = true;
            break;
          }
        charge(b.items().size() / 8);
      } else if (!b.isUndefined()) {
        typeError(std::string("argument of type '") + typeName(b) + "' is not iterable");
      }
      return op == Op::kIn ? found : !found;
    }
    default: {
      requireDefined(a);
      requireDefined(b);
      int c = compare(a, b);
      switch (op) {
        case Op::kLt:
          return c < 0;
        case Op::kLe:
          return c <= 0;
        case Op::kGt:
          return c > 0;
        default:
          return c >= 0;
      }
    }
  }
}

}  // namespace llmrt::tmpl
