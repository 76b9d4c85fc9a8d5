#include "io/http_server.h"

#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <future>
#include <optional>
#include <thread>

#include "io/http_client.h"

namespace kvgate::io {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace http_server_test {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;

std::string url(const HttpServer& s, std::string_view path) {
  return "http://127.0.0.1:" + std::to_string(s.port()) + std::string(path);
}

std::unique_ptr<HttpServer> serve(HttpHandler h, HttpServerOptions o = {}) {
  auto s = HttpServer::start(o, std::move(h));
  EXPECT_TRUE(s) << s.error();
  return std::move(*s);
}

// Raw-socket helper: sends bytes, reads until `until` appears or the peer closes.
std::string exchange(tcp::socket& s, std::string_view send, std::string_view until) {
  if (!send.empty()) net::write(s, net::buffer(send));
  std::string got;
  char buf[4096];
  while (got.find(until) == std::string::npos) {
    boost::system::error_code ec;
    size_t n = s.read_some(net::buffer(buf), ec);
    if (ec) break;
    got.append(buf, n);
  }
  return got;
}

TEST(HttpServer, WholeResponsesAndRequestFields) {
  auto server = serve([](HttpRequest&& r, std::shared_ptr<ResponseStream> s) {
    if (r.path == "/echo") {
      HttpResponse res;
      res.content_type = "text/plain";
      res.headers.push_back({"X-Method", r.method});
      res.body = r.body + "|" + r.query + "|" + std::string(r.header("X-TEST").value_or(""));
      s->respond(std::move(res));
      return;
    }
    s->respond(HttpResponse{
        404, "application/json", {}, R"({"error":{"message":"no route )" + r.path + R"("}})"});
  });
  auto r = http_fetch("POST", url(*server, "/echo?a=1"), "hello", {{"X-Test", "yes"}});
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello|a=1|yes");
  EXPECT_EQ(*r->header("x-method"), "POST");
  auto nf = http_fetch("GET", url(*server, "/nope"));
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->status, 404);
  EXPECT_NE(nf->body.find("\"error\""), std::string::npos);
  EXPECT_NE(nf->body.find("no route /nope"), std::string::npos);
}

TEST(HttpServer, KeepAliveServesSeveralRequestsOnOneConnection) {
  std::atomic<int> served{0};
  auto server = serve([&](HttpRequest&&, std::shared_ptr<ResponseStream> s) {
    s->respond(HttpResponse{200, "text/plain", {}, "n" + std::to_string(++served)});
  });
  net::io_context ioc;
  tcp::socket sock(ioc);
  sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), server->port()));
  const std::string req = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  EXPECT_NE(exchange(sock, req, "n1").find("n1"), std::string::npos);
  EXPECT_NE(exchange(sock, req, "n2").find("n2"), std::string::npos);
  EXPECT_EQ(server->connections(), 1u);
}

TEST(HttpServer, StreamsChunksAsTheyAreWritten) {
  std::promise<void> first_seen;
  auto first_seen_f = first_seen.get_future().share();
  std::thread producer;
  auto server = serve([&](HttpRequest&&, std::shared_ptr<ResponseStream> s) {
    s->start(200, "text/event-stream");
    producer = std::thread([s, first_seen_f] {
      s->write("data: 1\n\n");
      // The client must see chunk 1 before chunk 2 exists: true streaming.
      first_seen_f.wait();
      std::promise<void> flushed;
      s->write("data: 2\n\n", [&] { flushed.set_value(); });
      flushed.get_future().wait();
      s->write("data: [DONE]\n\n");
      s->finish();
    });
  });
  std::string got;
  bool signalled = false;
  auto r = http_fetch_streaming("GET", url(*server, "/s"), "", {}, [&](std::string_view d) {
    got += d;
    if (!signalled && got.find("data: 1") != std::string::npos) {
      signalled = true;
      first_seen.set_value();
    }
    return true;
  });
  producer.join();
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(*r->header("content-type"), "text/event-stream");
  EXPECT_EQ(got, "data: 1\n\ndata: 2\n\ndata: [DONE]\n\n");
}

// Regression: chunks written while the head is being written must not wait for a
// wake-up that already happened (a lost wake-up stalled streams under load).
TEST(HttpServer, ChunksWrittenDuringTheHeadWriteAreNotLost) {
  HttpServerOptions o;
  o.threads = 2;
  std::vector<std::thread> producers;
  std::mutex mu;
  auto server = serve(
      [&](HttpRequest&&, std::shared_ptr<ResponseStream> s) {
        std::lock_guard lock(mu);
        producers.emplace_back([s] {
          s->start(200, "text/event-stream");
          s->write("data: a\n\n");
          s->finish();
        });
      },
      o);
  for (int i = 0; i < 300; ++i) {
    auto r = http_fetch("GET", url(*server, "/"), "", {}, std::chrono::milliseconds(5000));
    ASSERT_TRUE(r) << "request " << i << ": " << r.error();
    ASSERT_EQ(r->body, "data: a\n\n");
  }
  std::lock_guard lock(mu);
  for (auto& t : producers) t.join();
}

