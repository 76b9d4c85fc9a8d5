#include "core/trace/request_spans.h"

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
  // One pass over the URL's few bytes (the exporter runs this for every hop span it has
  // not seen the URL of: OtlpJson's records encoder keeps the last one's answer).
  const char* p = url.data();
  const char* const end = p + url.size();
  std::string_view scheme;
  for (const char* q = p; q + 2 < end; ++q) {
    if (*q == '/' || *q == '?' || *q == '#') break;  // no "://" before the path: none
    if (q[0] == ':' && q[1] == '/' && q[2] == '/') {
      scheme = {p, static_cast<size_t>(q - p)};
      p = q + 3;
      break;
    }
  }
  // The authority: up to the path, the query or the fragment; past any userinfo.
  const char* host = p;
  const char* colon = nullptr;  // the last ':' (outside an IPv6 literal's brackets)
  const char* close = nullptr;  // an IPv6 literal's ']'
  const char* q = p;
  for (; q < end && *q != '/' && *q != '?' && *q != '#'; ++q) {
    if (*q == '@') {
      host = q + 1;
      colon = nullptr;
      close = nullptr;
    } else if (*q == ']') {
      close = q;
      colon = nullptr;
    } else if (*q == ':') {
      colon = q;
    }
  }
  const char* const authority_end = q;
  ServerAddress out;
  const char* port = nullptr;
  if (host < authority_end && *host == '[') {
    if (close == nullptr) return {{host, static_cast<size_t>(authority_end - host)}, 0};
    out.host = {host + 1, static_cast<size_t>(close - host - 1)};
    if (colon == close + 1) port = colon + 1;
  } else if (colon != nullptr) {
    out.host = {host, static_cast<size_t>(colon - host)};
    port = colon + 1;
  } else {
    out.host = {host, static_cast<size_t>(authority_end - host)};
  }
  if (port == nullptr || port == authority_end) {
    // None given: the scheme's.
    out.port = scheme == "https" ? 443 : scheme == "http" ? 80 : 0;
    return out;
  }
  // A port of 1 to 5 digits, 1-65535; anything else is not one (no server.port).
  int32_t n = 0;
  if (authority_end - port > 5) return out;
  for (const char* d = port; d < authority_end; ++d) {
    if (*d < '0' || *d > '9') return out;
    n = n * 10 + (*d - '0');
  }
  if (n > 0 && n <= 65535) out.port = n;
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
