#include "core/template/interpreter.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "core/template/builtins.h"
#include "core/template/strings.h"

namespace kvgate::jinja {
namespace {

enum class Flow { kNormal, kBreak, kContinue };

[[noreturn]] void undefined_error(const Value& v) {
  if (v.undefined_name().empty()) throw TemplateError("a value is undefined");
  throw TemplateError("'" + std::string(v.undefined_name()) + "' is undefined");
}

[[noreturn]] void operand_error(std::string_view op, const Value& a, const Value& b) {
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  throw TemplateError("unsupported operand type(s) for " + std::string(op) + ": '" +
                      std::string(a.type_name()) + "' and '" + std::string(b.type_name()) + "'");
}

[[noreturn]] void overflow() { throw TemplateError("integer overflow (kvgate ints are 64-bit)"); }

template <typename Op>
Value int_op(Op op, int64_t a, int64_t b) {
  int64_t r;
  if (op(a, b, &r)) overflow();
  return Value::integer(r);
}
bool add_ovf(int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); }
bool sub_ovf(int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); }
bool mul_ovf(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); }

bool is_intlike(const Value& v) { return v.is_int() || v.is_bool(); }

class Interp {
 public:
  Interp(const Compiled& c, const RenderOptions& o, std::string& out)
      : c_(c), p_(c.program), opt_(o), out_(&out) {}

  void render(const Value& context) {
    cur_ = push_frame(-1);
    if (context.is_dict()) {
      for (const auto& [k, v] : context.as_dict().items) {
        if (!k.is_string()) continue;
        auto it = c_.symbol_ids.find(k.str());
        if (it != c_.symbol_ids.end()) set_var(it->second, v);
      }
    }
    exec(p_.body);
  }

 private:
  // Symbols and values apart, so a lookup scans a few packed ints.
  struct Frame {
    int parent = -1;
    std::vector<int, ArenaAllocator<int>> syms;
    ValueList values;
    void clear() {
      syms.clear();
      values.clear();
    }
  };

  // ---- frames and budget
  int push_frame(int parent) {
    if (top_ == frames_.size()) frames_.emplace_back();
    Frame& f = frames_[top_];
    f.parent = parent;
    f.clear();
    return static_cast<int>(top_++);
  }
  void pop_frame() { --top_; }

  const Value* lookup(int sym) const {
    for (int f = cur_; f >= 0;) {
      const Frame& frame = frames_[static_cast<size_t>(f)];
      const int* syms = frame.syms.data();
      for (size_t i = 0, n = frame.syms.size(); i < n; ++i)
        if (syms[i] == sym) return &frame.values[i];
      f = frame.parent;
    }
    return nullptr;
  }

  void set_var(int sym, Value v) {
    Frame& f = frames_[static_cast<size_t>(cur_)];
    for (size_t i = 0; i < f.syms.size(); ++i) {
      if (f.syms[i] == sym) {
        f.values[i] = std::move(v);
        return;
      }
    }
    f.syms.push_back(sym);
    f.values.push_back(std::move(v));
  }

  void step() {
    if (++steps_ > opt_.max_steps)
      throw TemplateError("render exceeded its step budget of " + std::to_string(opt_.max_steps) +
                          " (an endless recursion?)");
  }

  void check_size(size_t n) const {
    if (n > opt_.max_output_bytes)
      throw TemplateError("render output exceeds " + std::to_string(opt_.max_output_bytes) +
                          " bytes");
  }

