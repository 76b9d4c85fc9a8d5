// The values a Jinja template computes with: Python's none, bool, int, float, str, list,
// tuple and dict, plus Jinja's undefined, namespace, loop, macro and callable objects.
//
// A Value is 40 bytes and cheap to copy: scalars are inline, a string is a view plus an
// optional keep-alive, containers are shared. A string view with no keep-alive points
// into memory that outlives the render (the compiled template's literals, the caller's
// JSON context); slices of a string (strip, split, [a:b]) share its keep-alive, so they
// cost no copy. Values never outlive the render that made them, except through the
// output text.
//
// Semantics follow Python 3 (truthiness, ==, <, `in`, str(), repr()); ints are 64-bit
// and overflow is an error (Python's are unbounded). Operations that Python would raise
// on throw TemplateError; the interpreter adds the line and column.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvgate::jinja {

// Thrown by value operations and the interpreter; never leaves Template::render.
class TemplateError : public std::runtime_error {
 public:
  explicit TemplateError(const std::string& m) : std::runtime_error(m) {}
};

enum class Kind : uint8_t {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,  // list or tuple (ListObj::tuple)
  kDict,
  kNamespace,
  kLoop,
  kMacro,
  kBuiltin,  // a global function (range, namespace, raise_exception, ...)
  kMethod,   // a bound method (s.strip) referenced without being called
};

class Value;
struct ListObj;
struct DictObj;
struct LoopObj;
struct MethodObj;
struct MacroObj;

class Value {
 public:
  Value() : kind_(Kind::kUndefined) {}  // an anonymous undefined
  static Value undefined(std::string_view name) {
    Value v;
    v.s_ = {name.data(), static_cast<uint32_t>(name.size())};
    return v;
  }
  static Value none() { return Value(Kind::kNone); }
  static Value boolean(bool b) {
    Value v(Kind::kBool);
    v.i_ = b;
    return v;
  }
  static Value integer(int64_t i) {
    Value v(Kind::kInt);
    v.i_ = i;
    return v;
  }
  static Value number(double d) {
    Value v(Kind::kFloat);
    v.f_ = d;
    return v;
  }
  // A view that must outlive the render (literals, the caller's context).
  static Value borrowed(std::string_view s) {
    Value v(Kind::kString);
    v.s_ = {s.data(), static_cast<uint32_t>(s.size())};
    return v;
  }
  static Value string(std::string s);
  // A new string of `size` bytes in a single allocation; the caller writes them through
  // *data before the value is read.
  static Value uninitialized_string(size_t size, char** data);
  // A slice of `owner`'s string (shares its keep-alive). REQUIRES: owner is a string and
  // `part` lies inside it.
  static Value slice_of(const Value& owner, std::string_view part) {
    Value v(Kind::kString);
    v.s_ = {part.data(), static_cast<uint32_t>(part.size())};
    v.obj_ = owner.obj_;
    return v;
  }
  static Value list(std::vector<Value> items, bool tuple = false);
  static Value dict(std::shared_ptr<DictObj> d);
  static Value new_dict();
  static Value namespace_(std::shared_ptr<DictObj> d);
  static Value loop(std::shared_ptr<LoopObj> l);
  static Value builtin(int id) {
    Value v(Kind::kBuiltin);
    v.i_ = id;
    return v;
  }
  static Value method(Value self, std::string_view name);
  static Value macro(std::shared_ptr<MacroObj> m);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const {
    return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool;
  }
  bool is_callable() const {
    return kind_ == Kind::kMacro || kind_ == Kind::kBuiltin || kind_ == Kind::kMethod;
  }

  // REQUIRES: the matching kind.
  bool as_bool() const { return i_ != 0; }
  int64_t as_int() const { return i_; }  // also for bool
  double as_float() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(i_); }
  std::string_view str() const { return {s_.data, s_.size}; }
  const ListObj& as_list() const { return *static_cast<const ListObj*>(obj_.get()); }
  const DictObj& as_dict() const { return *static_cast<const DictObj*>(obj_.get()); }
  DictObj& namespace_dict() const {
    return *const_cast<DictObj*>(static_cast<const DictObj*>(obj_.get()));
  }
  LoopObj& as_loop() const {
    return *const_cast<LoopObj*>(static_cast<const LoopObj*>(obj_.get()));
  }
  const MethodObj& as_method() const { return *static_cast<const MethodObj*>(obj_.get()); }
  const MacroObj& as_macro() const { return *static_cast<const MacroObj*>(obj_.get()); }
  int builtin_id() const { return static_cast<int>(i_); }
  // The name an undefined value was looked up by ("" when anonymous).
  std::string_view undefined_name() const { return {s_.data, s_.size}; }

  // Python truthiness (undefined is false).
  bool truthy() const;
  // Python's type name, as error messages print it ('str', 'int', 'dict', 'NoneType').
  std::string_view type_name() const;

 private:
  explicit Value(Kind k) : kind_(k) {}

  struct StrView {
    const char* data;
    uint32_t size;
  };
  Kind kind_;
  union {
    int64_t i_;
    double f_;
    StrView s_ = {nullptr, 0};
  };
  std::shared_ptr<const void> obj_;
};

struct ListObj {
  std::vector<Value> items;
  bool tuple = false;
};

// Insertion-ordered, like Python's dict; linear lookup (template dicts are small).
struct DictObj {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);
};

struct LoopObj {
  Value items;  // a list
  int64_t index0 = 0;
  int64_t depth0 = 0;
};

struct MethodObj {
  Value self;
  std::string_view name;  // points into the compiled template
};

// A macro, or the `caller` of a {% call %} block (its body, run in the frame of the call).
struct MacroObj {
  const void* node = nullptr;  // the interpreter's MacroStmt or CallBlock
  std::string_view name;
  size_t frame = 0;  // the interpreter frame it was defined in: its body's free names
};

// Python semantics. equals: ==; compare: <0, 0, >0 or throws TemplateError for types
// Python cannot order; contains: `needle in haystack`.
bool equals(const Value& a, const Value& b);
int compare(const Value& a, const Value& b);
bool contains(const Value& haystack, const Value& needle);

// str(v) appended to out (undefined prints as ""), and repr(v).
void append_str(std::string& out, const Value& v);
std::string to_str(const Value& v);
void append_repr(std::string& out, const Value& v);

// Python float repr (1.0, 1e-05, 1e+16, inf, nan).
void append_float_repr(std::string& out, double d);

// Python's `len`; throws for values without one.
int64_t length(const Value& v);

// Items as Python iterates them: list items, dict keys, string characters; undefined is
// empty. Throws for none and numbers.
std::vector<Value> iterate(const Value& v);

// Strings as Python indexes them: by code point. ASCII strings take a fast path.
int64_t str_length(std::string_view s);
// The byte offset of code point `index` (0 <= index <= str_length).
size_t str_offset(std::string_view s, int64_t index);

}  // namespace kvgate::jinja
