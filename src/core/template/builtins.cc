// Jinja's filters and tests (Python Jinja 3.1, with transformers' tojson), attribute and
// item lookup.
#include "core/template/builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/template/strings.h"

namespace kvgate::jinja {
namespace {

enum Filter : int {
  kAbs,
  kAttr,
  kCapitalize,
  kCenter,
  kCount,
  kDefault,
  kDictsort,
  kEscape,
  kFirst,
  kFloat,
  kFormat,
  kIndent,
  kInt,
  kItems,
  kJoin,
  kLast,
  kLength,
  kList,
  kLower,
  kMap,
  kMax,
  kMin,
  kReject,
  kRejectattr,
  kReplace,
  kReverse,
  kRound,
  kSafe,
  kSelect,
  kSelectattr,
  kSort,
  kString,
  kSum,
  kTitle,
  kTojson,
  kTrim,
  kUnique,
  kUpper,
  kWordcount,
};

struct Named {
  std::string_view name;
  int id;
};

constexpr Named kFilters[] = {
    {"abs", kAbs},
    {"attr", kAttr},
    {"capitalize", kCapitalize},
    {"center", kCenter},
    {"count", kCount},
    {"d", kDefault},
    {"default", kDefault},
    {"dictsort", kDictsort},
    {"e", kEscape},
    {"escape", kEscape},
    {"first", kFirst},
    {"float", kFloat},
    {"format", kFormat},
    {"indent", kIndent},
    {"int", kInt},
    {"items", kItems},
    {"join", kJoin},
    {"last", kLast},
    {"length", kLength},
    {"list", kList},
    {"lower", kLower},
    {"map", kMap},
    {"max", kMax},
    {"min", kMin},
    {"reject", kReject},
    {"rejectattr", kRejectattr},
    {"replace", kReplace},
    {"reverse", kReverse},
    {"round", kRound},
    {"safe", kSafe},
    {"select", kSelect},
    {"selectattr", kSelectattr},
    {"sort", kSort},
    {"string", kString},
    {"sum", kSum},
    {"title", kTitle},
    {"tojson", kTojson},
    {"trim", kTrim},
    {"unique", kUnique},
    {"upper", kUpper},
    {"wordcount", kWordcount},
};

enum Test : int {
  kTBoolean,
  kTCallable,
  kTDefined,
  kTDivisibleBy,
  kTEq,
  kTEven,
  kTFalse,
  kTFloat,
  kTGe,
  kTGt,
  kTIn,
  kTInteger,
  kTIterable,
  kTLe,
  kTLower,
  kTLt,
  kTMapping,
  kTNe,
  kTNone,
  kTNumber,
  kTOdd,
  kTSameAs,
  kTSequence,
  kTString,
  kTTrue,
  kTUndefined,
  kTUpper,
  kTEscaped,
};

constexpr Named kTests[] = {
    {"boolean", kTBoolean},
    {"callable", kTCallable},
    {"defined", kTDefined},
    {"divisibleby", kTDivisibleBy},
    {"eq", kTEq},
    {"equalto", kTEq},
    {"even", kTEven},
    {"false", kTFalse},
    {"float", kTFloat},
    {"ge", kTGe},
    {"gt", kTGt},
    {"greaterthan", kTGt},
    {"in", kTIn},
    {"integer", kTInteger},
    {"iterable", kTIterable},
    {"le", kTLe},
    {"lower", kTLower},
    {"lt", kTLt},
    {"lessthan", kTLt},
    {"mapping", kTMapping},
    {"ne", kTNe},
    {"none", kTNone},
    {"number", kTNumber},
    {"odd", kTOdd},
    {"sameas", kTSameAs},
    {"sequence", kTSequence},
    {"string", kTString},
    {"true", kTTrue},
    {"undefined", kTUndefined},
    {"upper", kTUpper},
    {"escaped", kTEscaped},
};

int find_named(const Named* table, size_t n, std::string_view name) {
  for (size_t i = 0; i < n; ++i)
    if (table[i].name == name) return table[i].id;
  return -1;
}

// Jinja's make_attrgetter: "a.b.0" looks up a, then b, then item 0.
Value get_path(const Value& v, std::string_view path) {
  Value cur = v;
  while (true) {
    const size_t dot = path.find('.');
    const std::string_view part = path.substr(0, dot);
    bool digits = !part.empty();
    for (char c : part) digits = digits && c >= '0' && c <= '9';
    if (digits) {
      cur = get_item(cur, Value::integer(std::atoll(std::string(part).c_str())));
    } else {
      cur = get_item(cur, Value::borrowed(part));
      if (cur.is_undefined()) cur = Value();  // no hint: `path` may not outlive the render
    }
    if (dot == std::string_view::npos) return cur;
    path.remove_prefix(dot + 1);
  }
}

std::string soft_str(const Value& v) { return to_str(v); }

Value str_value(const Value& v) {
  if (v.is_string()) return v;
  return Value::string(to_str(v));
}

bool bool_arg(const Args& a, size_t i, std::string_view name, bool fallback) {
  const Value& v = a.get(i, name, Value());
  return v.is_undefined() ? fallback : v.truthy();
}

// A key for sorting and uniqueness: strings lower-cased unless case-sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(to_lower(v.str()));
  return v;
}

ValueList items_of(const Value& v) {
  if (v.is_undefined()) return {};
  if (!v.is_dict()) throw TemplateError("Can only get item pairs from a mapping.");
  ValueList out;
  for (const auto& [k, x] : v.as_dict().items) out.push_back(Value::list({k, x}, true));
  return out;
}

Value select_or_reject(const Value& seq, const Args& a, bool select, bool by_attr) {
  size_t at = 0;
  std::string_view attribute;
  Value attr_holder;
  if (by_attr) {
    attr_holder = a.get(0, "attribute", Value());
    if (!attr_holder.is_string()) throw TemplateError("selectattr: the attribute must be a string");
    attribute = attr_holder.str();
    at = 1;
  }
  int test = -1;
  Args test_args;
  if (a.positional.size() > at) {
    const Value& name = a.positional[at];
    if (!name.is_string()) throw TemplateError("select: the test name must be a string");
    test = test_id(name.str());
    if (test < 0) throw TemplateError("no test named '" + std::string(name.str()) + "'");
    test_args.positional.assign(a.positional.begin() + static_cast<long>(at) + 1,
                                a.positional.end());
  }
  ValueList out;
  for (const Value& item : iterate(seq)) {
    const Value v = by_attr ? get_path(item, attribute) : item;
    const bool ok = test < 0 ? v.truthy() : apply_test(test, v, test_args);
    if (ok == select) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value do_map(const Value& seq, const Args& a) {
  ValueList out;
  const Value& attribute = a.get(99, "attribute", Value());
  if (!attribute.is_undefined()) {
    if (!attribute.is_string()) throw TemplateError("map: the attribute must be a string");
    const Value& fallback = a.get(99, "default", Value());
    for (const Value& item : iterate(seq)) {
      Value v = get_path(item, attribute.str());
      out.push_back(v.is_undefined() && !fallback.is_undefined() ? fallback : v);
    }
    return Value::list(std::move(out));
  }
  if (a.positional.empty() || !a.positional[0].is_string())
    throw TemplateError("map requires a filter name or attribute=");
  const int f = filter_id(a.positional[0].str());
  if (f < 0) throw TemplateError("no filter named '" + std::string(a.positional[0].str()) + "'");
  Args rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.named = a.named;
  for (const Value& item : iterate(seq)) out.push_back(apply_filter(f, item, rest));
  return Value::list(std::move(out));
}

ValueList sorted(const Value& seq, const Args& a, size_t reverse_at, size_t case_at,
                 size_t attr_at) {
  ValueList items = iterate(seq);
  const bool reverse = bool_arg(a, reverse_at, "reverse", false);
  const bool case_sensitive = bool_arg(a, case_at, "case_sensitive", false);
  const Value& attr = a.get(attr_at, "attribute", Value());
  std::vector<std::pair<Value, size_t>> keys;
  for (size_t i = 0; i < items.size(); ++i) {
    Value k = attr.is_string() ? get_path(items[i], attr.str()) : items[i];
    keys.emplace_back(sort_key(k, case_sensitive), i);
  }
  std::stable_sort(keys.begin(), keys.end(), [&](const auto& x, const auto& y) {
    const int c = compare(x.first, y.first);
    return reverse ? c > 0 : c < 0;
  });
  ValueList out;
  for (const auto& k : keys) out.push_back(items[k.second]);
  return out;
}

Value min_max(const Value& seq, const Args& a, bool want_max) {
  const bool case_sensitive = bool_arg(a, 0, "case_sensitive", false);
  const Value& attr = a.get(1, "attribute", Value());
  const Value* best = nullptr;
  Value best_key;
  ValueList items = iterate(seq);
  for (const Value& item : items) {
    Value k = sort_key(attr.is_string() ? get_path(item, attr.str()) : item, case_sensitive);
    if (!best || (want_max ? compare(k, best_key) > 0 : compare(k, best_key) < 0)) {
      best = &item;
      best_key = k;
    }
  }
  return best ? *best : Value();
}

Value arith_add(const Value& x, const Value& y) {
  if (x.is_number() && y.is_number()) {
    if (x.is_float() || y.is_float()) return Value::number(x.as_float() + y.as_float());
    int64_t r;
    if (__builtin_add_overflow(x.as_int(), y.as_int(), &r))
      throw TemplateError("integer overflow (kvgate ints are 64-bit)");
    return Value::integer(r);
  }
  throw TemplateError("unsupported operand type(s) for +: '" + std::string(x.type_name()) +
                      "' and '" + std::string(y.type_name()) + "'");
}

// Python's int(str, base) for the `int` filter.
bool parse_int(std::string_view s, int base, int64_t& out) {
  std::string t;
  for (char c : py_strip(s, nullptr, true, true))
    if (c != '_') t.push_back(c);
  if (t.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(t.c_str(), &end, base);
  if (errno != 0 || end != t.c_str() + t.size()) return false;
  out = v;
  return true;
}

bool parse_float(std::string_view s, double& out) {
  const std::string t(py_strip(s, nullptr, true, true));
  if (t.empty()) return false;
  char* end = nullptr;
  out = std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size();
}

Value do_indent(const Value& v, const Args& a) {
  const Value& w = a.get(0, "width", Value::integer(4));
  std::string indention;
  if (w.is_string()) {
    indention = std::string(w.str());
  } else {
    indention.assign(static_cast<size_t>(std::max<int64_t>(0, w.as_int())), ' ');
  }
  const bool first = bool_arg(a, 1, "first", false);
  const bool blank = bool_arg(a, 2, "blank", false);
  const std::string s = soft_str(v) + "\n";
  const std::vector<std::string_view> lines = splitlines(s, false);
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) rv += "\n" + indention;
      rv += lines[i];
    }
  } else {
    rv = lines.empty() ? "" : std::string(lines[0]);
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].empty()) rv += indention;
      rv += lines[i];
    }
  }
  if (first) rv = indention + rv;
  return Value::string(std::move(rv));
}

