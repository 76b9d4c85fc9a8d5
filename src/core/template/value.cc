#include "core/template/value.h"

#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/common/unicode.h"

namespace kvgate::jinja {
namespace {

using unicode::decode_utf8;

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

bool printable(char32_t cp) {
  if (cp == ' ') return true;
  if (cp < 0x20 || cp == 0x7F) return false;
  if (cp < 0x7F) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

void append_str_repr(std::string& out, std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char q = has_single && !has_double ? '"' : '\'';
  out.push_back(q);
  for (size_t i = 0; i < s.size();) {
    const auto c = decode_utf8(s, i);
    const std::string_view raw = s.substr(i, c.len);
    i += c.len;
    if (c.cp == static_cast<char32_t>(q) || c.cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c.cp));
    } else if (c.cp == '\n') {
      out += "\\n";
    } else if (c.cp == '\r') {
      out += "\\r";
    } else if (c.cp == '\t') {
      out += "\\t";
    } else if (!printable(c.cp)) {
      char buf[16];
      if (c.cp < 0x100) {
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c.cp));
      } else if (c.cp < 0x10000) {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c.cp));
      } else {
        std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c.cp));
      }
      out += buf;
    } else {
      out += raw;
    }
  }
  out.push_back(q);
}

int compare_lists(const ListObj& a, const ListObj& b) {
  const size_t n = std::min(a.items.size(), b.items.size());
  for (size_t i = 0; i < n; ++i) {
    if (!equals(a.items[i], b.items[i])) return compare(a.items[i], b.items[i]);
  }
  return a.items.size() < b.items.size() ? -1 : (a.items.size() > b.items.size() ? 1 : 0);
}

[[noreturn]] void not_orderable(const Value& a, const Value& b) {
  throw TemplateError("'<' not supported between instances of '" + std::string(a.type_name()) +
                      "' and '" + std::string(b.type_name()) + "'");
}

}  // namespace

void* allocate_obj(size_t size, size_t align, bool* in_arena) {
  if (Arena* a = current_arena()) {
    if (void* p = a->try_allocate(size, align)) {
      *in_arena = true;
      return p;
    }
  }
  *in_arena = false;
  return ::operator new(size);
}

void free_obj_memory(void* p, bool in_arena) noexcept {
  if (!in_arena) ::operator delete(p);
}

void destroy_obj(Obj* o) noexcept {
  const bool in_arena = o->in_arena;
  switch (o->type) {
    case ObjType::kString:
      static_cast<StrObj*>(o)->~StrObj();
      break;
    case ObjType::kList:
      static_cast<ListObj*>(o)->~ListObj();
      break;
    case ObjType::kDict:
      static_cast<DictObj*>(o)->~DictObj();
      break;
    case ObjType::kLoop:
      static_cast<LoopObj*>(o)->~LoopObj();
      break;
    case ObjType::kMethod:
      static_cast<MethodObj*>(o)->~MethodObj();
      break;
    case ObjType::kMacro:
      static_cast<MacroObj*>(o)->~MacroObj();
      break;
  }
  free_obj_memory(o, in_arena);
}

Value Value::string(std::string_view s) {
  if (s.empty()) return borrowed("");
  char* at;
  Value v = uninitialized_string(s.size(), &at);
  std::memcpy(at, s.data(), s.size());
  return v;
}

Value Value::uninitialized_string(size_t size, char** data) {
  bool in_arena = false;
  void* mem = allocate_obj(sizeof(StrObj) + (size ? size : 1), alignof(StrObj), &in_arena);
  StrObj* o = ::new (mem) StrObj();
  o->in_arena = in_arena;
  *data = o->data();
  Value v(Kind::kString);
  v.s_ = {o->data(), static_cast<uint32_t>(size)};
  v.obj_ = Ref<Obj>(o);
  return v;
}

Value Value::list(ValueList items, bool tuple) {
  Ref<ListObj> l = make_obj<ListObj>();
  l->items = std::move(items);
  l->tuple = tuple;
  Value v(Kind::kList);
  v.obj_ = std::move(l);
  return v;
}

Value Value::dict(Ref<DictObj> d) {
  Value v(Kind::kDict);
  v.obj_ = std::move(d);
  return v;
}

