// Python string semantics over UTF-8: whitespace, case mapping, splitting, str.format,
// printf-style %, HTML escaping and strftime, shared by the methods and the filters.
//
// Internal to the template engine (template.h is the public interface).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/template/builtins.h"

namespace kvgate::jinja {

// Python's str.isspace for one code point.
bool python_space(char32_t c);

// str.split() with no separator (runs of whitespace, no empty parts).
std::vector<std::string_view> split_whitespace(std::string_view s, int64_t maxsplit,
                                               bool from_right);
// str.splitlines(keepends).
std::vector<std::string_view> splitlines(std::string_view s, bool keepends);

// Clamps [start, end) the way str methods treat their optional start/end arguments.
void normalize_range(int64_t& start, int64_t& end, int64_t length);

// Simple (one code point to one) case mapping; Python's full mapping differs for a few
// letters such as 'ß'.upper() == 'SS'.
std::string to_upper(std::string_view s);
std::string to_lower(std::string_view s);
std::string py_title(std::string_view s);       // str.title()
std::string jinja_title(std::string_view s);    // Jinja's `title` filter
std::string py_capitalize(std::string_view s);  // str.capitalize()

// str.format(*args, **kwargs): {}, {0}, {name}, {name.attr}, {name[key]}, !r/!s and the
// format spec [[fill]align][sign][0][width][,][.precision][type].
std::string py_format(std::string_view fmt, const Args& args);
// fmt % args: %s %r %d %i %f %e %g %x %o %c %% with flags, width and precision; args is a
// tuple (several values), a dict (%(name)s) or one value.
std::string printf_format(std::string_view fmt, const Value& args);

// markupsafe's escape: & < > " ' as &amp; &lt; &gt; &#34; &#39;.
std::string html_escape(std::string_view s);

// time.strftime over UTC for a Unix time in seconds (the caller's clock).
std::string format_time(std::string_view fmt, int64_t unix_seconds);

}  // namespace kvgate::jinja
