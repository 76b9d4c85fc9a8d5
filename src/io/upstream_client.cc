// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "io/upstream_client.h"

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <mutex>
#include <optional>
#include <span>
#include <tuple>
#include <unordered_map>

#include "io/http_head.h"
#include "io/http_parsers.h"
#include "io/http_wire.h"
#include "io/text_pieces.h"

namespace kvgate::io {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

namespace {

constexpr size_t kMaxResponseHead = 64 * 1024;

using wire::ResponseParser;

// A pooled connection keeps its buffers, its header strings and its parser's storage: an
// exchange on a reused connection allocates no I/O memory.
struct Connection {
  explicit Connection(const asio::any_io_executor& ex)
      : socket(ex), deadline(ex, [this] {
          beast::error_code ignored;
          socket.close(ignored);  // the operation in progress fails: a timeout
        }) {}
  tcp::socket socket;
  wire::LazyDeadline deadline;  // connect, head and body timeouts
  beast::flat_buffer buffer;
  std::string head;                      // the request head being sent
  HeaderFields received;                 // the response's fields
  std::string body;                      // body bytes parsed and not yet handed out
  std::optional<ResponseParser> parser;  // unless the head was plain
  bool plain = false;                    // a plain head (http_head.h): the body is
  uint64_t plain_left = 0;               // Content-Length bytes, this many still to come
};

// The response head at the start of `c.buffer` when it is plain (http_head.h): fields into
// c.received, the head consumed, true. False leaves the buffer to Beast's parser.
bool take_plain_head(Connection& c, int& status, bool& keep_alive) {
  ParsedHead h;
  const auto data = c.buffer.data();
  const std::string_view in(static_cast<const char*>(data.data()), data.size());
  if (parse_response_head(in, kMaxResponseHead, h) != HeadParse::kDone) return false;
  c.received.assign(std::span(h.fields.data(), h.field_count));
  status = h.status;
  keep_alive = h.keep_alive;
  c.plain = true;
  c.plain_left = h.content_length;
  c.buffer.consume(h.size);
  return true;
}

// A plain body: moves what the buffer holds of it into c.body.
void take_plain_body(Connection& c) {
  c.plain_left -= wire::take_bytes(c.buffer, c.plain_left, c.body);
}

// The request head as sent: request line, Host, the caller's fixed headers, other headers
// and hop headers, Content-Length
// (written by hand: Beast's fields allocate per field).
// The body sent: `borrowed_body` when there is one, else `body`.
std::string_view sent_body(const UpstreamRequest& r) {
  return r.borrowed_body.empty() ? std::string_view(r.body) : r.borrowed_body;
}

void write_head(std::string& out, const UpstreamRequest& r, std::string_view host_port) {
  using namespace std::string_view_literals;  // appends of literals without strlen
  char length[24];
  const auto [end, ec] = std::to_chars(length, length + sizeof(length), sent_body(r).size());
  (void)ec;
  TextPieces<24> head;
  head << r.method << " "sv << r.target << " HTTP/1.1\r\nHost: "sv << host_port << "\r\n"sv
       << r.fixed_headers;
  for (const auto& [name, value] : r.headers) head << name << ": "sv << value << "\r\n"sv;
  if (!r.hop_headers.empty()) head << r.hop_headers;
  head << "Content-Length: "sv << std::string_view(length, static_cast<size_t>(end - length))
       << "\r\n\r\n"sv;
  head.write_to(out);
}

// A failure on an open connection: timed out, or closed mid-exchange.
ErrorCode code_of(const Connection& conn) {
  return conn.deadline.expired() ? ErrorCode::kDeadlineExceeded : ErrorCode::kAborted;
}

// kCancelled when the caller's cancel closed the socket, else as code_of.
ErrorCode code_of(const Connection& conn, const UpstreamCancel* cancel) {
  return cancel && cancel->cancelled() ? ErrorCode::kCancelled : code_of(conn);
}

// Points `cancel` at `conn` for as long as it lives here: the connection's socket closes
// on cancel(). Detaches on scope exit unless handed on (keep()).
class CancelAttachment {
 public:
  CancelAttachment(UpstreamCancel* cancel, Connection& conn) : cancel_(cancel) {
    if (cancel_) {
      cancel_->attach([c = &conn] {
        beast::error_code ignored;
        c->socket.close(ignored);
      });
    }
  }
  ~CancelAttachment() {
    if (cancel_) cancel_->detach();
  }
  CancelAttachment(const CancelAttachment&) = delete;
  CancelAttachment& operator=(const CancelAttachment&) = delete;
  void keep() { cancel_ = nullptr; }