TEST(HttpServer, LimitsAnswerInTheServersErrorShape) {
  HttpServerOptions o;
  o.max_body_bytes = 100;
  o.max_header_bytes = 1024;
  auto plain = serve(
      [](HttpRequest&&, std::shared_ptr<ResponseStream> s) { s->respond(HttpResponse{}); }, o);
  auto text = http_fetch("POST", url(*plain, "/"), std::string(1000, 'x'));
  ASSERT_TRUE(text) << text.error();
  EXPECT_EQ(text->status, 413);
  EXPECT_EQ(text->body.find("\"error\""), std::string::npos) << "no hook: plain text";
  EXPECT_FALSE(text->body.empty());

  o.error_json = [](int status, std::string_view message) {
    return "{\"error\":{\"code\":" + std::to_string(status) + ",\"message\":\"" +
           std::string(message) + "\"}}";
  };
  auto server = serve(
      [](HttpRequest&&, std::shared_ptr<ResponseStream> s) { s->respond(HttpResponse{}); }, o);
  auto big = http_fetch("POST", url(*server, "/"), std::string(1000, 'x'));
  ASSERT_TRUE(big) << big.error();
  EXPECT_EQ(big->status, 413);
  EXPECT_NE(big->body.find("{\"error\":{\"code\":413"), std::string::npos) << big->body;
  auto hdr = http_fetch("GET", url(*server, "/"), "", {{"X-Big", std::string(4000, 'h')}});
  ASSERT_TRUE(hdr) << hdr.error();
  EXPECT_EQ(hdr->status, 431);
  net::io_context ioc;
  tcp::socket sock(ioc);
  sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), server->port()));
  EXPECT_NE(exchange(sock, "NOT HTTP AT ALL\r\n\r\n", "\r\n\r\n").find("400"), std::string::npos);
}

TEST(HttpServer, ClientDisconnectRunsOnCloseWhileHandlerIsSilent) {
  std::promise<void> closed;
  std::promise<void> handled;
  std::shared_ptr<ResponseStream> kept;
  auto server = serve([&](HttpRequest&&, std::shared_ptr<ResponseStream> s) {
    s->on_close([&] { closed.set_value(); });
    kept = s;  // never answers
    handled.set_value();
  });
  {
    net::io_context ioc;
    tcp::socket sock(ioc);
    sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), server->port()));
    net::write(sock, net::buffer(std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n")));
    ASSERT_EQ(handled.get_future().wait_for(std::chrono::seconds(5)), std::future_status::ready);
  }  // socket closed here
  EXPECT_EQ(closed.get_future().wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_TRUE(kept->closed());
  kept->write("late");  // ignored, no crash
  kept->finish();
}

TEST(HttpServer, GracefulStopLetsAStreamFinish) {
  std::thread producer;
  std::promise<void> started;
  auto server = serve([&](HttpRequest&&, std::shared_ptr<ResponseStream> s) {
    s->start(200, "text/plain");
    started.set_value();
    producer = std::thread([s] {
      for (int i = 0; i < 5; ++i) {
        // Paces the stream (100 ms in all) so that stop() comes while it is in progress, the
        // case under test: it waits for nothing.
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        s->write("x");
      }
      s->finish();
    });
  });
  std::string body;
  std::thread client([&] {
    auto r = http_fetch("GET", url(*server, "/"));
    if (r) body = r->body;
  });
  started.get_future().wait();
  server->stop(std::chrono::milliseconds(5000));
  client.join();
  producer.join();
  EXPECT_EQ(body, "xxxxx");
  EXPECT_FALSE(http_fetch("GET", url(*server, "/"), "", {}, std::chrono::milliseconds(500)));
}

// A drain's promise (docs/gateway.md "Graceful drain"): a request whose response has not
// begun when the grace is nearly over is answered drain_answer, and its producer's work
// cancelled (on_close); a response already streaming goes on to the end of the grace.
TEST(HttpServer, GracefulStopAnswersWhatHasNotBegun) {
  HttpServerOptions o;
  o.drain_answer =
      HttpResponse{503, "application/json", {{"x-kvgate-reject-reason", "shutting_down"}}, "{}"};
  std::shared_ptr<ResponseStream> waiting, streaming;
  std::promise<void> waiting_in, streaming_in, cancelled;
  auto server = serve(
      [&](HttpRequest&& r, std::shared_ptr<ResponseStream> s) {
        if (r.path == "/wait") {  // an engine that never sends its first byte
          waiting = s;
          s->on_close([&] { cancelled.set_value(); });
          waiting_in.set_value();
          return;
        }
        streaming = s;
        s->start(200, "text/plain");
        s->write("x");
        streaming_in.set_value();
      },
      o);
  std::optional<Result<HttpClientResponse>> waited, streamed;
  std::thread a([&] { waited = http_fetch("GET", url(*server, "/wait"), "", {}, 10s); });
  std::thread b([&] { streamed = http_fetch("GET", url(*server, "/stream"), "", {}, 10s); });
  // (No ASSERT before the clients are joined: the stop below ends them either way.)
  EXPECT_EQ(waiting_in.get_future().wait_for(5s), std::future_status::ready);
  EXPECT_EQ(streaming_in.get_future().wait_for(5s), std::future_status::ready);
  const auto t0 = std::chrono::steady_clock::now();
  server->stop(600ms);
  const auto took = std::chrono::steady_clock::now() - t0;
  a.join();
  b.join();
  ASSERT_TRUE(waited && *waited) << (waited ? waited->error() : "no result");
  EXPECT_EQ((*waited)->status, 503);
  ASSERT_NE((*waited)->header("x-kvgate-reject-reason"), nullptr);
  EXPECT_EQ(*(*waited)->header("x-kvgate-reject-reason"), "shutting_down");
  EXPECT_EQ((*waited)->body, "{}");
  EXPECT_EQ(cancelled.get_future().wait_for(0s), std::future_status::ready);
  ASSERT_TRUE(waiting && streaming);
  EXPECT_TRUE(waiting->preempted());
  EXPECT_FALSE(streaming->preempted());
  waiting->respond(HttpResponse{200, "text/plain", {}, "late"});  // ignored, no crash
  // The stream kept its grace, then was cut: no 503 in its place.
  EXPECT_GE(took, 500ms);
  if (streamed && *streamed) {
    EXPECT_EQ((*streamed)->status, 200);
  }
}

// A request whose body is still coming when the stop begins is read and answered: only
// connections idle between requests are closed at once.
TEST(HttpServer, GracefulStopReadsARequestStillArriving) {
  auto server = serve([](HttpRequest&& r, std::shared_ptr<ResponseStream> s) {
    s->respond(HttpResponse{200, "text/plain", {}, "got " + r.body});
  });
  net::io_context ioc;
  tcp::socket sock(ioc);
  sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), server->port()));
  net::write(sock, net::buffer(std::string_view(
                       "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n01234")));
  std::this_thread::sleep_for(50ms);  // the head is read
  std::thread stopper([&] { server->stop(3000ms); });
  std::this_thread::sleep_for(100ms);  // the stop's first pass closed idle connections
  const std::string got = exchange(sock, "56789", "got 0123456789");
  stopper.join();
  EXPECT_NE(got.find("200 OK"), std::string::npos) << got;
  EXPECT_NE(got.find("got 0123456789"), std::string::npos) << got;
  EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
}