Value do_tojson(const Value& v, const Args& a) {
  std::string out;
  const Value& indent = a.get(1, "indent", Value::none());
  std::string spaces;
  std::optional<std::string_view> ind;
  if (indent.is_int()) {
    spaces.assign(static_cast<size_t>(std::max<int64_t>(0, indent.as_int())), ' ');
    ind = spaces;
  } else if (indent.is_string()) {
    ind = indent.str();
  }
  const Value& seps = a.get(2, "separators", Value::none());
  std::string_view item_sep, key_sep;
  if (seps.is_list() && seps.as_list().items.size() == 2 && seps.as_list().items[0].is_string() &&
      seps.as_list().items[1].is_string()) {
    item_sep = seps.as_list().items[0].str();
    key_sep = seps.as_list().items[1].str();
  }
  append_json_ex(out, v, ind, bool_arg(a, 3, "sort_keys", false),
                 bool_arg(a, 0, "ensure_ascii", false), item_sep, key_sep);
  return Value::string(std::move(out));
}

}  // namespace

Value Args::get(size_t index, std::string_view name, const Value& fallback) const {
  if (index < positional.size()) return positional[index];
  for (const auto& [k, v] : named)
    if (k == name) return v;
  return fallback;
}

int filter_id(std::string_view name) {
  return find_named(kFilters, sizeof kFilters / sizeof kFilters[0], name);
}
int test_id(std::string_view name) {
  return find_named(kTests, sizeof kTests / sizeof kTests[0], name);
}

