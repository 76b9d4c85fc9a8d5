// HttpServer: kvgate's HTTP/1.1 server (keep-alive, whole and streamed responses).
//
// A handler gets each request with a ResponseStream and answers either with one whole
// response or by streaming (SSE): start() the head, write() chunks as they come, finish().
// The stream is thread-safe and may be kept after the handler returns, so a handler can
// pass it to another thread (the engine's step loop) that writes tokens as they are
// produced. write() takes an optional on_flushed callback that runs once the chunk is on
// the socket: a producer that waits for it (a proxy reading an upstream) gets
// backpressure; one that cannot wait (a simulated engine) watches pending_bytes().
// A client that goes away is detected even while the handler is silent (once a response
// has kept it waiting 50 ms: quicker answers need no watch), and on_close()
// lets the producer abort its work.
// An awaited handler (AwaitableHttpHandler) runs inside the connection's coroutine: the
// cheapest path for a whole answer, but the connection neither reads nor watches the
// client until it returns.
// Request heads are read by a small strict parser when plain (http_head.h), else by
// Beast's.
//
// Limits and timeouts: header and body size (431 / 413, with an error body in the owner's
// protocol: HttpServerOptions::error_json, as io knows none), idle keep-alive timeout, a
// per-write timeout (a stalled client is dropped). Refusals made before the body is read
// reach clients that are still sending (lingering close).
// TLS (HttpServerOptions::tls_cert_file/tls_key_file): a failed or slow handshake, or
// bytes that are not TLS at all (plain HTTP sent to the HTTPS port), close the
// connection without an answer.
// Beast stays inside http_server.cc (it is slow to compile).
//
//   auto server = HttpServer::start(options, [](HttpRequest&& req, auto stream) {
//     stream->respond(HttpResponse{200, "text/plain", {}, "ok"});
//   });
//   uint16_t port = (*server)->port();
//   (*server)->stop();  // graceful: lets responses in flight finish (up to a grace time)
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/common/result.h"
#include "io/http_types.h"

namespace boost::asio {
class io_context;
}

namespace kvgate::io {

// One response in progress. Thread-safe. Exactly one of: respond(), or start() followed
// by any number of write() and one finish(). Calls after the stream closed are ignored.
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;

  virtual void respond(HttpResponse response) = 0;
  // Sends the head of a chunked response (e.g. "text/event-stream").
  virtual void start(int status, std::string content_type,
                     std::vector<HttpHeader> headers = {}) = 0;
  // Queues a chunk; on_flushed runs on an I/O thread once it is written, or when the
  // stream closes without writing it.
  virtual void write(std::string chunk, std::function<void()> on_flushed = {}) = 0;
  virtual void finish() = 0;
  // Closes the connection once the chunks already written are sent: the client sees a
  // truncated response (fault injection, or a producer that gives up). on_close runs.
  virtual void abort() = 0;

  // Bytes queued and not yet written to the socket.
  virtual size_t pending_bytes() const = 0;
  // True once the client disconnected or the connection failed before finish().
  virtual bool closed() const = 0;
  // Runs once (on an I/O thread) if the stream closes before it finished; runs at once
  // if it is already closed.
  virtual void on_close(std::function<void()> callback) = 0;
  // Watches for the client going away from now on, also while an awaited handler is
  // still running (the connection otherwise watches only once the handler returned and
  // the response kept the client waiting): a handler about to wait long on an upstream
  // calls it, and its on_close callback then runs as soon as the client leaves. Costs a
  // reactor registration, so quick answers should not.
  virtual void watch_client() = 0;
  // True once the server answered the request itself, before the producer began its
  // response (HttpServerOptions::drain_answer, during a graceful stop): on_close ran, and
  // the producer's calls are ignored. Lets the producer count its cancelled work apart
  // from a client that left.
  virtual bool preempted() const { return false; }
};

using HttpHandler =
    std::function<void(HttpRequest&& request, std::shared_ptr<ResponseStream> stream)>;

// A handler the connection awaits: what it responds before it returns is written without
// a hand-off between coroutines (a proxy that reads a whole answer from its upstream
// runs inside the connection's own coroutine). The connection reads nothing else, and does
// not watch for the client leaving, while it runs. A handler that streams starts the response,
// hands the stream to a coroutine of its own and returns: the connection then writes the chunks as
// they come.
using AwaitableHttpHandler = std::function<boost::asio::awaitable<void>(
    HttpRequest&& request, std::shared_ptr<ResponseStream> stream)>;

