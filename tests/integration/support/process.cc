#include "process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "io/http_client.h"

extern char** environ;

namespace kvgate::testing {

std::string kvgate_bin() {
  const char* b = std::getenv("KVGATE_BIN");
  return b ? b : "";
}

std::string source_dir() {
  const char* s = std::getenv("KVGATE_SOURCE_DIR");
  return s ? s : "";
}

Result<std::unique_ptr<ChildProcess>> ChildProcess::spawn(const std::string& program,
                                                          const std::vector<std::string>& args) {
  if (program.empty()) return Error("no program to spawn (is KVGATE_BIN set?)");
  std::unique_ptr<ChildProcess> p(new ChildProcess());
  std::string tmpl = (std::filesystem::temp_directory_path() / "kvgate-proc-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) return Error("mkdtemp failed");
  p->dir_ = tmpl;
  p->out_path_ = p->dir_ + "/stdout";
  p->err_path_ = p->dir_ + "/stderr";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, p->out_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, p->err_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  // The child starts with no blocked signals, whatever the test runner blocks.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const int rc = posix_spawn(&p->pid_, program.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    p->pid_ = -1;
    return Error("spawn " + program + ": " + std::strerror(rc));
  }
  return p;
}

ChildProcess::~ChildProcess() {
  stop(std::chrono::seconds(5));
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

std::string ChildProcess::read_file(const std::string& path) const {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string ChildProcess::output() const { return read_file(out_path_); }
std::string ChildProcess::errors() const { return read_file(err_path_); }

bool ChildProcess::reap(bool block) {
  if (status_ || pid_ <= 0) return true;
  int st = 0;
  const pid_t r = waitpid(pid_, &st, block ? 0 : WNOHANG);
  if (r == pid_) {
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
    return true;
  }
  return false;
}

bool ChildProcess::running() { return !reap(false); }

void ChildProcess::signal(int sig) {
  if (!status_ && pid_ > 0) ::kill(pid_, sig);
}

int ChildProcess::stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return -1;
  if (!status_) {
    ::kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (!reap(false) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!status_) {
      ::kill(pid_, SIGKILL);
      reap(true);
    }
  }
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
      return Error("child exited (status " + std::to_string(*status_) + ") before printing \"" +
                   std::string(needle) + "\"; stderr:\n" + errors());
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Error("timed out waiting for \"" + std::string(needle) + "\"; stdout:\n" + out +
                   "\nstderr:\n" + errors());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
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

Status ChildProcess::wait_for_status(const std::string& url, int status,
                                     std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = io::http_fetch("GET", url, "", {}, std::chrono::milliseconds(2000));
    if (r && r->status == status) return {};
    last = r ? "status " + std::to_string(r->status) : r.error();
    if (!running()) return Error("child exited; stderr:\n" + errors());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return Error("timed out waiting for " + url + " to answer " + std::to_string(status) +
               " (last: " + last + ")");
}

}  // namespace kvgate::testing
