// UpstreamClient: the gateway's HTTP/1.1 client towards inference endpoints.
//
// A keep-alive connection pool per endpoint (host:port): an exchange borrows an idle
// connection when one is there, else connects; a response read to its end hands the
// connection back, anything else (error, early stop, `Connection: close`) closes it.
// A reused connection that turns out to be dead before any response byte (the server
// closed it while idle) is replaced by a fresh one transparently, once.
// The response body is read piece by piece as it arrives (chunked transfer decoded), so
// an SSE stream passes through without ever being buffered whole.
//
// Coroutine API on the client's io_context (any number of threads); Beast stays in
// upstream_client.cc.
//
//   UpstreamClient client(io.get_executor(), {.connect_timeout = 2s});
//   auto ex = co_await client.send("127.0.0.1", 8001, request);
//   if (!ex) ... ex.code() == ErrorCode::kUnavailable (connect failed) ... ex.error() ...
//   while (true) {
//     auto piece = co_await (*ex)->read_some(timeout);   // empty: end of body
//     if (!piece || piece->empty()) break;
//   }
//
// Thread-safety: UpstreamClient is thread-safe; one UpstreamExchange is used by one
// coroutine at a time.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/common/result.h"
#include "io/http_types.h"

namespace kvgate::io {

using UpstreamHeaders = std::vector<std::pair<std::string, std::string>>;

// An exchange fails with an Error (core/common/result.h) whose code says how:
//   kUnavailable       resolve or connect failed (nothing was sent): safe to retry elsewhere
//   kDeadlineExceeded  connect, head or body timed out
//   kAborted           the connection failed or closed mid-exchange
//   kInternal          malformed response (or a body over the caller's limit)
//   kCancelled         the caller cancelled the exchange (UpstreamCancel)
// and whose message names the endpoint and what went wrong.

// The metric label of an exchange's failure: "connect", "timeout", "closed", "protocol",
// "cancelled" for the codes above, in that order ("unknown" for any other).
std::string_view upstream_failure(ErrorCode code);

// Lets a caller abort an exchange in progress (the client it serves went away): cancel()
// closes the exchange's connection at once, so the operation in progress fails with
// kCancelled, later ones fail at once, and the server sees the connection close (vLLM
// then aborts the request). A send() that starts after cancel() fails at once.
// Use it on the executor that runs the exchange's coroutine, as the exchange itself.
class UpstreamCancel {
 public:
  void cancel();
  bool cancelled() const { return cancelled_; }

  // For the client: the connection in use (`close` closes it), or none.
  void attach(std::function<void()> close) { close_ = std::move(close); }
  void detach() { close_ = nullptr; }

 private:
  bool cancelled_ = false;
  std::function<void()> close_;
};

struct UpstreamRequest {
  std::string method = "POST";
  std::string target;  // "/v1/chat/completions"
  // Header lines sent first, as given: each "Name: value\r\n". For fixed text (a literal
  // the caller keeps alive), which then costs no string per field.
  std::string_view fixed_headers;
  UpstreamHeaders headers;  // sent as given, after fixed_headers (Host and Content-Length
                            // are added)
  // Header lines sent after `headers`, as given ("Name: value\r\n" each); borrowed until
  // the send completes. A traced hop's `traceparent` line (gateway/data/tracer.h,
  // TracedHop), written in a buffer of the hop's own: no string, no vector entry.
  std::string_view hop_headers;
  std::string body;
  // Sent instead of `body` when not empty (`body` is then not sent): bytes borrowed until
  // the send completes. For a body kept in a buffer of the caller's that holds more than
  // it (the tracer's export batches, written over reused buffers that are never shrunk).
  std::string_view borrowed_body;
  // Borrowed; must outlive the exchange. Null: not cancellable.
  UpstreamCancel* cancel = nullptr;
};

struct UpstreamOptions {
  std::chrono::milliseconds connect_timeout{2'000};
  std::chrono::milliseconds head_timeout{60'000};  // request sent -> response head read
  size_t max_idle_per_endpoint = 256;
  // The context runs for good (a work guard): a pooled connection's timer may keep waiting
  // while it is idle, which saves a timer cancel and re-arm on every request.
  bool lazy_idle_timers = false;
  // Only the one thread that runs the executor's context ever uses the client (the
  // gateway with `threads: 1`): the connection pool takes no locks.
  bool single_threaded = false;
};

// One request/response in progress.
class UpstreamExchange {
 public:
  struct Impl;
  explicit UpstreamExchange(std::unique_ptr<Impl> impl);
  ~UpstreamExchange();

  int status() const;
  // The response's header fields, in wire order; valid until the body has been read to its
  // end (then the connection, which holds them, is back in the pool and this is empty).
  const HeaderFields& headers() const;
  // Close the connection at the end instead of returning it to the pool.
  void no_reuse();
  // The next piece of the body, as soon as any arrives within `timeout`; an empty view
  // at the end of the body (then the connection is back in the pool). The view is
  // valid until the next call.
  boost::asio::awaitable<Result<std::string_view>> read_some(std::chrono::milliseconds timeout);
  // Reads the whole remaining body (non-streaming responses), at most `limit` bytes.
  boost::asio::awaitable<Result<std::string>> read_all(std::chrono::milliseconds timeout,
                                                       size_t limit);

 private:
  std::unique_ptr<Impl> impl_;
};

class UpstreamClient {
 public:
  UpstreamClient(boost::asio::any_io_executor executor, UpstreamOptions options);
  ~UpstreamClient();
  UpstreamClient(const UpstreamClient&) = delete;
  UpstreamClient& operator=(const UpstreamClient&) = delete;

  // Sends `request` to host:port and reads the response head. `request` is borrowed
  // until the returned awaitable completes (a temporary in the co_await expression is).
  boost::asio::awaitable<Result<std::unique_ptr<UpstreamExchange>>> send(
      std::string host, uint16_t port, const UpstreamRequest& request);

  // Idle pooled connections right now (all endpoints).
  size_t idle_connections() const;
  // Closes every idle connection (shutdown).
  void close_idle();
  // Closes the idle connections to host:port (an endpoint that left: nothing will reuse
  // them, and a dead engine's would sit in CLOSE_WAIT for good).
  void close_idle(std::string_view host, uint16_t port);

  struct Pool;

 private:
  boost::asio::any_io_executor executor_;
  UpstreamOptions options_;
  std::shared_ptr<Pool> pool_;
};

}  // namespace kvgate::io
