// Statement execution and expression evaluation. Errors are TemplateError exceptions that
// carry the line of the node being run; ChatTemplate::render turns them into a Status.
#include "template/interpreter.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace llmrt::tmpl {

namespace {

// A macro defined by {% macro %}: the node lives in the template's immutable tree.
class MacroFn : public Callable {
 public:
  explicit MacroFn(const Node* node) : node_(node) {}
  Value call(Interpreter& in, const CallArgs& args) const override { return in.callMacro(*node_, args); }
  std::string name() const override { return node_->name; }

 private:
  const Node* node_;
};

// A method of a str / dict / list bound to its receiver ("abc".upper).
class BoundMethod : public Callable {
 public:
  BoundMethod(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
  Value call(Interpreter& in, const CallArgs& args) const override {
    return callMethod(in, self_, name_, args);
  }
  std::string name() const override { return name_; }

 private:
  Value self_;
  std::string name_;
};

// loop.cycle(a, b, ...)
class LoopCycle : public Callable {
 public:
  explicit LoopCycle(std::shared_ptr<LoopObj> loop) : loop_(std::move(loop)) {}
  Value call(Interpreter&, const CallArgs& args) const override {
    if (args.pos.empty()) typeError("no items for cycling given");
    return args.pos[static_cast<size_t>(loop_->index0) % args.pos.size()];
  }
  std::string name() const override { return "cycle"; }

