// Subprocess: one child process started from an argv, with its stdout and stderr read
// line by line (each line timestamped on arrival), stopped with SIGTERM then SIGKILL, and
// always reaped.
//
// Used by `kvgate coldstart` (time a server's start from its log lines) and meant for the
// autoscaler's local-process actuator. The child runs in its own process group, and every
// signal goes to the whole group, so the workers a server forks (vLLM's engine core, its
// GPU workers, a shell's children) stop with it. On Linux the child also gets SIGKILL if
// the parent dies (PR_SET_PDEATHSIG), so a crashed kvgate leaks nothing.
//
//   SubprocessOptions options;
//   options.argv = {"vllm", "serve", "Qwen/Qwen2.5-7B-Instruct"};
//   options.on_line = [](const OutputLine& line) { ... };  // called on the reader thread
//   Result<std::unique_ptr<Subprocess>> child = Subprocess::spawn(std::move(options));
//   ...
//   ExitStatus status = (*child)->stop(std::chrono::seconds(10));
//
// Thread safety: a Subprocess is used by one owner thread; on_line runs on the internal
// reader thread, one line at a time, and must not call back into the Subprocess.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/common/result.h"

namespace kvgate::io {

enum class OutputStream { kStdout, kStderr };

struct OutputLine {
  std::chrono::steady_clock::time_point at;  // when the line's last byte was read
  OutputStream stream;
  std::string text;  // without the trailing newline (and '\r')
};

struct SubprocessOptions {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH
  // Variables set (or overridden) in the child's environment.
  std::vector<std::pair<std::string, std::string>> env;
  bool inherit_env = true;  // false: the child sees only `env`
  std::string working_dir;  // empty: the parent's
  // Every complete line of output, on the reader thread. A final unterminated line is
  // delivered when the stream closes. Lines longer than 1 MiB are split.
  std::function<void(const OutputLine&)> on_line;
};

// How a child ended.
struct ExitStatus {
  int exit_code = -1;  // when it exited normally
  int signal = 0;      // when a signal killed it
  bool exited() const { return signal == 0 && exit_code >= 0; }
  std::string describe() const;
};

class Subprocess {
 public:
  // Starts the child. Errors: empty argv, a command that cannot be executed (the exec
  // error is reported here, not as exit code 127), no working dir, pipe/fork failure.
  static Result<std::unique_ptr<Subprocess>> spawn(SubprocessOptions options);

  // Stops the child (as stop() with a 5 s grace) if still running, and joins the reader.
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  std::chrono::steady_clock::time_point started_at() const { return started_at_; }

  // Non-blocking: the exit status if the child has ended (reaps it).
  std::optional<ExitStatus> poll();
  // Waits up to `timeout` for the child to end.
  std::optional<ExitStatus> wait_for(std::chrono::milliseconds timeout);
  // Sends `sig` to the child's process group. No-op once reaped.
  void signal(int sig);
  // SIGTERM to the group, waits up to `grace`, then SIGKILL; reaps the child and waits
  // for its output to drain (all lines delivered) before returning. A descendant that left
  // the process group and still holds the pipes is not waited for more than 2 s.
  ExitStatus stop(std::chrono::milliseconds grace);

 private:
  Subprocess() = default;
  void read_loop(int out_fd, int err_fd);
  void join_reader(std::chrono::milliseconds drain);

  pid_t pid_ = -1;
  std::chrono::steady_clock::time_point started_at_;
  std::optional<ExitStatus> status_;  // set once reaped
  std::function<void(const OutputLine&)> on_line_;
  int wake_fd_ = -1;  // eventfd: tells the reader to give up on the pipes
  std::future<void> reader_done_;
  std::thread reader_;
};

}  // namespace kvgate::io