Value Value::new_dict() { return dict(make_obj<DictObj>()); }

Value Value::namespace_(Ref<DictObj> d) {
  Value v(Kind::kNamespace);
  v.obj_ = std::move(d);
  return v;
}

Value Value::loop(Ref<LoopObj> l) {
  Value v(Kind::kLoop);
  v.obj_ = std::move(l);
  return v;
}

Value Value::method(Value self, std::string_view name) {
  Ref<MethodObj> m = make_obj<MethodObj>();
  m->self = std::move(self);
  m->name = name;
  Value v(Kind::kMethod);
  v.obj_ = std::move(m);
  return v;
}

Value Value::macro(Ref<MacroObj> m) {
  Value v(Kind::kMacro);
  v.obj_ = std::move(m);
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return f_ != 0.0;
    case Kind::kString:
      return s_.size != 0;
    case Kind::kList:
      return !as_list().items.empty();
    case Kind::kDict:
      return !as_dict().items.empty();
    default:
      return true;
  }
}

std::string_view Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return as_list().tuple ? "tuple" : "list";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kLoop:
      return "LoopContext";
    case Kind::kMacro:
      return "Macro";
    case Kind::kBuiltin:
      return "function";
    case Kind::kMethod:
      return "builtin_function_or_method";
  }
  return "object";
}

const Value* DictObj::find(const Value& key) const {
  if (key.is_string()) return find(key.str());
  for (const auto& [k, v] : items)
    if (equals(k, key)) return &v;
  return nullptr;
}

const Value* DictObj::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k.is_string() && same_text(k.str(), key)) return &v;
  return nullptr;
}

void DictObj::set(Value key, Value value) {
  if (key.is_string()) {  // what equals() does for a string key, without its dispatch
    for (auto& [k, v] : items) {
      if (k.is_string() && same_text(k.str(), key.str())) {
        v = std::move(value);
        return;
      }
    }
    items.emplace_back(std::move(key), std::move(value));
    return;
  }
  for (auto& [k, v] : items) {
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return same_text(a.str(), b.str());
    case Kind::kList: {
      const ListObj& x = a.as_list();
      const ListObj& y = b.as_list();
      if (x.tuple != y.tuple || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i)
        if (!equals(x.items[i], y.items[i])) return false;
      return true;
    }
    case Kind::kDict: {
      const DictObj& x = a.as_dict();
      const DictObj& y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* w = y.find(k);
        if (!w || !equals(v, *w)) return false;
      }
      return true;
    }
    case Kind::kBuiltin:
      return a.builtin_id() == b.builtin_id();
    case Kind::kNamespace:
      return &a.namespace_dict() == &b.namespace_dict();
    case Kind::kMacro:
      return &a.as_macro() == &b.as_macro();
    default:
      return false;
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_float(), y = b.as_float();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.str().compare(b.str());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.as_list().tuple == b.as_list().tuple)
    return compare_lists(a.as_list(), b.as_list());
  not_orderable(a, b);
}

bool contains(const Value& haystack, const Value& needle) {
  switch (haystack.kind()) {
    case Kind::kString:
      if (!needle.is_string()) {
        if (needle.is_undefined()) return false;
        throw TemplateError("'in <string>' requires string as left operand, not " +
                            std::string(needle.type_name()));
      }
      return haystack.str().find(needle.str()) != std::string_view::npos;
    case Kind::kList:
      for (const Value& v : haystack.as_list().items)
        if (equals(v, needle)) return true;
      return false;
    case Kind::kDict:
      return haystack.as_dict().find(needle) != nullptr;
    case Kind::kUndefined:
      return false;
    default:
      throw TemplateError("argument of type '" + std::string(haystack.type_name()) +
                          "' is not iterable");
  }
}

void append_float_repr(std::string& out, double d) {
  if (std::isnan(d)) {
    out += "nan";
    return;
  }
  if (std::isinf(d)) {
    out += d > 0 ? "inf" : "-inf";
    return;
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(r.ptr - buf));  // e.g. -1.2345e+02
  if (sci[0] == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e))
    if (c != '.') digits.push_back(c);
  int exp = 0;
  std::from_chars(sci.data() + e + (sci[e + 1] == '+' ? 2 : 1), sci.data() + sci.size(), exp);
  if (exp < -4 || exp >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  } else if (exp < 0) {
    out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
    out += digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(exp) + 1) + "." +
           digits.substr(static_cast<size_t>(exp) + 1);
  }
}

