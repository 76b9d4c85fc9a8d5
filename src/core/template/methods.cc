// Python's str, dict and list methods, json.dumps, and the string helpers the filters
// share with them.
#include <utf8proc.h>

#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "core/common/unicode.h"
#include "core/template/builtins.h"
#include "core/template/strings.h"

namespace kvgate::jinja {
namespace {

using unicode::append_utf8;
using unicode::decode_utf8;

[[noreturn]] void unsafe(const Value& self, std::string_view name) {
  throw TemplateError("access to attribute '" + std::string(name) + "' of '" +
                      std::string(self.type_name()) + "' object is unsafe");
}

std::string_view str_arg(const Args& a, size_t i, std::string_view name, std::string_view method) {
  const Value& v = a.get(i, name, Value());
  if (!v.is_string())
    throw TemplateError(std::string(method) + "() argument must be str, not " +
                        std::string(v.type_name()));
  return v.str();
}

int64_t int_arg(const Args& a, size_t i, std::string_view name, int64_t fallback) {
  const Value& v = a.get(i, name, Value());
  if (v.is_undefined() || v.is_none()) return fallback;
  if (!v.is_int() && !v.is_bool())
    throw TemplateError("'" + std::string(v.type_name()) +
                        "' object cannot be interpreted as an integer");
  return v.as_int();
}

// Python's str.split / rsplit.
Value split(const Value& self, const Args& a, bool from_right) {
  const std::string_view s = self.str();
  const Value& sep_v = a.get(0, "sep", Value::none());
  int64_t maxsplit = int_arg(a, 1, "maxsplit", -1);
  ValueList parts;
  if (sep_v.is_none() || sep_v.is_undefined()) {
    std::vector<std::string_view> words = split_whitespace(s, maxsplit, from_right);
    for (std::string_view w : words) parts.push_back(Value::slice_of(self, w));
    return Value::list(std::move(parts));
  }
  if (!sep_v.is_string())
    throw TemplateError("must be str or None, not " + std::string(sep_v.type_name()));
  const std::string_view sep = sep_v.str();
  if (sep.empty()) throw TemplateError("empty separator");
  if (!from_right) {
    size_t start = 0;
    while (maxsplit != 0) {
      const size_t p = s.find(sep, start);
      if (p == std::string_view::npos) break;
      parts.push_back(Value::slice_of(self, s.substr(start, p - start)));
      start = p + sep.size();
      if (maxsplit > 0) --maxsplit;
    }
    parts.push_back(Value::slice_of(self, s.substr(start)));
    return Value::list(std::move(parts));
  }
  size_t end = s.size();
  while (maxsplit != 0 && end >= sep.size()) {
    const size_t p = s.rfind(sep, end - sep.size());
    if (p == std::string_view::npos) break;
    parts.push_back(Value::slice_of(self, s.substr(p + sep.size(), end - p - sep.size())));
    end = p;
    if (maxsplit > 0) --maxsplit;
  }
  parts.push_back(Value::slice_of(self, s.substr(0, end)));
  std::reverse(parts.begin(), parts.end());
  return Value::list(std::move(parts));
}

bool affix_match(const Value& self, const Args& a, bool prefix) {
  std::string_view s = self.str();
  const int64_t n = str_length(s);
  int64_t start = int_arg(a, 1, "start", 0), end = int_arg(a, 2, "end", n);
  normalize_range(start, end, n);
  if (start > end) return false;
  s = s.substr(str_offset(s, start), str_offset(s, end) - str_offset(s, start));
  const Value& p = a.get(0, "prefix", Value());
  auto test = [&](const Value& x) {
    if (!x.is_string())
      throw TemplateError(std::string(prefix ? "startswith" : "endswith") +
                          " first arg must be str or a tuple of str, not " +
                          std::string(x.type_name()));
    const std::string_view t = x.str();
    return prefix ? s.substr(0, t.size()) == t
                  : (s.size() >= t.size() && s.substr(s.size() - t.size()) == t);
  };
  if (p.is_list()) {
    for (const Value& x : p.as_list().items)
      if (test(x)) return true;
    return false;
  }
  return test(p);
}

Value replace(const Value& self, const Args& a) {
  const std::string_view s = self.str();
  const std::string_view old = str_arg(a, 0, "old", "replace");
  const std::string_view with = str_arg(a, 1, "new", "replace");
  int64_t count = int_arg(a, 2, "count", -1);
  std::string out;
  if (old.empty()) {  // Python inserts `new` before every character and at the end
    size_t i = 0;
    while (i <= s.size()) {
      if (count-- == 0) {
        out += s.substr(i);
        break;
      }
      out += with;
      if (i == s.size()) break;
      const uint32_t n = decode_utf8(s, i).len;
      out += s.substr(i, n);
      i += n;
    }
    return Value::string(std::move(out));
  }
  size_t start = 0;
  while (count != 0) {
    const size_t p = s.find(old, start);
    if (p == std::string_view::npos) break;
    out += s.substr(start, p - start);
    out += with;
    start = p + old.size();
    if (count > 0) --count;
  }
  if (start == 0) return self;
  out += s.substr(start);
  return Value::string(std::move(out));
}

Value join(const Value& self, const Args& a) {
  std::string out;
  size_t i = 0;
  for (const Value& v : iterate(a.get(0, "iterable", Value()))) {
    if (!v.is_string())
      throw TemplateError("sequence item " + std::to_string(i) + ": expected str instance, " +
                          std::string(v.type_name()) + " found");
    if (i++) out += self.str();
    out += v.str();
  }
  return Value::string(std::move(out));
}

int64_t count_sub(std::string_view s, std::string_view sub) {
  if (sub.empty()) return str_length(s) + 1;
  int64_t n = 0;
  for (size_t p = s.find(sub); p != std::string_view::npos; p = s.find(sub, p + sub.size())) ++n;
  return n;
}

int64_t find_sub(std::string_view s, std::string_view sub, bool from_right) {
  const size_t p = from_right ? s.rfind(sub) : s.find(sub);
  if (p == std::string_view::npos) return -1;
  return str_length(s.substr(0, p));
}

template <typename Pred>
bool all_chars(std::string_view s, Pred pred) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size();) {
    const auto c = decode_utf8(s, i);
    if (!pred(c.cp)) return false;
    i += c.len;
  }
  return true;
}

