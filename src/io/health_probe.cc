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

std::optional<int> probe_health(const Url& url, std::chrono::milliseconds timeout) {
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
