// A small blocking HTTP/1.1 client: for tests, benchmarks and simple control calls.
// Each call opens one connection (no pooling) on its own io_context; the streaming
// variant hands the body to a callback piece by piece as it arrives (SSE).
//
//   Result<HttpClientResponse> r = http_fetch("GET", "http://127.0.0.1:8000/health");
//   if (r && r->status == 200) ...
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"
#include "io/http_types.h"

namespace kvgate::io {

struct HttpClientResponse {
  int status = 0;
  std::vector<HttpHeader> headers;
  std::string body;  // empty for http_fetch_streaming (the callback got it)
  const std::string* header(std::string_view name) const { return find_header(headers, name); }
};

struct Url {
  std::string host;
  std::string port;
  std::string target;  // path and query, "/" at least
};

// Parses "http://host[:port][/path]" (IPv6 hosts in brackets; port 80 when none).
// https is not supported here.
Result<Url> parse_url(std::string_view url);

// Errors: bad URL, connection refused, timeout (the whole exchange), malformed response.
Result<HttpClientResponse> http_fetch(
    std::string_view method, std::string_view url, std::string_view body = {},
    const std::vector<HttpHeader>& headers = {},
    std::chrono::milliseconds timeout = std::chrono::milliseconds(30'000));

// As http_fetch, but each piece of the body goes to on_data as soon as it is read;
// returning false from on_data stops reading (the connection is closed).
Result<HttpClientResponse> http_fetch_streaming(
    std::string_view method, std::string_view url, std::string_view body,
    const std::vector<HttpHeader>& headers, const std::function<bool(std::string_view)>& on_data,
    std::chrono::milliseconds timeout = std::chrono::milliseconds(30'000));

}  // namespace kvgate::io
