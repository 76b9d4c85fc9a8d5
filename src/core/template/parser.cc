#include "core/template/parser.h"

#include <algorithm>
#include <initializer_list>
#include <tuple>
#include <unordered_map>

#include "core/template/builtins.h"
#include "core/template/content_format.h"

namespace kvgate::jinja {
namespace {

constexpr int kMaxDepth = 200;  // nesting of expressions and blocks (the parser recurses)

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, std::deque<std::string>& pool)
      : toks_(tokens), pool_(pool) {
    for (const char* name : kBuiltinNames) intern(name);
    prog_.sym_loop = intern("loop");
    prog_.sym_caller = intern("caller");
    prog_.sym_varargs = intern("varargs");
    prog_.sym_kwargs = intern("kwargs");
  }

  Program run() {
    std::string_view end;
    prog_.body = body({}, end);
    mark_pure(prog_.body);
    prog_.iterates_content = loops_over_message_content(prog_);
    return std::move(prog_);
  }

 private:
  // ---- tokens
  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t k = 1) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  void next() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  bool is_op(std::string_view op) const { return cur().type == Tok::kOp && cur().text == op; }
  bool is_name(std::string_view n) const { return cur().type == Tok::kName && cur().text == n; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  [[noreturn]] void fail(const std::string& message) { fail_at(cur().offset, message); }
  [[noreturn]] void fail_at(uint32_t offset, const std::string& message) {
    throw SyntaxError{offset, message};
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::kData:
        return "template data";
      case Tok::kVarBegin:
        return "'{{'";
      case Tok::kVarEnd:
        return "end of print statement";
      case Tok::kBlockBegin:
        return "'{%'";
      case Tok::kBlockEnd:
        return "end of statement block";
      case Tok::kEof:
        return "end of template";
      case Tok::kString:
        return "string";
      case Tok::kInt:
      case Tok::kFloat:
        return "number";
      default:
        return "'" + std::string(t.text) + "'";
    }
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail("expected '" + std::string(op) + "', got " + describe(cur()));
  }
  void expect_block_end() {
    if (cur().type != Tok::kBlockEnd)
      fail("expected end of statement block, got " + describe(cur()));
    next();
  }
  std::string_view expect_name() {
    if (cur().type != Tok::kName) fail("expected a name, got " + describe(cur()));
    std::string_view n = cur().text;
    next();
    return n;
  }

  int intern(std::string_view name) {
    auto it = syms_.find(std::string(name));
    if (it != syms_.end()) return it->second;
    const int id = static_cast<int>(prog_.symbols.size());
    prog_.symbols.emplace_back(name);
    syms_.emplace(std::string(name), id);
    return id;
  }

  ExprPtr node(ExprKind kind, uint32_t offset) {
    ++prog_.nodes;
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->offset = offset;
    return e;
  }
  StmtPtr stmt(StmtKind kind, uint32_t offset) {
    ++prog_.nodes;
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->offset = offset;
    return s;
  }

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxDepth) p.fail("template nesting is too deep");
    }
    ~DepthGuard() { --p.depth_; }
  };

  // ---- statements
  // Parses until a block tag whose name is in `ends` (left after the name) or the end.
  Body body(std::initializer_list<std::string_view> ends, std::string_view& end) {
    DepthGuard guard(*this);
    Body out;
    while (true) {
      const Token& t = cur();
      if (t.type == Tok::kEof) {
        if (ends.size() != 0)  // the block's end tag is the last of its ends
          fail("unexpected end of template, expected '" + std::string(*(ends.end() - 1)) + "'");
        end = {};
        return out;
      }
      if (t.type == Tok::kData) {
        auto s = stmt(StmtKind::kData, t.offset);
        s->text = t.text;
        out.push_back(std::move(s));
        next();
      } else if (t.type == Tok::kVarBegin) {
        next();
        auto s = stmt(StmtKind::kPrint, t.offset);
        s->expr = tuple_expr(true, false);
        if (cur().type != Tok::kVarEnd)
          fail("expected end of print statement, got " + describe(cur()));
        next();
        out.push_back(std::move(s));
      } else if (t.type == Tok::kBlockBegin) {
        next();
        if (cur().type != Tok::kName) fail("expected a statement name, got " + describe(cur()));
        const std::string_view name = cur().text;
        if (std::find(ends.begin(), ends.end(), name) != ends.end()) {
          next();
          end = name;
          return out;
        }
        statement(out, name, t.offset);
      } else {
        fail("unexpected " + describe(t));
      }
    }
  }

  void statement(Body& out, std::string_view name, uint32_t offset) {
    next();  // the statement's name
    if (name == "if") return out.push_back(if_stmt(offset));
    if (name == "for") return out.push_back(for_stmt(offset));
    if (name == "set") return out.push_back(set_stmt(offset));
    if (name == "macro") return out.push_back(macro_stmt(offset));
    if (name == "call") return out.push_back(call_stmt(offset));
    if (name == "filter") return out.push_back(filter_stmt(offset));
    if (name == "with") return out.push_back(with_stmt(offset));
    if (name == "generation") {  // transformers' AssistantTracker: renders its body
      expect_block_end();
      auto s = stmt(StmtKind::kWith, offset);
      std::string_view end;
      s->body = body({"endgeneration"}, end);
      expect_block_end();
      return out.push_back(std::move(s));
    }
    if (name == "break" || name == "continue") {
      if (loops_ == 0) fail_at(offset, "'" + std::string(name) + "' outside of a for loop");
      expect_block_end();
      return out.push_back(stmt(name == "break" ? StmtKind::kBreak : StmtKind::kContinue, offset));
    }
    if (name == "include" || name == "import" || name == "from" || name == "extends" ||
        name == "block")
      fail_at(offset, "'" + std::string(name) +
                          "' needs a template loader, which chat templates "
                          "do not have");
    if (name.substr(0, 3) == "end" || name == "elif" || name == "else")
      fail_at(offset, "unexpected '" + std::string(name) + "'");
    fail_at(offset, "encountered unknown tag '" + std::string(name) + "'");
  }

  StmtPtr if_stmt(uint32_t offset) {
    auto s = stmt(StmtKind::kIf, offset);
    while (true) {
      ExprPtr cond = tuple_expr(false, false);
      expect_block_end();
      std::string_view end;
      Body b = body({"elif", "else", "endif"}, end);
      s->branches.emplace_back(std::move(cond), std::move(b));
      if (end == "elif") continue;
      if (end == "else") {
        expect_block_end();
        s->else_body = body({"endif"}, end);
      }
      expect_block_end();
      return s;
    }
  }

  void assign_targets(Stmt& s) {
    const bool paren = skip_op("(");
    while (true) {
      s.targets.push_back(intern(expect_name()));
      if (!skip_op(",")) break;
      s.unpack = true;
      if (paren && is_op(")")) break;
    }
    if (paren) {
      expect_op(")");
      s.unpack = true;
    }
  }

  StmtPtr for_stmt(uint32_t offset) {
    auto s = stmt(StmtKind::kFor, offset);
    assign_targets(*s);
    if (!skip_name("in")) fail("expected 'in', got " + describe(cur()));
    s->expr = tuple_expr(false, true);
    if (skip_name("if")) s->cond = expression(true);
    if (is_name("recursive")) fail("recursive for loops are not supported");
    expect_block_end();
    ++loops_;
    std::string_view end;
    s->body = body({"else", "endfor"}, end);
    --loops_;
    if (end == "else") {
      expect_block_end();
      s->else_body = body({"endfor"}, end);
    }
    expect_block_end();
    return s;
  }

  void filter_chain(std::vector<ExprPtr>& filters) {
    do {
      filters.push_back(filter(nullptr));
    } while (skip_op("|"));
  }

  StmtPtr set_stmt(uint32_t offset) {
    const std::string_view first = expect_name();
    if (skip_op(".")) {
      auto s = stmt(StmtKind::kSetAttr, offset);
      s->sym = intern(first);
      s->name = expect_name();
      expect_op("=");
      s->expr = tuple_expr(true, false);
      expect_block_end();
      return s;
    }
    if (is_op("=") || is_op(",")) {
      auto s = stmt(StmtKind::kSet, offset);
      s->targets.push_back(intern(first));
      while (skip_op(",")) {
        s->unpack = true;
        s->targets.push_back(intern(expect_name()));
      }
      expect_op("=");
      s->expr = tuple_expr(true, false);
      expect_block_end();
      return s;
    }
    auto s = stmt(StmtKind::kBlockSet, offset);
    s->sym = intern(first);
    if (skip_op("|")) filter_chain(s->filters);
    expect_block_end();
    std::string_view end;
    s->body = body({"endset"}, end);
    expect_block_end();
    return s;
  }

  void params(Stmt& s) {
    expect_op("(");
    while (!is_op(")")) {
      if (!s.params.empty()) expect_op(",");
      if (is_op(")")) break;
      Param p;
      p.name = expect_name();
      p.sym = intern(p.name);
      if (skip_op("=")) p.default_value = expression(true);
      s.params.push_back(std::move(p));
    }
    expect_op(")");
  }

  StmtPtr macro_stmt(uint32_t offset) {
    auto s = stmt(StmtKind::kMacro, offset);
    s->name = expect_name();
    s->sym = intern(s->name);
    params(*s);
    expect_block_end();
    const int saved = loops_;
    loops_ = 0;
    std::string_view end;
    macro_refs_.emplace_back(false, false);
    s->body = body({"endmacro"}, end);
    std::tie(s->uses_varargs, s->uses_kwargs) = macro_refs_.back();
    macro_refs_.pop_back();
    loops_ = saved;
    if (cur().type == Tok::kName) next();  // {% endmacro name %}
    expect_block_end();
    return s;
  }

  StmtPtr call_stmt(uint32_t offset) {
    auto s = stmt(StmtKind::kCallBlock, offset);
    if (is_op("(")) params(*s);
    s->expr = expression(true);
    if (s->expr->kind != ExprKind::kCall && s->expr->kind != ExprKind::kMethodCall)
      fail_at(s->expr->offset, "expected a call after 'call'");
    expect_block_end();
    const int saved = loops_;
    loops_ = 0;
    std::string_view end;
    macro_refs_.emplace_back(false, false);
    s->body = body({"endcall"}, end);
    std::tie(s->uses_varargs, s->uses_kwargs) = macro_refs_.back();
    macro_refs_.pop_back();
    loops_ = saved;
    expect_block_end();
    return s;
  }

  StmtPtr filter_stmt(uint32_t offset) {
    auto s = stmt(StmtKind::kFilterBlock, offset);
    filter_chain(s->filters);
    expect_block_end();
    std::string_view end;
    s->body = body({"endfilter"}, end);
    expect_block_end();
    return s;
  }

  StmtPtr with_stmt(uint32_t offset) {
    auto s = stmt(StmtKind::kWith, offset);
    while (cur().type != Tok::kBlockEnd) {
      if (!s->assigns.empty()) expect_op(",");
      const int sym = intern(expect_name());
      expect_op("=");
      s->assigns.emplace_back(sym, expression(true));
    }
    expect_block_end();
    std::string_view end;
    s->body = body({"endwith"}, end);
    expect_block_end();
    return s;
  }

  // ---- expressions
  bool tuple_end(bool for_iter) const {
    const Tok t = cur().type;
    if (t == Tok::kVarEnd || t == Tok::kBlockEnd || t == Tok::kEof) return true;
    if (is_op(")")) return true;
    return for_iter && (is_name("if") || is_name("recursive"));
  }

  // Python Jinja's parse_tuple: `a, b` is a tuple, `a` is a.
  ExprPtr tuple_expr(bool with_condexpr, bool for_iter) {
    const uint32_t offset = cur().offset;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (tuple_end(for_iter)) break;
      items.push_back(expression(with_condexpr));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (items.empty()) fail("expected an expression, got " + describe(cur()));
      return std::move(items[0]);
    }
    auto t = node(ExprKind::kTuple, offset);
    t->args = std::move(items);
    return t;
  }

  ExprPtr expression(bool with_condexpr) {
    DepthGuard guard(*this);
    return with_condexpr ? cond_expr() : or_expr();
  }

  ExprPtr cond_expr() {
    ExprPtr e = or_expr();
    while (is_name("if")) {
      const uint32_t offset = cur().offset;
      next();
      ExprPtr c = or_expr();
      ExprPtr other;
      if (skip_name("else")) other = cond_expr();
      auto n = node(ExprKind::kCond, offset);
      n->args.push_back(std::move(e));
      n->args.push_back(std::move(c));
      n->args.push_back(std::move(other));
      e = std::move(n);
    }
    return e;
  }

  ExprPtr binary(ExprKind kind, ExprPtr l, ExprPtr r, uint32_t offset) {
    auto n = node(kind, offset);
    n->args.push_back(std::move(l));
    n->args.push_back(std::move(r));
    return n;
  }

  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (is_name("or")) {
      const uint32_t offset = cur().offset;
      next();
      e = binary(ExprKind::kOr, std::move(e), and_expr(), offset);
    }
    return e;
  }

  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (is_name("and")) {
      const uint32_t offset = cur().offset;
      next();
      e = binary(ExprKind::kAnd, std::move(e), not_expr(), offset);
    }
    return e;
  }

  ExprPtr not_expr() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      auto n = node(ExprKind::kNot, cur().offset);
      next();
      n->args.push_back(not_expr());
      return n;
    }
    return compare_expr();
  }

  ExprPtr compare_expr() {
    const uint32_t offset = cur().offset;
    ExprPtr first = math1();
    std::unique_ptr<Expr> cmp;
    while (true) {
      CmpOp op;
      if (is_op("==")) {
        op = CmpOp::kEq;
      } else if (is_op("!=")) {
        op = CmpOp::kNe;
      } else if (is_op("<")) {
        op = CmpOp::kLt;
      } else if (is_op("<=")) {
        op = CmpOp::kLe;
      } else if (is_op(">")) {
        op = CmpOp::kGt;
      } else if (is_op(">=")) {
        op = CmpOp::kGe;
      } else if (is_name("in")) {
        op = CmpOp::kIn;
      } else if (is_name("not") && peek().type == Tok::kName && peek().text == "in") {
        next();
        op = CmpOp::kNotIn;
      } else {
        break;
      }
      next();
      if (!cmp) {
        cmp = node(ExprKind::kCompare, offset);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr arith(ExprKind kind, BinOp op, ExprPtr l, ExprPtr r, uint32_t offset) {
    ExprPtr n = binary(kind, std::move(l), std::move(r), offset);
    n->op = op;
    return n;
  }

  ExprPtr math1() {
    ExprPtr e = concat();
    while (is_op("+") || is_op("-")) {
      const BinOp op = is_op("+") ? BinOp::kAdd : BinOp::kSub;
      const uint32_t offset = cur().offset;
      next();
      e = arith(ExprKind::kBinary, op, std::move(e), concat(), offset);
    }
    return e;
  }

  ExprPtr concat() {
    const uint32_t offset = cur().offset;
    ExprPtr e = math2();
    if (!is_op("~")) return e;
    auto n = node(ExprKind::kConcat, offset);
    n->args.push_back(std::move(e));
    while (skip_op("~")) n->args.push_back(math2());
    return n;
  }

  ExprPtr math2() {
    ExprPtr e = pow_expr();
    while (true) {
      BinOp op;
      if (is_op("*")) {
        op = BinOp::kMul;
      } else if (is_op("/")) {
        op = BinOp::kDiv;
      } else if (is_op("//")) {
        op = BinOp::kFloorDiv;
      } else if (is_op("%")) {
        op = BinOp::kMod;
      } else {
        return e;
      }
      const uint32_t offset = cur().offset;
      next();
      e = arith(ExprKind::kBinary, op, std::move(e), pow_expr(), offset);
    }
  }

  ExprPtr pow_expr() {
    ExprPtr e = unary(true);
    while (is_op("**")) {
      const uint32_t offset = cur().offset;
      next();
      e = arith(ExprKind::kBinary, BinOp::kPow, std::move(e), unary(true), offset);
    }
    return e;
  }

  ExprPtr unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      e = node(is_op("-") ? ExprKind::kNeg : ExprKind::kPos, cur().offset);
      next();
      e->args.push_back(unary(false));
    } else {
      e = postfix(primary());
    }
    if (with_filter) e = filter_expr(std::move(e));
    return e;
  }

  ExprPtr literal(Value v, uint32_t offset) {
    auto n = node(ExprKind::kLiteral, offset);
    n->literal = std::move(v);
    return n;
  }

  ExprPtr primary() {
    const Token& t = cur();
    switch (t.type) {
      case Tok::kName: {
        const std::string_view n = t.text;
        next();
        if (n == "true" || n == "True") return literal(Value::boolean(true), t.offset);
        if (n == "false" || n == "False") return literal(Value::boolean(false), t.offset);
        if (n == "none" || n == "None") return literal(Value::none(), t.offset);
        auto e = node(ExprKind::kName, t.offset);
        e->name = n;
        e->sym = intern(n);
        if (!macro_refs_.empty()) {
          if (n == "varargs") macro_refs_.back().first = true;
          if (n == "kwargs") macro_refs_.back().second = true;
        }
        return e;
      }
      case Tok::kString: {
        std::string_view s = t.text;
        next();
        if (cur().type == Tok::kString) {  // adjacent literals concatenate
          std::string joined(s);
          while (cur().type == Tok::kString) {
            joined += cur().text;
            next();
          }
          pool_.push_back(std::move(joined));
          s = pool_.back();
        }
        return literal(Value::borrowed(s), t.offset);
      }
      case Tok::kInt:
        next();
        return literal(Value::integer(t.i), t.offset);
      case Tok::kFloat:
        next();
        return literal(Value::number(t.f), t.offset);
      case Tok::kOp:
        if (t.text == "(") {
          next();
          ExprPtr e;
          if (is_op(")")) {
            e = node(ExprKind::kTuple, t.offset);
          } else {
            e = tuple_expr(true, false);
          }
          expect_op(")");
          return e;
        }
        if (t.text == "[") {
          next();
          auto e = node(ExprKind::kList, t.offset);
          while (!is_op("]")) {
            if (!e->args.empty()) expect_op(",");
            if (is_op("]")) break;
            e->args.push_back(expression(true));
          }
          expect_op("]");
          return e;
        }
        if (t.text == "{") {
          next();
          auto e = node(ExprKind::kDict, t.offset);
          while (!is_op("}")) {
            if (!e->args.empty()) expect_op(",");
            if (is_op("}")) break;
            e->args.push_back(expression(true));
            expect_op(":");
            e->args.push_back(expression(true));
          }
          expect_op("}");
          return e;
        }
        break;
      default:
        break;
    }
    fail("unexpected " + describe(t));
  }

  void call_args(Expr& call) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
      if (cur().type == Tok::kName && peek().type == Tok::kOp && peek().text == "=") {
        const std::string_view key = cur().text;
        next();
        next();
        call.kwargs.emplace_back(key, expression(true));
      } else {
        if (!call.kwargs.empty()) fail("positional argument after keyword argument");
        call.args.push_back(expression(true));
      }
    }
    expect_op(")");
  }

  ExprPtr make_call(ExprPtr callee, uint32_t offset) {
    ExprPtr call;
    // Errors point at the name called, or at the '.' of a method.
    if (callee->kind == ExprKind::kName || callee->kind == ExprKind::kAttr) offset = callee->offset;
    if (callee->kind == ExprKind::kAttr) {
      call = node(ExprKind::kMethodCall, offset);
      call->name = callee->name;
      call->fn = callee->fn;
      call->args.push_back(std::move(callee->args[0]));
    } else {
      call = node(ExprKind::kCall, offset);
      call->args.push_back(std::move(callee));
    }
    call_args(*call);
    return call;
  }

  ExprPtr postfix(ExprPtr e) {
    while (true) {
      const uint32_t offset = cur().offset;
      if (skip_op(".")) {
        if (cur().type == Tok::kName) {
          auto n = node(ExprKind::kAttr, offset);
          n->name = cur().text;
          n->fn = method_kinds(n->name);
          next();
          n->args.push_back(std::move(e));
          e = std::move(n);
        } else if (cur().type == Tok::kInt) {
          auto n = node(ExprKind::kItem, offset);
          n->args.push_back(std::move(e));
          n->args.push_back(literal(Value::integer(cur().i), cur().offset));
          next();
          e = std::move(n);
        } else {
          fail("expected an attribute name, got " + describe(cur()));
        }
      } else if (is_op("[")) {
        next();
        e = subscript(std::move(e), offset);
      } else if (is_op("(")) {
        e = make_call(std::move(e), offset);
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr obj, uint32_t offset) {
    ExprPtr parts[3];
    int colons = 0;
    bool have_any = false;
    while (!is_op("]")) {
      if (skip_op(":")) {
        if (++colons > 2) fail("too many ':' in a slice");
        continue;
      }
      if (parts[colons]) fail("expected ':' or ']', got " + describe(cur()));
      parts[colons] = expression(true);
      have_any = true;
      if (colons == 0 && is_op(",")) fail("tuple subscripts are not supported");
    }
    expect_op("]");
    if (colons == 0) {
      if (!have_any) fail_at(offset, "expected a subscript");
      auto n = node(ExprKind::kItem, offset);
      n->args.push_back(std::move(obj));
      n->args.push_back(std::move(parts[0]));
      return n;
    }
    auto n = node(ExprKind::kSlice, offset);
    n->args.push_back(std::move(obj));
    for (auto& p : parts) n->args.push_back(std::move(p));
    return n;
  }

  std::string_view dotted_name() {
    std::string_view n = expect_name();
    while (is_op(".") && peek().type == Tok::kName) {
      next();
      std::string joined = std::string(n) + "." + std::string(cur().text);
      next();
      pool_.push_back(std::move(joined));
      n = pool_.back();
    }
    return n;
  }

  // `value | name(args)`; value may be null (filter blocks, block set).
  ExprPtr filter(ExprPtr value) {
    const uint32_t offset = cur().offset;
    auto f = node(ExprKind::kFilter, offset);
    f->name = dotted_name();
    f->fn = filter_id(f->name);
    if (f->fn < 0) fail_at(offset, "no filter named '" + std::string(f->name) + "'");
    f->args.push_back(std::move(value));
    if (is_op("(")) call_args(*f);
    return f;
  }

  ExprPtr filter_expr(ExprPtr e) {
    while (true) {
      if (skip_op("|")) {
        e = filter(std::move(e));
      } else if (is_name("is")) {
        const uint32_t offset = cur().offset;
        next();
        auto t = node(ExprKind::kTest, offset);
        t->negated = skip_name("not");
        t->name = dotted_name();
        t->fn = test_id(t->name);
        if (t->fn < 0) fail_at(offset, "no test named '" + std::string(t->name) + "'");
        t->args.push_back(std::move(e));
        if (is_op("(")) {
          call_args(*t);
        } else if ((cur().type == Tok::kName || cur().type == Tok::kString ||
                    cur().type == Tok::kInt || cur().type == Tok::kFloat || is_op("(") ||
                    is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          if (is_name("is")) fail("you cannot chain multiple tests with 'is'");
          t->args.push_back(postfix(primary()));
        }
        e = std::move(t);
      } else if (is_op("(")) {
        e = make_call(std::move(e), cur().offset);
      } else {
        return e;
      }
    }
  }

  // Sets Expr::pure bottom-up: calls (of macros, callers, or methods that may be either)
  // are the only expressions that can run template code.
  static bool mark_pure(Expr* e) {
    if (!e) return true;
    bool pure = e->kind != ExprKind::kCall && e->kind != ExprKind::kMethodCall;
    for (ExprPtr& a : e->args) pure = mark_pure(a.get()) && pure;
    for (auto& kw : e->kwargs) pure = mark_pure(kw.second.get()) && pure;
    e->pure = pure;
    return pure;
  }
  static void mark_pure(Body& body) {
    for (StmtPtr& s : body) {
      mark_pure(s->expr.get());
      mark_pure(s->cond.get());
      for (auto& [cond, b] : s->branches) {
        mark_pure(cond.get());
        mark_pure(b);
      }
      mark_pure(s->body);
      mark_pure(s->else_body);
      for (Param& p : s->params) mark_pure(p.default_value.get());
      for (ExprPtr& f : s->filters) mark_pure(f.get());
      for (auto& a : s->assigns) mark_pure(a.second.get());
    }
  }

  const std::vector<Token>& toks_;
  std::deque<std::string>& pool_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loops_ = 0;
  std::vector<std::pair<bool, bool>> macro_refs_;  // per macro being parsed: varargs, kwargs
  Program prog_;
  std::unordered_map<std::string, int> syms_;
};

}  // namespace

Program parse(const std::vector<Token>& tokens, std::deque<std::string>& pool) {
  return Parser(tokens, pool).run();
}

}  // namespace kvgate::jinja
