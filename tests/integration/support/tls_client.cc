#include "tls_client.h"

#include <openssl/ssl.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cstdlib>
#include <filesystem>

namespace kvgate::testing {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
constexpr auto kTuple = net::as_tuple(net::use_awaitable);

}  // namespace

Result<TestCertificate> make_test_certificate() {
  char tmpl[] = "/tmp/kvgate-tls-XXXXXX";
  if (!::mkdtemp(tmpl)) return Error("mkdtemp failed");
  TestCertificate c{tmpl, std::string(tmpl) + "/cert.pem", std::string(tmpl) + "/key.pem"};
  const std::string cmd =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2"
      " -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1"
      " -keyout " +
      c.key_file + " -out " + c.cert_file + " 2>" + c.dir + "/openssl.log";
  if (std::system(cmd.c_str()) != 0) return Error("openssl req failed: " + cmd);
  return c;
}

Result<HttpsResponse> https_fetch(uint16_t port, const std::string& method,
                                  const std::string& target, const std::string& body,
                                  const HttpsOptions& options, std::chrono::milliseconds timeout) {
  net::io_context ioc;
  net::ssl::context ctx(net::ssl::context::tls_client);
  beast::error_code ec;
  ctx.load_verify_file(options.ca_file, ec);
  if (ec) return Error("load CA " + options.ca_file + ": " + ec.message());
  ctx.set_verify_mode(net::ssl::verify_peer);
  if (options.tls12_only) SSL_CTX_set_max_proto_version(ctx.native_handle(), TLS1_2_VERSION);
  beast::ssl_stream<beast::tcp_stream> stream(ioc, ctx);
  SSL_set_tlsext_host_name(stream.native_handle(), options.server_name.c_str());
  SSL_set1_host(stream.native_handle(), options.server_name.c_str());
  HttpsResponse out;
  std::string error;
  auto run = [&]() -> net::awaitable<void> {
    auto& tcp_layer = beast::get_lowest_layer(stream);
    tcp_layer.expires_after(timeout);
    auto [cec] = co_await tcp_layer.socket().async_connect(
        tcp::endpoint(net::ip::make_address("127.0.0.1"), port), kTuple);
    if (cec) {
      error = "connect: " + cec.message();
      co_return;
    }
    auto [hec] = co_await stream.async_handshake(net::ssl::stream_base::client, kTuple);
    if (hec) {
      error = "handshake: " + hec.message();
      co_return;
    }
    out.tls_version = SSL_get_version(stream.native_handle());
    http::request<http::string_body> req{http::string_to_verb(method), target, 11};
    req.set(http::field::host, options.server_name);
    if (!body.empty()) req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    auto [wec, wn] = co_await http::async_write(stream, req, kTuple);
    (void)wn;
    if (wec) {
      error = "write: " + wec.message();
      co_return;
    }
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(boost::none);
    auto [rec, rn] = co_await http::async_read(stream, buffer, parser, kTuple);
    (void)rn;
    if (rec) {
      error = "read: " + rec.message();
      co_return;
    }
    out.response.status = static_cast<int>(parser.get().result_int());
    for (const auto& f : parser.get()) {
      out.response.headers.push_back({std::string(f.name_string()), std::string(f.value())});
    }
    out.response.body = std::move(parser.get().body());
    auto [sec] = co_await stream.async_shutdown(kTuple);
    (void)sec;  // the server may close first
  };
  net::co_spawn(ioc, run(), [&](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      error = ex.what();
    }
  });
  ioc.run();
  if (!error.empty()) return Error(error);
  return out;
}

Result<std::string> send_raw_until_closed(uint16_t port, const std::string& bytes,
                                          std::chrono::milliseconds timeout) {
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  std::string received;
  std::string error;
  auto run = [&]() -> net::awaitable<void> {
    stream.expires_after(timeout);
    auto [cec] = co_await stream.socket().async_connect(
        tcp::endpoint(net::ip::make_address("127.0.0.1"), port), kTuple);
    if (cec) {
      error = "connect: " + cec.message();
      co_return;
    }
    auto [wec, wn] = co_await net::async_write(stream, net::buffer(bytes), kTuple);
    (void)wn;
    // A server may close while we write (then the write fails): still read what it sent.
    (void)wec;
    char buf[4096];
    while (true) {
      auto [rec, n] = co_await stream.async_read_some(net::buffer(buf), kTuple);
      received.append(buf, n);
      if (rec == beast::error::timeout) {
        error = "the server kept the connection open";
        co_return;
      }
      if (rec) co_return;  // eof or reset: closed
    }
  };
  net::co_spawn(ioc, run(), net::detached);
  ioc.run();
  if (!error.empty()) return Error(error);
  return received;
}

}  // namespace kvgate::testing
