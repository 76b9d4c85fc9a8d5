#include "io/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

extern char** environ;

namespace kvgate::io {
namespace {

constexpr size_t kMaxLineBytes = 1 << 20;

using Clock = std::chrono::steady_clock;

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

ExitStatus decode_wait_status(int status) {
  ExitStatus s;
  if (WIFEXITED(status)) {
    s.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    s.signal = WTERMSIG(status);
  }
  return s;
}

std::vector<std::string> build_env(const SubprocessOptions& options) {
  std::vector<std::string> env;
  auto overridden = [&](std::string_view entry) {
    for (const auto& [key, value] : options.env) {
      if (entry.size() > key.size() && entry.substr(0, key.size()) == key &&
          entry[key.size()] == '=') {
        return true;
      }
    }
    return false;
  };
  if (options.inherit_env) {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      if (!overridden(*e)) env.emplace_back(*e);
    }
  }
  for (const auto& [key, value] : options.env) env.push_back(key + "=" + value);
  return env;
}

// Runs in the forked child: only async-signal-safe calls until exec.
[[noreturn]] void exec_child(pid_t parent, int out_w, int err_w, int report_w, const char* dir,
                             char* const* argv, char* const* envp) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD}) ::signal(sig, SIG_DFL);
  int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
  ::dup2(out_w, STDOUT_FILENO);
  ::dup2(err_w, STDERR_FILENO);
  // Nothing else of the parent's leaks into the child but the (close-on-exec) report pipe.
  if (report_w > 3) ::close_range(3, report_w - 1, 0);
  ::close_range(report_w + 1, ~0U, 0);
  int err = 0;
  if (dir != nullptr && ::chdir(dir) != 0) {
    err = errno;
  } else {
    ::execvpe(argv[0], argv, envp);
    err = errno;
  }
  [[maybe_unused]] ssize_t n = ::write(report_w, &err, sizeof(err));
  ::_exit(127);
}

}  // namespace

std::string ExitStatus::describe() const {
  if (signal != 0) return "killed by signal " + std::to_string(signal);
  if (exit_code >= 0) return "exited with code " + std::to_string(exit_code);
  return "unknown";
}

Result<std::unique_ptr<Subprocess>> Subprocess::spawn(SubprocessOptions options) {
  if (options.argv.empty()) return Error("subprocess: empty command");
  std::vector<std::string> env = build_env(options);
  std::vector<char*> argv_ptrs;
  for (auto& a : options.argv) argv_ptrs.push_back(a.data());
  argv_ptrs.push_back(nullptr);
  std::vector<char*> env_ptrs;
  for (auto& e : env) env_ptrs.push_back(e.data());
  env_ptrs.push_back(nullptr);
  const char* dir = options.working_dir.empty() ? nullptr : options.working_dir.c_str();

  std::array<int, 2> out{-1, -1}, err{-1, -1}, report{-1, -1};
  auto close_all = [&] {
    for (auto* p : {&out, &err, &report}) {
      close_fd((*p)[0]);
      close_fd((*p)[1]);
    }
  };
  if (::pipe2(out.data(), O_CLOEXEC) != 0 || ::pipe2(err.data(), O_CLOEXEC) != 0 ||
      ::pipe2(report.data(), O_CLOEXEC) != 0) {
    int e = errno;
    close_all();
    return Error(std::string("subprocess: pipe: ") + std::strerror(e));
  }
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    close_all();
    return Error(std::string("subprocess: fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    exec_child(parent, out[1], err[1], report[1], dir, argv_ptrs.data(), env_ptrs.data());
  }
  ::setpgid(pid, pid);  // also done by the child; whichever runs first wins the race
  close_fd(out[1]);
  close_fd(err[1]);
  close_fd(report[1]);

  // The report pipe closes on a successful exec; otherwise it carries exec's errno.
  int exec_errno = 0;
  ssize_t n;
  do {
    n = ::read(report[0], &exec_errno, sizeof(exec_errno));
  } while (n < 0 && errno == EINTR);
  close_fd(report[0]);
  if (n == static_cast<ssize_t>(sizeof(exec_errno))) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    close_fd(out[0]);
    close_fd(err[0]);
    std::string what = dir != nullptr && ::access(dir, X_OK) != 0 ? "chdir " + std::string(dir)
                                                                  : "exec " + options.argv[0];
    return Error("subprocess: " + what + ": " + std::strerror(exec_errno));
  }

  std::unique_ptr<Subprocess> child(new Subprocess());
  child->pid_ = pid;
  child->started_at_ = Clock::now();
  child->on_line_ = std::move(options.on_line);
  child->wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
  std::packaged_task<void()> task(
      [c = child.get(), o = out[0], e = err[0]] { c->read_loop(o, e); });
  child->reader_done_ = task.get_future();
  child->reader_ = std::thread(std::move(task));
  return child;
}

