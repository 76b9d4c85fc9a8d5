// How vLLM hands a chat template message content: as a string, or (its "openai" content
// format) as a list of {"type": "text", "text": ...} parts, a string being one part. vLLM
// decides from the template's syntax tree, not from what the template does with content
// (_detect_content_format, vllm/entrypoints/chat_utils.py), so kvgate applies the same
// rule to its own tree. Parts when some for loop iterates `m.content` or `m['content']`
// (also through filters, tests or a slice: `m.content|select(...)`, `m['content'][1:]`)
// where `m` is the target of a for loop over `messages`, or over a variable set from it
// (`{% set loop_messages = messages[1:] %}`, transitively, also through filters, tests and
// slices). Any other loop over a `.content` does not count: over a macro's parameter
// (`{% for p in msg.content %}` in `{% macro render(msg) %}`, unless the parameter has the
// name of such a loop target), over an item indexed out of `messages[i]`.
//
// vLLM's analysis asserts that the variables it follows are single names; where one is not
// (a `{% set %}` from messages to a tuple or a namespace attribute, a tuple target on a loop
// over messages or on the first loop over a message's content) it fails, and failing means
// "string". kvgate answers the same. (vLLM's main branch, since its PR #42660, also counts
// `{% for x in content %}`, a loop over any variable named `content`; kvgate does not yet,
// as released vLLM up to 0.18 does not.)
//
//   {% for m in messages %}{% for p in m.content %}...      -> parts
//   {% for m in messages %}{% if m.content is string %}...  -> string
//
// Internal to the template engine (template.h is the public interface).
#pragma once

#include "core/template/ast.h"

namespace kvgate::jinja {

// True for the parts format. `program` is a parsed template (its symbols name its variables).
bool loops_over_message_content(const Program& program);

}  // namespace kvgate::jinja
