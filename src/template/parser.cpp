// Recursive-descent parser following jinja2/parser.py: operator precedence, tuple rules and
// the statement forms are jinja2's, so templates parse (and fail) where jinja2's do.
#include "template/parser.h"

#include <algorithm>
#include <initializer_list>

#include "template/lexer.h"

namespace llmrt::tmpl {
namespace {

struct ParseFail {
  std::string message;
  int line, col;
};

class Parser {
 public:
  Parser(std::vector<Token> tokens, int max_depth) : toks_(std::move(tokens)), max_depth_(max_depth) {}

  Body parse() { return subparse({}); }

 private:
  // ---- token helpers ----
  const Token& cur() const { return toks_[pos_]; }
  const Token& look() const { return toks_[std::min(pos_ + 1, toks_.size() - 1)]; }
  void next() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  bool isOp(const char* op) const { return cur().type == Tok::kOp && cur().text == op; }
  bool isName(const char* n) const { return cur().type == Tok::kName && cur().text == n; }
  bool skipOp(const char* op) {
    if (!isOp(op)) return false;
    next();
    return true;
  }
  bool skipName(const char* n) {
    if (!isName(n)) return false;
    next();
    return true;
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::kData:
        return "template data / text";
      case Tok::kVarBegin:
        return "begin of print statement";
      case Tok::kVarEnd:
        return "end of print statement";
      case Tok::kBlockBegin:
        return "begin of statement block";
      case Tok::kBlockEnd:
        return "end of statement block";
      case Tok::kName:
        return t.text;
      case Tok::kString:
        return "string";
      case Tok::kInt:
        return "integer";
      case Tok::kFloat:
        return "float";
      case Tok::kOp:
        return t.text;
      case Tok::kEof:
        return "end of template";
    }
    return "token";
  }

  [[noreturn]] void fail(const std::string& msg) { throw ParseFail{msg, cur().line, cur().col}; }
  [[noreturn]] void failAt(const std::string& msg, const Token& t) { throw ParseFail{msg, t.line, t.col}; }

  void expectOp(const char* op) {
    if (!skipOp(op)) fail(std::string("expected token '") + op + "', got '" + describe(cur()) + "'");
  }
  void expect(Tok type, const char* what) {
    if (cur().type != type) fail(std::string("expected token '") + what + "', got '" + describe(cur()) + "'");
    next();
  }
  std::string expectName() {
    if (cur().type != Tok::kName) fail("expected token 'name', got '" + describe(cur()) + "'");
    std::string n = cur().text;
    next();
    return n;
  }

  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p_(p) {
      if (++p_.depth_ > p_.max_depth_)
        p_.fail("template nested too deeply (more than " + std::to_string(p_.max_depth_) + " levels)");
    }
    ~DepthGuard() { --p_.depth_; }
    Parser& p_;
  };

