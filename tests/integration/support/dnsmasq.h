// A real DNS server for the DNS discovery tests: Debian's dnsmasq on a loopback port,
// answering from files the test rewrites (hosts re-read on SIGHUP) and from --srv-host /
// --host-record flags (fixed for one run: restart() to change them).
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "process.h"

namespace kvgate::testing {

// A UDP port free on 127.0.0.1 just now.
inline uint16_t free_udp_port() {
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  (void)::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
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
    port_ = free_udp_port();
    start();
  }
  ~Dnsmasq() {
    if (proc_) proc_->stop(std::chrono::seconds(2));
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string server() const { return "127.0.0.1:" + std::to_string(port_); }
  // Replaces the hosts file ("ADDRESS NAME" lines) and makes dnsmasq read it again.
  void set_hosts(const std::string& lines) {
    write_hosts(lines);
    if (proc_) proc_->signal(SIGHUP);
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
  }

  int ttl_;
  std::vector<std::string> flags_;
  std::filesystem::path dir_;
  std::string hosts_;
  uint16_t port_ = 0;
  std::unique_ptr<ChildProcess> proc_;
};

}  // namespace kvgate::testing
