#include "io/health_probe.h"

namespace kvgate::io {

std::optional<int> probe_health(const Url& url, std::chrono::milliseconds timeout) {
  const bool ipv6 = url.host.find(':') != std::string::npos;
  const std::string host = ipv6 ? "[" + url.host + "]" : url.host;
  auto r = http_fetch("GET", "http://" + host + ":" + url.port + url.target, {}, {}, timeout);
  if (!r) return std::nullopt;  // refused, reset, timed out, not HTTP: no answer yet
  return r->status;
}

}  // namespace kvgate::io