utf8proc_category_t category(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}
bool is_cased_upper(char32_t c) { return category(c) == UTF8PROC_CATEGORY_LU; }
bool is_cased_lower(char32_t c) { return category(c) == UTF8PROC_CATEGORY_LL; }

// Python's isupper/islower: at least one cased character, and none of the other case.
bool case_test(std::string_view s, bool upper) {
  bool any = false;
  for (size_t i = 0; i < s.size();) {
    const auto c = decode_utf8(s, i);
    i += c.len;
    if (is_cased_upper(c.cp) || category(c.cp) == UTF8PROC_CATEGORY_LT) {
      if (!upper) return false;
      any = true;
    } else if (is_cased_lower(c.cp)) {
      if (upper) return false;
      any = true;
    }
  }
  return any;
}

Value pad(const Value& self, const Args& a, int where) {  // -1 ljust, 0 center, 1 rjust
  const int64_t width = int_arg(a, 0, "width", 0);
  std::string_view fill = " ";
  if (a.size() > 1) fill = str_arg(a, 1, "fillchar", "pad");
  const int64_t n = str_length(self.str());
  if (width <= n) return self;
  const int64_t total = width - n;
  int64_t left = where < 0 ? 0 : (where > 0 ? total : total / 2 + (total & width & 1));
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += self.str();
  for (int64_t i = 0; i < total - left; ++i) out += fill;
  return Value::string(std::move(out));
}

