#include "core/trace/request_spans.h"

#include <algorithm>
#include <cstring>

namespace kvgate::trace {

TextRef TextBuffer::add_on_heap(std::string_view s) {
  const TextRef ref{size_, static_cast<uint32_t>(s.size())};
  if (!on_heap_) {
    heap_.reserve(2 * (size_ + s.size()));
    heap_.assign(inline_, size_);
    on_heap_ = true;
  }
  heap_.append(s);
  size_ += ref.size;
  return ref;
}

ServerAddress server_address(std::string_view url) {
  std::string_view scheme;
  std::string_view rest = url;
  if (const size_t at = url.find("://"); at != std::string_view::npos) {
    scheme = url.substr(0, at);
    rest = url.substr(at + 3);
  }
  // The authority ends where the path, the query or the fragment begins; userinfo is not
  // part of the host.
  std::string_view authority = rest.substr(0, std::min(rest.find_first_of("/?#"), rest.size()));
  if (const size_t at = authority.rfind('@'); at != std::string_view::npos) {
    authority.remove_prefix(at + 1);
  }
  ServerAddress out;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    // An IPv6 literal: "[::1]:8000".
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return {authority, 0};
    out.host = authority.substr(1, close - 1);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty() && after.front() == ':') port = after.substr(1);
  } else if (const size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    out.host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  } else {
    out.host = authority;
  }
  // A port of 1 to 5 digits, 1-65535; none given: the scheme's.
  int32_t n = 0;
  const bool digits =
      !port.empty() && port.size() <= 5 &&
      std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (digits) {
    for (const char c : port) n = n * 10 + (c - '0');
  }
  if (digits && n > 0 && n <= 65535) {
    out.port = n;
  } else if (port.empty()) {
    out.port = scheme == "https" ? 443 : scheme == "http" ? 80 : 0;
  }
  return out;
}

void RequestSpans::clear() {
  trace_id = {};
  span_id = 0;
  parent_span_id = 0;
  trace_flags = kSampledFlag;
  trace_state = {};
  start_unix_nanos = 0;
  end_unix_nanos = 0;
  model.reset();
  pool.reset();
  path.reset();
  routing.reset();
  endpoint = {};
  http_status = 0;
  hops_started = 0;
  hops.clear();
  text.clear();
}

}  // namespace kvgate::trace
