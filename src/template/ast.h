// The syntax tree of a parsed template: one Node type whose fields are read according to its
// kind (listed below). Trees are immutable once parsed and shared by all renders.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "template/value.h"

namespace llmrt::tmpl {

enum class NodeKind : uint8_t {
  // ---- expressions ----
  kConst,     // value
  kName,      // name
  kInput,     // the value a filter block / block set filters (a filter chain's start)
  kGetattr,   // kids[0].name
  kGetitem,   // kids[0][kids[1]]
  kSlice,     // kids[0]:kids[1]:kids[2] (each may be null)
  kCall,      // kids[0](kids[1..n_pos], kw_names = kids[n_pos+1..])
  kFilter,    // kids[0] | name(args as kCall)
  kTest,      // kids[0] is name(args as kCall)
  kNeg,       // -kids[0]
  kPos,       // +kids[0]
  kNot,       // not kids[0]
  kBinary,    // kids[0] op kids[1]
  kAnd,       // kids[0] and kids[1]
  kOr,        // kids[0] or kids[1]
  kConcat,    // kids[0] ~ kids[1] ~ ...
  kCompare,   // kids[0] ops[0] kids[1] ops[1] kids[2] ...
  kCondExpr,  // kids[1] if kids[0] else kids[2] (may be null)
  kList,      // [kids...]
  kTuple,     // (kids...)
  kDict,      // {kids[0]: kids[1], ...}
  // ---- statements ----
  kData,         // name: template text
  kPrint,        // {{ kids[0] }}
  kIf,           // if kids[i]: bodies[i]; bodies[kids.size()] is the else branch when present
  kFor,          // for names in kids[0] (if kids[1]): bodies[0] else bodies[1]
  kSet,          // names (or name.attr when is_ns_ref) = kids[0]
  kSetBlock,     // names = rendered bodies[0] (| filter chain kids[0], may be null)
  kMacro,        // macro name(names = defaults kids aligned to the last params): bodies[0]
  kFilterBlock,  // filter kids[0]: bodies[0]
  kBreak,
  kContinue,
  kWith,   // with names[i] = kids[i]: bodies[0]
  kScope,  // bodies[0] in a scope of its own ({% generation %})
};

enum class Op : uint8_t {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kFloorDiv,
  kMod,
  kPow,
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kIn,
  kNotIn
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  NodeKind kind;
  int line = 0;
  int depth = 1;  // height of the expression tree below (1 for a leaf)
  Op op = Op::kAdd;
  bool is_tuple_target = false;  // for/set target written as a tuple
  bool is_ns_ref = false;        // set target `name.attr`
  size_t n_pos = 0;              // positional arguments of a call / filter / test
  std::string name;
  std::string attr;
  Value value;
  std::vector<NodePtr> kids;
  std::vector<std::string> names;  // targets, macro parameters, keyword-argument names
  std::vector<Op> ops;
  std::vector<Body> bodies;
};

}  // namespace llmrt::tmpl