Value str_method(const Value& self, std::string_view name, const Args& a) {
  const std::string_view s = self.str();
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Value& chars = a.get(0, "chars", Value::none());
    std::string_view cs;
    if (!chars.is_none() && !chars.is_undefined()) {
      if (!chars.is_string()) throw TemplateError(std::string(name) + " arg must be None or str");
      cs = chars.str();
    }
    const std::string_view* cp = chars.is_string() ? &cs : nullptr;
    return Value::slice_of(self, py_strip(s, cp, name != "rstrip", name != "lstrip"));
  }
  if (name == "split") return split(self, a, false);
  if (name == "rsplit") return split(self, a, true);
  if (name == "splitlines") {
    ValueList out;
    const bool keep = a.get(0, "keepends", Value::boolean(false)).truthy();
    for (std::string_view line : splitlines(s, keep)) out.push_back(Value::slice_of(self, line));
    return Value::list(std::move(out));
  }
  if (name == "startswith") return Value::boolean(affix_match(self, a, true));
  if (name == "endswith") return Value::boolean(affix_match(self, a, false));
  if (name == "upper") return Value::string(to_upper(s));
  if (name == "lower" || name == "casefold") return Value::string(to_lower(s));
  if (name == "title") return Value::string(py_title(s));
  if (name == "capitalize") return Value::string(py_capitalize(s));
  if (name == "swapcase") {
    std::string out;
    for (size_t i = 0; i < s.size();) {
      const auto c = decode_utf8(s, i);
      i += c.len;
      append_utf8(
          out, is_cased_upper(c.cp)
                   ? static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c.cp)))
                   : static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c.cp))));
    }
    return Value::string(std::move(out));
  }
  if (name == "replace") return replace(self, a);
  if (name == "format") return Value::string(py_format(s, a));
  if (name == "join") return join(self, a);
  if (name == "count") return Value::integer(count_sub(s, str_arg(a, 0, "sub", "count")));
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    const int64_t r = find_sub(s, str_arg(a, 0, "sub", name), name[0] == 'r');
    if (r < 0 && (name == "index" || name == "rindex")) throw TemplateError("substring not found");
    return Value::integer(r);
  }
  if (name == "removeprefix") {
    const std::string_view p = str_arg(a, 0, "prefix", name);
    return s.substr(0, p.size()) == p ? Value::slice_of(self, s.substr(p.size())) : self;
  }
  if (name == "removesuffix") {
    const std::string_view p = str_arg(a, 0, "suffix", name);
    return !p.empty() && s.size() >= p.size() && s.substr(s.size() - p.size()) == p
               ? Value::slice_of(self, s.substr(0, s.size() - p.size()))
               : self;
  }
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric") {
    return Value::boolean(all_chars(s, [](char32_t c) {
      const auto cat = category(c);
      return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NO ||
             cat == UTF8PROC_CATEGORY_NL;
    }));
  }
  if (name == "isalpha") {
    return Value::boolean(all_chars(s, [](char32_t c) {
      const auto cat = category(c);
      return cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
    }));
  }
  if (name == "isalnum") {
    return Value::boolean(all_chars(s, [](char32_t c) {
      const auto cat = category(c);
      return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
             (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
    }));
  }
  if (name == "isspace") return Value::boolean(all_chars(s, python_space));
  if (name == "isupper") return Value::boolean(case_test(s, true));
  if (name == "islower") return Value::boolean(case_test(s, false));
  if (name == "ljust") return pad(self, a, -1);
  if (name == "rjust") return pad(self, a, 1);
  if (name == "center") return pad(self, a, 0);
  if (name == "zfill") {
    const int64_t width = int_arg(a, 0, "width", 0);
    const int64_t n = str_length(s);
    if (width <= n) return self;
    std::string out;
    size_t sign = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
    out += s.substr(0, sign);
    out.append(static_cast<size_t>(width - n), '0');
    out += s.substr(sign);
    return Value::string(std::move(out));
  }
  if (name == "partition" || name == "rpartition") {
    const std::string_view sep = str_arg(a, 0, "sep", name);
    if (sep.empty()) throw TemplateError("empty separator");
    const size_t p = name[0] == 'r' ? s.rfind(sep) : s.find(sep);
    ValueList out;
    if (p == std::string_view::npos) {
      const Value empty = Value::borrowed("");
      out = name[0] == 'r' ? ValueList{empty, empty, self} : ValueList{self, empty, empty};
    } else {
      out = {Value::slice_of(self, s.substr(0, p)), Value::slice_of(self, s.substr(p, sep.size())),
             Value::slice_of(self, s.substr(p + sep.size()))};
    }
    return Value::list(std::move(out), true);
  }
  throw TemplateError("'str object' has no attribute '" + std::string(name) + "'");
}

constexpr std::string_view kStrMethods[] = {
    "strip",    "lstrip",       "rstrip",       "split",    "rsplit",    "splitlines", "startswith",
    "endswith", "upper",        "lower",        "casefold", "title",     "capitalize", "swapcase",
    "replace",  "format",       "join",         "count",    "find",      "rfind",      "index",
    "rindex",   "removeprefix", "removesuffix", "isdigit",  "isdecimal", "isnumeric",  "isalpha",
    "isalnum",  "isspace",      "isupper",      "islower",  "ljust",     "rjust",      "center",
    "zfill",    "partition",    "rpartition"};
constexpr std::string_view kDictMethods[] = {"get", "items", "keys", "values", "copy"};
constexpr std::string_view kDictUnsafe[] = {"clear",      "pop",    "popitem",
                                            "setdefault", "update", "fromkeys"};
