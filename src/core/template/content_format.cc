#include "core/template/content_format.h"

#include <algorithm>
#include <string_view>
#include <vector>

namespace kvgate::jinja {
namespace {

// The statements vLLM's analysis looks at, in source order (Python Jinja's find_all):
// {% set %} with an expression (Jinja's Assign nodes; a block set is not one) and loops.
struct Found {
  std::vector<const Stmt*> sets;
  std::vector<const Stmt*> loops;
};

void collect(const Body& body, Found& found) {
  for (const StmtPtr& s : body) {
    if (s->kind == StmtKind::kSet || s->kind == StmtKind::kSetAttr) found.sets.push_back(s.get());
    if (s->kind == StmtKind::kFor) found.loops.push_back(s.get());
    for (const auto& branch : s->branches) collect(branch.second, found);
    collect(s->body, found);
    collect(s->else_body, found);
  }
}

// vLLM's _is_var_or_elems_access: whether `e` reads variable `sym` (key empty) or its `key`
// attribute or item (`v.key`, `v['key']`), through any filters, tests and slices.
bool reads(const Expr* e, int sym, std::string_view key) {
  while (e && (e->kind == ExprKind::kFilter || e->kind == ExprKind::kTest ||
               e->kind == ExprKind::kSlice))
    e = e->args[0].get();
  if (!e) return false;
  if (key.empty()) return e->kind == ExprKind::kName && e->sym == sym;
  const bool attr = e->kind == ExprKind::kAttr && e->name == key;
  const bool item = e->kind == ExprKind::kItem && e->args[1]->kind == ExprKind::kLiteral &&
                    e->args[1]->literal.is_string() && e->args[1]->literal.str() == key;
  if (!attr && !item) return false;
  const Expr& obj = *e->args[0];
  return obj.kind == ExprKind::kName && obj.sym == sym;
}

bool has(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

bool loops_over_message_content(const Program& program) {
  const auto it = std::find(program.symbols.begin(), program.symbols.end(), "messages");
  if (it == program.symbols.end()) return false;
  Found found;
  collect(program.body, found);
  // `messages` and the variables set from it, breadth first. vLLM asserts that each such
  // set has a single name as its target; when one does not, its analysis fails: "string".
  std::vector<int> lists{static_cast<int>(it - program.symbols.begin())};
  for (size_t i = 0; i < lists.size(); ++i) {
    for (const Stmt* s : found.sets) {
      if (!reads(s->expr.get(), lists[i], {})) continue;
      if (s->kind != StmtKind::kSet || s->unpack) return false;
      if (!has(lists, s->targets[0])) lists.push_back(s->targets[0]);
    }
  }
  // The targets of the loops over those: the messages. (The same assertion.)
  std::vector<int> messages;
  for (const Stmt* loop : found.loops) {
    for (int list : lists) {
      if (!reads(loop->expr.get(), list, {})) continue;
      if (loop->unpack) return false;
      messages.push_back(loop->targets[0]);
      break;
    }
  }
  // The first loop over a message's content decides (and its target must be a name).
  for (const Stmt* loop : found.loops) {
    for (int message : messages)
      if (reads(loop->expr.get(), message, "content")) return !loop->unpack;
  }
  return false;
}

}  // namespace kvgate::jinja
