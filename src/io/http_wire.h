// Internal to src/io (http_server.cc, upstream_client.cc): the two pieces of an HTTP/1.1
// connection that sit on every request's path, kept lean.
//
// read_until / read_message: feed a Beast parser from any Asio stream (TCP or TLS) with the
// stream's own async_read_some, instead of Beast's composed read operations (each allocates its
// state and wraps every read in a timer of the tcp_stream).
//
// LazyDeadline: one timer per connection that is re-armed only when it fires. Setting a
// deadline is a store: most deadlines (a keep-alive wait, a write to a fast client) are
// pushed back or cleared long before they expire, so they cost no timer operation.
//
// Beast is included here: only the two .cc files above include this header.
#pragma once

#include <algorithm>
#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/read_size.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <chrono>
#include <ctime>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>

namespace kvgate::io::wire {

// The completion token for awaiting operations of stream S. On a plain TCP socket,
// deferred: the coroutine's frame awaits the operation directly, without the awaitable
// frame of its own that use_awaitable makes per operation. Beast's TLS stream (and its
// message writes) accept only tokens of the older style: use_awaitable.
template <class S>
constexpr auto token_for() {
  if constexpr (std::is_same_v<S, boost::asio::ip::tcp::socket>) {
    return boost::asio::as_tuple(boost::asio::deferred);
  } else {
    return boost::asio::as_tuple(boost::asio::use_awaitable);
  }
}

// How much to read next into `buffer`: what it has room for, at least 512 bytes (Beast's
// rule), so an idle or slow connection keeps a small buffer (10,000 held streams).
inline size_t read_size(const boost::beast::flat_buffer& buffer) {
  return boost::beast::read_size(buffer, 64 * 1024);
}

// Moves up to `left` bytes from the front of `buffer` to the end of `out` (a body whose
// length the head gave); returns how many.
inline size_t take_bytes(boost::beast::flat_buffer& buffer, uint64_t left, std::string& out) {
  const size_t n = static_cast<size_t>(std::min<uint64_t>(left, buffer.size()));
  out.append(static_cast<const char*>(buffer.data().data()), n);
  buffer.consume(n);
  return n;
}

// Feeds `parser` from what `buffer` holds, reading from `stream` whenever that is not
// enough, until `done()`. Bytes past the message stay in `buffer` (a pipelined request, or
// nothing). Errors: the stream's, the parser's (header_limit, body_limit, bad syntax), or
// http::error::end_of_stream when the peer closed before sending anything; a body that the
// peer's close delimits ends without error.
template <class Stream, bool isRequest, class Done>
boost::asio::awaitable<boost::beast::error_code> read_until(
    Stream& stream, boost::beast::flat_buffer& buffer,
    boost::beast::http::basic_parser<isRequest>& parser, Done done) {
  namespace http = boost::beast::http;
  boost::beast::error_code ec;
  while (!done()) {
    if (buffer.size() > 0) {
      const size_t used = parser.put(buffer.data(), ec);
      buffer.consume(used);
      if (ec == http::error::need_more) {
        ec = {};
      } else if (ec) {
        co_return ec;
      } else if (used > 0) {
        continue;  // more may parse from what is buffered
      }
    }
    auto [rec, n] =
        co_await stream.async_read_some(buffer.prepare(read_size(buffer)), token_for<Stream>());
    if (rec == boost::asio::error::eof) {
      if (!parser.got_some()) co_return http::error::end_of_stream;
      parser.put_eof(ec);  // a body delimited by the end of the connection
      co_return ec ? ec : (done() ? boost::beast::error_code{} : rec);
    }
    if (rec) co_return rec;
    buffer.commit(n);
  }
  co_return ec;
}

// Until the parser has the whole header (`header_only`) or the whole message.
template <class Stream, bool isRequest>
boost::asio::awaitable<boost::beast::error_code> read_message(
    Stream& stream, boost::beast::flat_buffer& buffer,
    boost::beast::http::basic_parser<isRequest>& parser, bool header_only) {
  parser.eager(!header_only);
  return read_until(stream, buffer, parser, [&parser, header_only] {
    return header_only ? parser.is_header_done() : parser.is_done();
  });
}

// A mutex that its owner can switch off for good at construction: for state shared
// across threads in general that, in a one-thread configuration, only that thread ever
// touches (then each lock pair is pure cost on every request).
class OptionalMutex {
 public:
  explicit OptionalMutex(bool enabled) : enabled_(enabled) {}
  void lock() {
    if (enabled_) mu_.lock();
  }
  void unlock() {
    if (enabled_) mu_.unlock();
  }
  bool enabled() const { return enabled_; }

