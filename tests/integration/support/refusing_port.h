// RefusingPort: a loopback port where connections are refused, for as long as it lives.
//
// A port found by binding to port 0 and closing again is free for anyone: another test
// process running at the same time (ctest runs two) may be given it and answer there. A
// socket bound but never listening keeps the port reserved, and the kernel answers a
// connection to it with a reset, that is "connection refused". Depends on nothing but
// POSIX, so the unit tests (tests/<layer>/) include it as well as the integration tests.
//
//   RefusingPort dead;
//   start(config_for({dead.port(), good->port()}));
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace kvgate::testing {

class RefusingPort {
 public:
  RefusingPort() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      if (fd_ >= 0) ::close(fd_);
      throw std::runtime_error("RefusingPort: no loopback port to bind");
    }
    port_ = ntohs(a.sin_port);
  }
  ~RefusingPort() { ::close(fd_); }
  RefusingPort(const RefusingPort&) = delete;
  RefusingPort& operator=(const RefusingPort&) = delete;

  uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_;
  uint16_t port_ = 0;
};

}  // namespace kvgate::testing