Value get_attr(const Value& obj, std::string_view name, bool hint) {
  return get_attr(obj, name, hint, method_kinds(name));
}

Value get_attr(const Value& obj, std::string_view name, bool hint, uint8_t kinds) {
  const Value missing = hint ? Value::undefined(name) : Value();
  switch (obj.kind()) {
    case Kind::kUndefined:
      throw TemplateError("'" + std::string(obj.undefined_name()) + "' is undefined");
    case Kind::kDict: {
      if (has_method(obj, kinds)) return Value::method(obj, name);
      const Value* v = obj.as_dict().find(name);
      return v ? *v : missing;
    }
    case Kind::kNamespace: {
      const Value* v = obj.namespace_dict().find(name);
      return v ? *v : missing;
    }
    case Kind::kLoop: {
      const LoopObj& l = obj.as_loop();
      const auto& items = l.items.as_list().items;
      const auto n = static_cast<int64_t>(items.size());
      if (name == "index") return Value::integer(l.index0 + 1);
      if (name == "index0") return Value::integer(l.index0);
      if (name == "revindex") return Value::integer(n - l.index0);
      if (name == "revindex0") return Value::integer(n - l.index0 - 1);
      if (name == "first") return Value::boolean(l.index0 == 0);
      if (name == "last") return Value::boolean(l.index0 == n - 1);
      if (name == "length") return Value::integer(n);
      if (name == "depth") return Value::integer(l.depth0 + 1);
      if (name == "depth0") return Value::integer(l.depth0);
      if (name == "previtem")
        return l.index0 > 0 ? items[static_cast<size_t>(l.index0 - 1)]
                            : Value::undefined("previtem");
      if (name == "nextitem")
        return l.index0 + 1 < n ? items[static_cast<size_t>(l.index0 + 1)]
                                : Value::undefined("nextitem");
      if (name == "cycle") return Value::method(obj, name);
      return missing;
    }
    case Kind::kString:
    case Kind::kList:
      if (has_method(obj, kinds)) return Value::method(obj, name);
      return missing;
    default:
      return missing;
  }
}