void append_str(std::string& out, const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return;
    case Kind::kString:
      out += v.str();
      return;
    case Kind::kNone:
      out += "None";
      return;
    case Kind::kBool:
      out += v.as_bool() ? "True" : "False";
      return;
    case Kind::kInt: {
      char buf[24];
      auto r = std::to_chars(buf, buf + sizeof buf, v.as_int());
      out.append(buf, r.ptr);
      return;
    }
    case Kind::kFloat:
      append_float_repr(out, v.as_float());
      return;
    default:
      append_repr(out, v);
  }
}

std::string to_str(const Value& v) {
  std::string s;
  append_str(s, v);
  return s;
}

void append_repr(std::string& out, const Value& v) {
  switch (v.kind()) {
    case Kind::kString:
      append_str_repr(out, v.str());
      return;
    case Kind::kList: {
      const ListObj& l = v.as_list();
      out.push_back(l.tuple ? '(' : '[');
      for (size_t i = 0; i < l.items.size(); ++i) {
        if (i) out += ", ";
        append_repr(out, l.items[i]);
      }
      if (l.tuple && l.items.size() == 1) out.push_back(',');
      out.push_back(l.tuple ? ')' : ']');
      return;
    }
    case Kind::kDict: {
      out.push_back('{');
      bool first = true;
      for (const auto& [k, x] : v.as_dict().items) {
        if (!first) out += ", ";
        first = false;
        append_repr(out, k);
        out += ": ";
        append_repr(out, x);
      }
      out.push_back('}');
      return;
    }
    case Kind::kNamespace: {
      out += "<Namespace {";
      bool first = true;
      for (const auto& [k, x] : v.namespace_dict().items) {
        if (!first) out += ", ";
        first = false;
        append_repr(out, k);
        out += ": ";
        append_repr(out, x);
      }
      out += "}>";
      return;
    }
    case Kind::kLoop: {
      const LoopObj& l = v.as_loop();
      out += "<LoopContext " + std::to_string(l.index0 + 1) + "/" +
             std::to_string(l.items.as_list().items.size()) + ">";
      return;
    }
    case Kind::kMacro:
      out += "<Macro '" + std::string(v.as_macro().name) + "'>";
      return;
    case Kind::kBuiltin:
      out += "<built-in function>";
      return;
    case Kind::kMethod:
      out += "<built-in method " + std::string(v.as_method().name) + ">";
      return;
    case Kind::kUndefined:
      return;
    default:
      append_str(out, v);
  }
}

int64_t str_length(std::string_view s) {
  if (is_ascii(s)) return static_cast<int64_t>(s.size());
  int64_t n = 0;
  for (char c : s)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  return n;
}

size_t str_offset(std::string_view s, int64_t index) {
  size_t i = 0;
  for (int64_t k = 0; k < index && i < s.size(); ++k) {
    ++i;
    while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
  }
  return i;
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Kind::kString:
      return str_length(v.str());
    case Kind::kList:
      return static_cast<int64_t>(v.as_list().items.size());
    case Kind::kDict:
      return static_cast<int64_t>(v.as_dict().items.size());
    case Kind::kUndefined:
      return 0;
    default:
      throw TemplateError("object of type '" + std::string(v.type_name()) + "' has no len()");
  }
}

ValueList iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kList:
      return v.as_list().items;
    case Kind::kDict: {
      ValueList keys;
      keys.reserve(v.as_dict().items.size());
      for (const auto& kv : v.as_dict().items) keys.push_back(kv.first);
      return keys;
    }
    case Kind::kString: {
      ValueList chars;
      const std::string_view s = v.str();
      for (size_t i = 0; i < s.size();) {
        const uint32_t n = decode_utf8(s, i).len;
        chars.push_back(Value::slice_of(v, s.substr(i, n)));
        i += n;
      }
      return chars;
    }
    case Kind::kUndefined:
      return {};
    default:
      throw TemplateError("'" + std::string(v.type_name()) + "' object is not iterable");
  }
}

}  // namespace kvgate::jinja