constexpr std::string_view kListMethods[] = {"index", "count", "copy"};
constexpr std::string_view kListUnsafe[] = {"append", "clear",  "extend",  "insert",
                                            "pop",    "remove", "reverse", "sort"};

template <size_t N>
bool among(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

}  // namespace

uint8_t method_kinds(std::string_view name) {
  static const std::unordered_map<std::string_view, uint8_t> kinds = [] {
    std::unordered_map<std::string_view, uint8_t> m;
    for (std::string_view n : kStrMethods) m[n] |= kMethodOfStr;
    for (std::string_view n : kDictMethods) m[n] |= kMethodOfDict;
    for (std::string_view n : kDictUnsafe) m[n] |= kMethodOfDict;
    for (std::string_view n : kListMethods) m[n] |= kMethodOfList | kMethodOfTuple;
    for (std::string_view n : kListUnsafe) m[n] |= kMethodOfList;
    m["cycle"] |= kMethodOfLoop;
    return m;
  }();
  auto it = kinds.find(name);
  return it == kinds.end() ? 0 : it->second;
}

bool has_method(const Value& self, uint8_t kinds) {
  switch (self.kind()) {
    case Kind::kString:
      return kinds & kMethodOfStr;
    case Kind::kDict:
      return kinds & kMethodOfDict;
    case Kind::kList:
      return kinds & (self.as_list().tuple ? kMethodOfTuple : kMethodOfList);
    case Kind::kLoop:
      return kinds & kMethodOfLoop;
    default:
      return false;
  }
}

bool has_method(const Value& self, std::string_view name) {
  return has_method(self, method_kinds(name));
}

Value call_method(const Value& self, std::string_view name, const Args& a) {
  switch (self.kind()) {
    case Kind::kString:
      return str_method(self, name, a);
    case Kind::kDict: {
      const DictObj& d = self.as_dict();
      if (name == "get") {
        const Value* v = d.find(a.get(0, "key", Value()));
        return v ? *v : a.get(1, "default", Value::none());
      }
      if (name == "items") {
        ValueList out;
        out.reserve(d.items.size());
        for (const auto& [k, v] : d.items) out.push_back(Value::list({k, v}, true));
        return Value::list(std::move(out));
      }
      if (name == "keys" || name == "values") {
        ValueList out;
        out.reserve(d.items.size());
        for (const auto& [k, v] : d.items) out.push_back(name == "keys" ? k : v);
        return Value::list(std::move(out));
      }
      if (name == "copy") {
        auto c = make_obj<DictObj>(d);
        return Value::dict(std::move(c));
      }
      if (among(kDictUnsafe, name)) unsafe(self, name);
      break;
    }
    case Kind::kList: {
      const auto& items = self.as_list().items;
      if (name == "index" || name == "count") {
        const Value& x = a.get(0, "value", Value());
        int64_t n = 0;
        for (size_t i = 0; i < items.size(); ++i) {
          if (equals(items[i], x)) {
            if (name == "index") return Value::integer(static_cast<int64_t>(i));
            ++n;
          }
        }
        if (name == "index") throw TemplateError("value is not in list");
        return Value::integer(n);
      }
      if (name == "copy") return Value::list(items);
      if (among(kListUnsafe, name)) unsafe(self, name);
      break;
    }
    case Kind::kLoop:
      if (name == "cycle") {
        if (a.positional.empty()) throw TemplateError("no items for cycling given");
        const LoopObj& l = self.as_loop();
        return a.positional[static_cast<size_t>(l.index0) % a.positional.size()];
      }
      break;
    default:
      break;
  }
  throw TemplateError("'" + std::string(self.type_name()) + " object' has no attribute '" +
                      std::string(name) + "'");
}

std::string_view py_strip(std::string_view s, const std::string_view* chars, bool left,
                          bool right) {
  auto drop = [&](char32_t c) {
    if (!chars) return python_space(c);
    for (size_t i = 0; i < chars->size();) {
      const auto d = decode_utf8(*chars, i);
      if (d.cp == c) return true;
      i += d.len;
    }
    return false;
  };
  size_t b = 0;
  if (left) {
    while (b < s.size()) {
      const auto c = decode_utf8(s, b);
      if (!drop(c.cp)) break;
      b += c.len;
    }
  }
  size_t e = s.size();
  if (right) {
    while (e > b) {
      size_t k = e - 1;
      while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
      if (!drop(decode_utf8(s, k).cp)) break;
      e = k;
    }
  }
  return s.substr(b, e - b);
}

