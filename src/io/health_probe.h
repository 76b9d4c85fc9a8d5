// health_probe: one blocking HTTP/1.1 GET, for polling a server's /health while it starts.
//
// Deliberately tiny (plain Boost.Asio, no Beast): it sends one request with
// "Connection: close" and reads only the status line. A server that is still starting
// refuses the connection, which is an answer (nullopt status), not an error to report.
//
//   Result<HealthUrl> url = parse_health_url("http://127.0.0.1:8000/health");
//   std::optional<int> status = probe_health(*url, std::chrono::milliseconds(500));
//   if (status == 200) ...  // up
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "core/common/result.h"

namespace kvgate::io {

struct HealthUrl {
  std::string host;
  std::string port;    // "80" when the URL names none
  std::string target;  // "/" at least
};

// "http://host[:port][/path]" (IPv6 hosts in brackets). https is not supported.
Result<HealthUrl> parse_health_url(std::string_view url);

// The HTTP status code, or nullopt when there is no answer within `timeout` (refused,
// reset, timed out, not HTTP).
std::optional<int> probe_health(const HealthUrl& url, std::chrono::milliseconds timeout);

}  // namespace kvgate::io
