// Refusals made before a request's body is read (413, 431, 400, early_refusal's) reach a
// client that is still sending: the server answers, shuts its write side and reads what
// the client sends until it stops (lingering close, RFC 9112 section 9.6), within bounds.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "../integration/support/eventually.h"
#include "io/http_server.h"

namespace kvgate::io {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace http_server_refusal_test {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

std::unique_ptr<HttpServer> serve(HttpServerOptions o, std::atomic<int>* handled = nullptr) {
  auto s = HttpServer::start(o, [handled](HttpRequest&& r, std::shared_ptr<ResponseStream> st) {
    if (handled) ++*handled;
    st->respond(HttpResponse{200, "text/plain", {}, "got " + std::to_string(r.body.size())});
  });
  EXPECT_TRUE(s) << s.error();
  return std::move(*s);
}

struct Sent {
  uint64_t body_bytes = 0;  // of the body, written before the write failed (or all)
  bool write_failed = false;
  std::string answer;  // everything read back until the server closed
};

// Sends `head` and then `body_bytes` bytes of body in 64 KiB writes (as a client that
// does not read before it has sent all, like Python's urllib), then reads to the end.
Sent send_all(uint16_t port, const std::string& head, uint64_t body_bytes) {
  net::io_context ioc;
  tcp::socket s(ioc);
  s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  Sent out;
  boost::system::error_code ec;
  net::write(s, net::buffer(head), ec);
  const std::string block(64 * 1024, 'x');
  while (!ec && out.body_bytes < body_bytes) {
    const size_t n =
        static_cast<size_t>(std::min<uint64_t>(block.size(), body_bytes - out.body_bytes));
    out.body_bytes += net::write(s, net::buffer(block.data(), n), ec);
  }
  out.write_failed = static_cast<bool>(ec);
  s.shutdown(tcp::socket::shutdown_send, ec);
  char buf[4096];
  while (true) {
    const size_t n = s.read_some(net::buffer(buf), ec);
    if (ec) break;
    out.answer.append(buf, n);
  }
  return out;
}

std::string post_head(uint64_t length, std::string_view extra = "") {
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n" +
         std::string(extra) + "Content-Length: " + std::to_string(length) + "\r\n\r\n";
}

TEST(HttpServerRefusal, TooLargeBodyIsAnsweredWhileTheClientSendsIt) {
  HttpServerOptions o;  // 8 MiB body limit
  std::atomic<int> handled{0};
  auto server = serve(o, &handled);
  for (uint64_t mib : {9, 64}) {
    const Sent r = send_all(server->port(), post_head(mib << 20), mib << 20);
    EXPECT_FALSE(r.write_failed) << mib << " MiB: the server reset the connection";
    EXPECT_EQ(r.body_bytes, mib << 20);
    EXPECT_TRUE(r.answer.starts_with("HTTP/1.1 413 ")) << r.answer;
    EXPECT_NE(r.answer.find("Connection: close\r\n"), std::string::npos) << r.answer;
    // Without error_json, the message as text/plain.
    EXPECT_NE(r.answer.find("\r\n\r\nrequest body exceeds 8388608 bytes\n"), std::string::npos)
        << r.answer;
  }
  EXPECT_EQ(handled.load(), 0);
}

TEST(HttpServerRefusal, HeadersTooLargeAndBadHeadsAreAnsweredToo) {
  HttpServerOptions o;
  o.max_header_bytes = 1024;
  // The owner's protocol words the refusals (the gateway's and the engine's: vLLM's).
  o.error_json = [](int status, std::string_view message) {
    return R"({"error":{"message":")" + std::string(message) + R"(","code":)" +
           std::to_string(status) + "}}";
  };
  auto server = serve(o);
  const Sent big = send_all(
      server->port(),
      "POST / HTTP/1.1\r\nX-Pad: " + std::string(4000, 'p') + "\r\nContent-Length: 4194304\r\n\r\n",
      4 << 20);
  EXPECT_FALSE(big.write_failed);
  EXPECT_TRUE(big.answer.starts_with("HTTP/1.1 431 ")) << big.answer;
  EXPECT_NE(big.answer.find(R"("message":"request headers exceed 1024 bytes","code":431)"),
            std::string::npos)
      << big.answer;
  const Sent bad = send_all(server->port(), "POST / HTTP/9.9\r\n\r\n", 4 << 20);
  EXPECT_FALSE(bad.write_failed);
  EXPECT_TRUE(bad.answer.starts_with("HTTP/1.1 400 ")) << bad.answer;
  EXPECT_NE(bad.answer.find(R"({"error":{"message":"malformed HTTP request: )"), std::string::npos)
      << bad.answer;
}

TEST(HttpServerRefusal, EarlyRefusalAnswersOnTheHeadBeforeTheBody) {
  HttpServerOptions o;
  std::atomic<int> refusals{0};
  o.early_refusal = [&](const HttpRequest& head) -> std::optional<HttpResponse> {
    EXPECT_TRUE(head.body.empty());
    if (head.header("authorization")) return std::nullopt;
    ++refusals;
    return HttpResponse{401, "application/json", {}, R"({"error":{"message":"no key"}})"};
  };
  std::atomic<int> handled{0};
  auto server = serve(o, &handled);
  // A plain head (the fast parser) and a chunked one (Beast's), 4 MiB within the limit.
  const Sent plain = send_all(server->port(), post_head(4 << 20), 4 << 20);
  EXPECT_FALSE(plain.write_failed);
  EXPECT_TRUE(plain.answer.starts_with("HTTP/1.1 401 ")) << plain.answer;
  EXPECT_NE(plain.answer.find(R"("message":"no key")"), std::string::npos) << plain.answer;
  const Sent chunked =
      send_all(server->port(),
               "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 4 << 20);
  EXPECT_FALSE(chunked.write_failed);
  EXPECT_TRUE(chunked.answer.starts_with("HTTP/1.1 401 ")) << chunked.answer;
  EXPECT_EQ(refusals.load(), 2);
  EXPECT_EQ(handled.load(), 0);
  // With the key, the body is read and the handler answers.
  const Sent ok =
      send_all(server->port(), post_head(4 << 20, "Authorization: Bearer k\r\n"), 4 << 20);
  EXPECT_TRUE(ok.answer.starts_with("HTTP/1.1 200 ")) << ok.answer;
  EXPECT_NE(ok.answer.find("got 4194304"), std::string::npos) << ok.answer;
  EXPECT_EQ(handled.load(), 1);
}

TEST(HttpServerRefusal, LingeringStopsAtItsBounds) {
  HttpServerOptions o;
  o.max_body_bytes = 1024;
  o.linger_max_bytes = 1 << 20;
  o.linger_timeout = std::chrono::milliseconds(200);
  auto server = serve(o);
  // A client that keeps sending is cut off once it sent linger_max_bytes more.
  const Sent flood = send_all(server->port(), post_head(1ull << 40), 1ull << 30);
  EXPECT_TRUE(flood.write_failed);
  EXPECT_LT(flood.body_bytes, 64ull << 20);
  // A client that goes silent gets the answer and the server's FIN at once; the server
  // keeps reading for linger_timeout, then closes its end.
  net::io_context ioc;
  tcp::socket s(ioc);
  s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), server->port()));
  net::write(s, net::buffer(post_head(5000) + "partial"));
  std::string answer;
  char buf[4096];
  boost::system::error_code ec;
  while (!ec) answer.append(buf, s.read_some(net::buffer(buf), ec));
  const auto answered = Clock::now();
  EXPECT_EQ(ec, net::error::eof);
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 413 ")) << answer;
  EXPECT_EQ(server->connections(), 1u);  // still reading what the client might send
  // Waits for the server's I/O thread to close the connection after its linger.
  testing::eventually([&] { return server->connections() == 0; }, std::chrono::seconds(3),
                      std::chrono::milliseconds(5));
  EXPECT_EQ(server->connections(), 0u);
  EXPECT_GE(Clock::now() - answered, std::chrono::milliseconds(100));
}

}  // namespace http_server_refusal_test
}  // namespace kvgate::io