 private:
  std::shared_ptr<LoopObj> loop_;
};

std::string objectTypeRepr(const Value& v) {
  if (v.isNone()) return "None";
  return std::string(typeName(v)) + " object";
}

Value missingAttr(const Value& obj, const std::string& name) {
  std::string msg;
  msg += '\'';
  msg += objectTypeRepr(obj);
  msg += "' has no attribute ";
  appendStrRepr(msg, name);
  return Value::undefined(std::move(msg));
}

Value missingItem(const Value& obj, const Value& key) {
  return Value::undefined(objectTypeRepr(obj) + " has no element " + repr(key));
}

}  // namespace

void undefinedError(const Value& v) { throwError("UndefinedError", v.undefinedMessage()); }

Interpreter::DepthGuard::DepthGuard(Interpreter& in, int limit) : in_(in) {
  if (++in_.depth_ > limit) {
    --in_.depth_;
    throwError("RecursionError", "maximum recursion depth exceeded (template nesting deeper than " +
                                     std::to_string(limit) + ")");
  }
}

Interpreter::~Interpreter() {
  // Namespaces may reference each other (ns.a = ns): empty them all first, so no cycle leaks
  // and no long chain is destroyed recursively.
  std::vector<Value> held;
  for (auto& ns : namespaces_)
    for (auto& [k, v] : ns->attrs) held.push_back(std::move(v));
  for (auto& ns : namespaces_) ns->attrs.clear();
  held.clear();
}

void Interpreter::stepLimit() const {
  throwError("RuntimeError", "template ran for more than " + std::to_string(limits_.max_steps) + " steps");
}

void Interpreter::sizeLimit(size_t bytes) const {
  throwError("RuntimeError", "template output of " + std::to_string(bytes) + " bytes exceeds the limit of " +
                                 std::to_string(limits_.max_output_bytes) + " bytes");
}

std::string Interpreter::render(const Body& body, const Value& context) {
  Frame root;
  for (const auto& [k, v] : context.dict().entries)
    if (k.isString()) root.vars[k.str()] = v;
  root_ = &root;
  std::string out;
  out_ = &out;
  try {
    execBody(body, root);
  } catch (TemplateError& e) {
    if (e.line == 0) e.line = line_;
    throw;
  }
  return out;
}

void Interpreter::write(std::string_view s) {
  if (out_->size() + s.size() > limits_.max_output_bytes) sizeLimit(out_->size() + s.size());
  out_->append(s);
}

void Interpreter::writeValue(const Value& v) {
  if (v.isString()) return write(v.str());
  std::string s;
  appendStr(s, v);
  write(s);
}

std::string Interpreter::renderBody(const Body& body, Frame& frame) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  try {
    execBody(body, frame);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buf;
}

Interpreter::Flow Interpreter::execBody(const Body& body, Frame& frame) {
  for (const auto& n : body) {
    Flow f = exec(*n, frame);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec(const Node& n, Frame& frame) {
  DepthGuard guard(*this, limits_.max_depth * 8);
  charge(1);
  line_ = n.line;
  switch (n.kind) {
    case NodeKind::kData:
      write(n.name);
      return Flow::kNormal;
    case NodeKind::kPrint:
      writeValue(eval(*n.kids[0], frame));
      return Flow::kNormal;
    case NodeKind::kIf:
      for (size_t i = 0; i < n.kids.size(); ++i)
        if (truthy(eval(*n.kids[i], frame))) return execBody(n.bodies[i], frame);
      if (n.bodies.size() > n.kids.size()) return execBody(n.bodies.back(), frame);
      return Flow::kNormal;
    case NodeKind::kFor:
      return execFor(n, frame);
    case NodeKind::kSet: {
      Value v = eval(*n.kids[0], frame);
      assign(n, v, frame);
      return Flow::kNormal;
    }
    case NodeKind::kSetBlock: {
      Frame inner{{}, &frame};
      Value v(renderBody(n.bodies[0], inner));
      if (n.kids[0]) {
        Value saved = input_;
        input_ = v;
        v = eval(*n.kids[0], frame);
        input_ = saved;
      }
      assign(n, v, frame);
      return Flow::kNormal;
    }
    case NodeKind::kMacro: {
      frame.vars[n.name] = Value(std::shared_ptr<const Callable>(std::make_shared<MacroFn>(&n)));
      return Flow::kNormal;
    }
    case NodeKind::kFilterBlock: {
      Frame inner{{}, &frame};
      Value saved = input_;
      input_ = Value(renderBody(n.bodies[0], inner));
      Value v = eval(*n.kids[0], frame);
      input_ = saved;
      writeValue(v);
      return Flow::kNormal;
    }
    case NodeKind::kBreak:
      return Flow::kBreak;
    case NodeKind::kContinue:
      return Flow::kContinue;
    case NodeKind::kWith: {
      Frame inner{{}, &frame};
      for (size_t i = 0; i < n.names.size(); ++i) inner.vars[n.names[i]] = eval(*n.kids[i], frame);
      return execBody(n.bodies[0], inner);
    }
    case NodeKind::kScope: {
      Frame inner{{}, &frame};
      return execBody(n.bodies[0], inner);
    }
    default:
      writeValue(eval(n, frame));
      return Flow::kNormal;
  }
}

void Interpreter::assign(const Node& target, const Value& v, Frame& frame) {
  if (target.is_ns_ref) {
    Value ns = lookup(target.name, frame);
    if (!ns.isNamespace())
      throwError("TemplateRuntimeError", "cannot assign attribute on non-namespace object");
    ns.ns().set(target.attr, v);
    return;
  }
  if (!target.is_tuple_target) {
    frame.vars[target.names[0]] = v;
    return;
  }
  std::vector<Value> items = iterate(v);
  if (items.size() != target.names.size()) {
    if (items.size() > target.names.size())
      throwError("ValueError",
                 "too many values to unpack (expected " + std::to_string(target.names.size()) + ")");
    throwError("ValueError", "not enough values to unpack (expected " + std::to_string(target.names.size()) +
                                 ", got " + std::to_string(items.size()) + ")");
  }
  for (size_t i = 0; i < items.size(); ++i) frame.vars[target.names[i]] = items[i];
}

Interpreter::Flow Interpreter::execFor(const Node& n, Frame& frame) {
  Value seq = eval(*n.kids[0], frame);
  std::shared_ptr<const ListObj> items;
  if (seq.isList() && !n.kids[1]) {
    items = std::static_pointer_cast<const ListObj>(seq.object());
  } else {
    auto l = std::make_shared<ListObj>();
    std::vector<Value> all = iterate(seq);
    charge(all.size());
    if (n.kids[1]) {
      for (Value& item : all) {
        Frame test_frame{{}, &frame};
        assign(n, item, test_frame);
        if (truthy(eval(*n.kids[1], test_frame))) l->items.push_back(std::move(item));
      }
    } else {
      l->items = std::move(all);
    }
    items = std::move(l);
  }
  auto loop = std::make_shared<LoopObj>();
  loop->items = items;
  Value loop_value(loop);
  bool ran = false;
  const size_t count = items->items.size();
  for (size_t i = 0; i < count; ++i) {
    charge(1);
    ran = true;
    loop->index0 = static_cast<int64_t>(i);
    Frame iter{{}, &frame};
    assign(n, items->items[i], iter);
    iter.vars["loop"] = loop_value;
    Flow f = execBody(n.bodies[0], iter);
    if (f == Flow::kBreak) break;
  }
  if (!ran && n.bodies.size() > 1) {
    Frame inner{{}, &frame};
    return execBody(n.bodies[1], inner);
  }
  return Flow::kNormal;
}

Value Interpreter::callMacro(const Node& macro, const CallArgs& args) {
  if (macro_depth_ >= limits_.max_depth)
    throwError("RecursionError", "maximum recursion depth exceeded in macro '" + macro.name + "' (" +
                                     std::to_string(limits_.max_depth) + " nested calls)");
  if (args.pos.size() > macro.names.size())
    typeError("macro '" + macro.name + "' takes not more than " + std::to_string(macro.names.size()) +
              " argument(s)");
  for (const auto& [k, v] : args.kw)
    if (std::find(macro.names.begin(), macro.names.end(), k) == macro.names.end())
      typeError("macro '" + macro.name + "' takes no keyword argument '" + k + "'");
  Frame frame{{}, root_};
  const size_t first_default = macro.names.size() - macro.kids.size();
  for (size_t i = 0; i < macro.names.size(); ++i) {
    const Value* given = args.get(i, macro.names[i]);
    if (given) {
      frame.vars[macro.names[i]] = *given;
    } else if (i >= first_default) {
      frame.vars[macro.names[i]] = eval(*macro.kids[i - first_default], frame);
    } else {
      frame.vars[macro.names[i]] = Value::undefined("'" + macro.names[i] + "' is undefined");
    }
  }
  ++macro_depth_;
  int saved_line = line_;
  std::string out;
  try {
    out = renderBody(macro.bodies[0], frame);
  } catch (...) {
    --macro_depth_;
    throw;
  }
  --macro_depth_;
  line_ = saved_line;
  return Value(std::move(out));
}

// ---- expressions ----

Value Interpreter::lookup(const std::string& name, Frame& frame) {
  for (Frame* f = &frame; f; f = f->parent) {
    auto it = f->vars.find(name);
    if (it != f->vars.end()) return it->second;
  }
  Value g = findGlobal(name);
  if (!g.isUndefined()) return g;
  return Value::undefined("'" + name + "' is undefined");
}

Value Interpreter::eval(const Node& n, Frame& frame) {
  DepthGuard guard(*this, limits_.max_depth * 8);
  charge(1);
  line_ = n.line;
  return evalInner(n, frame);
}

void Interpreter::evalArgs(const Node& n, size_t first, Frame& frame, CallArgs& args) {
  args.pos.reserve(n.n_pos);
  for (size_t i = 0; i < n.n_pos; ++i) args.pos.push_back(eval(*n.kids[first + i], frame));
  for (size_t i = 0; i < n.names.size(); ++i)
    args.kw.emplace_back(n.names[i], eval(*n.kids[first + n.n_pos + i], frame));
}

Value Interpreter::evalInner(const Node& n, Frame& frame) {
  switch (n.kind) {
    case NodeKind::kConst:
      return n.value;
    case NodeKind::kName:
      return lookup(n.name, frame);
    case NodeKind::kInput:
      return input_;
    case NodeKind::kGetattr:
      return getAttr(eval(*n.kids[0], frame), n.name);
    case NodeKind::kGetitem: {
      Value obj = eval(*n.kids[0], frame);
      if (n.kids[1]->kind == NodeKind::kSlice) return slice(obj, *n.kids[1], frame);
      return getItem(obj, eval(*n.kids[1], frame));
    }
    case NodeKind::kCall: {
      Value fn = eval(*n.kids[0], frame);
      CallArgs args;
      evalArgs(n, 1, frame, args);
      line_ = n.line;
      return call(fn, args);
    }
    case NodeKind::kFilter: {
      Value v = eval(*n.kids[0], frame);
      CallArgs args;
      evalArgs(n, 1, frame, args);
      line_ = n.line;
      return applyFilter(n.name, v, args);
    }
    case NodeKind::kTest: {
      Value v = eval(*n.kids[0], frame);
      CallArgs args;
      evalArgs(n, 1, frame, args);
      line_ = n.line;
      return Value(applyTest(n.name, v, args));
    }
    case NodeKind::kNeg:
    case NodeKind::kPos: {
      Value v = eval(*n.kids[0], frame);
      requireDefined(v);
      if (!v.isNumber())
        typeError(std::string("bad operand type for unary ") + (n.kind == NodeKind::kNeg ? "-" : "+") +
                  ": '" + typeName(v) + "'");
      if (n.kind == NodeKind::kPos) return v.isBool() ? Value(v.integer()) : v;
      if (v.isFloat()) return Value(-v.number());
      if (v.integer() == INT64_MIN) throwError("OverflowError", "integer result too large for 64 bits");
      return Value(-v.integer());
    }
    case NodeKind::kNot:
      return Value(!truthy(eval(*n.kids[0], frame)));
    case NodeKind::kAnd: {
      Value a = eval(*n.kids[0], frame);
      return truthy(a) ? eval(*n.kids[1], frame) : a;
    }
    case NodeKind::kOr: {
      Value a = eval(*n.kids[0], frame);
      return truthy(a) ? a : eval(*n.kids[1], frame);
    }
    case NodeKind::kBinary: {
      Value a = eval(*n.kids[0], frame);
      Value b = eval(*n.kids[1], frame);
      line_ = n.line;
      return evalBinary(n.op, a, b);
    }
    case NodeKind::kConcat: {
      std::string s;
      for (const auto& k : n.kids) {
        appendStr(s, eval(*k, frame));
        checkSize(s.size());
      }
      charge(s.size() / 64);
      return Value(std::move(s));
    }
    case NodeKind::kCompare: {
      Value left = eval(*n.kids[0], frame);
      for (size_t i = 0; i < n.ops.size(); ++i) {
        Value right = eval(*n.kids[i + 1], frame);
        line_ = n.line;
        if (!evalCompare(n.ops[i], left, right)) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case NodeKind::kCondExpr:
      if (truthy(eval(*n.kids[0], frame))) return eval(*n.kids[1], frame);
      if (n.kids[2]) return eval(*n.kids[2], frame);
      return Value::undefined("the inline if-expression on line " + std::to_string(n.line) +
                              " evaluated to false and no else section was defined.");
    case NodeKind::kList:
    case NodeKind::kTuple: {
      std::vector<Value> items;
      items.reserve(n.kids.size());
      for (const auto& k : n.kids) items.push_back(eval(*k, frame));
      return Value::list(std::move(items), n.kind == NodeKind::kTuple);
    }
    case NodeKind::kDict: {
      auto d = std::make_shared<DictObj>();
      for (size_t i = 0; i + 1 < n.kids.size(); i += 2) {
        Value k = eval(*n.kids[i], frame);
        if (k.isList() && !k.isTuple()) typeError("unhashable type: 'list'");
        if (k.isDict()) typeError("unhashable type: 'dict'");
        d->set(std::move(k), eval(*n.kids[i + 1], frame));
      }
      return Value(std::shared_ptr<const DictObj>(std::move(d)));
    }
    default:
      throwError("TemplateSyntaxError", "statement used as an expression");
  }
}

Value Interpreter::call(const Value& fn, const CallArgs& args) {
  if (fn.isCallable()) return fn.callable().call(*this, args);
  requireDefined(fn);
  typeError(std::string("'") + typeName(fn) + "' object is not callable");
}

Value Interpreter::getAttr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Kind::kUndefined:
      undefinedError(obj);
    case Kind::kDict: {
      if (hasMethod(obj, name))
        return Value(std::shared_ptr<const Callable>(std::make_shared<BoundMethod>(obj, name)));
      if (const Value* v = obj.dict().find(std::string_view(name))) return *v;
      return missingAttr(obj, name);
    }
    case Kind::kString:
    case Kind::kList:
      if (hasMethod(obj, name))
        return Value(std::shared_ptr<const Callable>(std::make_shared<BoundMethod>(obj, name)));
      return missingAttr(obj, name);
    case Kind::kNamespace:
      if (const Value* v = obj.ns().find(name)) return *v;
      return missingAttr(obj, name);
    case Kind::kLoop: {
      const LoopObj& l = obj.loop();
      const int64_t len = static_cast<int64_t>(l.items->items.size());
      const int64_t i = l.index0;
      if (name == "index0") return Value(i);
      if (name == "index") return Value(i + 1);
      if (name == "revindex") return Value(len - i);
      if (name == "revindex0") return Value(len - i - 1);
      if (name == "first") return Value(i == 0);
      if (name == "last") return Value(i == len - 1);
      if (name == "length") return Value(len);
      if (name == "depth") return Value(int64_t{1});
      if (name == "depth0") return Value(int64_t{0});
      if (name == "previtem")
        return i > 0 ? l.items->items[static_cast<size_t>(i - 1)]
                     : Value::undefined("there is no previous item");
      if (name == "nextitem")
        return i + 1 < len ? l.items->items[static_cast<size_t>(i + 1)]
                           : Value::undefined("there is no next item");
      if (name == "cycle") {
        auto self = std::static_pointer_cast<LoopObj>(std::const_pointer_cast<Object>(obj.object()));
        return Value(std::shared_ptr<const Callable>(std::make_shared<LoopCycle>(std::move(self))));
      }
      return missingAttr(obj, name);
    }
    default:
      return missingAttr(obj, name);
  }
}

Value Interpreter::getItem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Kind::kUndefined:
      undefinedError(obj);
    case Kind::kDict: {
      if (const Value* v = obj.dict().find(key)) return *v;
      break;
    }
    case Kind::kList:
    case Kind::kString: {
      if ((!key.isInt() && !key.isBool()) || obj.isLazy()) break;
      int64_t i = key.integer();
      if (obj.isList()) {
        const auto& items = obj.items();
        const auto size = static_cast<int64_t>(items.size());
        if (i < 0) i += size;
        if (i < 0 || i >= size) return missingItem(obj, key);
        return items[static_cast<size_t>(i)];
      }
      const std::string& s = obj.str();
      if (isAscii(s)) {
        const auto size = static_cast<int64_t>(s.size());
        if (i < 0) i += size;
        if (i < 0 || i >= size) return missingItem(obj, key);
        return Value(std::string(1, s[static_cast<size_t>(i)]));
      }
      std::vector<uint32_t> cps = decodeUtf8(s);
      const auto size = static_cast<int64_t>(cps.size());
      if (i < 0) i += size;
      if (i < 0 || i >= size) return missingItem(obj, key);
      return Value(encodeUtf8(cps, static_cast<size_t>(i), static_cast<size_t>(i) + 1));
    }
    default:
      break;
  }
  if (key.isString()) return getAttr(obj, key.str());
  return missingItem(obj, key);
}

Value Interpreter::slice(const Value& obj, const Node& s, Frame& frame) {
  auto bound = [&](int i) -> std::optional<int64_t> {
    if (!s.kids[static_cast<size_t>(i)]) return std::nullopt;
    Value v = eval(*s.kids[static_cast<size_t>(i)], frame);
    if (v.isNone()) return std::nullopt;
    requireDefined(v);
    if (!v.isInt() && !v.isBool()) typeError("slice indices must be integers or None");
    return v.integer();
  };
  std::optional<int64_t> start = bound(0), stop = bound(1), step_opt = bound(2);
  requireDefined(obj);
  int64_t step = step_opt.value_or(1);
  if (step == 0) throwError("ValueError", "slice step cannot be zero");
  std::vector<uint32_t> cps;
  int64_t len;
  const bool ascii = obj.isString() && isAscii(obj.str());
  if (obj.isList() && !obj.isLazy()) {
    len = static_cast<int64_t>(obj.items().size());
  } else if (obj.isString()) {
    if (!ascii) cps = decodeUtf8(obj.str());
    len = ascii ? static_cast<int64_t>(obj.str().size()) : static_cast<int64_t>(cps.size());
  } else {
    return missingItem(obj, Value("slice"));
  }
  // Python's PySlice_AdjustIndices.
  auto adjust = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) {
      x += len;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= len) {
      x = step < 0 ? len - 1 : len;
    }
    return x;
  };
  int64_t b = adjust(start, step < 0 ? len - 1 : 0);
  int64_t e = adjust(stop, step < 0 ? -1 : len);
  std::vector<size_t> idx;
  if (step > 0) {
    for (int64_t i = b; i < e; i += step) idx.push_back(static_cast<size_t>(i));
  } else {
    for (int64_t i = b; i > e; i += step) idx.push_back(static_cast<size_t>(i));
  }
  charge(idx.size());
  if (obj.isList()) {
    std::vector<Value> out;
    out.reserve(idx.size());
    for (size_t i : idx) out.push_back(obj.items()[i]);
    return Value::list(std::move(out), obj.isTuple());
  }
  std::string out;
  for (size_t i : idx) {
    if (ascii) {
      out += obj.str()[i];
    } else {
      appendUtf8(out, cps[i]);
    }
  }
  return Value(std::move(out));
}

Value Interpreter::applyFilter(const std::string& name, const Value& v, const CallArgs& args) {
  FilterFn f = findFilter(name);
  if (!f) throwError("TemplateAssertionError", "No filter named '" + name + "'.");
  return f(*this, v, args);
}

bool Interpreter::applyTest(const std::string& name, const Value& v, const CallArgs& args) {
  TestFn t = findTest(name);
  if (!t) throwError("TemplateAssertionError", "No test named '" + name + "'.");
  return t(*this, v, args);
}

}  // namespace llmrt::tmpl