Value get_item(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Kind::kUndefined:
      throw TemplateError("'" + std::string(obj.undefined_name()) + "' is undefined");
    case Kind::kDict: {
      const Value* v = obj.as_dict().find(key);
      if (v) return *v;
      break;
    }
    case Kind::kList:
    case Kind::kString:
      if (key.is_int() || key.is_bool()) {
        const int64_t n = length(obj);
        int64_t i = key.as_int();
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value();
        if (obj.is_list()) return obj.as_list().items[static_cast<size_t>(i)];
        const std::string_view s = obj.str();
        const size_t b = str_offset(s, i);
        return Value::slice_of(obj, s.substr(b, str_offset(s.substr(b), 1)));
      }
      break;
    default:
      break;
  }
  if (key.is_string()) return get_attr(obj, key.str(), false);
  return Value();
}

Value apply_filter(int id, const Value& v, const Args& a) {
  switch (static_cast<Filter>(id)) {
    case kAbs:
      if (v.is_float()) return Value::number(std::fabs(v.as_float()));
      if (v.is_int() || v.is_bool()) {
        if (v.as_int() == INT64_MIN)
          throw TemplateError("integer overflow (kvgate ints are 64-bit)");
        return Value::integer(std::llabs(v.as_int()));
      }
      throw TemplateError("bad operand type for abs(): '" + std::string(v.type_name()) + "'");
    case kAttr: {
      const Value& name = a.get(0, "name", Value());
      if (!name.is_string()) return Value();
      if (v.is_dict()) return has_method(v, name.str()) ? get_attr(v, name.str(), false) : Value();
      return get_attr(v, name.str(), false);
    }
    case kCapitalize:
      return Value::string(py_capitalize(soft_str(v)));
    case kCenter: {
      Args pa;
      pa.positional.push_back(a.get(0, "width", Value::integer(80)));
      return call_method(str_value(v), "center", pa);
    }
    case kCount:
    case kLength:
      return Value::integer(length(v));
    case kDefault: {
      const bool boolean = bool_arg(a, 1, "boolean", false);
      if (v.is_undefined() || (boolean && !v.truthy()))
        return a.get(0, "default_value", Value::borrowed(""));
      return v;
    }
    case kDictsort: {
      const bool case_sensitive = bool_arg(a, 0, "case_sensitive", false);
      const Value& by = a.get(1, "by", Value::borrowed("key"));
      const bool reverse = bool_arg(a, 2, "reverse", false);
      const size_t pos = by.is_string() && by.str() == "value" ? 1 : 0;
      if (by.is_string() && by.str() != "key" && by.str() != "value")
        throw TemplateError("You can only sort by either \"key\" or \"value\"");
      ValueList pairs = items_of(v);
      std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
        const int c = compare(sort_key(x.as_list().items[pos], case_sensitive),
                              sort_key(y.as_list().items[pos], case_sensitive));
        return reverse ? c > 0 : c < 0;
      });
      return Value::list(std::move(pairs));
    }
    case kEscape:
      return Value::string(html_escape(soft_str(v)));
    case kFirst: {
      if (v.is_list()) return v.as_list().items.empty() ? Value() : v.as_list().items[0];
      ValueList items = iterate(v);
      return items.empty() ? Value() : items[0];
    }
    case kLast: {
      ValueList items = iterate(v);
      return items.empty() ? Value() : items.back();
    }
    case kFloat: {
      const Value& fallback = a.get(0, "default", Value::number(0.0));
      if (v.is_number()) return Value::number(v.as_float());
      double d;
      if (v.is_string() && parse_float(v.str(), d)) return Value::number(d);
      return fallback;
    }
    case kInt: {
      const Value& fallback = a.get(0, "default", Value::integer(0));
      const Value& base = a.get(1, "base", Value::integer(10));
      if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
      if (v.is_float()) {
        if (!std::isfinite(v.as_float())) throw TemplateError("cannot convert float to integer");
        return Value::integer(static_cast<int64_t>(v.as_float()));
      }
      if (v.is_string()) {
        int64_t i;
        if (parse_int(v.str(), static_cast<int>(base.is_int() ? base.as_int() : 10), i))
          return Value::integer(i);
        double d;
        if (parse_float(v.str(), d) && std::isfinite(d))
          return Value::integer(static_cast<int64_t>(d));
      }
      return fallback;
    }
    case kFormat: {
      if (!a.named.empty()) {
        auto d = make_obj<DictObj>();
        for (const auto& [k, x] : a.named) d->set(Value::string(std::string(k)), x);
        return Value::string(printf_format(soft_str(v), Value::dict(std::move(d))));
      }
      return Value::string(printf_format(soft_str(v), Value::list(a.positional, true)));
    }
    case kIndent:
      return do_indent(v, a);
    case kItems:
      return Value::list(items_of(v));
    case kJoin: {
      const Value& sep = a.get(0, "d", Value::borrowed(""));
      const Value& attr = a.get(1, "attribute", Value());
      std::string out;
      bool first = true;
      for (const Value& item : iterate(v)) {
        if (!first) append_str(out, sep);
        first = false;
        append_str(out, attr.is_string() ? get_path(item, attr.str()) : item);
      }
      return Value::string(std::move(out));
    }
    case kList:
      return Value::list(iterate(v));
    case kLower:
      return Value::string(to_lower(soft_str(v)));
    case kUpper:
      return Value::string(to_upper(soft_str(v)));
    case kMap:
      return do_map(v, a);
    case kMax:
      return min_max(v, a, true);
    case kMin:
      return min_max(v, a, false);
    case kSelect:
      return select_or_reject(v, a, true, false);
    case kReject:
      return select_or_reject(v, a, false, false);
    case kSelectattr:
      return select_or_reject(v, a, true, true);
    case kRejectattr:
      return select_or_reject(v, a, false, true);
    case kReplace: {
      Args pa;
      pa.positional = {a.get(0, "old", Value()), a.get(1, "new", Value())};
      const Value& count = a.get(2, "count", Value::none());
      if (!count.is_none()) pa.positional.push_back(count);
      return call_method(str_value(v), "replace", pa);
    }
    case kReverse: {
      if (v.is_string()) {
        ValueList chars = iterate(v);
        std::string out;
        for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += it->str();
        return Value::string(std::move(out));
      }
      ValueList items = iterate(v);
      std::reverse(items.begin(), items.end());
      return Value::list(std::move(items));
    }
    case kRound: {
      const int64_t precision = a.get(0, "precision", Value::integer(0)).as_int();
      const Value& method = a.get(1, "method", Value::borrowed("common"));
      if (!v.is_number()) throw TemplateError("round: a number is required");
      const double scale = std::pow(10.0, static_cast<double>(precision));
      const double x = v.as_float() * scale;
      const std::string_view m = method.is_string() ? method.str() : "common";
      double r;
      if (m == "common") {
        r = std::nearbyint(x);  // ties to even, as Python's round
      } else if (m == "floor") {
        r = std::floor(x);
      } else if (m == "ceil") {
        r = std::ceil(x);
      } else {
        throw TemplateError("method must be 'common', 'ceil' or 'floor'");
      }
      return Value::number(r / scale);
    }
    case kSafe:
    case kString:
      return str_value(v);
    case kSort:
      return Value::list(sorted(v, a, 0, 1, 2));
    case kSum: {
      const Value& attr = a.get(0, "attribute", Value());
      Value total = a.get(1, "start", Value::integer(0));
      for (const Value& item : iterate(v))
        total = arith_add(total, attr.is_string() ? get_path(item, attr.str()) : item);
      return total;
    }
    case kTitle:
      return Value::string(jinja_title(soft_str(v)));
    case kTojson:
      return do_tojson(v, a);
    case kTrim: {
      const Value s = str_value(v);
      const Value& chars = a.get(0, "chars", Value::none());
      std::string_view cs;
      if (chars.is_string()) cs = chars.str();
      return Value::slice_of(s, py_strip(s.str(), chars.is_string() ? &cs : nullptr, true, true));
    }
    case kUnique: {
      const bool case_sensitive = bool_arg(a, 0, "case_sensitive", false);
      const Value& attr = a.get(1, "attribute", Value());
      ValueList seen, out;
      for (const Value& item : iterate(v)) {
        Value k = sort_key(attr.is_string() ? get_path(item, attr.str()) : item, case_sensitive);
        bool dup = false;
        for (const Value& s : seen) dup = dup || equals(s, k);
        if (!dup) {
          seen.push_back(std::move(k));
          out.push_back(item);
        }
      }
      return Value::list(std::move(out));
    }
    case kWordcount:
      return Value::integer(static_cast<int64_t>(split_whitespace(soft_str(v), -1, false).size()));
  }
  throw TemplateError("unknown filter");
}

