// The values a Jinja template computes with: Python's none, bool, int, float, str, list,
// tuple and dict, plus Jinja's undefined, namespace, loop, macro and callable objects.
//
// A Value is 32 bytes and cheap to copy: scalars are inline, a string is a view plus an
// optional keep-alive, containers are shared. A string view with no keep-alive points
// into memory that outlives the render (the compiled template's literals, the caller's
// JSON context); slices of a string (strip, split, [a:b]) share its keep-alive, so they
// cost no copy. Values never outlive the render that made them, except through the
// output text.
//
// Shared objects are counted by a plain (non-atomic) reference count: a render runs on
// one thread, and no Value is shared between threads (a compiled template holds only
// scalar and borrowed-string literals). Inside a RenderArena (arena.h) they are made in
// the render's arena.
//
// Semantics follow Python 3 (truthiness, ==, <, `in`, str(), repr()); ints are 64-bit
// and overflow is an error (Python's are unbounded). Operations that Python would raise
// on throw TemplateError; the interpreter adds the line and column.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/template/arena.h"

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

// The header of every shared object a Value refers to. A copy of an object is a new
// object (its own count; make_obj sets the rest).
enum class ObjType : uint8_t { kString, kList, kDict, kLoop, kMethod, kMacro };
struct Obj {
  Obj() = default;
  Obj(const Obj&) noexcept {}
  Obj& operator=(const Obj&) noexcept { return *this; }

  uint32_t refs = 0;
  ObjType type = ObjType::kString;
  bool in_arena = false;
};

// Runs the object's destructor and frees it (a no-op for arena memory).
void destroy_obj(Obj* o) noexcept;

// A counted reference to an Obj (an intrusive shared_ptr without atomics).
template <typename T>
class Ref {
 public:
  Ref() noexcept = default;
  explicit Ref(T* p) noexcept : p_(p) {
    if (p_) ++p_->refs;
  }
  Ref(const Ref& o) noexcept : p_(o.p_) {
    if (p_) ++p_->refs;
  }
  Ref(Ref&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  template <typename U>
  Ref(Ref<U>&& o) noexcept : p_(o.release()) {}  // NOLINT: derived to base
  ~Ref() {
    if (p_ && --p_->refs == 0) destroy_obj(p_);
  }
  Ref& operator=(const Ref& o) noexcept {
    Ref(o).swap(*this);
    return *this;
  }
  Ref& operator=(Ref&& o) noexcept {
    Ref(std::move(o)).swap(*this);
    return *this;
  }
  void swap(Ref& o) noexcept { std::swap(p_, o.p_); }
  // Gives up the count without dropping it.
  T* release() noexcept {
    T* p = p_;
    p_ = nullptr;
    return p;
  }
  T* get() const noexcept { return p_; }
  T* operator->() const noexcept { return p_; }
  T& operator*() const noexcept { return *p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }

 private:
  T* p_ = nullptr;
};

// Memory for an object: from the current arena when there is one (*in_arena set), else
// the heap.
void* allocate_obj(size_t size, size_t align, bool* in_arena);
void free_obj_memory(void* p, bool in_arena) noexcept;

// A new T(args...), counted once.
template <typename T, typename... A>
Ref<T> make_obj(A&&... args) {
  bool in_arena = false;
  void* mem = allocate_obj(sizeof(T), alignof(T), &in_arena);
  T* p = nullptr;
  try {
    p = ::new (mem) T(std::forward<A>(args)...);
  } catch (...) {
    free_obj_memory(mem, in_arena);
    throw;
  }
  p->type = T::kType;
  p->in_arena = in_arena;
  return Ref<T>(p);
}

// Lists and dict items, in the render's arena when there is one.
using ValueList = std::vector<Value, ArenaAllocator<Value>>;
using DictItems = std::vector<std::pair<Value, Value>, ArenaAllocator<std::pair<Value, Value>>>;

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
  // A copy of s (in the arena when there is one).
  static Value string(std::string_view s);
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
  static Value list(ValueList items, bool tuple = false);
  static Value dict(Ref<DictObj> d);
  static Value new_dict();
  static Value namespace_(Ref<DictObj> d);
  static Value loop(Ref<LoopObj> l);
  static Value builtin(int id) {
    Value v(Kind::kBuiltin);
    v.i_ = id;
    return v;
  }
  static Value method(Value self, std::string_view name);
  static Value macro(Ref<MacroObj> m);

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
  const ListObj& as_list() const;
  const DictObj& as_dict() const;
  DictObj& namespace_dict() const;
  LoopObj& as_loop() const;
  const MethodObj& as_method() const;
  const MacroObj& as_macro() const;
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
  Ref<Obj> obj_;
};

// A string's bytes, stored right after the header (one allocation).
struct StrObj : Obj {
  static constexpr ObjType kType = ObjType::kString;
  char* data() { return reinterpret_cast<char*>(this + 1); }
};

struct ListObj : Obj {
  static constexpr ObjType kType = ObjType::kList;
  ValueList items;
  bool tuple = false;
};

// Insertion-ordered, like Python's dict; linear lookup (template dicts are small).
struct DictObj : Obj {
  static constexpr ObjType kType = ObjType::kDict;
  DictItems items;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);
};

struct LoopObj : Obj {
  static constexpr ObjType kType = ObjType::kLoop;
  Value items;  // a list
  int64_t index0 = 0;
  int64_t depth0 = 0;
};

struct MethodObj : Obj {
  static constexpr ObjType kType = ObjType::kMethod;
  Value self;
  std::string_view name;  // points into the compiled template
};

// A macro, or the `caller` of a {% call %} block (its body, run in the frame of the call).
struct MacroObj : Obj {
  static constexpr ObjType kType = ObjType::kMacro;
  const void* node = nullptr;  // the interpreter's MacroStmt or CallBlock
  std::string_view name;
  size_t frame = 0;  // the interpreter frame it was defined in: its body's free names
};

inline const ListObj& Value::as_list() const { return *static_cast<const ListObj*>(obj_.get()); }
inline const DictObj& Value::as_dict() const { return *static_cast<const DictObj*>(obj_.get()); }
inline DictObj& Value::namespace_dict() const { return *static_cast<DictObj*>(obj_.get()); }
inline LoopObj& Value::as_loop() const { return *static_cast<LoopObj*>(obj_.get()); }
inline const MethodObj& Value::as_method() const {
  return *static_cast<const MethodObj*>(obj_.get());
}
inline const MacroObj& Value::as_macro() const { return *static_cast<const MacroObj*>(obj_.get()); }

// Whether two strings are equal: the sizes and first bytes first, then the rest (keys are
// short and mostly differ in size or first letter).
inline bool same_text(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  if (a.empty() || a.data() == b.data()) return true;
  return a[0] == b[0] && std::memcmp(a.data() + 1, b.data() + 1, a.size() - 1) == 0;
}

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
ValueList iterate(const Value& v);

// Strings as Python indexes them: by code point. ASCII strings take a fast path.
int64_t str_length(std::string_view s);
// The byte offset of code point `index` (0 <= index <= str_length).
size_t str_offset(std::string_view s, int64_t index);

}  // namespace kvgate::jinja
