#include "io/health_probe.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <istream>

namespace kvgate::io {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

Result<HealthUrl> parse_health_url(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return Error("health URL must start with http:// (got '" + std::string(url) + "')");
  }
  std::string_view rest = url.substr(kScheme.size());
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  HealthUrl out;
  out.target = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (authority.empty()) return Error("health URL has no host: " + std::string(url));
  if (authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return Error("bad IPv6 host in " + std::string(url));
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    out.port = after.size() > 1 && after.front() == ':' ? std::string(after.substr(1)) : "80";
  } else {
    size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    out.port = colon == std::string_view::npos ? "80" : std::string(authority.substr(colon + 1));
  }
  if (out.host.empty() || out.port.empty() ||
      out.port.find_first_not_of("0123456789") != std::string::npos) {
    return Error("bad host or port in health URL: " + std::string(url));
  }
  return out;
}

std::optional<int> probe_health(const HealthUrl& url, std::chrono::milliseconds timeout) {
  asio::io_context io;
  tcp::socket socket(io);
  tcp::resolver resolver(io);
  asio::streambuf response;
  std::optional<int> status;
  std::string request = "GET " + url.target + " HTTP/1.1\r\nHost: " + url.host + ":" + url.port +
                        "\r\nConnection: close\r\nUser-Agent: kvgate-coldstart\r\n\r\n";

  resolver.async_resolve(url.host, url.port, [&](auto ec, const tcp::resolver::results_type& r) {
    if (ec) return;
    asio::async_connect(socket, r, [&](auto ec2, const tcp::endpoint&) {
      if (ec2) return;
      asio::async_write(socket, asio::buffer(request), [&](auto ec3, size_t) {
        if (ec3) return;
        asio::async_read_until(socket, response, "\r\n", [&](auto ec4, size_t) {
          if (ec4) return;
          std::istream in(&response);
          std::string version;
          int code = 0;
          if (in >> version >> code && version.rfind("HTTP/", 0) == 0) status = code;
        });
      });
    });
  });
  io.run_for(timeout);
  return status;
}

}  // namespace kvgate::io
