#include "process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "io/http_client.h"
#include "io/subprocess.h"

namespace kvgate::testing {

std::string kvgate_bin() {
  const char* b = std::getenv("KVGATE_BIN");
  return b ? b : "";
}

std::string source_dir() {
  const char* s = std::getenv("KVGATE_SOURCE_DIR");
  return s ? s : "";
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

struct ChildProcess::Output {
  std::mutex mu;
  std::condition_variable grew;
  std::string out;
  std::string err;
};

namespace {

// Exit code, or -signal when a signal ended it.
int code_of(const io::ExitStatus& s) { return s.signal != 0 ? -s.signal : s.exit_code; }

}  // namespace

Result<std::unique_ptr<ChildProcess>> ChildProcess::spawn(const std::string& program,
                                                          const std::vector<std::string>& args) {
  if (program.empty()) return Error("no program to spawn (is KVGATE_BIN set?)");
  std::unique_ptr<ChildProcess> p(new ChildProcess());
  p->output_ = std::make_shared<Output>();
  io::SubprocessOptions options;
  options.argv.push_back(program);
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.on_line = [out = p->output_](const io::OutputLine& line) {
    {
      std::lock_guard lock(out->mu);
      std::string& to = line.stream == io::OutputStream::kStdout ? out->out : out->err;
      to += line.text;
      to += '\n';
    }
    out->grew.notify_all();
  };
  auto child = io::Subprocess::spawn(std::move(options));
  if (!child) return Error("spawn " + program + ": " + child.error());
  p->child_ = std::move(*child);
  return p;
}

ChildProcess::~ChildProcess() { stop(std::chrono::seconds(5)); }

pid_t ChildProcess::pid() const { return child_ ? child_->pid() : -1; }

std::string ChildProcess::output() const {
  std::lock_guard lock(output_->mu);
  return output_->out;
}

std::string ChildProcess::errors() const {
  std::lock_guard lock(output_->mu);
  return output_->err;
}

bool ChildProcess::running() {
  if (status_ || !child_) return false;
  if (auto s = child_->poll()) status_ = code_of(*s);
  return !status_;
}

void ChildProcess::signal(int sig) {
  if (!status_ && child_) child_->signal(sig);
}

int ChildProcess::stop(std::chrono::milliseconds grace) {
  if (!child_) return -1;
  if (!status_) status_ = code_of(child_->stop(grace));
  return *status_;
}

Result<std::string> ChildProcess::wait_for_line(std::string_view needle,
                                                std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const std::string out = output();
    const size_t at = out.find(needle);
    if (at != std::string::npos) {
      const size_t b = out.rfind('\n', at);
      const size_t e = out.find('\n', at);
      const size_t from = b == std::string::npos ? 0 : b + 1;
      return out.substr(from, e == std::string::npos ? std::string::npos : e - from);
    }
    if (!running()) {
      return Error("child exited (status " + std::to_string(status_.value_or(-1)) +
                   ") before printing \"" + std::string(needle) + "\"; stderr:\n" + errors());
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Error("timed out waiting for \"" + std::string(needle) + "\"; stdout:\n" + out +
                   "\nstderr:\n" + errors());
    }
    // Woken by new output; the timeout also catches the child's exit.
    std::unique_lock lock(output_->mu);
    output_->grew.wait_for(lock, std::chrono::milliseconds(20),
                           [&] { return output_->out.size() != out.size(); });
  }
}

Result<std::string> ChildProcess::wait_for_url(std::chrono::milliseconds timeout) {
  auto line = wait_for_line("listening on http://", timeout);
  if (!line) return line;
  const size_t at = line->find("http://");
  std::string url = line->substr(at);
  while (!url.empty() && (url.back() == '\r' || url.back() == ' ')) url.pop_back();
  return url;
}

Result<std::string> ChildProcess::wait_for_admin_url(std::chrono::milliseconds timeout) {
  auto line = wait_for_line("admin API on http://", timeout);
  if (!line) return line;
  std::string url = line->substr(line->find("http://"));
  while (!url.empty() && (url.back() == '\r' || url.back() == '\n' || url.back() == ' ')) {
    url.pop_back();
  }
  return url;
}

Status ChildProcess::wait_for_status(const std::string& url, int status,
                                     std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = io::http_fetch("GET", url, "", {}, std::chrono::milliseconds(2000));
    if (r && r->status == status) return {};
    last = r ? "status " + std::to_string(r->status) : r.error();
    if (!running()) return Error("child exited; stderr:\n" + errors());
    // Waits for the child to answer `status` on `url`.
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return Error("timed out waiting for " + url + " to answer " + std::to_string(status) +
               " (last: " + last + ")");
}

Result<std::unique_ptr<ChildProcess>> start_redis(int port) {
  auto p = ChildProcess::spawn("/usr/bin/redis-server",
                               {"--port", std::to_string(port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no", "--daemonize", "no"});
  if (!p) return p;
  if (auto line = (*p)->wait_for_line("Ready to accept connections"); !line) {
    return Error(line.error());
  }
  return p;
}

}  // namespace kvgate::testing
