// The blocking HTTP client against a real io::HttpServer on loopback: one-shot fetches,
// and the keep-alive client's connection reuse, replacement and clean-up.
#include "io/http_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "../integration/support/eventually.h"
#include "io/http_server.h"

namespace kvgate::io {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace http_client_test {

using namespace std::chrono_literals;

// A server answering "hello <path>"; with `close_after_answer` each answer says
// Connection: close.
std::unique_ptr<HttpServer> hello_server(std::atomic<int>* hits = nullptr,
                                         bool close_after_answer = false) {
  auto s = HttpServer::start(
      {}, [hits, close_after_answer](HttpRequest&& r, std::shared_ptr<ResponseStream> out) {
        if (hits) ++*hits;
        HttpResponse res{200, "text/plain", {}, "hello " + r.path};
        if (close_after_answer) res.headers.push_back({"Connection", "close"});
        out->respond(std::move(res));
      });
  EXPECT_TRUE(s) << s.error();
  return s ? std::move(*s) : nullptr;
}

std::string url(const HttpServer& s, std::string_view path) {
  return "http://127.0.0.1:" + std::to_string(s.port()) + std::string(path);
}

// Until the server's count of open connections is `n` (closes are seen asynchronously).
bool server_connections_become(const HttpServer& s, size_t n) {
  // Waits for the server's I/O thread to see the closes.
  return testing::eventually([&] { return s.connections() == n; }, 1s, 5ms);
}

TEST(HttpFetch, OneShotFetchClosesItsConnection) {
  auto s = hello_server();
  auto r = http_fetch("GET", url(*s, "/a"), {}, {}, 5s);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello /a");
  EXPECT_TRUE(server_connections_become(*s, 0));
}

TEST(HttpKeepAliveClient, ReusesOneConnectionPerServer) {
  std::atomic<int> hits = 0;
  auto s = hello_server(&hits);
  HttpKeepAliveClient client;
  for (int i = 0; i < 5; ++i) {
    auto r = client.fetch("GET", url(*s, "/m" + std::to_string(i)), {}, {}, 5s);
    ASSERT_TRUE(r) << r.error();
    EXPECT_EQ(r->body, "hello /m" + std::to_string(i));
  }
  EXPECT_EQ(hits, 5);
  EXPECT_EQ(client.open_connections(), 1u);
  EXPECT_EQ(s->connections(), 1u);  // one connection served all five

  auto other = hello_server();
  ASSERT_TRUE(client.fetch("GET", url(*other, "/x"), {}, {}, 5s));
  EXPECT_EQ(client.open_connections(), 2u);
  client.retain({url(*other, "")});  // the first server is gone from the list
  EXPECT_EQ(client.open_connections(), 1u);
  EXPECT_TRUE(server_connections_become(*s, 0));
  EXPECT_EQ(other->connections(), 1u);
}

TEST(HttpKeepAliveClient, ServerThatClosesGetsAFreshConnectionEachTime) {
  std::atomic<int> hits = 0;
  auto s = hello_server(&hits, /*close_after_answer=*/true);
  HttpKeepAliveClient client;
  for (int i = 0; i < 3; ++i) {
    auto r = client.fetch("GET", url(*s, "/c"), {}, {}, 5s);
    ASSERT_TRUE(r) << r.error();
    EXPECT_EQ(r->body, "hello /c");
    EXPECT_EQ(client.open_connections(), 0u);  // Connection: close is honoured
  }
  EXPECT_EQ(hits, 3);
}

TEST(HttpKeepAliveClient, AServerThatWentAwayIsAnErrorAndItsConnectionIsDropped) {
  std::atomic<int> hits = 0;
  auto s = hello_server(&hits);
  const std::string where = url(*s, "/1");
  HttpKeepAliveClient client;
  ASSERT_TRUE(client.fetch("GET", where, {}, {}, 5s));
  ASSERT_EQ(client.open_connections(), 1u);
  s->stop(0ms);  // the kept connection is closed by the server
  s.reset();
  // The kept connection fails before any response byte; the retry on a fresh one is
  // refused: one error, and nothing kept.
  auto r = client.fetch("GET", where, {}, {}, 2s);
  EXPECT_FALSE(r);
  EXPECT_EQ(client.open_connections(), 0u);
  EXPECT_EQ(hits, 1);
}

TEST(HttpKeepAliveClient, StaleConnectionToARestartedServerIsRetriedTransparently) {
  // The same port, served again after a restart: the kept connection is dead, the retry
  // on a fresh connection succeeds and the caller sees one answer.
  std::atomic<int> hits = 0;
  auto s = hello_server(&hits);
  const uint16_t port = s->port();
  HttpKeepAliveClient client;
  ASSERT_TRUE(client.fetch("GET", url(*s, "/a"), {}, {}, 5s));
  s->stop(0ms);
  s.reset();
  HttpServerOptions o;
  o.port = port;
  auto again = HttpServer::start(o, [&hits](HttpRequest&& r, std::shared_ptr<ResponseStream> out) {
    ++hits;
    out->respond(HttpResponse{200, "text/plain", {}, "again " + r.path});
  });
  if (!again) GTEST_SKIP() << "port " << port << " was taken meanwhile: " << again.error();
  auto r = client.fetch("GET", "http://127.0.0.1:" + std::to_string(port) + "/b", {}, {}, 5s);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->body, "again /b");
  EXPECT_EQ(hits, 2);
  EXPECT_EQ(client.open_connections(), 1u);
}

TEST(HttpKeepAliveClient, BadUrlIsAnError) {
  HttpKeepAliveClient client;
  EXPECT_FALSE(client.fetch("GET", "https://example.com/"));
  EXPECT_FALSE(client.fetch("GET", "http://127.0.0.1:0/"));
  EXPECT_EQ(client.open_connections(), 0u);
}

}  // namespace http_client_test
}  // namespace kvgate::io
