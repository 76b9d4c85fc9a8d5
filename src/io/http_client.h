// A small blocking HTTP/1.1 client: for tests, benchmarks and simple control calls.
// Each http_fetch call opens one connection (no pooling) on its own io_context; the
// streaming variant hands the body to a callback piece by piece as it arrives (SSE).
// HttpKeepAliveClient keeps its connections and its io_context between calls, for a
// caller that polls the same servers again and again (the gateway's metrics scraper).
//
//   Result<HttpClientResponse> r = http_fetch("GET", "http://127.0.0.1:8000/health");
//   if (r && r->status == 200) ...
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
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

// As http_fetch, but one connection per host:port stays open between calls (as a
// Prometheus server keeps its scrape connections): no connect, and no io_context set-up,
// per call. A kept connection that the server has closed meanwhile is replaced by a fresh
// one, once, before any response byte; any failure drops the connection. Blocking, for
// one thread at a time (not thread-safe).
class HttpKeepAliveClient {
 public:
  HttpKeepAliveClient();
  ~HttpKeepAliveClient();
  HttpKeepAliveClient(const HttpKeepAliveClient&) = delete;
  HttpKeepAliveClient& operator=(const HttpKeepAliveClient&) = delete;

  Result<HttpClientResponse> fetch(
      std::string_view method, std::string_view url, std::string_view body = {},
      const std::vector<HttpHeader>& headers = {},
      std::chrono::milliseconds timeout = std::chrono::milliseconds(30'000));
  // Connections kept open now.
  size_t open_connections() const;
  // Closes the connections to servers other than those of `urls` (gone from the caller's
  // list), so that none is kept for good.
  void retain(const std::vector<std::string>& urls);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvgate::io
