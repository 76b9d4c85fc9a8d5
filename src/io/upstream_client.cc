// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "io/upstream_client.h"

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <mutex>
#include <unordered_map>

namespace kvgate::io {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

namespace {

// A pooled connection keeps its buffers: an exchange on a reused connection allocates
// no I/O memory.
struct Connection {
  explicit Connection(asio::any_io_executor ex) : stream(std::move(ex)) {}
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  std::array<char, 16 * 1024> body;  // where read_some puts body bytes
  std::string head;                  // the request head being sent
};

// The request head as sent: request line, Host, the caller's headers, Content-Length
// (written by hand: Beast's fields allocate per field).
void write_head(std::string& out, const UpstreamRequest& r, std::string_view host_port) {
  out.clear();
  out.append(r.method).append(" ").append(r.target).append(" HTTP/1.1\r\nHost: ");
  out.append(host_port).append("\r\n");
  for (const auto& [name, value] : r.headers)
    out.append(name).append(": ").append(value).append("\r\n");
  out.append("Content-Length: ").append(std::to_string(r.body.size())).append("\r\n\r\n");
}

UpstreamErrorKind kind_of(const boost::system::error_code& ec) {
  return ec == beast::error::timeout ? UpstreamErrorKind::kTimeout : UpstreamErrorKind::kClosed;
}

}  // namespace

struct UpstreamClient::Pool {
  mutable std::mutex mu;
  std::unordered_map<std::string, std::vector<std::unique_ptr<Connection>>> idle;
  size_t max_idle = 0;

  std::unique_ptr<Connection> take(const std::string& key) {
    std::lock_guard lock(mu);
    auto it = idle.find(key);
    if (it == idle.end() || it->second.empty()) return nullptr;
    auto conn = std::move(it->second.back());
    it->second.pop_back();
    return conn;
  }

  void give(const std::string& key, std::unique_ptr<Connection> conn) {
    conn->stream.expires_never();
    std::lock_guard lock(mu);
    auto& list = idle[key];
    if (list.size() < max_idle) list.push_back(std::move(conn));
  }
};

struct UpstreamExchange::Impl {
  std::shared_ptr<UpstreamClient::Pool> pool;
  std::string key;
  std::unique_ptr<Connection> conn;
  http::response_parser<http::buffer_body> parser;
  int status = 0;
  UpstreamHeaders headers;
  bool keep_alive = false;
  bool done = false;