struct HttpServerOptions {
  std::string address = "127.0.0.1";
  uint16_t port = 0;  // 0: an ephemeral port (see port())
  int threads = 1;    // I/O threads (with io_context below: how many threads run it)
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 8 * 1024 * 1024;
  std::chrono::milliseconds idle_timeout{60'000};   // keep-alive and request read
  std::chrono::milliseconds write_timeout{60'000};  // one write to a slow client
  // A stream whose unwritten bytes exceed this is closed (client too slow to follow).
  size_t max_pending_bytes = 16 * 1024 * 1024;
  // Refusals before the body is read (413, 431, 400 on a bad head, early_refusal's) close
  // the connection the way nginx does (RFC 9112 section 9.6): the answer is written, the
  // write side shut down, and what the client still sends is read and thrown away until it
  // closes, for at most linger_time in all, linger_timeout without a byte, or
  // linger_max_bytes. Closing at once would make the kernel reset the connection while
  // the client is still sending, and most clients then never read the answer.
  std::chrono::milliseconds linger_time{30'000};
  std::chrono::milliseconds linger_timeout{5'000};
  uint64_t linger_max_bytes = 256ull * 1024 * 1024;
  // Runs on the head of a request whose body has not all arrived with it (method, target,
  // path, query and fields set; body empty). A response refuses the request there,
  // without reading the body (say a missing API key on a 60 MiB upload); nullopt reads
  // the body and calls the handler as usual. Runs on an I/O thread; must not block.
  std::function<std::optional<HttpResponse>(const HttpRequest& head)> early_refusal;
  // The JSON body of the server's own error answers (400 on a bad head, 413, 431, and 500
  // when a handler throws), in the owner's protocol: the gateway and the engine simulator
  // pass openai::vllm_error_json. Empty: the message as text/plain.
  std::function<std::string(int status, std::string_view message)> error_json;
  int backlog = 4096;
  // HTTPS: with both files set, the listener speaks TLS 1.2/1.3 only (see tls_context.h);
  // a client must complete its handshake within handshake_timeout or is dropped.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::chrono::milliseconds handshake_timeout{10'000};
  // Runs on this io_context (its owner runs and stops it; `threads` is ignored) instead
  // of its own: a proxy that shares its context with its upstream client saves a thread
  // hop per request.
  boost::asio::io_context* io_context = nullptr;
  // The owner promises that its handlers, and whatever they hand a ResponseStream to,
  // call the stream only from the one thread that runs io_context (the gateway with
  // `threads: 1`): the streams then take no locks.
  bool single_threaded = false;
  // Graceful stop (stop(grace)): the answer given in the producer's stead to every request
  // whose response has not begun (nothing respond()ed or start()ed yet) shortly before the
  // grace ends (core/common/drain.h: answer_unstarted_at), e.g. a 503 "shutting down". Its
  // stream's on_close callback runs then (the producer cancels its work, as when a client
  // leaves) and preempted() turns true. Those answers, and any whole response already
  // handed over, are still written when the grace ends (up to 2 s more); only responses
  // that stream are cut then. Unset: every connection still busy at the end of the grace
  // is closed, whatever it was about to answer.
  std::optional<HttpResponse> drain_answer;
};

class HttpServer {
 public:
  // Binds, listens and starts the I/O threads. Errors: bad address, port in use.
  static Result<std::unique_ptr<HttpServer>> start(const HttpServerOptions& options,
                                                   HttpHandler handler);
  static Result<std::unique_ptr<HttpServer>> start(const HttpServerOptions& options,
                                                   AwaitableHttpHandler handler);
  ~HttpServer();  // stop(0)
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const;
  // Open connections right now.
  size_t connections() const;
  // Stops accepting, closes idle keep-alive connections, lets requests already being read
  // and responses in flight finish for up to `grace` (with drain_answer set, unstarted
  // responses are answered with it shortly before), then closes every connection and
  // joins the I/O threads. Idempotent.
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));

  struct Impl;

 private:
  explicit HttpServer(std::shared_ptr<Impl> impl);
  static Result<std::unique_ptr<HttpServer>> start_impl(const HttpServerOptions& options,
                                                        HttpHandler handler,
                                                        AwaitableHttpHandler awaited);
  std::shared_ptr<Impl> impl_;
};

}  // namespace kvgate::io