  // ---- statements
  Flow exec(const Body& body) {
    for (const StmtPtr& s : body) {
      const Flow f = exec_stmt(*s);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  Flow exec_stmt(const Stmt& s) {
    step();
    try {
      return exec_inner(s);
    } catch (const TemplateError& e) {
      throw RenderFailure{s.offset, e.what()};
    }
  }

  Flow exec_inner(const Stmt& s) {
    switch (s.kind) {
      case StmtKind::kData:
        out_->append(s.text);
        check_size(out_->size());
        return Flow::kNormal;
      case StmtKind::kPrint:
        print(*s.expr);
        check_size(out_->size());
        return Flow::kNormal;
      case StmtKind::kIf:
        for (const auto& [cond, body] : s.branches)
          if (truth(*cond)) return exec(body);
        return exec(s.else_body);
      case StmtKind::kFor:
        return exec_for(s);
      case StmtKind::kSet: {
        Value v = eval(*s.expr);
        if (!s.unpack) {
          set_var(s.targets[0], std::move(v));
        } else {
          bind_unpacked(s.targets, v);
        }
        return Flow::kNormal;
      }
      case StmtKind::kSetAttr: {
        const Value* ns = lookup(s.sym);
        if (!ns || ns->kind() != Kind::kNamespace)
          throw TemplateError("cannot assign attribute on non-namespace object");
        Value target = *ns;
        target.namespace_dict().set(Value::borrowed(s.name), eval(*s.expr));
        return Flow::kNormal;
      }
      case StmtKind::kBlockSet: {
        Value v = Value::string(capture_scoped(s.body));
        for (const ExprPtr& f : s.filters) v = filter(*f, v);
        set_var(s.sym, std::move(v));
        return Flow::kNormal;
      }
      case StmtKind::kMacro: {
        auto m = make_obj<MacroObj>();
        m->node = &s;
        m->name = s.name;
        m->frame = static_cast<size_t>(cur_);
        set_var(s.sym, Value::macro(std::move(m)));
        return Flow::kNormal;
      }
      case StmtKind::kCallBlock:
        return exec_call_block(s);
      case StmtKind::kFilterBlock: {
        Value v = Value::string(capture_scoped(s.body));
        for (const ExprPtr& f : s.filters) v = filter(*f, v);
        append_str(*out_, v);
        check_size(out_->size());
        return Flow::kNormal;
      }
      case StmtKind::kWith: {
        ValueList values;
        for (const auto& a : s.assigns) values.push_back(eval(*a.second));
        const int saved = cur_;
        cur_ = push_frame(saved);
        for (size_t i = 0; i < values.size(); ++i)
          set_var(s.assigns[i].first, std::move(values[i]));
        const Flow f = exec(s.body);
        pop_frame();
        cur_ = saved;
        return f;
      }
      case StmtKind::kBreak:
        return Flow::kBreak;
      case StmtKind::kContinue:
        return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  std::string capture(const Body& body) {
    std::string buf;
    std::string* saved = out_;
    out_ = &buf;
    exec(body);
    out_ = saved;
    return buf;
  }

  // A block set's or filter block's body: its own scope, as Python Jinja gives them (a
  // `{% set %}` inside does not outlive the block; a namespace's attributes do).
  std::string capture_scoped(const Body& body) {
    const int saved = cur_;
    cur_ = push_frame(saved);
    std::string buf = capture(body);
    pop_frame();
    cur_ = saved;
    return buf;
  }

  void bind_unpacked(const std::vector<int>& targets, const Value& v) {
    ValueList parts = iterate(v);
    if (parts.size() < targets.size())
      throw TemplateError("not enough values to unpack (expected " +
                          std::to_string(targets.size()) + ", got " + std::to_string(parts.size()) +
                          ")");
    if (parts.size() > targets.size())
      throw TemplateError("too many values to unpack (expected " + std::to_string(targets.size()) +
                          ")");
    for (size_t i = 0; i < targets.size(); ++i) set_var(targets[i], std::move(parts[i]));
  }

  void bind_targets(const Stmt& s, const Value& item) {
    if (s.unpack) {
      bind_unpacked(s.targets, item);
    } else {
      set_var(s.targets[0], item);
    }
  }

  Flow exec_for(const Stmt& s) {
    const Value iterable = eval(*s.expr);
    Value list;
    if (iterable.is_list() && !s.cond) {
      list = iterable;
    } else {
      ValueList items = iterate(iterable);
      if (s.cond) {
        const int saved = cur_;
        cur_ = push_frame(saved);
        ValueList kept;
        for (Value& item : items) {
          step();
          frames_[static_cast<size_t>(cur_)].clear();
          bind_targets(s, item);
          if (truth(*s.cond)) kept.push_back(std::move(item));
        }
        pop_frame();
        cur_ = saved;
        items = std::move(kept);
      }
      list = Value::list(std::move(items));
    }
    const auto& items = list.as_list().items;
    if (items.empty()) return exec(s.else_body);
    auto loop = make_obj<LoopObj>();
    loop->items = list;
    loop->depth0 = loop_depth_;
    const Value loop_value = Value::loop(loop);
    const int saved = cur_;
    cur_ = push_frame(saved);
    ++loop_depth_;
    for (size_t i = 0; i < items.size(); ++i) {
      step();
      frames_[static_cast<size_t>(cur_)].clear();
      loop->index0 = static_cast<int64_t>(i);
      bind_targets(s, items[i]);
      set_var(p_.sym_loop, loop_value);
      if (exec(s.body) == Flow::kBreak) break;
    }
    --loop_depth_;
    pop_frame();
    cur_ = saved;
    return Flow::kNormal;
  }

  Flow exec_call_block(const Stmt& s) {
    auto caller = make_obj<MacroObj>();
    caller->node = &s;
    caller->name = "caller";
    caller->frame = static_cast<size_t>(cur_);
    const Expr& call = *s.expr;
    Args args = eval_args(call);
    args.named.emplace_back("caller", Value::macro(std::move(caller)));
    Value result;
    if (call.kind == ExprKind::kMethodCall) {
      result = method_call(eval(*call.args[0]), call.name, static_cast<uint8_t>(call.fn), args);
    } else {
      result = call_value(eval(*call.args[0]), args);
    }
    append_str(*out_, result);
    check_size(out_->size());
    return Flow::kNormal;
  }

  // ---- expressions
  Value eval(const Expr& e) {
    try {
      return eval_inner(e);
    } catch (const TemplateError& err) {
      throw RenderFailure{e.offset, err.what()};
    }
  }

  // e's value without a copy when it is already stored somewhere (a literal, a variable,
  // an item or attribute of a dict reached from one), else evaluated into tmp. The
  // reference is good until the next evaluation that may run template code (a call can
  // bind variables or set a namespace's attributes).
  const Value& eval_ref(const Expr& e, Value& tmp) {
    if (const Value* v = ref(e)) return *v;
    tmp = eval(e);
    return tmp;
  }

  // Where e's value is stored, when finding it has no side effects and cannot fail; null
  // otherwise (the caller evaluates e, which raises whatever error there is). Follows
  // get_attr and get_item: a dict's method name is not a key lookup, a missing key falls
  // back to an attribute.
  const Value* ref(const Expr& e) {
    switch (e.kind) {
      case ExprKind::kLiteral:
        return &e.literal;
      case ExprKind::kName:
        return lookup(e.sym);
      case ExprKind::kAttr: {
        const Value* obj = ref(*e.args[0]);
        if (!obj) return nullptr;
        if (obj->is_dict()) {
          if (has_method(*obj, static_cast<uint8_t>(e.fn))) return nullptr;
          return obj->as_dict().find(e.name);
        }
        if (obj->kind() == Kind::kNamespace) return obj->namespace_dict().find(e.name);
        return nullptr;
      }
      case ExprKind::kItem: {
        const Expr& key = *e.args[1];
        if (key.kind != ExprKind::kLiteral) return nullptr;
        const Value* obj = ref(*e.args[0]);
        if (!obj) return nullptr;
        if (obj->is_dict()) return obj->as_dict().find(key.literal);
        if (obj->is_list() && is_intlike(key.literal)) {
          const auto& items = obj->as_list().items;
          int64_t i = key.literal.as_int();
          if (i < 0) i += static_cast<int64_t>(items.size());
          if (i < 0 || i >= static_cast<int64_t>(items.size())) return nullptr;
          return &items[static_cast<size_t>(i)];
        }
        return nullptr;
      }
      default:
        return nullptr;
    }
  }

  // Python truthiness of e, without building the Values of `and`, `or`, `not`, comparisons
  // and tests.
  bool truth(const Expr& e) {
    switch (e.kind) {
      case ExprKind::kNot:
        return !truth(*e.args[0]);
      case ExprKind::kAnd:
        return truth(*e.args[0]) && truth(*e.args[1]);
      case ExprKind::kOr:
        return truth(*e.args[0]) || truth(*e.args[1]);
      case ExprKind::kCompare:
        try {
          return compare_chain(e);
        } catch (const TemplateError& err) {
          throw RenderFailure{e.offset, err.what()};
        }
      case ExprKind::kTest:
        if (e.args.size() == 1) {
          Value tmp;
          const Value& v = eval_ref(*e.args[0], tmp);
          try {
            return apply_test(e.fn, v, Args{}) != e.negated;
          } catch (const TemplateError& err) {
            throw RenderFailure{e.offset, err.what()};
          }
        }
        [[fallthrough]];
      default: {
        Value tmp;
        return eval_ref(e, tmp).truthy();
      }
    }
  }

  // a op1 b op2 c ...: Python's chained comparison. Throws TemplateError.
  bool compare_chain(const Expr& e) {
    if (e.ops.size() == 1) {
      Value lt, rt;
      const Value* left;
      if (e.args[1]->pure) {
        left = &eval_ref(*e.args[0], lt);
      } else {
        lt = eval(*e.args[0]);
        left = &lt;
      }
      return compare_op(e.ops[0], *left, eval_ref(*e.args[1], rt));
    }
    Value left = eval(*e.args[0]);
    for (size_t i = 0; i < e.ops.size(); ++i) {
      Value right = eval(*e.args[i + 1]);
      if (!compare_op(e.ops[i], left, right)) return false;
      left = std::move(right);
    }
    return true;
  }

  void print(const Expr& e) {
    if (e.kind == ExprKind::kBinary && e.op == BinOp::kAdd) {
      try {
        eval_add(e, out_);
      } catch (const TemplateError& err) {
        throw RenderFailure{e.offset, err.what()};
      }
      return;
    }
    if (e.kind == ExprKind::kConcat) {
      for (const ExprPtr& a : e.args) append_str(*out_, eval(*a));
      return;
    }
    Value tmp;
    const Value& v = eval_ref(e, tmp);
    if (v.is_string()) {
      out_->append(v.str());
    } else {
      append_str(*out_, v);
    }
  }

  // A chain a + b + c: evaluates the operands left to right; when all are strings they
  // are joined in one allocation (or written straight to `direct`), else folded pairwise.
  Value eval_add(const Expr& e, std::string* direct) {
    constexpr size_t kMax = 16;
    std::array<const Expr*, kMax> rights;
    size_t n = 0;
    const Expr* left = &e;
    while (left->kind == ExprKind::kBinary && left->op == BinOp::kAdd && n + 1 < kMax) {
      rights[n++] = left->args[1].get();
      left = left->args[0].get();
    }
    // Operands that are stored somewhere (literals, variables, dict items) are read in
    // place; the others are evaluated onto a stack shared by nested chains. In place only
    // when no operand can run template code (which could change what a reference shows).
    bool pure = left->pure;
    for (size_t i = 0; i < n && pure; ++i) pure = rights[i]->pure;
    const size_t base = add_stack_.size();
    std::array<const Value*, kMax> ptrs;
    auto operand = [&](size_t k, const Expr& x) {
      if (pure) {
        if (const Value* r = ref(x)) {
          ptrs[k] = r;
          return;
        }
      }
      ptrs[k] = nullptr;
      add_stack_.push_back(eval(x));
    };
    operand(0, *left);
    for (size_t i = 0; i < n; ++i) operand(i + 1, *rights[n - 1 - i]);
    for (size_t k = 0, next = base; k <= n; ++k)
      if (!ptrs[k]) ptrs[k] = &add_stack_[next++];  // the stack no longer grows
    bool all_strings = true;
    size_t total = 0;
    for (size_t i = 0; i <= n && all_strings; ++i) {
      all_strings = ptrs[i]->is_string();
      if (all_strings) total += ptrs[i]->str().size();
    }
    Value result;
    if (all_strings) {
      check_size(total);
      if (direct) {
        for (size_t i = 0; i <= n; ++i) direct->append(ptrs[i]->str());
      } else {
        char* at;
        result = Value::uninitialized_string(total, &at);
        for (size_t i = 0; i <= n; ++i) {
          const std::string_view part = ptrs[i]->str();
          if (!part.empty()) std::memcpy(at, part.data(), part.size());
          at += part.size();
        }
      }
    } else {
      Value acc = *ptrs[0];
      for (size_t i = 1; i <= n; ++i) acc = binop(BinOp::kAdd, acc, *ptrs[i]);
      if (direct) {
        append_str(*direct, acc);
      } else {
        result = std::move(acc);
      }
    }
    add_stack_.resize(base);
    return result;
  }

  Args eval_args(const Expr& e) {
    Args a;
    a.positional.reserve(e.args.size() - 1);
    for (size_t i = 1; i < e.args.size(); ++i) a.positional.push_back(eval(*e.args[i]));
    for (const auto& [k, x] : e.kwargs) a.named.emplace_back(k, eval(*x));
    return a;
  }

  Value filter(const Expr& f, const Value& v) {
    Args a = eval_args(f);
    try {
      return apply_filter(f.fn, v, a);
    } catch (const TemplateError& err) {
      throw RenderFailure{f.offset, err.what()};
    }
  }

  Value eval_inner(const Expr& e) {
    switch (e.kind) {
      case ExprKind::kLiteral:
        return e.literal;
      case ExprKind::kName: {
        if (const Value* v = lookup(e.sym)) return *v;
        if (e.sym < kBuiltinCount) return Value::builtin(e.sym);
        return Value::undefined(e.name);
      }
      case ExprKind::kAttr: {
        Value tmp;
        const Value& obj = eval_ref(*e.args[0], tmp);
        if (obj.is_dict() && !has_method(obj, static_cast<uint8_t>(e.fn))) {
          const Value* v = obj.as_dict().find(e.name);  // get_attr's dict case
          return v ? *v : Value::undefined(e.name);
        }
        return get_attr(obj, e.name, true, static_cast<uint8_t>(e.fn));
      }
      case ExprKind::kItem: {
        if (e.args[1]->kind == ExprKind::kLiteral) {
          Value tmp;
          const Value& obj = eval_ref(*e.args[0], tmp);
          if (obj.is_dict()) {
            if (const Value* v = obj.as_dict().find(e.args[1]->literal)) return *v;
          }
          return get_item(obj, e.args[1]->literal);
        }
        Value obj = eval(*e.args[0]);
        return get_item(obj, eval(*e.args[1]));
      }
      case ExprKind::kSlice:
        return slice(e);
      case ExprKind::kCall: {
        Value callee = eval(*e.args[0]);
        return call_value(callee, eval_args(e));
      }
      case ExprKind::kMethodCall: {
        Value obj = eval(*e.args[0]);
        return method_call(obj, e.name, static_cast<uint8_t>(e.fn), eval_args(e));
      }
      case ExprKind::kFilter: {
        if (e.args.size() == 1 && e.kwargs.empty()) {
          Value tmp;
          return apply_filter(e.fn, eval_ref(*e.args[0], tmp), Args{});
        }
        Value v = eval(*e.args[0]);
        return apply_filter(e.fn, v, eval_args(e));
      }
      case ExprKind::kTest: {
        if (e.args.size() == 1) {
          Value tmp;
          return Value::boolean(apply_test(e.fn, eval_ref(*e.args[0], tmp), Args{}) != e.negated);
        }
        Value v = eval(*e.args[0]);
        return Value::boolean(apply_test(e.fn, v, eval_args(e)) != e.negated);
      }
      case ExprKind::kNeg:
      case ExprKind::kPos: {
        Value v = eval(*e.args[0]);
        const bool neg = e.kind == ExprKind::kNeg;
        if (v.is_float()) return Value::number(neg ? -v.as_float() : v.as_float());
        if (is_intlike(v)) {
          if (neg && v.as_int() == INT64_MIN) overflow();
          return Value::integer(neg ? -v.as_int() : v.as_int());
        }
        if (v.is_undefined()) undefined_error(v);
        throw TemplateError(std::string("bad operand type for unary ") + (neg ? "-" : "+") + ": '" +
                            std::string(v.type_name()) + "'");
      }
      case ExprKind::kNot:
        return Value::boolean(!truth(*e.args[0]));
      case ExprKind::kBinary:
        if (e.op == BinOp::kAdd) return eval_add(e, nullptr);
        {
          Value a = eval(*e.args[0]);
          Value b = eval(*e.args[1]);
          return binop(e.op, a, b);
        }
      case ExprKind::kConcat: {
        std::string s;
        for (const ExprPtr& a : e.args) append_str(s, eval(*a));
        check_size(s.size());
        return Value::string(std::move(s));
      }
      case ExprKind::kAnd: {
        Value a = eval(*e.args[0]);
        if (!a.truthy()) return a;
        return eval(*e.args[1]);
      }
      case ExprKind::kOr: {
        Value a = eval(*e.args[0]);
        if (a.truthy()) return a;
        return eval(*e.args[1]);
      }
      case ExprKind::kCompare:
        return Value::boolean(compare_chain(e));
      case ExprKind::kCond:
        if (truth(*e.args[1])) return eval(*e.args[0]);
        return e.args[2] ? eval(*e.args[2]) : Value();
      case ExprKind::kList:
      case ExprKind::kTuple: {
        ValueList items;
        items.reserve(e.args.size());
        for (const ExprPtr& a : e.args) items.push_back(eval(*a));
        return Value::list(std::move(items), e.kind == ExprKind::kTuple);
      }
      case ExprKind::kDict: {
        auto d = make_obj<DictObj>();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value k = eval(*e.args[i]);
          if (k.is_list() && !k.as_list().tuple) throw TemplateError("unhashable type: 'list'");
          if (k.is_dict()) throw TemplateError("unhashable type: 'dict'");
          d->set(std::move(k), eval(*e.args[i + 1]));
        }
        return Value::dict(std::move(d));
      }
    }
    return Value();
  }

  static bool compare_op(CmpOp op, const Value& a, const Value& b) {
    switch (op) {
      case CmpOp::kEq:
        return equals(a, b);
      case CmpOp::kNe:
        return !equals(a, b);
      case CmpOp::kLt:
        return compare(a, b) < 0;
      case CmpOp::kLe:
        return compare(a, b) <= 0;
      case CmpOp::kGt:
        return compare(a, b) > 0;
      case CmpOp::kGe:
        return compare(a, b) >= 0;
      case CmpOp::kIn:
        return contains(b, a);
      case CmpOp::kNotIn:
        return !contains(b, a);
    }
    return false;
  }

  Value repeat(const Value& seq, int64_t times) {
    if (times <= 0)
      return seq.is_string() ? Value::borrowed("") : Value::list({}, seq.as_list().tuple);
    if (seq.is_string()) {
      const size_t n = seq.str().size();
      if (n != 0 && static_cast<uint64_t>(times) > opt_.max_output_bytes / n) check_size(SIZE_MAX);
      std::string s;
      s.reserve(n * static_cast<size_t>(times));
      for (int64_t i = 0; i < times; ++i) s.append(seq.str());
      return Value::string(std::move(s));
    }
    const auto& items = seq.as_list().items;
    if (!items.empty() && static_cast<uint64_t>(times) > opt_.max_steps / items.size())
      throw TemplateError("list repetition too large");
    ValueList out;
    for (int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
    return Value::list(std::move(out), seq.as_list().tuple);
  }

  Value binop(BinOp op, const Value& a, const Value& b) {
    const bool nums = a.is_number() && b.is_number();
    const bool ints = is_intlike(a) && is_intlike(b);
    switch (op) {
      case BinOp::kAdd:
        if (ints) return int_op(add_ovf, a.as_int(), b.as_int());
        if (nums) return Value::number(a.as_float() + b.as_float());
        if (a.is_string() && b.is_string()) {
          check_size(a.str().size() + b.str().size());
          std::string s;
          s.reserve(a.str().size() + b.str().size());
          s.append(a.str()).append(b.str());
          return Value::string(std::move(s));
        }
        if (a.is_list() && b.is_list() && a.as_list().tuple == b.as_list().tuple) {
          ValueList items = a.as_list().items;
          items.insert(items.end(), b.as_list().items.begin(), b.as_list().items.end());
          return Value::list(std::move(items), a.as_list().tuple);
        }
        if ((a.is_string() || a.is_list()) && !b.is_undefined())
          throw TemplateError("can only concatenate " + std::string(a.type_name()) + " (not \"" +
                              std::string(b.type_name()) + "\") to " + std::string(a.type_name()));
        operand_error("+", a, b);
      case BinOp::kSub:
        if (ints) return int_op(sub_ovf, a.as_int(), b.as_int());
        if (nums) return Value::number(a.as_float() - b.as_float());
        operand_error("-", a, b);
      case BinOp::kMul:
        if (ints) return int_op(mul_ovf, a.as_int(), b.as_int());
        if (nums) return Value::number(a.as_float() * b.as_float());
        if ((a.is_string() || a.is_list()) && is_intlike(b)) return repeat(a, b.as_int());
        if ((b.is_string() || b.is_list()) && is_intlike(a)) return repeat(b, a.as_int());
        operand_error("*", a, b);
      case BinOp::kDiv:
        if (nums) {
          if (b.as_float() == 0) throw TemplateError("division by zero");
          return Value::number(a.as_float() / b.as_float());
        }
        operand_error("/", a, b);
      case BinOp::kFloorDiv:
        if (ints) {
          if (b.as_int() == 0) throw TemplateError("integer division or modulo by zero");
          if (a.as_int() == INT64_MIN && b.as_int() == -1) overflow();
          int64_t q = a.as_int() / b.as_int();
          if ((a.as_int() % b.as_int() != 0) && ((a.as_int() < 0) != (b.as_int() < 0))) --q;
          return Value::integer(q);
        }
        if (nums) {
          if (b.as_float() == 0) throw TemplateError("float floor division by zero");
          return Value::number(std::floor(a.as_float() / b.as_float()));
        }
        operand_error("//", a, b);
      case BinOp::kMod:
        if (a.is_string()) return Value::string(printf_format(a.str(), b));
        if (ints) {
          if (b.as_int() == 0) throw TemplateError("integer division or modulo by zero");
          if (b.as_int() == -1) return Value::integer(0);
          int64_t m = a.as_int() % b.as_int();
          if (m != 0 && ((m < 0) != (b.as_int() < 0))) m += b.as_int();
          return Value::integer(m);
        }
        if (nums) {
          if (b.as_float() == 0) throw TemplateError("float modulo");
          double m = std::fmod(a.as_float(), b.as_float());
          if (m != 0 && ((m < 0) != (b.as_float() < 0))) m += b.as_float();
          return Value::number(m);
        }
        operand_error("%", a, b);
      case BinOp::kPow:
        if (ints && b.as_int() >= 0) {
          int64_t base = a.as_int(), result = 1;
          for (int64_t e = b.as_int(); e > 0; --e) {
            if (__builtin_mul_overflow(result, base, &result)) overflow();
            if (result == 0 || result == 1) break;
          }
          return Value::integer(result);
        }
        if (nums) return Value::number(std::pow(a.as_float(), b.as_float()));
        operand_error("** or pow()", a, b);
    }
    operand_error("?", a, b);
  }

  Value slice(const Expr& e) {
    Value obj = eval(*e.args[0]);
    auto part = [&](size_t i, bool& given) -> int64_t {
      given = false;
      if (!e.args[i]) return 0;
      Value v = eval(*e.args[i]);
      if (v.is_none()) return 0;
      if (!is_intlike(v)) throw TemplateError("slice indices must be integers or None");
      given = true;
      return v.as_int();
    };
    bool has_start, has_stop, has_step;
    int64_t start = part(1, has_start), stop = part(2, has_stop), stride = part(3, has_step);
    if (!has_step) stride = 1;
    if (stride == 0) throw TemplateError("slice step cannot be zero");
    if (obj.is_undefined()) undefined_error(obj);
    if (!obj.is_string() && !obj.is_list()) return Value();
    const int64_t n = length(obj);
    // Python's slice.indices.
    auto fix = [&](int64_t v, bool given, int64_t lo_default, int64_t hi_default) {
      if (!given) return stride > 0 ? lo_default : hi_default;
      if (v < 0) v += n;
      if (stride > 0) return std::clamp<int64_t>(v, 0, n);
      return std::clamp<int64_t>(v, -1, n - 1);
    };
    start = fix(start, has_start, 0, n - 1);
    stop = fix(stop, has_stop, n, -1);
    std::vector<int64_t> idx;
    if (obj.is_string() && stride == 1) {
      const std::string_view s = obj.str();
      if (stop <= start) return Value::borrowed("");
      const size_t b = str_offset(s, start);
      const size_t len = str_offset(s.substr(b), stop - start);
      return Value::slice_of(obj, s.substr(b, len));
    }
    for (int64_t i = start; stride > 0 ? i < stop : i > stop; i += stride) idx.push_back(i);
    if (obj.is_list()) {
      const auto& items = obj.as_list().items;
      ValueList out;
      out.reserve(idx.size());
      for (int64_t i : idx) out.push_back(items[static_cast<size_t>(i)]);
      return Value::list(std::move(out), obj.as_list().tuple);
    }
    const ValueList chars = iterate(obj);
    std::string s;
    for (int64_t i : idx) s.append(chars[static_cast<size_t>(i)].str());
    return Value::string(std::move(s));
  }

  Value method_call(const Value& obj, std::string_view name, uint8_t kinds, const Args& args) {
    if (obj.is_undefined()) undefined_error(obj);
    if (has_method(obj, kinds)) return call_method(obj, name, args);
    const Value v = get_attr(obj, name, false);
    if (v.is_undefined())
      throw TemplateError("'" + std::string(obj.type_name()) + " object' has no attribute '" +
                          std::string(name) + "'");
    return call_value(v, args);
  }

  Value call_value(const Value& callee, const Args& args) {
    switch (callee.kind()) {
      case Kind::kBuiltin:
        return call_builtin(callee.builtin_id(), args);
      case Kind::kMacro:
        return call_macro(callee.as_macro(), args);
      case Kind::kMethod:
        return call_method(callee.as_method().self, callee.as_method().name, args);
      case Kind::kUndefined:
        undefined_error(callee);
      default:
        throw TemplateError("'" + std::string(callee.type_name()) + "' object is not callable");
    }
  }

  Value call_macro(const MacroObj& m, const Args& args) {
    const Stmt& s = *static_cast<const Stmt*>(m.node);
    if (call_depth_ >= opt_.max_call_depth)
      throw TemplateError("macro calls nested deeper than " + std::to_string(opt_.max_call_depth) +
                          " (an endless recursion?)");
    step();
    // Free names resolve where the macro was defined (Python Jinja's closures: a macro
    // defined in a loop or another macro sees that scope's variables as they are at the
    // call), never in the caller's locals. A frame popped since (a macro kept past its
    // scope in a namespace) falls back to the top level; frames below top_ are live and
    // their parents lower, so the chain cannot loop.
    const int saved = cur_;
    cur_ = push_frame(m.frame < top_ ? static_cast<int>(m.frame) : 0);
    if (args.positional.size() > s.params.size() && !s.uses_varargs)
      throw TemplateError("macro '" + std::string(m.name) + "' takes not more than " +
                          std::to_string(s.params.size()) + " argument(s)");
    ValueList extra;
    for (size_t i = s.params.size(); i < args.positional.size(); ++i)
      extra.push_back(args.positional[i]);
    auto kwargs = make_obj<DictObj>();
    for (size_t i = 0; i < s.params.size(); ++i) {
      const Param& p = s.params[i];
      if (i < args.positional.size()) {
        set_var(p.sym, args.positional[i]);
        continue;
      }
      const Value* named = nullptr;
      for (const auto& [k, v] : args.named)
        if (k == p.name) named = &v;
      if (named) {
        set_var(p.sym, *named);
      } else if (p.default_value) {
        set_var(p.sym, eval(*p.default_value));
      } else {
        set_var(p.sym, Value::undefined(p.name));
      }
    }
    for (const auto& [k, v] : args.named) {
      if (k == "caller") {
        set_var(p_.sym_caller, v);
        continue;
      }
      bool is_param = false;
      for (const Param& p : s.params) is_param = is_param || p.name == k;
      if (is_param) continue;
      if (!s.uses_kwargs)
        throw TemplateError("macro '" + std::string(m.name) + "' takes no keyword argument '" +
                            std::string(k) + "'");
      kwargs->set(Value::borrowed(k), v);
    }
    set_var(p_.sym_varargs, Value::list(std::move(extra), true));
    set_var(p_.sym_kwargs, Value::dict(std::move(kwargs)));
    ++call_depth_;
    std::string body = capture(s.body);
    --call_depth_;
    pop_frame();
    cur_ = saved;
    return Value::string(std::move(body));
  }

  Value call_builtin(int id, const Args& args) {
    switch (id) {
      case kBuiltinRange: {
        int64_t start = 0, stop = 0, stride = 1;
        for (const Value& v : args.positional)
          if (!is_intlike(v))
            throw TemplateError("'" + std::string(v.type_name()) +
                                "' object cannot be interpreted as an integer");
        if (args.positional.size() == 1) {
          stop = args.positional[0].as_int();
        } else if (args.positional.size() >= 2) {
          start = args.positional[0].as_int();
          stop = args.positional[1].as_int();
          if (args.positional.size() >= 3) stride = args.positional[2].as_int();
        } else {
          throw TemplateError("range expected at least 1 argument, got 0");
        }
        if (stride == 0) throw TemplateError("range() arg 3 must not be zero");
        ValueList out;
        for (int64_t i = start; stride > 0 ? i < stop : i > stop; i += stride) {
          if (out.size() >= opt_.max_steps - std::min(opt_.max_steps, steps_))
            throw TemplateError("range() larger than the render's step budget");
          out.push_back(Value::integer(i));
        }
        return Value::list(std::move(out));
      }
      case kBuiltinNamespace:
      case kBuiltinDict: {
        auto d = make_obj<DictObj>();
        for (const Value& v : args.positional) {
          if (!v.is_dict()) throw TemplateError("dict expected as the positional argument");
          for (const auto& [k, x] : v.as_dict().items) d->set(k, x);
        }
        for (const auto& [k, x] : args.named) d->set(Value::borrowed(k), x);
        return id == kBuiltinDict ? Value::dict(std::move(d)) : Value::namespace_(std::move(d));
      }
      case kBuiltinRaiseException:
        throw TemplateError(args.positional.empty() ? std::string("raise_exception called")
                                                    : to_str(args.positional[0]));
      case kBuiltinStrftimeNow: {
        const Value& fmt = args.get(0, "format", Value());
        if (!fmt.is_string()) throw TemplateError("strftime_now needs a format string");
        return Value::string(format_time(fmt.str(), opt_.now_unix_seconds));
      }
      default:
        throw TemplateError("unknown builtin");
    }
  }

  const Compiled& c_;
  const Program& p_;
  const RenderOptions& opt_;
  std::string* out_;
  std::vector<Frame, ArenaAllocator<Frame>> frames_;
  ValueList add_stack_;  // operands of + chains being evaluated (eval_add)
  size_t top_ = 0;
  int cur_ = -1;
  uint64_t steps_ = 0;
  int call_depth_ = 0;
  int64_t loop_depth_ = 0;
};

}  // namespace

void run(const Compiled& compiled, const Value& context, const RenderOptions& options,
         std::string& out) {
  Interp(compiled, options, out).render(context);
}

}  // namespace kvgate::jinja