bool apply_test(int id, const Value& v, const Args& a) {
  const Value& arg = a.get(0, "value", Value());
  switch (static_cast<Test>(id)) {
    case kTBoolean:
      return v.is_bool();
    case kTCallable:
      return v.is_callable();
    case kTDefined:
      return !v.is_undefined();
    case kTUndefined:
      return v.is_undefined();
    case kTDivisibleBy:
      if (!v.is_number() || !arg.is_number()) throw TemplateError("divisibleby needs numbers");
      if (arg.as_float() == 0) throw TemplateError("integer division or modulo by zero");
      if (v.is_float() || arg.is_float()) return std::fmod(v.as_float(), arg.as_float()) == 0;
      return v.as_int() % arg.as_int() == 0;
    case kTEq:
      return equals(v, arg);
    case kTNe:
      return !equals(v, arg);
    case kTLt:
      return compare(v, arg) < 0;
    case kTLe:
      return compare(v, arg) <= 0;
    case kTGt:
      return compare(v, arg) > 0;
    case kTGe:
      return compare(v, arg) >= 0;
    case kTEven:
    case kTOdd:
      if (!v.is_int() && !v.is_bool()) throw TemplateError("even/odd need an integer");
      return (((v.as_int() % 2) + 2) % 2 == 1) == (id == kTOdd);
    case kTFalse:
      return v.is_bool() && !v.as_bool();
    case kTTrue:
      return v.is_bool() && v.as_bool();
    case kTFloat:
      return v.is_float();
    case kTInteger:
      return v.is_int();
    case kTNumber:
      return v.is_number();
    case kTIn:
      return contains(arg, v);
    case kTIterable:
      return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
    case kTSequence:
      return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
    case kTMapping:
      return v.is_dict();
    case kTNone:
      return v.is_none();
    case kTString:
      return v.is_string();
    case kTLower:
      return call_method(str_value(v), "islower", Args{}).truthy();
    case kTUpper:
      return call_method(str_value(v), "isupper", Args{}).truthy();
    case kTSameAs:
      if (v.kind() != arg.kind()) return false;
      if (v.is_none() || v.is_undefined()) return true;
      if (v.is_bool()) return v.as_bool() == arg.as_bool();
      if (v.is_int()) return v.as_int() == arg.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
      return equals(v, arg) && (v.is_list() || v.is_dict()) && &v.as_list() == &arg.as_list();
    case kTEscaped:
      return false;
  }
  return false;
}

}  // namespace kvgate::jinja