namespace {

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const auto cp = decode_utf8(s, i);
      if (ensure_ascii) {
        char buf[16];
        if (cp.cp >= 0x10000) {
          const char32_t v = cp.cp - 0x10000;
          std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + static_cast<unsigned>(v >> 10),
                        0xDC00 + static_cast<unsigned>(v & 0x3FF));
        } else {
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp.cp));
        }
        out += buf;
      } else {
        out.append(s.substr(i, cp.len));
      }
      i += cp.len;
      continue;
    }
    ++i;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

struct JsonWriter {
  std::string& out;
  std::string_view indent;
  bool has_indent;
  bool sort_keys;
  bool ensure_ascii;
  std::string_view item_sep, key_sep;
  int depth = 0;

  void newline(int level) {
    out.push_back('\n');
    for (int i = 0; i < level; ++i) out += indent;
  }

  void key(const Value& k) {
    switch (k.kind()) {
      case Kind::kString:
        json_string(out, k.str(), ensure_ascii);
        return;
      case Kind::kInt:
      case Kind::kFloat:
        out.push_back('"');
        append_str(out, k);
        out.push_back('"');
        return;
      case Kind::kBool:
        out += k.as_bool() ? "\"true\"" : "\"false\"";
        return;
      case Kind::kNone:
        out += "\"null\"";
        return;
      default:
        throw TemplateError("keys must be str, int, float, bool or None, not " +
                            std::string(k.type_name()));
    }
  }

  void write(const Value& v) {
    if (++depth > 200) throw TemplateError("tojson: nesting too deep");
    switch (v.kind()) {
      case Kind::kNone:
        out += "null";
        break;
      case Kind::kBool:
        out += v.as_bool() ? "true" : "false";
        break;
      case Kind::kInt:
        append_str(out, v);
        break;
      case Kind::kFloat: {
        const double d = v.as_float();
        if (d != d) {
          out += "NaN";
        } else if (d == 1.0 / 0.0) {
          out += "Infinity";
        } else if (d == -1.0 / 0.0) {
          out += "-Infinity";
        } else {
          append_float_repr(out, d);
        }
        break;
      }
      case Kind::kString:
        json_string(out, v.str(), ensure_ascii);
        break;
      case Kind::kList: {
        const auto& items = v.as_list().items;
        if (items.empty()) {
          out += "[]";
          break;
        }
        out.push_back('[');
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep;
          if (has_indent) newline(depth);
          write(items[i]);
        }
        if (has_indent) newline(depth - 1);
        out.push_back(']');
        break;
      }
      case Kind::kDict: {
        const auto& items = v.as_dict().items;
        if (items.empty()) {
          out += "{}";
          break;
        }
        std::vector<const std::pair<Value, Value>*> order;
        order.reserve(items.size());
        for (const auto& kv : items) order.push_back(&kv);
        if (sort_keys) {
          std::stable_sort(order.begin(), order.end(),
                           [](auto* a, auto* b) { return compare(a->first, b->first) < 0; });
        }
        out.push_back('{');
        for (size_t i = 0; i < order.size(); ++i) {
          if (i) out += item_sep;
          if (has_indent) newline(depth);
          key(order[i]->first);
          out += key_sep;
          write(order[i]->second);
        }
        if (has_indent) newline(depth - 1);
        out.push_back('}');
        break;
      }
      default:
        throw TemplateError("Object of type " + std::string(v.type_name()) +
                            " is not JSON serializable");
    }
    --depth;
  }
};

}  // namespace

void append_json(std::string& out, const Value& v, int indent, bool sort_keys,
                 std::string_view item_sep, std::string_view key_sep) {
  const std::string spaces(indent > 0 ? static_cast<size_t>(indent) : 0, ' ');
  append_json_ex(out, v, indent >= 0 ? std::optional<std::string_view>(spaces) : std::nullopt,
                 sort_keys, false, item_sep, key_sep);
}

void append_json_ex(std::string& out, const Value& v, std::optional<std::string_view> indent,
                    bool sort_keys, bool ensure_ascii, std::string_view item_sep,
                    std::string_view key_sep) {
  JsonWriter w{out,    indent.value_or(""), indent.has_value(), sort_keys, ensure_ascii, item_sep,
               key_sep};
  if (w.item_sep.empty() && w.key_sep.empty()) {
    w.item_sep = indent ? "," : ", ";
    w.key_sep = ": ";
  }
  w.write(v);
}

}  // namespace kvgate::jinja