void Subprocess::read_loop(int out_fd, int err_fd) {
  std::array<int, 2> fds{out_fd, err_fd};
  std::array<std::string, 2> partial;
  std::array<char, 65536> buf;
  auto emit = [&](size_t i, std::string text) {
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (on_line_) {
      on_line_(OutputLine{Clock::now(), i == 0 ? OutputStream::kStdout : OutputStream::kStderr,
                          std::move(text)});
    }
  };
  while (fds[0] >= 0 || fds[1] >= 0) {
    std::array<pollfd, 3> p{pollfd{fds[0], POLLIN, 0}, pollfd{fds[1], POLLIN, 0},
                            pollfd{wake_fd_, POLLIN, 0}};
    int ready = ::poll(p.data(), p.size(), -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (p[2].revents != 0) break;
    for (size_t i = 0; i < 2; ++i) {
      if (fds[i] < 0 || p[i].revents == 0) continue;
      ssize_t n = ::read(fds[i], buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (!partial[i].empty()) emit(i, std::move(partial[i]));
        partial[i].clear();
        close_fd(fds[i]);
        continue;
      }
      partial[i].append(buf.data(), static_cast<size_t>(n));
      size_t start = 0;
      for (size_t nl; (nl = partial[i].find('\n', start)) != std::string::npos; start = nl + 1) {
        emit(i, partial[i].substr(start, nl - start));
      }
      partial[i].erase(0, start);
      while (partial[i].size() >= kMaxLineBytes) {
        emit(i, partial[i].substr(0, kMaxLineBytes));
        partial[i].erase(0, kMaxLineBytes);
      }
    }
  }
  for (int& fd : fds) close_fd(fd);
}

std::optional<ExitStatus> Subprocess::poll() {
  if (status_) return status_;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) {
    status_ = decode_wait_status(status);
  } else if (r < 0) {
    status_ = ExitStatus{};  // ECHILD: someone else reaped it; treat as gone
  }
  return status_;
}

std::optional<ExitStatus> Subprocess::wait_for(std::chrono::milliseconds timeout) {
  if (poll()) return status_;
  auto deadline = Clock::now() + timeout;
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  while (!poll()) {
    // Rounded up: waking a fraction of a millisecond early would end the wait too soon.
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(left.count()));
    } else {
      std::this_thread::sleep_for(std::min(left, std::chrono::milliseconds(2)));
    }
  }
  if (pidfd >= 0) ::close(pidfd);
  return status_;
}

void Subprocess::signal(int sig) {
  if (status_ || pid_ <= 0) return;
  if (::kill(-pid_, sig) != 0) ::kill(pid_, sig);  // group gone: the leader alone
}

ExitStatus Subprocess::stop(std::chrono::milliseconds grace) {
  if (!poll()) {
    signal(SIGTERM);
    if (!wait_for(grace)) {
      signal(SIGKILL);
      while (!wait_for(std::chrono::milliseconds(1000))) {
      }
    }
  }
  // The leader is gone; members of its group that ignored SIGTERM are killed now, so they
  // cannot hold the pipes open (or outlive us).
  ::kill(-pid_, SIGKILL);
  join_reader(std::chrono::milliseconds(2000));
  return *status_;
}

void Subprocess::join_reader(std::chrono::milliseconds drain) {
  if (!reader_.joinable()) return;
  if (reader_done_.valid() && reader_done_.wait_for(drain) != std::future_status::ready &&
      wake_fd_ >= 0) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  }
  reader_.join();
}

Subprocess::~Subprocess() {
  if (pid_ > 0) stop(std::chrono::milliseconds(5000));
  join_reader(std::chrono::milliseconds(0));
  close_fd(wake_fd_);
}

}  // namespace kvgate::io
