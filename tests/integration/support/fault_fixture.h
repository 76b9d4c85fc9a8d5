// Helpers for the fault tests (cancellation, stream migration, the fault matrix): a raw
// TCP client that can leave at any moment, polling with a deadline (eventually.h), metrics of any
// process, and a gateway whose admin API shows the router's load.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <string>
#include <string_view>
#include <thread>

#include "eventually.h"
#include "gateway_fixture.h"

namespace kvgate::testing {

// The value of one sample on `base_url`/metrics (0 when absent, -1 when unreachable).
inline double metric_at(const std::string& base_url, const std::string& name,
                        const metrics::Labels& labels = {}) {
  auto r = io::http_fetch("GET", base_url + "/metrics", "", {}, std::chrono::seconds(5));
  if (!r || r->status != 200) return -1;
  auto m = metrics::parse_prometheus_text(r->body);
  if (!m) return -1;
  return m->value(name, labels).value_or(0);
}

// "127.0.0.1" and 8000 of "http://127.0.0.1:8000".
inline std::pair<std::string, int> host_port(const std::string& url) {
  std::string rest = url.substr(url.find("//") + 2);
  const size_t colon = rest.rfind(':');
  return {rest.substr(0, colon), std::stoi(rest.substr(colon + 1))};
}

// A blocking TCP client speaking raw bytes: for clients that leave half-way, send
// slowly, or never send at all.
class RawClient {
 public:
  explicit RawClient(const std::string& url) {
    auto [host, port] = host_port(url);
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawClient() { close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;
  RawClient(RawClient&& o) noexcept : fd_(o.fd_), received_(std::move(o.received_)) { o.fd_ = -1; }

  bool connected() const { return fd_ >= 0; }
  bool send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // Reads until `needle` appears in what came (true), the peer closes or `timeout` passes.
  bool read_until(std::string_view needle,
                  std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (received_.find(needle) == std::string::npos) {
      if (read_once(left_until(end)) != Read::kData) return false;
    }
    return true;
  }
  // Reads what arrives within `timeout` (one read; nothing if nothing came): for a caller
  // that counts events as they come. False once the peer closed or failed.
  bool read_some(std::chrono::milliseconds timeout) { return read_once(timeout) != Read::kClosed; }
  // True when the peer closed the connection within `timeout` (what came is kept).
  bool closed_by_peer(std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (true) {
      const Read r = read_once(left_until(end));
      if (r != Read::kData) return r == Read::kClosed;
    }
  }
  const std::string& received() const { return received_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  enum class Read { kData, kNothing, kClosed };
  static std::chrono::milliseconds left_until(std::chrono::steady_clock::time_point end) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(end -
                                                                 std::chrono::steady_clock::now());
  }
  // One poll of up to `timeout` and one read into received_: kNothing when nothing came in
  // time (or no time was left), kClosed when the peer closed or the read failed.
  Read read_once(std::chrono::milliseconds timeout) {
    if (timeout.count() <= 0) return Read::kNothing;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return Read::kNothing;
    char buf[8192];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return Read::kClosed;
    received_.append(buf, static_cast<size_t>(n));
    return Read::kData;
  }
  int fd_ = -1;
  std::string received_;
};

// The body of a raw HTTP/1.1 response (head and chunked framing removed; a
// Content-Length body as is). What is cut off at the end is kept as far as it came.
inline std::string response_body(const std::string& raw) {
  const size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) return {};
  const std::string head = raw.substr(0, head_end);
  std::string_view rest = std::string_view(raw).substr(head_end + 4);
  std::string lower;
  for (char c : head) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("transfer-encoding: chunked") == std::string::npos) return std::string(rest);
  std::string body;
  while (true) {
    const size_t eol = rest.find("\r\n");
    if (eol == std::string_view::npos) break;
    const size_t size = std::stoul(std::string(rest.substr(0, eol)), nullptr, 16);
    rest.remove_prefix(eol + 2);
    if (size == 0) break;
    body.append(rest.substr(0, size));
    if (rest.size() < size + 2) break;
    rest.remove_prefix(size + 2);
  }
  return body;
}

// The value of header `name` (lower case) in a raw response head, or "".
inline std::string response_header(const std::string& raw, const std::string& name) {
  const size_t head_end = raw.find("\r\n\r\n");
  size_t pos = 0;
  while (pos < head_end) {
    const size_t eol = raw.find("\r\n", pos);
    std::string line = raw.substr(pos, eol - pos);
    std::string lower;
    for (char c : line) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower.starts_with(name + ":")) {
      std::string v = line.substr(name.size() + 1);
      while (!v.empty() && v.front() == ' ') v.erase(0, 1);
      return v;
    }
    pos = eol + 2;
  }
  return {};
}

