// kvgate's own Jinja2 engine for chat templates: a template is compiled once (lexed and
// parsed to a syntax tree) and rendered many times, concurrently, against a context of
// Values. Pure: no clock (strftime_now's time is passed in), no I/O, no globals.
//
// It follows Python Jinja 3 as transformers configures it for chat templates (what vLLM
// runs): an immutable sandbox with trim_blocks and lstrip_blocks, the loopcontrols
// extension ({% break %}, {% continue %}), transformers' {% generation %} tag, its
// tojson filter and the raise_exception and strftime_now globals. docs/template.md lists
// what is supported and every known difference to Python Jinja and @huggingface/jinja.
//
//   auto tpl = jinja::Template::compile(text);          // syntax errors: "3:14: ..."
//   jinja::Value ctx = jinja::Value::new_dict();
//   ctx.namespace_dict()... (or build one with jinja::context_from_json)
//   Result<std::string> out = tpl->render(ctx, {.now_unix_seconds = t});
//
// Errors (syntax, undefined attribute, type errors, raise_exception, a render that runs
// past its step budget or output limit) are Results whose message starts with
// "line:column: ", never exceptions or crashes.
//
// Thread-safety: a compiled Template is immutable; render may run on any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/common/result.h"
#include "core/template/value.h"

namespace kvgate::jinja {

struct CompileOptions {
  bool trim_blocks = true;  // as transformers sets them
  bool lstrip_blocks = true;
};

struct RenderOptions {
  int64_t now_unix_seconds = 0;        // strftime_now's clock, formatted as UTC
  uint64_t max_steps = 2'000'000;      // statements, loop iterations and calls
  size_t max_output_bytes = 64 << 20;  // rendered text, and any one string built
  int max_call_depth = 100;            // nested macro calls
};

struct Compiled;

class Template {
 public:
  static Result<Template> compile(std::string_view source, const CompileOptions& options = {});

  // context: a dict (its string keys are the template's variables).
  Result<std::string> render(const Value& context, const RenderOptions& options = {}) const;
  // Appends to out (left as far as it got on an error).
  Status render_into(const Value& context, std::string& out, const RenderOptions& options) const;

  // True when vLLM passes this template message content as a list of parts ("openai"
  // content format) instead of a string: some for loop iterates the content of a message,
  // a loop variable over `messages` (content_format.h has vLLM's exact rule).
  bool iterates_content() const;
  // Whether the template names a variable `name` anywhere. A context variable it does not
  // name can never be read, so a caller may leave it out of the context.
  bool references(std::string_view name) const;
  // Heap bytes held by the compiled template (source, tree, literals), estimated.
  size_t memory_bytes() const;

 private:
  std::shared_ptr<const Compiled> impl_;
};

}  // namespace kvgate::jinja