 private:
  std::mutex mu_;
  const bool enabled_;
};

// CLOCK_MONOTONIC (steady_clock's clock, on Linux) as of the kernel's last tick: read
// from the vDSO without reading the TSC, several times cheaper than steady_clock::now(),
// and set on every request's path.
inline std::chrono::steady_clock::time_point coarse_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::chrono::steady_clock::time_point(std::chrono::seconds(ts.tv_sec) +
                                               std::chrono::nanoseconds(ts.tv_nsec));
}

class LazyDeadline {
 public:
  using Clock = std::chrono::steady_clock;

  // `on_expire` runs on `executor` once a deadline passes (typically: close the socket,
  // so the pending operation fails). The fields are atomics: the timer's handler may run
  // on another thread of the context than the owner's operations.
  LazyDeadline(boost::asio::any_io_executor executor, std::function<void()> on_expire)
      : state_(std::make_shared<State>(std::move(executor), std::move(on_expire))) {}
  ~LazyDeadline() { cancel(); }
  LazyDeadline(const LazyDeadline&) = delete;
  LazyDeadline& operator=(const LazyDeadline&) = delete;

  // Measured from the coarse clock (see coarse_now): the deadline may come up to one
  // kernel tick (1-10 ms) early, nothing for timeouts of seconds.
  void expires_after(Clock::duration d) {
    State& s = *state_;
    const Clock::time_point t = coarse_now() + d;
    s.deadline.store(t, std::memory_order_relaxed);
    // The timer is re-armed only when it is idle or set later than the new deadline.
    if (!s.armed.load(std::memory_order_acquire) || t < s.armed_at.load(std::memory_order_relaxed))
      arm(state_);
  }
  void expires_never() { state_->deadline.store(Clock::time_point::max()); }
  // expires_never(), and the timer stops waiting: the owner goes idle for an unknown time
  // (a pending wait would keep its io_context's run() from returning).
  void disarm() {
    State& s = *state_;
    s.deadline.store(Clock::time_point::max());
    if (s.armed.exchange(false)) {
      ++s.generation;
      s.timer.cancel();
    }
  }
  // True once a deadline passed (on_expire ran); cleared by reset_expired().
  bool expired() const { return state_->expired.load(); }
  void reset_expired() { state_->expired.store(false); }
  // Stops the timer for good (the owner goes away); on_expire never runs after this.
  void cancel() {
    {
      std::lock_guard lock(state_->expire_mu);  // waits for an on_expire in progress
      state_->alive.store(false);
    }
    state_->timer.cancel();
  }

 private:
  struct State {
    State(boost::asio::any_io_executor ex, std::function<void()> fn)
        : timer(std::move(ex)), on_expire(std::move(fn)) {}
    boost::asio::steady_timer timer;
    std::function<void()> on_expire;
    std::atomic<Clock::time_point> deadline{Clock::time_point::max()};
    std::atomic<Clock::time_point> armed_at{Clock::time_point::max()};  // the timer's expiry
    std::atomic<uint64_t> generation{0};  // of the current wait: a superseded one does nothing
    std::atomic<bool> armed{false};
    std::atomic<bool> alive{true};
    std::atomic<bool> expired{false};
    std::mutex expire_mu;  // held while on_expire runs, and by cancel()
  };

  static void arm(const std::shared_ptr<State>& s) {
    const Clock::time_point at = s->deadline.load();
    s->armed_at.store(at);
    const uint64_t gen = ++s->generation;
    s->armed.store(true, std::memory_order_release);
    s->timer.expires_at(at);  // cancels a wait in progress (superseded)
    s->timer.async_wait([s, gen](const boost::system::error_code& ec) {
      if (gen != s->generation.load()) return;  // re-armed or disarmed since
      s->armed.store(false);
      const Clock::time_point d = s->deadline.load();
      if (ec || !s->alive.load() || d == Clock::time_point::max()) return;
      if (Clock::now() < d) return arm(s);  // pushed back meanwhile
      // Under the lock that cancel() takes: the owner cannot go away while on_expire runs
      // (closing a socket lets its pending operation complete on another thread, which
      // may free the owner before close() returns here).
      std::lock_guard lock(s->expire_mu);
      if (!s->alive.load()) return;
      s->expired.store(true);
      s->on_expire();
    });
  }

  std::shared_ptr<State> state_;
};

}  // namespace kvgate::io::wire
