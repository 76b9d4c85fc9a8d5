// health_probe: one blocking HTTP/1.1 GET, for polling a server's /health while it starts.
//
// A thin layer over http_fetch (io/http_client.h): a server that is still starting
// refuses the connection, which is an answer (nullopt status), not an error to report.
//
//   Result<Url> url = parse_url("http://127.0.0.1:8000/health");  // io/http_client.h
//   std::optional<int> status = probe_health(*url, std::chrono::milliseconds(500));
//   if (status == 200) ...  // up
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "core/common/result.h"
#include "io/http_client.h"

namespace kvgate::io {

// The HTTP status code, or nullopt when there is no answer within `timeout` (refused,
// reset, timed out, not HTTP).
std::optional<int> probe_health(const Url& url, std::chrono::milliseconds timeout);

}  // namespace kvgate::io