  void release() {
    done = true;
    if (conn && keep_alive && parser.is_done()) {
      pool->give(key, std::move(conn));
    } else if (conn) {
      beast::error_code ignored;
      conn->stream.socket().close(ignored);
      conn.reset();
    }
  }
};

UpstreamExchange::UpstreamExchange(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UpstreamExchange::~UpstreamExchange() = default;
int UpstreamExchange::status() const { return impl_->status; }
const UpstreamHeaders& UpstreamExchange::headers() const { return impl_->headers; }
void UpstreamExchange::no_reuse() { impl_->keep_alive = false; }

asio::awaitable<UpstreamResult<std::string_view>> UpstreamExchange::read_some(
    std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  while (!s.done) {
    if (s.parser.is_done()) {
      s.release();
      break;
    }
    auto& buf = s.conn->body;
    s.parser.get().body().data = buf.data();
    s.parser.get().body().size = buf.size();
    s.conn->stream.expires_after(timeout);
    beast::error_code ec;
    co_await http::async_read_some(s.conn->stream, s.conn->buffer, s.parser,
                                   asio::redirect_error(asio::use_awaitable, ec));
    if (ec == http::error::need_buffer) ec = {};
    if (ec) {
      UpstreamError err{kind_of(ec), "upstream body: " + ec.message()};
      s.keep_alive = false;
      s.release();
      co_return err;
    }
    size_t n = buf.size() - s.parser.get().body().size;
    // A finished response goes back to the pool at the next call (the loop's top), not
    // now: the view points into the connection, which another thread may take from
    // the pool at once.
    if (n > 0) co_return std::string_view(buf.data(), n);
  }
  co_return std::string_view{};
}

asio::awaitable<UpstreamResult<std::string>> UpstreamExchange::read_all(
    std::chrono::milliseconds timeout, size_t limit) {
  std::string body;
  while (true) {
    auto piece = co_await read_some(timeout);
    if (!piece) co_return piece.error();
    if (piece->empty()) break;
    body.append(piece->data(), piece->size());
    if (body.size() > limit) {
      impl_->keep_alive = false;
      impl_->release();
      co_return UpstreamError{UpstreamErrorKind::kProtocol, "upstream body too large"};
    }
  }
  co_return body;
}

UpstreamClient::UpstreamClient(asio::any_io_executor executor, UpstreamOptions options)
    : executor_(std::move(executor)), options_(options), pool_(std::make_shared<Pool>()) {
  pool_->max_idle = options_.max_idle_per_endpoint;
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

asio::awaitable<UpstreamResult<std::unique_ptr<UpstreamExchange>>> UpstreamClient::send(
    std::string host, uint16_t port, const UpstreamRequest& request) {
  std::string key = host + ":" + std::to_string(port);
  // Attempt 0 may reuse an idle connection; when that one turns out dead before any
  // response byte, attempt 1 uses a fresh one.
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::unique_ptr<Connection> conn = attempt == 0 ? pool_->take(key) : nullptr;
    const bool reused = conn != nullptr;
    beast::error_code ec;
    if (!conn) {
      conn = std::make_unique<Connection>(executor_);
      tcp::resolver resolver(executor_);
      auto endpoints = co_await resolver.async_resolve(
          host, std::to_string(port), asio::redirect_error(asio::use_awaitable, ec));
      if (ec)
        co_return UpstreamError{UpstreamErrorKind::kConnect,
                                "resolve " + key + ": " + ec.message()};
      conn->stream.expires_after(options_.connect_timeout);
      co_await conn->stream.async_connect(endpoints, asio::redirect_error(asio::use_awaitable, ec));
      if (ec)
        co_return UpstreamError{UpstreamErrorKind::kConnect,
                                "connect " + key + ": " + ec.message()};
      conn->stream.socket().set_option(tcp::no_delay(true), ec);
    }
    conn->stream.expires_after(options_.head_timeout);
    write_head(conn->head, request, key);
    const std::array<asio::const_buffer, 2> out{asio::buffer(conn->head),
                                                asio::buffer(request.body)};
    co_await asio::async_write(conn->stream, out, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (reused) continue;
      co_return UpstreamError{kind_of(ec), "send to " + key + ": " + ec.message()};
    }
    auto impl = std::make_unique<UpstreamExchange::Impl>();
    impl->parser.body_limit(boost::none);
    impl->parser.header_limit(64 * 1024);
    co_await http::async_read_header(conn->stream, conn->buffer, impl->parser,
                                     asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (reused && ec != beast::error::timeout && conn->buffer.size() == 0) continue;
      co_return UpstreamError{kind_of(ec), "response head from " + key + ": " + ec.message()};
    }
    conn->stream.expires_never();
    const auto& head = impl->parser.get();
    impl->status = static_cast<int>(head.result_int());
    for (const auto& field : head) {
      impl->headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    impl->keep_alive = head.keep_alive();
    impl->pool = pool_;
    impl->key = key;
    impl->conn = std::move(conn);
    co_return std::make_unique<UpstreamExchange>(std::move(impl));
  }
  co_return UpstreamError{UpstreamErrorKind::kClosed, "send to " + key + ": connection lost"};
}

std::string_view to_string(UpstreamErrorKind kind) {
  switch (kind) {
    case UpstreamErrorKind::kConnect:
      return "connect";
    case UpstreamErrorKind::kTimeout:
      return "timeout";
    case UpstreamErrorKind::kClosed:
      return "closed";
    case UpstreamErrorKind::kProtocol:
      return "protocol";
  }
  return "unknown";
}

}  // namespace kvgate::io
