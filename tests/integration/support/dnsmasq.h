// A real DNS server for the DNS discovery tests: Debian's dnsmasq on a loopback port,
// answering from files the test rewrites (hosts re-read on SIGHUP) and from --srv-host /
// --host-record flags (fixed for one run: restart() to change them). The constructor and
// restart() return once dnsmasq answers queries.
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "process.h"

namespace kvgate::testing {

// A port free on 127.0.0.1 for UDP and for TCP just now: dnsmasq listens on both and
// exits when the TCP one is taken (a loopback client of another test can hold a port that
// is free for UDP).
inline uint16_t free_dns_port() {
  for (int attempt = 0; attempt < 100; ++attempt) {
    int udp = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    (void)::bind(udp, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(udp, reinterpret_cast<sockaddr*>(&a), &len);
    int tcp = ::socket(AF_INET, SOCK_STREAM, 0);
    const bool both = ::bind(tcp, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(tcp);
    ::close(udp);
    if (both) return ntohs(a.sin_port);
  }
  return 0;
}

// Asks the DNS server on 127.0.0.1:`port` "`name` A" (`name`: dot-separated labels of up
// to 63 bytes) and waits up to 100 ms: the answer's length in `reply`, or -1 (no answer;
// at once while nothing listens there, as the ICMP error ends the wait).
inline ssize_t dns_ask(uint16_t port, const std::string& name, unsigned char (&reply)[512]) {
  std::vector<unsigned char> q = {0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0};  // id 1, RD, one question
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    q.push_back(static_cast<unsigned char>(dot - start));
    q.insert(q.end(), name.begin() + static_cast<std::ptrdiff_t>(start),
             name.begin() + static_cast<std::ptrdiff_t>(dot));
    start = dot + 1;
  }
  q.insert(q.end(), {0, 0, 1, 0, 1});  // root, A, IN
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  ssize_t n = -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::send(fd, q.data(), q.size(), 0) == static_cast<ssize_t>(q.size())) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) == 1) n = ::recv(fd, reply, sizeof reply, 0);
  }
  ::close(fd);
  return n;
}

// True when the server answers at all (an NXDOMAIN for "ready.test" will do).
inline bool dns_answers(uint16_t port) {
  unsigned char reply[512];
  return dns_ask(port, "ready.test", reply) > 0;
}

// True when the server answers "`name` A" with RCODE 0 and at least one record.
inline bool dns_has_a_record(uint16_t port, const std::string& name) {
  unsigned char reply[512];
  const ssize_t n = dns_ask(port, name, reply);
  return n >= 12 && (reply[3] & 0x0f) == 0 && (reply[6] != 0 || reply[7] != 0);
}

class Dnsmasq {
 public:
  static constexpr const char* kBinary = "/usr/sbin/dnsmasq";

  // `ttl`: the TTL of every answer (--local-ttl); `flags`: more records.
  Dnsmasq(int ttl, std::vector<std::string> flags) : ttl_(ttl), flags_(std::move(flags)) {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("dnsmasq." + std::to_string(::getpid()) + "." + std::to_string(counter()++));
    std::filesystem::create_directories(dir_);
    hosts_ = (dir_ / "hosts").string();
    write_hosts("");
    port_ = free_dns_port();
    start();
  }
  ~Dnsmasq() {
    if (proc_) proc_->stop(std::chrono::seconds(2));
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string server() const { return "127.0.0.1:" + std::to_string(port_); }
  // Replaces the hosts file ("ADDRESS NAME" lines) and makes dnsmasq read it again.
  // Returns once dnsmasq answers from the new file: SIGHUP is asynchronous, and a query
  // sent before dnsmasq re-read the file gets the old answer (or NXDOMAIN, whose
  // re-resolution a test may not wait for). A marker name per generation tells.
  void set_hosts(const std::string& lines) {
    const std::string marker = "hosts-" + std::to_string(++generation_) + ".test";
    write_hosts(lines + "\n127.0.0.1 " + marker + "\n");
    if (!proc_) return;
    proc_->signal(SIGHUP);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!dns_has_a_record(port_, marker)) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "dnsmasq did not re-read its hosts file";
        return;
      }
      // Waits for dnsmasq to re-read its hosts file after SIGHUP.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  void stop() {
    if (proc_) proc_->stop(std::chrono::seconds(2));
    proc_.reset();
  }
  void restart(std::vector<std::string> flags) {
    stop();
    flags_ = std::move(flags);
    start();
  }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  void write_hosts(const std::string& lines) {
    const std::string tmp = hosts_ + ".tmp";
    std::ofstream(tmp) << lines;
    std::filesystem::rename(tmp, hosts_);
  }
  void start() {
    std::vector<std::string> args = {
        "--no-daemon", "--no-resolv", "--no-hosts", "--conf-file=/dev/null", "--bind-interfaces",
        "--listen-address=127.0.0.1", "--port=" + std::to_string(port_), "--addn-hosts=" + hosts_,
        "--pid-file=" + (dir_ / "pid").string(), "--local-ttl=" + std::to_string(ttl_),
        "--log-facility=-",
        // Answer unknown names under test. with NXDOMAIN
        // (not REFUSED: there is no upstream server).
        "--local=/test/"};
    args.insert(args.end(), flags_.begin(), flags_.end());
    auto p = ChildProcess::spawn(kBinary, args);
    if (!p) {
      ADD_FAILURE() << p.error();
      return;
    }
    proc_ = std::move(*p);
    // dnsmasq dies of a SIGHUP that comes before it installs its handler, which is what
    // set_hosts() right after the constructor did: every later query went unanswered. An
    // answer comes from its main loop, after every handler is in place.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!dns_answers(port_)) {
      if (!proc_->running()) {
        ADD_FAILURE() << "dnsmasq exited; stderr:\n" << proc_->errors();
        return;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "dnsmasq does not answer on " << server() << "; stderr:\n"
                      << proc_->errors();
        return;
      }
      // Waits for dnsmasq to answer on its port.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  int ttl_;
  int generation_ = 0;
  std::vector<std::string> flags_;
  std::filesystem::path dir_;
  std::string hosts_;
  uint16_t port_ = 0;
  std::unique_ptr<ChildProcess> proc_;
};

}  // namespace kvgate::testing
