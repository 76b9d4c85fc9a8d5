// Jinja's filters and tests and Python's str/dict/list methods, as Python Jinja (with the
// tojson that transformers installs) defines them. Filters and tests are resolved by name
// to ids at compile time; methods are dispatched by name at the call.
//
// Internal to the template engine (template.h is the public interface).
#pragma once

#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "core/template/value.h"

namespace kvgate::jinja {

// Arguments as a call passes them.
struct Args {
  ValueList positional;
  std::vector<std::pair<std::string_view, Value>,
              ArenaAllocator<std::pair<std::string_view, Value>>>
      named;

  // The argument at `index` or named `name`, else `fallback` (by value: a fallback is
  // often a temporary).
  Value get(size_t index, std::string_view name, const Value& fallback) const;
  size_t size() const { return positional.size() + named.size(); }
};

// obj.name and obj[key] as Jinja's environment resolves them: a str/dict/list method
// first for `.name` (Python's getattr), a dict key, a list index; anything missing is
// undefined; looking into an undefined throws. `name` must outlive the render when
// `hint` is set (the undefined remembers it for its error message).
Value get_attr(const Value& obj, std::string_view name, bool hint = true);
Value get_attr(const Value& obj, std::string_view name, bool hint, uint8_t method_kinds);
Value get_item(const Value& obj, const Value& key);

// -1 when unknown.
int filter_id(std::string_view name);
int test_id(std::string_view name);

// Hooks from filters back into the interpreter (map/select call other filters and tests
// by name, which need no interpreter state; this keeps the table here).
Value apply_filter(int id, const Value& value, const Args& args);
bool apply_test(int id, const Value& value, const Args& args);

// Python's methods of str, dict and list (non-mutating ones; mutating ones are refused
// as Jinja's immutable sandbox refuses them). Throws TemplateError for unknown names.
Value call_method(const Value& self, std::string_view name, const Args& args);
// Whether `self.name` names a method (Python's getattr finds it before any dict key).
// method_kinds(name) is the set of types that have a method `name` (the parser computes
// it once per attribute, so a render does no string lookups for it).
enum : uint8_t {
  kMethodOfStr = 1,
  kMethodOfDict = 2,
  kMethodOfList = 4,
  kMethodOfTuple = 8,
  kMethodOfLoop = 16,
};
uint8_t method_kinds(std::string_view name);
bool has_method(const Value& self, uint8_t kinds);
bool has_method(const Value& self, std::string_view name);

// json.dumps(v, ensure_ascii=False, indent=indent, sort_keys=sort_keys) with Python's
// separators (", " and ": ", or "," and ": " with an indent). indent < 0: none.
void append_json(std::string& out, const Value& v, int indent, bool sort_keys,
                 std::string_view item_sep = {}, std::string_view key_sep = {});

// The general form: indent as a string (none: one line), ensure_ascii as Python's.
void append_json_ex(std::string& out, const Value& v, std::optional<std::string_view> indent,
                    bool sort_keys, bool ensure_ascii, std::string_view item_sep,
                    std::string_view key_sep);

// Python's str.strip/lstrip/rstrip: whitespace when chars is null, else those chars.
std::string_view py_strip(std::string_view s, const std::string_view* chars, bool left, bool right);

}  // namespace kvgate::jinja