  NodePtr make(NodeKind kind, int line) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->line = line;
    return n;
  }
  // Sets the node's height from its children and enforces the depth limit.
  NodePtr done(NodePtr n) {
    int d = 0;
    for (const auto& k : n->kids)
      if (k) d = std::max(d, k->depth);
    n->depth = d + 1;
    if (n->depth > max_depth_)
      fail("expression nested too deeply (more than " + std::to_string(max_depth_) + " levels)");
    return n;
  }

  // ---- statements ----
  Body subparse(std::initializer_list<const char*> end_tokens) {
    DepthGuard guard(*this);
    Body body;
    for (;;) {
      const Token& t = cur();
      switch (t.type) {
        case Tok::kData: {
          auto n = make(NodeKind::kData, t.line);
          n->name = t.text;
          body.push_back(std::move(n));
          next();
          break;
        }
        case Tok::kVarBegin: {
          int line = t.line;
          next();
          auto n = make(NodeKind::kPrint, line);
          n->kids.push_back(parseTuple(false, true, {}, false));
          body.push_back(done(std::move(n)));
          expect(Tok::kVarEnd, "end of print statement");
          break;
        }
        case Tok::kBlockBegin: {
          next();
          if (cur().type == Tok::kName)
            for (const char* e : end_tokens)
              if (cur().text == e) return body;
          parseStatement(body);
          expect(Tok::kBlockEnd, "end of statement block");
          break;
        }
        case Tok::kEof: {
          if (end_tokens.size() != 0) {
            std::string want;
            for (const char* e : end_tokens) want += (want.empty() ? "'" : " or '") + std::string(e) + "'";
            fail("Unexpected end of template. Jinja was looking for the following tags: " + want + ".");
          }
          return body;
        }
        default:
          fail("unexpected '" + describe(t) + "'");
      }
    }
  }

  // After the statement's own tokens: the rest of the tag, then the body up to an end tag.
  Body parseStatements(std::initializer_list<const char*> end_tokens, bool drop_needle) {
    skipOp(":");
    expect(Tok::kBlockEnd, "end of statement block");
    Body body = subparse(end_tokens);
    if (drop_needle) next();
    return body;
  }

  void parseStatement(Body& out) {
    if (cur().type != Tok::kName) fail("tag name expected");
    const Token tag = cur();
    const std::string& n = tag.text;
    if (n == "if") return out.push_back(parseIf());
    if (n == "for") return out.push_back(parseFor());
    if (n == "set") return out.push_back(parseSet());
    if (n == "macro") return out.push_back(parseMacro());
    if (n == "filter") return out.push_back(parseFilterBlock());
    if (n == "with") return out.push_back(parseWith());
    if (n == "generation") {
      next();
      auto s = make(NodeKind::kScope, tag.line);
      s->bodies.push_back(parseStatements({"endgeneration"}, true));
      return out.push_back(std::move(s));
    }
    if (n == "print") {
      next();
      bool first = true;
      while (cur().type != Tok::kBlockEnd) {
        if (!first) expectOp(",");
        first = false;
        auto p = make(NodeKind::kPrint, tag.line);
        p->kids.push_back(parseExpression(true));
        out.push_back(done(std::move(p)));
      }
      return;
    }
    if (n == "break" || n == "continue") {
      if (loop_depth_ == 0) fail("'" + n + "' outside of a loop");
      next();
      out.push_back(make(n == "break" ? NodeKind::kBreak : NodeKind::kContinue, tag.line));
      return;
    }
    if (n == "call" || n == "block" || n == "extends" || n == "include" || n == "import" || n == "from" ||
        n == "autoescape")
      fail("the '" + n + "' tag is not supported in chat templates");
    fail("Encountered unknown tag '" + n + "'.");
  }

  NodePtr parseIf() {
    auto node = make(NodeKind::kIf, cur().line);
    next();
    for (;;) {
      node->kids.push_back(parseTuple(false, false, {}, false));
      node->bodies.push_back(parseStatements({"elif", "else", "endif"}, false));
      std::string t = cur().text;
      next();
      if (t == "elif") continue;
      if (t == "else") node->bodies.push_back(parseStatements({"endif"}, true));
      break;
    }
    return node;
  }

  // A name, or names separated by commas (a tuple target).
  void parseTarget(Node& n, std::initializer_list<const char*> extra_end) {
    for (;;) {
      if (cur().type != Tok::kName) fail("can't assign to '" + describe(cur()) + "'");
      n.names.push_back(cur().text);
      next();
      if (!isOp(",")) break;
      n.is_tuple_target = true;
      next();
      bool end = cur().type == Tok::kBlockEnd;
      for (const char* e : extra_end) end = end || isName(e);
      if (end) break;
    }
    for (const auto& name : n.names)
      if (name == "true" || name == "false" || name == "none" || name == "True" || name == "False" ||
          name == "None")
        fail("can't assign to 'const'");
  }

  NodePtr parseFor() {
    auto node = make(NodeKind::kFor, cur().line);
    next();
    parseTarget(*node, {"in"});
    if (!skipName("in")) fail("expected token 'in', got '" + describe(cur()) + "'");
    node->kids.push_back(parseTuple(false, false, {"recursive"}, false));
    node->kids.push_back(skipName("if") ? parseExpression(true) : nullptr);
    if (isName("recursive")) fail("recursive for loops are not supported in chat templates");
    ++loop_depth_;
    node->bodies.push_back(parseStatements({"endfor", "else"}, false));
    --loop_depth_;
    std::string t = cur().text;
    next();
    if (t == "else") node->bodies.push_back(parseStatements({"endfor"}, true));
    return done(std::move(node));
  }

  NodePtr parseSet() {
    int line = cur().line;
    next();
    NodePtr node = make(NodeKind::kSet, line);
    if (cur().type == Tok::kName && look().type == Tok::kOp && look().text == ".") {
      node->is_ns_ref = true;
      node->name = cur().text;
      next();
      next();
      node->attr = expectName();
    } else {
      parseTarget(*node, {});
    }
    if (skipOp("=")) {
      node->kids.push_back(parseTuple(false, true, {}, false));
      return done(std::move(node));
    }
    node->kind = NodeKind::kSetBlock;
    node->kids.push_back(isOp("|") ? parseFilter(make(NodeKind::kInput, line), false) : nullptr);
    int saved = loop_depth_;
    loop_depth_ = 0;
    node->bodies.push_back(parseStatements({"endset"}, true));
    loop_depth_ = saved;
    return done(std::move(node));
  }

  NodePtr parseMacro() {
    auto node = make(NodeKind::kMacro, cur().line);
    next();
    node->name = expectName();
    expectOp("(");
    while (!isOp(")")) {
      if (!node->names.empty()) expectOp(",");
      if (isOp(")")) break;
      node->names.push_back(expectName());
      if (skipOp("=")) {
        node->kids.push_back(parseExpression(true));
      } else if (!node->kids.empty()) {
        fail("non-default argument follows default argument");
      }
    }
    expectOp(")");
    int saved = loop_depth_;
    loop_depth_ = 0;
    node->bodies.push_back(parseStatements({"endmacro"}, true));
    loop_depth_ = saved;
    return done(std::move(node));
  }

  NodePtr parseFilterBlock() {
    auto node = make(NodeKind::kFilterBlock, cur().line);
    next();
    node->kids.push_back(parseFilter(make(NodeKind::kInput, node->line), true));
    node->bodies.push_back(parseStatements({"endfilter"}, true));
    return done(std::move(node));
  }

  NodePtr parseWith() {
    auto node = make(NodeKind::kWith, cur().line);
    next();
    while (cur().type != Tok::kBlockEnd) {
      if (!node->names.empty()) expectOp(",");
      node->names.push_back(expectName());
      expectOp("=");
      node->kids.push_back(parseExpression(true));
    }
    node->bodies.push_back(parseStatements({"endwith"}, true));
    return done(std::move(node));
  }

  // ---- expressions ----
  bool isTupleEnd(std::initializer_list<const char*> extra_end) const {
    if (cur().type == Tok::kVarEnd || cur().type == Tok::kBlockEnd || isOp(")")) return true;
    for (const char* e : extra_end)
      if (isName(e)) return true;
    return false;
  }

  NodePtr parseTuple(bool simplified, bool with_condexpr, std::initializer_list<const char*> extra_end,
                     bool explicit_parens) {
    int line = cur().line;
    std::vector<NodePtr> args;
    bool is_tuple = false;
    for (;;) {
      if (!args.empty()) expectOp(",");
      if (isTupleEnd(extra_end)) break;
      args.push_back(simplified ? parsePrimary() : parseExpression(with_condexpr));
      if (isOp(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parens) fail("Expected an expression, got '" + describe(cur()) + "'");
    }
    auto t = make(NodeKind::kTuple, line);
    t->kids = std::move(args);
    return done(std::move(t));
  }

  NodePtr parseExpression(bool with_condexpr) { return with_condexpr ? parseCondExpr() : parseOr(); }

  NodePtr parseCondExpr() {
    DepthGuard guard(*this);
    int line = cur().line;
    NodePtr expr1 = parseOr();
    while (skipName("if")) {
      NodePtr expr2 = parseOr();
      NodePtr expr3 = skipName("else") ? parseCondExpr() : nullptr;
      auto n = make(NodeKind::kCondExpr, line);
      n->kids.push_back(std::move(expr2));
      n->kids.push_back(std::move(expr1));
      n->kids.push_back(std::move(expr3));
      expr1 = done(std::move(n));
    }
    return expr1;
  }

  NodePtr binary(NodeKind kind, Op op, NodePtr l, NodePtr r, int line) {
    auto n = make(kind, line);
    n->op = op;
    n->kids.push_back(std::move(l));
    n->kids.push_back(std::move(r));
    return done(std::move(n));
  }

  NodePtr parseOr() {
    int line = cur().line;
    NodePtr left = parseAnd();
    while (skipName("or")) left = binary(NodeKind::kOr, Op::kAdd, std::move(left), parseAnd(), line);
    return left;
  }

  NodePtr parseAnd() {
    int line = cur().line;
    NodePtr left = parseNot();
    while (skipName("and")) left = binary(NodeKind::kAnd, Op::kAdd, std::move(left), parseNot(), line);
    return left;
  }

  NodePtr parseNot() {
    if (isName("not")) {
      DepthGuard guard(*this);
      auto n = make(NodeKind::kNot, cur().line);
      next();
      n->kids.push_back(parseNot());
      return done(std::move(n));
    }
    return parseCompare();
  }

  NodePtr parseCompare() {
    int line = cur().line;
    NodePtr expr = parseMath1();
    NodePtr cmp;
    for (;;) {
      Op op;
      if (isOp("=="))
        op = Op::kEq;
      else if (isOp("!="))
        op = Op::kNe;
      else if (isOp("<"))
        op = Op::kLt;
      else if (isOp("<="))
        op = Op::kLe;
      else if (isOp(">"))
        op = Op::kGt;
      else if (isOp(">="))
        op = Op::kGe;
      else if (isName("in"))
        op = Op::kIn;
      else if (isName("not") && look().type == Tok::kName && look().text == "in") {
        op = Op::kNotIn;
        next();
      } else
        break;
      next();
      if (!cmp) {
        cmp = make(NodeKind::kCompare, line);
        cmp->kids.push_back(std::move(expr));
      }
      cmp->ops.push_back(op);
      cmp->kids.push_back(parseMath1());
      cmp = done(std::move(cmp));
    }
    return cmp ? std::move(cmp) : std::move(expr);
  }

  NodePtr parseMath1() {
    int line = cur().line;
    NodePtr left = parseConcat();
    while (isOp("+") || isOp("-")) {
      Op op = isOp("+") ? Op::kAdd : Op::kSub;
      next();
      left = binary(NodeKind::kBinary, op, std::move(left), parseConcat(), line);
    }
    return left;
  }

  NodePtr parseConcat() {
    int line = cur().line;
    NodePtr first = parseMath2();
    if (!isOp("~")) return first;
    auto n = make(NodeKind::kConcat, line);
    n->kids.push_back(std::move(first));
    while (skipOp("~")) {
      n->kids.push_back(parseMath2());
      if (n->kids.size() > 100000) fail("too many '~' operands");
    }
    return done(std::move(n));
  }

  NodePtr parseMath2() {
    int line = cur().line;
    NodePtr left = parsePow();
    for (;;) {
      Op op;
      if (isOp("*"))
        op = Op::kMul;
      else if (isOp("/"))
        op = Op::kDiv;
      else if (isOp("//"))
        op = Op::kFloorDiv;
      else if (isOp("%"))
        op = Op::kMod;
      else
        break;
      next();
      left = binary(NodeKind::kBinary, op, std::move(left), parsePow(), line);
    }
    return left;
  }

  NodePtr parsePow() {
    int line = cur().line;
    NodePtr left = parseUnary(true);
    while (skipOp("**")) left = binary(NodeKind::kBinary, Op::kPow, std::move(left), parseUnary(true), line);
    return left;
  }

  NodePtr parseUnary(bool with_filter) {
    DepthGuard guard(*this);
    int line = cur().line;
    NodePtr node;
    if (isOp("-") || isOp("+")) {
      NodeKind k = isOp("-") ? NodeKind::kNeg : NodeKind::kPos;
      next();
      node = make(k, line);
      node->kids.push_back(parseUnary(false));
      node = done(std::move(node));
    } else {
      node = parsePrimary();
    }
    node = parsePostfix(std::move(node));
    if (with_filter) node = parseFilterExpr(std::move(node));
    return node;
  }

  NodePtr parsePrimary() {
    DepthGuard guard(*this);
    const Token& t = cur();
    NodePtr node;
    switch (t.type) {
      case Tok::kName: {
        const std::string& n = t.text;
        if (n == "true" || n == "True" || n == "false" || n == "False") {
          node = make(NodeKind::kConst, t.line);
          node->value = Value(n == "true" || n == "True");
        } else if (n == "none" || n == "None") {
          node = make(NodeKind::kConst, t.line);
          node->value = Value::none();
        } else {
          node = make(NodeKind::kName, t.line);
          node->name = n;
        }
        next();
        return node;
      }
      case Tok::kString: {
        node = make(NodeKind::kConst, t.line);
        std::string s = t.text;
        next();
        while (cur().type == Tok::kString) {
          s += cur().text;
          next();
        }
        node->value = Value(std::move(s));
        return node;
      }
      case Tok::kInt:
      case Tok::kFloat:
        node = make(NodeKind::kConst, t.line);
        node->value = t.type == Tok::kInt ? Value(t.int_value) : Value(t.float_value);
        next();
        return node;
      case Tok::kOp:
        if (t.text == "(") {
          next();
          node = parseTuple(false, true, {}, true);
          expectOp(")");
          return node;
        }
        if (t.text == "[") return parseList();
        if (t.text == "{") return parseDict();
        break;
      default:
        break;
    }
    fail("unexpected '" + describe(t) + "'");
  }

  NodePtr parseList() {
    auto n = make(NodeKind::kList, cur().line);
    expectOp("[");
    while (!isOp("]")) {
      if (!n->kids.empty()) expectOp(",");
      if (isOp("]")) break;
      n->kids.push_back(parseExpression(true));
    }
    expectOp("]");
    return done(std::move(n));
  }

  NodePtr parseDict() {
    auto n = make(NodeKind::kDict, cur().line);
    expectOp("{");
    while (!isOp("}")) {
      if (!n->kids.empty()) expectOp(",");
      if (isOp("}")) break;
      n->kids.push_back(parseExpression(true));
      expectOp(":");
      n->kids.push_back(parseExpression(true));
    }
    expectOp("}");
    return done(std::move(n));
  }

  NodePtr parsePostfix(NodePtr node) {
    for (;;) {
      if (isOp(".") || isOp("[")) {
        node = parseSubscript(std::move(node));
      } else if (isOp("(")) {
        node = parseCall(std::move(node));
      } else {
        return node;
      }
    }
  }

  NodePtr parseFilterExpr(NodePtr node) {
    for (;;) {
      if (isOp("|")) {
        node = parseFilter(std::move(node), false);
      } else if (isName("is")) {
        node = parseTest(std::move(node));
      } else if (isOp("(")) {
        node = parseCall(std::move(node));
      } else {
        return node;
      }
    }
  }

  NodePtr parseSubscript(NodePtr node) {
    const Token tok = cur();
    next();
    if (tok.text == ".") {
      const Token attr = cur();
      next();
      if (attr.type == Tok::kName) {
        auto n = make(NodeKind::kGetattr, tok.line);
        n->kids.push_back(std::move(node));
        n->name = attr.text;
        return done(std::move(n));
      }
      if (attr.type != Tok::kInt) failAt("expected name or number", attr);
      auto n = make(NodeKind::kGetitem, tok.line);
      n->kids.push_back(std::move(node));
      auto c = make(NodeKind::kConst, attr.line);
      c->value = Value(attr.int_value);
      n->kids.push_back(std::move(c));
      return done(std::move(n));
    }
    std::vector<NodePtr> args;
    while (!isOp("]")) {
      if (!args.empty()) expectOp(",");
      args.push_back(parseSubscribed());
    }
    expectOp("]");
    auto n = make(NodeKind::kGetitem, tok.line);
    n->kids.push_back(std::move(node));
    if (args.size() == 1) {
      n->kids.push_back(std::move(args[0]));
    } else {
      auto t = make(NodeKind::kTuple, tok.line);
      t->kids = std::move(args);
      n->kids.push_back(done(std::move(t)));
    }
    return done(std::move(n));
  }

  NodePtr parseSubscribed() {
    int line = cur().line;
    std::vector<NodePtr> args;
    if (isOp(":")) {
      next();
      args.push_back(nullptr);
    } else {
      NodePtr node = parseExpression(true);
      if (!isOp(":")) return node;
      next();
      args.push_back(std::move(node));
    }
    if (isOp(":")) {
      args.push_back(nullptr);
    } else if (!isOp("]") && !isOp(",")) {
      args.push_back(parseExpression(true));
    } else {
      args.push_back(nullptr);
    }
    if (isOp(":")) {
      next();
      args.push_back(!isOp("]") && !isOp(",") ? parseExpression(true) : nullptr);
    } else {
      args.push_back(nullptr);
    }
    auto n = make(NodeKind::kSlice, line);
    n->kids = std::move(args);
    return done(std::move(n));
  }

  // '(' args ')' into n->kids (after kids[0]) and n->names / n->n_pos.
  void parseCallArgs(Node& n) {
    const Token open = cur();
    expectOp("(");
    bool require_comma = false;
    while (!isOp(")")) {
      if (require_comma) {
        expectOp(",");
        if (isOp(")")) break;
      }
      if (isOp("*") || isOp("**")) fail("*args and **kwargs are not supported in chat templates");
      if (cur().type == Tok::kName && look().type == Tok::kOp && look().text == "=") {
        n.names.push_back(cur().text);
        next();
        next();
        n.kids.push_back(parseExpression(true));
      } else {
        if (!n.names.empty()) failAt("invalid syntax for function call expression", open);
        n.kids.push_back(parseExpression(true));
        ++n.n_pos;
      }
      require_comma = true;
    }
    expectOp(")");
  }

  NodePtr parseCall(NodePtr node) {
    auto n = make(NodeKind::kCall, cur().line);
    n->kids.push_back(std::move(node));
    parseCallArgs(*n);
    return done(std::move(n));
  }

  std::string dottedName() {
    std::string name = expectName();
    while (skipOp(".")) {
      name += '.';
      name += expectName();
    }
    return name;
  }

  NodePtr parseFilter(NodePtr node, bool start_inline) {
    while (isOp("|") || start_inline) {
      if (!start_inline) next();
      start_inline = false;
      auto n = make(NodeKind::kFilter, cur().line);
      n->name = dottedName();
      n->kids.push_back(std::move(node));
      if (isOp("(")) parseCallArgs(*n);
      node = done(std::move(n));
    }
    return node;
  }

  NodePtr parseTest(NodePtr node) {
    int line = cur().line;
    next();  // 'is'
    bool negated = skipName("not");
    auto n = make(NodeKind::kTest, line);
    n->name = dottedName();
    n->kids.push_back(std::move(node));
    if (isOp("(")) {
      parseCallArgs(*n);
    } else if ((cur().type == Tok::kName || cur().type == Tok::kString || cur().type == Tok::kInt ||
                cur().type == Tok::kFloat || isOp("(") || isOp("[") || isOp("{")) &&
               !isName("else") && !isName("or") && !isName("and")) {
      if (isName("is")) fail("You cannot chain multiple tests with is");
      n->kids.push_back(parsePostfix(parsePrimary()));
      n->n_pos = 1;
    }
    NodePtr t = done(std::move(n));
    if (!negated) return t;
    auto neg = make(NodeKind::kNot, line);
    neg->kids.push_back(std::move(t));
    return done(std::move(neg));
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int max_depth_;
  int loop_depth_ = 0;
};

}  // namespace

bool parseTemplate(std::string_view source, int max_depth, Body& body, SyntaxError& error) {
  std::vector<Token> tokens;
  LexError lex_error;
  if (!tokenize(source, tokens, lex_error)) {
    error = {lex_error.message, lex_error.line, lex_error.col};
    return false;
  }
  Parser parser(std::move(tokens), std::max(max_depth, 1));
  try {
    body = parser.parse();
    return true;
  } catch (const ParseFail& f) {
    error = {f.message, f.line, f.col};
    return false;
  }
}

}  // namespace llmrt::tmpl
