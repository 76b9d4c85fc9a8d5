#include "core/template/template.h"

#include <algorithm>

#include "core/template/arena.h"
#include "core/template/interpreter.h"
#include "core/template/lexer.h"
#include "core/template/parser.h"

namespace kvgate::jinja {
namespace {

std::string located(std::string_view source, uint32_t offset, const std::string& message) {
  uint32_t line = 1, col = 1;
  for (uint32_t i = 0; i < offset && i < source.size(); ++i) {
    if (source[i] == '\n') {
      ++line;
      col = 1;
    } else if ((static_cast<unsigned char>(source[i]) & 0xC0) != 0x80) {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col) + ": " + message;
}

}  // namespace

Result<Template> Template::compile(std::string_view source, const CompileOptions& options) {
  auto c = std::make_shared<Compiled>();
  c->source = normalize_source(source);
  try {
    LexOptions lo{.trim_blocks = options.trim_blocks, .lstrip_blocks = options.lstrip_blocks};
    const std::vector<Token> tokens = lex(c->source, lo, c->pool);
    c->program = parse(tokens, c->pool);
  } catch (const SyntaxError& e) {
    return Error(located(c->source, e.offset, e.message));
  }
  for (size_t i = 0; i < c->program.symbols.size(); ++i)
    c->symbol_ids.emplace(c->program.symbols[i], static_cast<int>(i));
  size_t pool = 0;
  for (const std::string& s : c->pool) pool += s.capacity() + sizeof(std::string);
  size_t syms = 0;
  for (const std::string& s : c->program.symbols) syms += s.capacity() + sizeof(std::string) + 48;
  // The tree: each node is one Expr or Stmt plus its child vector.
  c->memory = sizeof(Compiled) + c->source.capacity() + pool + syms +
              c->program.nodes * (std::max(sizeof(Expr), sizeof(Stmt)) / 2 + 3 * sizeof(void*));
  Template t;
  t.impl_ = std::move(c);
  return t;
}

Status Template::render_into(const Value& context, std::string& out,
                             const RenderOptions& options) const {
  // The render's Values live in this thread's arena (the caller's, when it opened one to
  // build the context); the interpreter and every Value it made are gone before it resets.
  RenderArena arena;
  try {
    run(*impl_, context, options, out);
  } catch (const RenderFailure& f) {
    return Error(located(impl_->source, f.offset, f.message));
  } catch (const TemplateError& e) {
    return Error(e.what());
  } catch (const std::bad_alloc&) {
    return Error("out of memory while rendering");
  }
  return {};
}

Result<std::string> Template::render(const Value& context, const RenderOptions& options) const {
  std::string out;
  const size_t hint = impl_->output_hint.load(std::memory_order_relaxed);
  if (hint) out.reserve(std::min(hint + hint / 8 + 64, options.max_output_bytes));
  Status st = render_into(context, out, options);
  if (!st) return Error(st.error());
  impl_->output_hint.store(out.size(), std::memory_order_relaxed);
  return out;
}

bool Template::iterates_content() const { return impl_->program.iterates_content; }

bool Template::references(std::string_view name) const { return impl_->symbol_ids.contains(name); }

size_t Template::memory_bytes() const { return impl_->memory; }

}  // namespace kvgate::jinja
