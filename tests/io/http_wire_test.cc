// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "io/http_wire.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <string>

namespace kvgate::io::wire {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
using namespace std::chrono_literals;

// A connected pair of loopback sockets on one io_context.
struct SocketPair {
  asio::io_context io;
  tcp::socket a{io};
  tcp::socket b{io};
  SocketPair() {
    tcp::acceptor acc(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    a.connect(acc.local_endpoint());
    acc.accept(b);
  }
};

beast::error_code read_request(SocketPair& p, beast::flat_buffer& buffer,
                               http::request_parser<http::string_body>& parser,
                               bool header_only = false) {
  auto f = asio::co_spawn(p.io, read_message(p.b, buffer, parser, header_only), asio::use_future);
  p.io.restart();
  p.io.run();
  return f.get();
}

TEST(ReadMessage, ParsesPipelinedRequestsOneAtATime) {
  SocketPair p;
  const std::string two =
      "POST /v1/a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
      "GET /v1/b HTTP/1.1\r\nHost: x\r\n\r\n";
  asio::write(p.a, asio::buffer(two));
  beast::flat_buffer buffer;
  {
    http::request_parser<http::string_body> parser;
    ASSERT_FALSE(read_request(p, buffer, parser));
    EXPECT_EQ(parser.get().target(), "/v1/a");
    EXPECT_EQ(parser.get().body(), "hello");
  }
  EXPECT_GT(buffer.size(), 0u);  // the second request stays buffered
  http::request_parser<http::string_body> parser;
  ASSERT_FALSE(read_request(p, buffer, parser));
  EXPECT_EQ(parser.get().target(), "/v1/b");
}

TEST(ReadMessage, BodyArrivingInPiecesAndChunked) {
  SocketPair p;
  asio::write(p.a, asio::buffer(std::string("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                                            "3\r\nabc\r\n")));
  asio::co_spawn(
      p.io,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer t(p.io, 20ms);
        co_await t.async_wait(asio::use_awaitable);
        co_await asio::async_write(p.a, asio::buffer(std::string("2\r\nde\r\n0\r\n\r\n")),
                                   asio::use_awaitable);
      },
      asio::detached);
  beast::flat_buffer buffer;
  http::request_parser<http::string_body> parser;
  ASSERT_FALSE(read_request(p, buffer, parser));
  EXPECT_EQ(parser.get().body(), "abcde");
}

TEST(ReadMessage, HeaderOnlyLeavesTheBodyBuffered) {
  SocketPair p;
  asio::write(p.a, asio::buffer(std::string("POST / HTTP/1.1\r\nContent-Length: 4\r\n\r\nbody")));
  beast::flat_buffer buffer;
  http::request_parser<http::string_body> parser;
  ASSERT_FALSE(read_request(p, buffer, parser, /*header_only=*/true));
  EXPECT_TRUE(parser.is_header_done());
  EXPECT_FALSE(parser.is_done());
}

TEST(ReadMessage, PeerClosingBeforeAnyByteIsEndOfStream) {
  SocketPair p;
  p.a.close();
  beast::flat_buffer buffer;
  http::request_parser<http::string_body> parser;
  EXPECT_EQ(read_request(p, buffer, parser), http::error::end_of_stream);
}

TEST(ReadMessage, LimitsAndBadSyntaxAreParserErrors) {
  {
    SocketPair p;
    asio::write(p.a, asio::buffer(std::string("POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n")));
    beast::flat_buffer buffer;
    http::request_parser<http::string_body> parser;
    parser.body_limit(10);
    EXPECT_EQ(read_request(p, buffer, parser), http::error::body_limit);
  }
  {
    SocketPair p;
    asio::write(p.a, asio::buffer(std::string("NOT HTTP AT ALL\r\n\r\n")));
    beast::flat_buffer buffer;
    http::request_parser<http::string_body> parser;
    EXPECT_TRUE(read_request(p, buffer, parser));
  }
}

TEST(LazyDeadline, ExpiresOnceItPasses) {
  asio::io_context io;
  int expired = 0;
  LazyDeadline d(io.get_executor(), [&] { ++expired; });
  d.expires_after(20ms);
  io.run_for(200ms);
  EXPECT_EQ(expired, 1);
  EXPECT_TRUE(d.expired());
  d.reset_expired();
  EXPECT_FALSE(d.expired());
}

TEST(LazyDeadline, PushedBackDeadlineDoesNotFireEarly) {
  asio::io_context io;
  auto start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::duration fired_at{};
  LazyDeadline d(io.get_executor(), [&] { fired_at = std::chrono::steady_clock::now() - start; });
  d.expires_after(30ms);
  asio::steady_timer push(io, 15ms);
  push.async_wait([&](auto) { d.expires_after(100ms); });  // now ~115 ms from start
  io.run_for(400ms);
  // Not at the first deadline (30 ms); deadlines are set from the coarse clock, which
  // lags by at most one kernel tick (up to 10 ms).
  EXPECT_GE(fired_at, 100ms);
}

TEST(LazyDeadline, AnEarlierDeadlineRearmsTheTimer) {
  asio::io_context io;
  int expired = 0;
  LazyDeadline d(io.get_executor(), [&] { ++expired; });
  d.expires_after(10s);   // armed for 10 s
  d.expires_after(20ms);  // earlier: must not wait for the 10 s
  io.run_for(300ms);
  EXPECT_EQ(expired, 1);
  d.cancel();
}

TEST(LazyDeadline, NeverAndDisarmDoNotFireAndLetRunReturn) {
  asio::io_context io;
  int expired = 0;
  LazyDeadline d(io.get_executor(), [&] { ++expired; });
  d.expires_after(30ms);
  d.expires_never();  // the armed wait finds no deadline and stops
  io.run_for(200ms);
  EXPECT_EQ(expired, 0);

  io.restart();
  d.expires_after(10s);
  d.disarm();
  const auto t0 = std::chrono::steady_clock::now();
  io.run();  // nothing pending: returns at once instead of after 10 s
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_EQ(expired, 0);
}

TEST(LazyDeadline, CancelledOwnerIsNeverCalled) {
  asio::io_context io;
  int expired = 0;
  {
    LazyDeadline d(io.get_executor(), [&] { ++expired; });
    d.expires_after(10ms);
  }  // destroyed: cancelled
  io.run_for(100ms);
  EXPECT_EQ(expired, 0);
}

}  // namespace
}  // namespace kvgate::io::wire