 private:
  UpstreamCancel* cancel_;
};

// The error's text, "timed out" when the deadline closed the socket.
std::string message_of(const Connection& conn, const boost::system::error_code& ec) {
  return conn.deadline.expired() ? "timed out" : ec.message();
}

}  // namespace

struct UpstreamClient::Pool {
  explicit Pool(bool locking) : mu(locking) {}
  mutable wire::OptionalMutex mu;
  std::unordered_map<std::string, std::vector<std::unique_ptr<Connection>>> idle;
  size_t max_idle = 0;
  bool lazy_idle_timers = false;

  std::unique_ptr<Connection> take(const std::string& key) {
    std::lock_guard lock(mu);
    auto it = idle.find(key);
    if (it == idle.end() || it->second.empty()) return nullptr;
    auto conn = std::move(it->second.back());
    it->second.pop_back();
    return conn;
  }

  void give(const std::string& key, std::unique_ptr<Connection> conn) {
    // Idle in the pool: no deadline. The timer stops waiting too (it would keep the
    // context's run() from returning), unless the owner keeps its context running anyway:
    // then a wait in progress is left to lapse, and the next request re-arms nothing.
    if (lazy_idle_timers) {
      conn->deadline.expires_never();
    } else {
      conn->deadline.disarm();
    }
    std::lock_guard lock(mu);
    auto& list = idle[key];
    if (list.size() < max_idle) list.push_back(std::move(conn));
  }
};

struct UpstreamExchange::Impl {
  ~Impl() {
    if (cancel) cancel->detach();
  }
  std::shared_ptr<UpstreamClient::Pool> pool;
  UpstreamCancel* cancel = nullptr;  // attached to conn while it is here
  std::string key;
  std::unique_ptr<Connection> conn;
  int status = 0;
  bool keep_alive = false;
  bool done = false;
  size_t handed_out = 0;  // bytes of conn->body the last read_some returned

  bool parsed_all() const {
    return conn && (conn->plain ? conn->plain_left == 0 : conn->parser->is_done());
  }

  // The caller is done with the piece the last read_some returned.
  void drop_handed_out() {
    if (conn && handed_out > 0) conn->body.erase(0, handed_out);
    handed_out = 0;
  }

  void release() {
    done = true;
    if (cancel) cancel->detach();
    if (conn && keep_alive && parsed_all()) {
      conn->parser.reset();
      conn->body.clear();
      pool->give(key, std::move(conn));
    } else if (conn) {
      conn->deadline.cancel();  // waits for a timeout's close in progress on another thread
      beast::error_code ignored;
      conn->socket.close(ignored);
      conn.reset();
    }
  }

