// The syntax tree of a compiled template: expressions and statements, built once by the
// parser and walked by the interpreter on every render. Names are interned to symbol ids
// at compile time; filters, tests and global functions are resolved to ids, so a render
// does no string lookups for them.
//
// Internal to the template engine (template.h is the public interface).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/template/value.h"

namespace kvgate::jinja {

enum class ExprKind : uint8_t {
  kLiteral,     // literal
  kName,        // sym
  kAttr,        // args[0].name
  kItem,        // args[0][args[1]]
  kSlice,       // args[0][args[1]:args[2]:args[3]] (null parts omitted)
  kCall,        // args[0](args[1..], kwargs)
  kMethodCall,  // args[0].name(args[1..], kwargs): no bound method is built
  kFilter,      // args[0] | fn(args[1..], kwargs); args[0] null inside filter blocks
  kTest,        // args[0] is [not] fn(args[1..])
  kNeg,
  kPos,
  kNot,
  kBinary,   // args[0] op args[1]
  kConcat,   // args[0] ~ args[1] ~ ...
  kAnd,      // args[0] and args[1]
  kOr,       // args[0] or args[1]
  kCompare,  // args[0] ops[0] args[1] ops[1] args[2] ...
  kCond,     // args[0] if args[1] else args[2] (args[2] may be null)
  kList,
  kTuple,
  kDict,  // args: key, value, key, value, ...
};

enum class BinOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CmpOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind;
  uint32_t offset;  // into the normalized source
  BinOp op = BinOp::kAdd;
  bool negated = false;  // kTest
  // No call anywhere inside (set after parsing): evaluating it runs no template code, so
  // it cannot bind variables or set a namespace's attributes.
  bool pure = false;
  int sym = -1;  // kName: symbol id
  int fn = -1;   // kFilter, kTest: builtins id; kAttr, kMethodCall: method_kinds
  std::string_view name;
  Value literal;
  std::vector<ExprPtr> args;
  std::vector<CmpOp> ops;
  std::vector<std::pair<std::string_view, ExprPtr>> kwargs;
};

enum class StmtKind : uint8_t {
  kData,         // text
  kPrint,        // {{ expr }}
  kIf,           // branches, else_body
  kFor,          // for targets in expr [if cond]: body else else_body
  kSet,          // set targets = expr
  kSetAttr,      // set sym.name = expr (a namespace)
  kBlockSet,     // set sym | filters %}body{% endset
  kMacro,        // macro name(params): body
  kCallBlock,    // call(params) expr: body
  kFilterBlock,  // filter filters: body
  kWith,         // with assigns: body
  kBreak,
  kContinue,
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Param {
  int sym;
  std::string_view name;
  ExprPtr default_value;  // may be null
};

struct Stmt {
  StmtKind kind;
  uint32_t offset;
  std::string_view text;
  ExprPtr expr;
  ExprPtr cond;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<int> targets;
  bool unpack = false;  // targets written as a tuple
  int sym = -1;
  std::string_view name;
  std::vector<Param> params;
  std::vector<ExprPtr> filters;                  // kFilter exprs with a null value slot
  std::vector<std::pair<int, ExprPtr>> assigns;  // kWith
  // kMacro, kCallBlock: whether the body names varargs / kwargs (Python Jinja refuses
  // extra arguments otherwise).
  bool uses_varargs = false;
  bool uses_kwargs = false;
};

// Global functions, resolved when a name is not bound in any frame. Their symbol ids are
// the first ones interned, so sym < kBuiltinCount means "maybe this builtin".
enum Builtin : int {
  kBuiltinRange,
  kBuiltinNamespace,
  kBuiltinDict,
  kBuiltinRaiseException,
  kBuiltinStrftimeNow,
  kBuiltinCount,
};
inline constexpr const char* kBuiltinNames[] = {"range", "namespace", "dict", "raise_exception",
                                                "strftime_now"};

struct Program {
  Body body;
  std::vector<std::string> symbols;  // id -> name
  int sym_loop = -1, sym_caller = -1, sym_varargs = -1, sym_kwargs = -1;
  bool iterates_content = false;  // loops over a message's content (content_format.h)
  size_t nodes = 0;               // expressions + statements, for the memory estimate
};

}  // namespace kvgate::jinja