// A POST of a JSON body as raw HTTP/1.1 bytes.
inline std::string raw_post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: kvgate\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// A chat request body for model "sim".
inline std::string chat_body(const std::string& content, int max_tokens, bool stream,
                             const std::string& extra = "") {
  std::string b = R"({"model":"sim","messages":[{"role":"user","content":")" + content +
                  R"("}],"max_tokens":)" + std::to_string(max_tokens);
  if (stream) b += R"(,"stream":true)";
  return b + extra + "}";
}

// The gateway with a loopback admin API (no token needed there), to read the router's
// load per endpoint.
struct AdminGateway {
  GatewayProcess gw;
  std::string admin_url;

  explicit AdminGateway(const std::string& yaml) : gw(yaml), admin_url(gw.wait_for_admin_url()) {}
  // The router's requests in flight summed over the pool's endpoints (-1 on error).
  int64_t in_flight(const std::string& pool = "main") {
    auto r = io::http_fetch("GET", admin_url + "/admin/pools/" + pool + "/endpoints");
    if (!r || r->status != 200) return -1;
    boost::system::error_code ec;
    auto v = boost::json::parse(r->body, ec);
    if (ec) return -1;
    int64_t n = 0;
    for (const auto& e : v.at("endpoints").as_array()) {
      n += e.at("load").at("in_flight").to_number<int64_t>();
    }
    return n;
  }
  // How many leading blocks of `prompt` the pool's index puts on the endpoint at `url`
  // (POST /admin/pools/POOL/route: the router's view, nothing routed); -1 on error or when
  // the pool has no such endpoint.
  int64_t matched_blocks(const std::string& prompt, const std::string& url,
                         const std::string& pool = "main") {
    auto r = io::http_fetch("POST", admin_url + "/admin/pools/" + pool + "/route",
                            R"({"prompt":")" + prompt + R"(","max_tokens":1})");
    if (!r || r->status != 200) return -1;
    boost::system::error_code ec;
    auto v = boost::json::parse(r->body, ec);
    if (ec) return -1;
    for (const auto& e : v.at("endpoints").as_array()) {
      if (e.at("url").as_string() == url) return e.at("matched_blocks").to_number<int64_t>();
    }
    return -1;
  }
};

// gateway_yaml with its own `timeouts` (the text inside the braces), `extra` top-level
// sections and `pool_extra` lines inside pool "main".
inline std::string fault_yaml(const std::vector<std::string>& urls, const std::string& timeouts,
                              const std::string& extra = "", const std::string& pool_extra = "",
                              const std::string& policy = "round-robin") {
  std::string y = gateway_yaml(urls, policy, extra);
  const size_t t = y.find("timeouts: {");
  const size_t t_end = y.find("}\n", t) + 2;
  y.replace(t, t_end - t, "timeouts: {" + timeouts + "}\n");
  const std::string anchor = "    block_size: 16\n";
  y.insert(y.find(anchor) + anchor.size(), pool_extra);
  return y;
}

// The admin section for gateway_yaml's `extra`.
inline const std::string kLoopbackAdmin = "admin: {address: 127.0.0.1, port: 0}\n";

}  // namespace kvgate::testing