TEST(HttpServer, SlowProducerOverflowClosesTheStream) {
  HttpServerOptions o;
  o.max_pending_bytes = 1000;
  std::shared_ptr<ResponseStream> kept;
  std::promise<void> closed;
  auto server = serve(
      [&](HttpRequest&&, std::shared_ptr<ResponseStream> s) {
        kept = s;
        s->on_close([&] { closed.set_value(); });
        s->start(200, "text/plain");
        for (int i = 0; i < 100; ++i) s->write(std::string(100, 'x'));
      },
      o);
  (void)http_fetch("GET", url(*server, "/"), "", {}, std::chrono::milliseconds(3000));
  EXPECT_EQ(closed.get_future().wait_for(std::chrono::seconds(5)), std::future_status::ready);
}

TEST(HttpServer, RunsOnACallersContextAndStopLeavesItRunning) {
  net::io_context shared;
  auto guard = net::make_work_guard(shared);
  std::thread runner([&] { shared.run(); });
  HttpServerOptions o;
  o.io_context = &shared;
  std::thread::id handler_thread;
  auto server = serve(
      [&](HttpRequest&&, std::shared_ptr<ResponseStream> s) {
        handler_thread = std::this_thread::get_id();
        s->respond(HttpResponse{200, "text/plain", {}, "on shared"});
      },
      o);
  auto r = http_fetch("GET", url(*server, "/"));
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->body, "on shared");
  EXPECT_EQ(handler_thread, runner.get_id());  // no threads of its own
  server->stop(std::chrono::milliseconds(100));
  EXPECT_FALSE(http_fetch("GET", url(*server, "/"), "", {}, std::chrono::milliseconds(500)));
  // The context is still the caller's, and still runs.
  std::promise<void> ran;
  net::post(shared, [&] { ran.set_value(); });
  EXPECT_EQ(ran.get_future().wait_for(std::chrono::seconds(5)), std::future_status::ready);
  server.reset();
  guard.reset();
  runner.join();
}

TEST(HttpServer, TlsListenerRefusesUnusableCertificateFiles) {
  HttpServerOptions o;
  o.tls_cert_file = "/nonexistent/cert.pem";
  o.tls_key_file = "/nonexistent/key.pem";
  auto s = HttpServer::start(o, [](HttpRequest&&, std::shared_ptr<ResponseStream>) {});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("cannot read /nonexistent/cert.pem"), std::string::npos) << s.error();
}

}  // namespace http_server_test
}  // namespace kvgate::io
