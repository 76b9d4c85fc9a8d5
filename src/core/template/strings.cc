#include "core/template/strings.h"

#include <utf8proc.h>

#include <cmath>
#include <cstdio>

#include "core/common/unicode.h"

namespace kvgate::jinja {
namespace {

using unicode::append_utf8;
using unicode::decode_utf8;

bool ascii_only(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

char32_t map_cp(char32_t c, int how) {  // 0 lower, 1 upper, 2 title
  const auto i = static_cast<utf8proc_int32_t>(c);
  return static_cast<char32_t>(how == 0   ? utf8proc_tolower(i)
                               : how == 1 ? utf8proc_toupper(i)
                                          : utf8proc_totitle(i));
}

std::string map_case(std::string_view s, int how) {
  std::string out;
  out.reserve(s.size());
  if (ascii_only(s)) {
    for (char c : s) {
      if (how == 0 && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      if (how != 0 && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      out.push_back(c);
    }
    return out;
  }
  for (size_t i = 0; i < s.size();) {
    const auto c = decode_utf8(s, i);
    i += c.len;
    append_utf8(out, map_cp(c.cp, how));
  }
  return out;
}

bool is_cased(char32_t c) {
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

bool line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

struct Spec {
  char fill = ' ';
  char align = 0;  // < > ^ =
  char sign = '-';
  bool zero = false;
  int width = -1;
  bool comma = false;
  int precision = -1;
  char type = 0;
};

Spec parse_spec(std::string_view s) {
  Spec sp;
  size_t i = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (s.size() >= 2 && is_align(s[1])) {
    sp.fill = s[0];
    sp.align = s[1];
    i = 2;
  } else if (!s.empty() && is_align(s[0])) {
    sp.align = s[0];
    i = 1;
  }
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) sp.sign = s[i++];
  if (i < s.size() && s[i] == '0') {
    sp.zero = true;
    ++i;
  }
  if (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    sp.width = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') sp.width = sp.width * 10 + (s[i++] - '0');
  }
  if (i < s.size() && s[i] == ',') {
    sp.comma = true;
    ++i;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    sp.precision = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9')
      sp.precision = sp.precision * 10 + (s[i++] - '0');
  }
  if (i < s.size()) sp.type = s[i++];
  if (i != s.size()) throw TemplateError("Invalid format specifier '" + std::string(s) + "'");
  return sp;
}

std::string number_text(const Value& v, const Spec& sp) {
  char buf[64];
  const char t = sp.type;
  if (t == 'd' || (t == 0 && (v.is_int() || v.is_bool()))) {
    if (!v.is_int() && !v.is_bool())
      throw TemplateError("Unknown format code 'd' for object of type '" +
                          std::string(v.type_name()) + "'");
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v.as_int()));
  } else if (t == 'x' || t == 'X' || t == 'o' || t == 'b') {
    if (!v.is_int()) throw TemplateError("Unknown format code for a non-integer");
    const long long x = v.as_int();
    if (t == 'b') {
      std::string bits;
      unsigned long long u = static_cast<unsigned long long>(x < 0 ? -x : x);
      do {
        bits.insert(bits.begin(), static_cast<char>('0' + (u & 1)));
        u >>= 1;
      } while (u);
      return (x < 0 ? "-" : "") + bits;
    }
    std::snprintf(buf, sizeof buf, t == 'x' ? "%llx" : (t == 'X' ? "%llX" : "%llo"),
                  static_cast<long long>(x < 0 ? -x : x));
    return (x < 0 ? "-" : "") + std::string(buf);
  } else if (t == 'f' || t == 'F' || t == 'e' || t == 'E' || t == 'g' || t == 'G' || t == '%') {
    double d = v.as_float();
    const int p = sp.precision < 0 ? 6 : sp.precision;
    if (t == '%') d *= 100;
    const char c = t == '%' ? 'f' : t;
    const char f[] = {'%', '.', '*', c, 0};
    std::snprintf(buf, sizeof buf, f, p, d);
    return std::string(buf) + (t == '%' ? "%" : "");
  } else if (t == 0 && v.is_float()) {
    std::string s;
    if (sp.precision >= 0) {
      std::snprintf(buf, sizeof buf, "%.*g", sp.precision, v.as_float());
      return buf;
    }
    append_float_repr(s, v.as_float());
    return s;
  } else {
    throw TemplateError(std::string("Unknown format code '") + t + "' for object of type '" +
                        std::string(v.type_name()) + "'");
  }
  std::string s = buf;
  if (sp.comma) {
    const size_t start = s[0] == '-' ? 1 : 0;
    for (size_t k = s.size(); k > start + 3; k -= 3) s.insert(k - 3, ",");
  }
  return s;
}

std::string apply_spec(const Value& v, std::string_view spec_text) {
  const Spec sp = parse_spec(spec_text);
  std::string body;
  const bool numeric = v.is_number() && sp.type != 's';
  if (numeric) {
    body = number_text(v, sp);
    if (sp.sign != '-' && body[0] != '-') body.insert(body.begin(), sp.sign);
  } else {
    if (sp.type != 0 && sp.type != 's')
      throw TemplateError(std::string("Unknown format code '") + sp.type +
                          "' for object of type '" + std::string(v.type_name()) + "'");
    body = to_str(v);
    if (sp.precision >= 0) body = body.substr(0, str_offset(body, sp.precision));
  }
  const int64_t n = str_length(body);
  if (sp.width <= n) return body;
  const size_t pad = static_cast<size_t>(sp.width - n);
  char align = sp.align ? sp.align : (numeric ? '>' : '<');
  char fill = sp.fill;
  if (sp.zero && !sp.align && numeric) {
    align = '=';
    fill = '0';
  }
  switch (align) {
    case '<':
      return body + std::string(pad, fill);
    case '^':
      return std::string(pad / 2, fill) + body + std::string(pad - pad / 2, fill);
    case '=': {
      const size_t sign = (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' '));
      return body.substr(0, sign) + std::string(pad, fill) + body.substr(sign);
    }
    default:
      return std::string(pad, fill) + body;
  }
}

Value lookup_field(const Value& root, std::string_view rest) {
  Value v = root;
  while (!rest.empty()) {
    if (rest[0] == '.') {
      size_t e = 1;
      while (e < rest.size() && rest[e] != '.' && rest[e] != '[') ++e;
      const std::string_view key = rest.substr(1, e - 1);
      const Value* x = v.is_dict() ? v.as_dict().find(key) : nullptr;
      if (!x)
        throw TemplateError("'" + std::string(v.type_name()) + "' object has no attribute '" +
                            std::string(key) + "'");
      v = *x;
      rest.remove_prefix(e);
    } else if (rest[0] == '[') {
      const size_t e = rest.find(']');
      if (e == std::string_view::npos) throw TemplateError("Missing ']' in format string");
      const std::string_view key = rest.substr(1, e - 1);
      if (v.is_list()) {
        const int64_t i = std::stoll(std::string(key));
        if (i < 0 || i >= static_cast<int64_t>(v.as_list().items.size()))
          throw TemplateError("list index out of range");
        v = v.as_list().items[static_cast<size_t>(i)];
      } else {
        const Value* x = v.is_dict() ? v.as_dict().find(key) : nullptr;
        if (!x) throw TemplateError("KeyError: '" + std::string(key) + "'");
        v = *x;
      }
      rest.remove_prefix(e + 1);
    } else {
      throw TemplateError("bad format field");
    }
  }
  return v;
}

}  // namespace

bool python_space(char32_t c) {
  return (c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

std::vector<std::string_view> split_whitespace(std::string_view s, int64_t maxsplit,
                                               bool from_right) {
  // Code point boundaries with a whitespace flag, so both directions are simple.
  struct Cp {
    size_t at;
    uint32_t len;
    bool space;
  };
  std::vector<Cp> cps;
  for (size_t i = 0; i < s.size();) {
    const auto c = decode_utf8(s, i);
    cps.push_back({i, c.len, python_space(c.cp)});
    i += c.len;
  }
  std::vector<std::string_view> out;
  if (!from_right) {
    size_t k = 0;
    while (k < cps.size()) {
      while (k < cps.size() && cps[k].space) ++k;
      if (k == cps.size()) break;
      if (maxsplit == 0) {  // the rest, as it is (Python strips only the split side)
        out.push_back(s.substr(cps[k].at));
        break;
      }
      const size_t b = k;
      while (k < cps.size() && !cps[k].space) ++k;
      out.push_back(s.substr(cps[b].at, (k < cps.size() ? cps[k].at : s.size()) - cps[b].at));
      if (maxsplit > 0) --maxsplit;
    }
    return out;
  }
  size_t k = cps.size();
  while (k > 0) {
    while (k > 0 && cps[k - 1].space) --k;
    if (k == 0) break;
    if (maxsplit == 0) {
      out.push_back(s.substr(0, cps[k - 1].at + cps[k - 1].len));
      break;
    }
    const size_t e = k;
    while (k > 0 && !cps[k - 1].space) --k;
    out.push_back(s.substr(cps[k].at, cps[e - 1].at + cps[e - 1].len - cps[k].at));
    if (maxsplit > 0) --maxsplit;
  }
  return {out.rbegin(), out.rend()};
}

std::vector<std::string_view> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string_view> out;
  size_t start = 0, i = 0;
  while (i < s.size()) {
    const auto c = decode_utf8(s, i);
    if (!line_break(c.cp)) {
      i += c.len;
      continue;
    }
    size_t end = i + c.len;
    if (c.cp == '\r' && end < s.size() && s[end] == '\n') ++end;
    out.push_back(s.substr(start, (keepends ? end : i) - start));
    start = i = end;
  }
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

void normalize_range(int64_t& start, int64_t& end, int64_t length) {
  if (start < 0) start = std::max<int64_t>(0, start + length);
  if (end < 0) end = std::max<int64_t>(0, end + length);
  start = std::min(start, length);
  end = std::min(end, length);
}

std::string to_upper(std::string_view s) { return map_case(s, 1); }
std::string to_lower(std::string_view s) { return map_case(s, 0); }

std::string py_title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (size_t i = 0; i < s.size();) {
    const auto c = decode_utf8(s, i);
    i += c.len;
    append_utf8(out, map_cp(c.cp, prev_cased ? 0 : 2));
    prev_cased = is_cased(c.cp);
  }
  return out;
}

std::string jinja_title(std::string_view s) {
  // Words start after runs of whitespace or one of - ( { [ <; each word's first character
  // is upper-cased and the rest lower-cased.
  std::string out;
  bool word_start = true;
  for (size_t i = 0; i < s.size();) {
    const auto c = decode_utf8(s, i);
    i += c.len;
    const bool sep = python_space(c.cp) || c.cp == '-' || c.cp == '(' || c.cp == '{' ||
                     c.cp == '[' || c.cp == '<';
    if (sep) {
      append_utf8(out, c.cp);
      word_start = true;
    } else {
      append_utf8(out, map_cp(c.cp, word_start ? 1 : 0));
      word_start = false;
    }
  }
  return out;
}

std::string py_capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (size_t i = 0; i < s.size();) {
    const auto c = decode_utf8(s, i);
    i += c.len;
    append_utf8(out, map_cp(c.cp, first ? 2 : 0));
    first = false;
  }
  return out;
}

std::string py_format(std::string_view fmt, const Args& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      throw TemplateError("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string_view::npos)
      throw TemplateError("Single '{' encountered in format string");
    std::string_view field = fmt.substr(i + 1, close - i - 1);
    i = close;
    std::string_view spec, conv;
    if (size_t colon = field.find(':'); colon != std::string_view::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    if (size_t bang = field.find('!'); bang != std::string_view::npos) {
      conv = field.substr(bang + 1);
      field = field.substr(0, bang);
    }
    size_t name_end = 0;
    while (name_end < field.size() && field[name_end] != '.' && field[name_end] != '[') ++name_end;
    const std::string_view name = field.substr(0, name_end);
    Value v;
    if (name.empty() || (name[0] >= '0' && name[0] <= '9')) {
      const size_t idx =
          name.empty() ? auto_index++ : static_cast<size_t>(std::stoul(std::string(name)));
      if (idx >= args.positional.size())
        throw TemplateError("Replacement index " + std::to_string(idx) +
                            " out of range for positional args tuple");
      v = args.positional[idx];
    } else {
      bool found = false;
      for (const auto& [k, x] : args.named) {
        if (k == name) {
          v = x;
          found = true;
        }
      }
      if (!found) throw TemplateError("KeyError: '" + std::string(name) + "'");
    }
    v = lookup_field(v, field.substr(name_end));
    if (conv == "r") {
      std::string r;
      append_repr(r, v);
      v = Value::string(std::move(r));
    } else if (!conv.empty() && conv != "s") {
      throw TemplateError("Unknown conversion specifier " + std::string(conv));
    }
    out += spec.empty() ? to_str(v) : apply_spec(v, spec);
  }
  return out;
}

std::string printf_format(std::string_view fmt, const Value& args) {
  ValueList list;
  const bool is_tuple = args.is_list() && args.as_list().tuple;
  if (is_tuple) {
    list = args.as_list().items;
  } else {
    list.push_back(args);
  }
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (++i >= fmt.size()) throw TemplateError("incomplete format");
    Value v;
    bool have = false;
    if (fmt[i] == '(') {
      const size_t e = fmt.find(')', i);
      if (e == std::string_view::npos || !args.is_dict())
        throw TemplateError("format requires a mapping");
      const Value* x = args.as_dict().find(fmt.substr(i + 1, e - i - 1));
      if (!x) throw TemplateError("KeyError: '" + std::string(fmt.substr(i + 1, e - i - 1)) + "'");
      v = *x;
      have = true;
      i = e + 1;
    }
    std::string flags;
    while (i < fmt.size() &&
           (fmt[i] == '-' || fmt[i] == '+' || fmt[i] == ' ' || fmt[i] == '0' || fmt[i] == '#'))
      flags.push_back(fmt[i++]);
    std::string width, prec;
    while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') width.push_back(fmt[i++]);
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      prec = ".";
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') prec.push_back(fmt[i++]);
    }
    if (i >= fmt.size()) throw TemplateError("incomplete format");
    const char t = fmt[i];
    if (t == '%') {
      out.push_back('%');
      continue;
    }
    if (!have) {
      if (next >= list.size()) throw TemplateError("not enough arguments for format string");
      v = list[next++];
    }
    std::string body;
    char buf[128];
    const std::string f = "%" + flags + width + prec;
    switch (t) {
      case 's':
      case 'r': {
        std::string s;
        if (t == 'r') {
          append_repr(s, v);
        } else {
          append_str(s, v);
        }
        if (!prec.empty())
          s = s.substr(0, str_offset(s, prec.size() > 1 ? std::stoll(prec.substr(1)) : 0));
        const int64_t w = width.empty() ? 0 : std::stoll(width);
        const int64_t n = str_length(s);
        if (w > n) {
          const std::string pad(static_cast<size_t>(w - n), ' ');
          s = flags.find('-') != std::string::npos ? s + pad : pad + s;
        }
        body = s;
        break;
      }
      case 'd':
      case 'i':
      case 'x':
      case 'X':
      case 'o':
        if (!v.is_number())
          throw TemplateError("%" + std::string(1, t) + " format: a number is required, not " +
                              std::string(v.type_name()));
        std::snprintf(buf, sizeof buf, (f + "ll" + (t == 'i' ? 'd' : t)).c_str(),
                      static_cast<long long>(v.is_float() ? std::trunc(v.as_float()) : v.as_int()));
        body = buf;
        break;
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G':
        if (!v.is_number())
          throw TemplateError("must be real number, not " + std::string(v.type_name()));
        std::snprintf(buf, sizeof buf, (f + t).c_str(), v.as_float());
        body = buf;
        break;
      case 'c':
        if (v.is_string()) {
          body = std::string(v.str());
        } else if (v.is_int()) {
          append_utf8(body, static_cast<char32_t>(v.as_int()));
        } else {
          throw TemplateError("%c requires int or char");
        }
        break;
      default:
        throw TemplateError(std::string("unsupported format character '") + t + "'");
    }
    out += body;
  }
  if (!args.is_dict() && next < list.size())
    throw TemplateError("not all arguments converted during string formatting");
  return out;
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string format_time(std::string_view fmt, int64_t t) {
  static constexpr const char* kDays[] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                          "Thursday", "Friday", "Saturday"};
  static constexpr const char* kMonths[] = {"January",   "February", "March",    "April",
                                            "May",       "June",     "July",     "August",
                                            "September", "October",  "November", "December"};
  int64_t days = t / 86400;
  int64_t secs = t % 86400;
  if (secs < 0) {
    secs += 86400;
    --days;
  }
  const int64_t weekday = ((days % 7) + 11) % 7;  // 1970-01-01 was a Thursday
  // Civil date from days since the epoch (Howard Hinnant's algorithm).
  const int64_t z = days + 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t day = doy - (153 * mp + 2) / 5 + 1;
  const int64_t month = mp < 10 ? mp + 3 : mp - 9;
  const int64_t year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  static constexpr int kCum[] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  const int64_t yday = kCum[month - 1] + day + (leap && month > 2 ? 1 : 0);
  const int64_t hour = secs / 3600, minute = secs / 60 % 60, second = secs % 60;
  std::string out;
  char buf[32];
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%' || i + 1 >= fmt.size()) {
      out.push_back(fmt[i]);
      continue;
    }
    char c = fmt[++i];
    bool no_pad = false;
    if (c == '-' && i + 1 < fmt.size()) {  // glibc's %-d: no padding
      no_pad = true;
      c = fmt[++i];
    }
    auto num = [&](int64_t v, int w) {
      if (no_pad) {
        std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
      } else {
        std::snprintf(buf, sizeof buf, "%0*lld", w, static_cast<long long>(v));
      }
      out += buf;
    };
    switch (c) {
      case 'Y':
        num(year, 4);
        break;
      case 'y':
        num(year % 100, 2);
        break;
      case 'm':
        num(month, 2);
        break;
      case 'd':
        num(day, 2);
        break;
      case 'e':
        std::snprintf(buf, sizeof buf, "%2lld", static_cast<long long>(day));
        out += buf;
        break;
      case 'H':
        num(hour, 2);
        break;
      case 'I':
        num(hour % 12 == 0 ? 12 : hour % 12, 2);
        break;
      case 'M':
        num(minute, 2);
        break;
      case 'S':
        num(second, 2);
        break;
      case 'j':
        num(yday, 3);
        break;
      case 'p':
        out += hour < 12 ? "AM" : "PM";
        break;
      case 'B':
        out += kMonths[month - 1];
        break;
      case 'b':
      case 'h':
        out += std::string(kMonths[month - 1]).substr(0, 3);
        break;
      case 'A':
        out += kDays[weekday];
        break;
      case 'a':
        out += std::string(kDays[weekday]).substr(0, 3);
        break;
      case 'w':
        num(weekday, 1);
        break;
      case 'u':
        num(weekday == 0 ? 7 : weekday, 1);
        break;
      case 'F':
        num(year, 4);
        out += '-';
        num(month, 2);
        out += '-';
        num(day, 2);
        break;
      case 'T':
        num(hour, 2);
        out += ':';
        num(minute, 2);
        out += ':';
        num(second, 2);
        break;
      case 'Z':
        out += "UTC";
        break;
      case 'z':
        out += "+0000";
        break;
      case '%':
        out += '%';
        break;
      default:
        out.push_back('%');
        if (no_pad) out.push_back('-');
        out.push_back(c);
    }
  }
  return out;
}

}  // namespace kvgate::jinja
