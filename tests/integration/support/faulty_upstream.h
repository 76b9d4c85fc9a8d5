// FaultyUpstream: a TCP server that misbehaves the way a broken engine or a broken network
// does, for the fault matrix: it reads each request and answers garbage, a chunked body
// cut short, or an SSE stream that never ends. A fault injector, not a stand-in for an
// engine (the well-behaved side is always a real `kvgate engine`).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace kvgate::testing {

class FaultyUpstream {
 public:
  enum class Mode {
    kGarbage,           // bytes that are not HTTP, then close
    kTruncatedChunked,  // 200, chunked JSON: one chunk of half an answer, then close
    kNeverEndingSse,    // 200 text/event-stream: a token event every 20 ms, never [DONE]
  };

  explicit FaultyUpstream(Mode mode) : mode_(mode) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    ::listen(fd_, 64);
    socklen_t len = sizeof(a);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { accept_loop(); });
  }
  ~FaultyUpstream() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
    for (auto& t : conns_) t.join();
  }
  FaultyUpstream(const FaultyUpstream&) = delete;
  FaultyUpstream& operator=(const FaultyUpstream&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_.load(); }
  // Proxied requests' connections the peer (the gateway) closed while this server was
  // still sending.
  int closed_by_peer() const { return closed_by_peer_.load(); }

 private:
  void accept_loop() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      conns_.emplace_back([this, c] { serve(c); });
    }
  }
  static bool send_all(int c, const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      const ssize_t n = ::send(c, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  static std::string chunk(const std::string& data) {
    char size[16];
    std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
    return size + data + "\r\n";
  }
  void serve(int c) {
    std::string in;
    char buf[4096];
    // The head, then Content-Length bytes of body.
    while (in.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::recv(c, buf, sizeof(buf), 0);
      if (n <= 0) return (void)::close(c);
      in.append(buf, static_cast<size_t>(n));
    }
    const size_t head_end = in.find("\r\n\r\n") + 4;
    size_t length = 0;
    if (const size_t cl = in.find("Content-Length: "); cl != std::string::npos) {
      length = std::stoul(in.substr(cl + 16));
    }
    while (in.size() < head_end + length) {
      const ssize_t n = ::recv(c, buf, sizeof(buf), 0);
      if (n <= 0) return (void)::close(c);
      in.append(buf, static_cast<size_t>(n));
    }
    // The gateway's scrapes (GET /metrics) get the same fault but are not counted: the
    // counts are of the requests it proxied.
    const bool proxied = in.rfind("POST ", 0) == 0;
    if (proxied) ++requests_;
    switch (mode_) {
      case Mode::kGarbage:
        send_all(c, std::string("\x16\x03\x01 this is not HTTP at all \xff\xfe\r\n\r\n", 34));
        break;
      case Mode::kTruncatedChunked:
        send_all(c,
                 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n" +
                     chunk(R"({"id":"cmpl-1","object":"chat.completion","choices":[{"ind)"));
        break;
      case Mode::kNeverEndingSse: {
        if (!send_all(c,
                      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n")) {
          break;
        }
        for (int i = 0; !stop_; ++i) {
          const std::string ev =
              R"(data: {"id":"chatcmpl-x","object":"chat.completion.chunk","created":1,"model":"sim","choices":[{"index":0,"delta":{"content":" tok"},"logprobs":null,"finish_reason":null}]})"
              "\n\n";
          if (!send_all(c, chunk(ev))) {
            if (proxied) ++closed_by_peer_;
            break;
          }
          // Paces the stream (an event every 20 ms), as an engine's steps: it waits for nothing.
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        break;
      }
    }
    ::close(c);
  }

  const Mode mode_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::atomic<int> closed_by_peer_{0};
  std::thread thread_;
  std::vector<std::thread> conns_;  // touched by the accept thread only, joined at the end
};

}  // namespace kvgate::testing