  // Reads more of the body into conn->body; an error ends the exchange.
  asio::awaitable<std::optional<Error>> read_more(std::chrono::milliseconds timeout) {
    conn->deadline.expires_after(timeout);
    // Until some body arrives (or the body ends): a stream's pieces pass on as they come.
    const size_t before = conn->body.size();
    Connection* c = conn.get();
    beast::error_code ec;
    if (c->plain) {
      while (true) {
        take_plain_body(*c);
        if (c->body.size() != before || c->plain_left == 0) break;
        auto [rec, n] = co_await c->socket.async_read_some(
            c->buffer.prepare(wire::read_size(c->buffer)), asio::as_tuple(asio::deferred));
        if (rec) {
          ec = rec == asio::error::eof ? beast::error_code(http::error::partial_message) : rec;
          break;
        }
        c->buffer.commit(n);
      }
    } else {
      ec = co_await wire::read_until(c->socket, c->buffer, *c->parser, [c, before] {
        return c->body.size() != before || c->parser->is_done();
      });
    }
    conn->deadline.expires_never();
    if (!ec) co_return std::nullopt;
    Error err(code_of(*conn, cancel), "upstream body: " + message_of(*conn, ec));
    keep_alive = false;
    release();
    co_return err;
  }
};

UpstreamExchange::UpstreamExchange(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UpstreamExchange::~UpstreamExchange() = default;
int UpstreamExchange::status() const { return impl_->status; }
const HeaderFields& UpstreamExchange::headers() const {
  static const HeaderFields kNone;
  return impl_->conn ? impl_->conn->received : kNone;
}
void UpstreamExchange::no_reuse() { impl_->keep_alive = false; }

asio::awaitable<Result<std::string_view>> UpstreamExchange::read_some(
    std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  s.drop_handed_out();
  while (!s.done) {
    if (s.conn->plain) take_plain_body(*s.conn);  // no read (nor coroutine) for what is here
    if (!s.conn->body.empty()) {
      // A finished response goes back to the pool at the next call, not now: the view
      // points into the connection, which another thread may take from the pool at once.
      s.handed_out = s.conn->body.size();
      co_return std::string_view(s.conn->body);
    }
    if (s.parsed_all()) {
      s.release();
      break;
    }
    if (auto err = co_await s.read_more(timeout)) co_return std::move(*err);
  }
  co_return std::string_view{};
}

asio::awaitable<Result<std::string>> UpstreamExchange::read_all(std::chrono::milliseconds timeout,
                                                                size_t limit) {
  Impl& s = *impl_;
  std::string body;
  s.drop_handed_out();
  while (!s.done) {
    if (s.conn->plain) take_plain_body(*s.conn);  // no read (nor coroutine) for what is here
    if (s.conn->body.size() > limit) {
      s.keep_alive = false;
      s.release();
      co_return Error(ErrorCode::kInternal, "upstream body too large");
    }
    if (s.parsed_all()) {
      body.swap(s.conn->body);  // the connection's buffer goes to the caller
      s.release();
      break;
    }
    if (auto err = co_await s.read_more(timeout)) co_return std::move(*err);
  }
  co_return body;
}

UpstreamClient::UpstreamClient(asio::any_io_executor executor, UpstreamOptions options)
    : executor_(std::move(executor)),
      options_(options),
      pool_(std::make_shared<Pool>(!options.single_threaded)) {
  pool_->max_idle = options_.max_idle_per_endpoint;
  pool_->lazy_idle_timers = options_.lazy_idle_timers;
}

UpstreamClient::~UpstreamClient() { close_idle(); }

size_t UpstreamClient::idle_connections() const {
  std::lock_guard lock(pool_->mu);
  size_t n = 0;
  for (const auto& [key, list] : pool_->idle) n += list.size();
  return n;
}

void UpstreamClient::close_idle() {
  std::lock_guard lock(pool_->mu);
  pool_->idle.clear();
}

void UpstreamClient::close_idle(std::string_view host, uint16_t port) {
  const std::string key = std::string(host) + ":" + std::to_string(port);
  std::vector<std::unique_ptr<Connection>> closing;  // closed outside the lock
  {
    std::lock_guard lock(pool_->mu);
    auto it = pool_->idle.find(key);
    if (it == pool_->idle.end()) return;
    closing.swap(it->second);
    pool_->idle.erase(it);
  }
}

asio::awaitable<Result<std::unique_ptr<UpstreamExchange>>> UpstreamClient::send(
    std::string host, uint16_t port, const UpstreamRequest& request) {
  // host:port, the pool's key and the Host header, in one allocation at most.
  std::string key;
  key.reserve(host.size() + 6);
  key.append(host).push_back(':');
  char digits[8];
  key.append(digits, std::to_chars(digits, digits + sizeof(digits), port).ptr);
  UpstreamCancel* const cancel = request.cancel;
  auto cancelled = [cancel] { return cancel && cancel->cancelled(); };
  if (cancelled()) co_return Error(ErrorCode::kCancelled, "cancelled");
  // Attempt 0 may reuse an idle connection; when that one turns out dead before any
  // response byte, attempt 1 uses a fresh one.
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::unique_ptr<Connection> conn = attempt == 0 ? pool_->take(key) : nullptr;
    const bool reused = conn != nullptr;
    beast::error_code ec;
    if (!conn) conn = std::make_unique<Connection>(executor_);
    CancelAttachment attached(cancel, *conn);
    if (!reused) {
      tcp::resolver resolver(executor_);
      // A numeric address (as endpoints mostly are) needs no lookup.
      auto endpoints =
          resolver.resolve(host, std::to_string(port),
                           tcp::resolver::numeric_host | tcp::resolver::numeric_service, ec);
      if (ec) {
        ec = {};
        endpoints = co_await resolver.async_resolve(host, std::to_string(port),
                                                    asio::redirect_error(asio::use_awaitable, ec));
      }
      if (ec) co_return Error(ErrorCode::kUnavailable, "resolve " + key + ": " + ec.message());
      conn->deadline.expires_after(options_.connect_timeout);
      co_await asio::async_connect(conn->socket, endpoints,
                                   asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        if (cancelled()) co_return Error(ErrorCode::kCancelled, "cancelled");
        if (conn->deadline.expired()) {
          co_return Error(ErrorCode::kDeadlineExceeded, "connect " + key + ": timed out");
        }
        co_return Error(ErrorCode::kUnavailable, "connect " + key + ": " + ec.message());
      }
      conn->socket.set_option(tcp::no_delay(true), ec);
    }
    conn->deadline.reset_expired();
    conn->deadline.expires_after(options_.head_timeout);
    write_head(conn->head, request, key);
    const std::array<asio::const_buffer, 2> out{asio::buffer(conn->head),
                                                asio::buffer(sent_body(request))};
    std::tie(ec, std::ignore) =
        co_await asio::async_write(conn->socket, out, asio::as_tuple(asio::deferred));
    if (ec) {
      if (reused && !conn->deadline.expired() && !cancelled()) continue;
      co_return Error(code_of(*conn, cancel), "send to " + key + ": " + message_of(*conn, ec));
    }
    conn->body.clear();
    conn->plain = false;
    if (conn->buffer.size() == 0) {
      auto [rec, n] = co_await conn->socket.async_read_some(
          conn->buffer.prepare(wire::read_size(conn->buffer)), asio::as_tuple(asio::deferred));
      if (rec) {
        // Nothing came: a stale connection.
        if (reused && !conn->deadline.expired() && !cancelled()) continue;
        co_return Error(code_of(*conn, cancel),
                        "response head from " + key + ": " + message_of(*conn, rec));
      }
      conn->buffer.commit(n);
    }
    // A plain head (http_head.h), as most are, is read without Beast's parser.
    int status = 0;
    bool keep_alive = false;
    if (!take_plain_head(*conn, status, keep_alive)) {
      conn->parser.emplace(conn->received, conn->body);
      conn->parser->body_limit(boost::none);
      conn->parser->header_limit(kMaxResponseHead);
      ec = co_await wire::read_message(conn->socket, conn->buffer, *conn->parser, true);
      if (ec) {
        if (reused && !conn->deadline.expired() && !conn->parser->got_some() && !cancelled()) {
          continue;
        }
        co_return Error(code_of(*conn, cancel),
                        "response head from " + key + ": " + message_of(*conn, ec));
      }
      status = conn->parser->status();
      keep_alive = conn->parser->keep_alive();
    }
    conn->deadline.expires_never();
    auto impl = std::make_unique<UpstreamExchange::Impl>();
    impl->status = status;
    impl->keep_alive = keep_alive;
    impl->pool = pool_;
    impl->key = std::move(key);
    impl->conn = std::move(conn);
    impl->cancel = cancel;  // stays attached to the connection, now the exchange's
    attached.keep();
    co_return std::make_unique<UpstreamExchange>(std::move(impl));
  }
  co_return Error(ErrorCode::kAborted, "send to " + key + ": connection lost");
}

void UpstreamCancel::cancel() {
  if (cancelled_) return;
  cancelled_ = true;
  if (auto close = std::move(close_)) {
    close_ = nullptr;
    close();
  }
}

std::string_view upstream_failure(ErrorCode code) {
  switch (code) {
    case ErrorCode::kUnavailable:
      return "connect";
    case ErrorCode::kDeadlineExceeded:
      return "timeout";
    case ErrorCode::kAborted:
      return "closed";
    case ErrorCode::kInternal:
      return "protocol";
    case ErrorCode::kCancelled:
      return "cancelled";
    default:
      return "unknown";
  }
}

}  // namespace kvgate::io
