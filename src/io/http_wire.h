// Internal to src/io (http_server.cc, upstream_client.cc): the two pieces of an HTTP/1.1
// connection that sit on every request's path, kept lean.
//
// read_message: feeds a Beast parser from any Asio stream (TCP or TLS) with the stream's
// own async_read_some, instead of Beast's composed read operations (each allocates its
// state and wraps every read in a timer of the tcp_stream).
//
// LazyDeadline: one timer per connection that is re-armed only when it fires. Setting a
// deadline is a store: most deadlines (a keep-alive wait, a write to a fast client) are
// pushed back or cleared long before they expire, so they cost no timer operation.
//
// Beast is included here: only the two .cc files above include this header.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <chrono>
#include <functional>
#include <memory>

namespace kvgate::io::wire {

// Until the parser has the whole header (`header_only`) or the whole message. Bytes after
// it stay in `buffer` (a pipelined request, or nothing). Errors: the stream's, the
// parser's (header_limit, body_limit, bad syntax), or http::error::end_of_stream when
// the peer closed before sending anything.
template <class Stream, bool isRequest>
boost::asio::awaitable<boost::beast::error_code> read_message(
    Stream& stream, boost::beast::flat_buffer& buffer,
    boost::beast::http::basic_parser<isRequest>& parser, bool header_only) {
  namespace http = boost::beast::http;
  constexpr size_t kReadSize = 16 * 1024;
  auto done = [&] { return header_only ? parser.is_header_done() : parser.is_done(); };
  parser.eager(!header_only);
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
    auto [rec, n] = co_await stream.async_read_some(
        buffer.prepare(kReadSize), boost::asio::as_tuple(boost::asio::use_awaitable));
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

class LazyDeadline {
 public:
  using Clock = std::chrono::steady_clock;

  // `on_expire` runs on `executor` once a deadline passes (typically: close the socket,
  // so the pending operation fails). The owner's operations and the timer's handler are
  // expected on one thread at a time (the connection's executor).
  LazyDeadline(boost::asio::any_io_executor executor, std::function<void()> on_expire)
      : state_(std::make_shared<State>(std::move(executor), std::move(on_expire))) {}
  ~LazyDeadline() { cancel(); }
  LazyDeadline(const LazyDeadline&) = delete;
  LazyDeadline& operator=(const LazyDeadline&) = delete;

  void expires_after(Clock::duration d) {
    State& s = *state_;
    const Clock::time_point t = Clock::now() + d;
    s.deadline = t;
    // The timer is re-armed only when it is idle or set later than the new deadline.
    if (!s.armed || t < s.armed_at) arm(state_);
  }
  void expires_never() { state_->deadline = Clock::time_point::max(); }
  // expires_never(), and the timer stops waiting: the owner goes idle for an unknown time
  // (a pending wait would keep its io_context's run() from returning).
  void disarm() {
    State& s = *state_;
    s.deadline = Clock::time_point::max();
    if (s.armed) {
      s.armed = false;
      ++s.generation;
      s.timer.cancel();
    }
  }
  // True once a deadline passed (on_expire ran); cleared by reset_expired().
  bool expired() const { return state_->expired; }
  void reset_expired() { state_->expired = false; }
  // Stops the timer for good (the owner goes away); on_expire never runs after this.
  void cancel() {
    state_->alive = false;
    state_->timer.cancel();
  }

 private:
  struct State {
    State(boost::asio::any_io_executor ex, std::function<void()> fn)
        : timer(std::move(ex)), on_expire(std::move(fn)) {}
    boost::asio::steady_timer timer;
    std::function<void()> on_expire;
    Clock::time_point deadline = Clock::time_point::max();
    Clock::time_point armed_at = Clock::time_point::max();  // the timer's expiry
    uint64_t generation = 0;  // of the current wait: a superseded one does nothing
    bool armed = false;
    bool alive = true;
    bool expired = false;
  };

  static void arm(const std::shared_ptr<State>& s) {
    s->armed = true;
    s->armed_at = s->deadline;
    const uint64_t gen = ++s->generation;
    s->timer.expires_at(s->armed_at);  // cancels a wait in progress (superseded)
    s->timer.async_wait([s, gen](const boost::system::error_code& ec) {
      if (gen != s->generation) return;  // re-armed since
      s->armed = false;
      if (ec || !s->alive || s->deadline == Clock::time_point::max()) return;
      if (Clock::now() < s->deadline) return arm(s);  // pushed back meanwhile
      s->expired = true;
      s->on_expire();
    });
  }

  std::shared_ptr<State> state_;
};

}  // namespace kvgate::io::wire
