// ChildProcess: runs a real program (usually the kvgate binary) for integration tests.
//
// A thin test-side face of io::Subprocess (the same process handling the autoscaler's
// local actuator uses: own process group, killed with its parent): the child's stdout and
// stderr are kept in memory (read them with output() / errors()); helpers wait for a line
// to appear (e.g. "listening on http://..."), for a URL to answer, and stop() sends
// SIGTERM, then SIGKILL after a grace period, and always reaps the child. The destructor
// stops it too, so a failing test leaks nothing.
//
//   auto p = ChildProcess::spawn(kvgate_bin(), {"engine", "--port", "0"});
//   ASSERT_TRUE(p) << p.error();
//   auto url = (*p)->wait_for_url();          // "http://127.0.0.1:41234"
//   ...
//   EXPECT_EQ((*p)->stop(), 0);
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"

namespace kvgate::io {
class Subprocess;
}

namespace kvgate::testing {

// $KVGATE_BIN, else "kvgate" next to the test binary's build dir is not guessed: empty.
std::string kvgate_bin();
// $KVGATE_SOURCE_DIR or "".
std::string source_dir();
// A TCP port on 127.0.0.1 that is free right now (bound to port 0, then released).
int free_port();

class ChildProcess {
 public:
  static Result<std::unique_ptr<ChildProcess>> spawn(const std::string& program,
                                                     const std::vector<std::string>& args);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const;
  // Everything the child wrote so far.
  std::string output() const;
  std::string errors() const;

  // Waits until a stdout line contains `needle` and returns the whole line. Errors: the
  // child exited first (its stderr is in the message), or the timeout passed.
  Result<std::string> wait_for_line(std::string_view needle,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // Waits for "listening on http://HOST:PORT" and returns "http://HOST:PORT".
  Result<std::string> wait_for_url(std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // Waits for `kvgate serve`'s "admin API on http://HOST:PORT" and returns the URL.
  Result<std::string> wait_for_admin_url(
      std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // Polls GET url until it answers `status`.
  Status wait_for_status(const std::string& url, int status,
                         std::chrono::milliseconds timeout = std::chrono::seconds(20));

  // True while the child has not exited (reaps it if it has).
  bool running();
  // SIGTERM, then SIGKILL after `grace`; reaps. Returns the exit code, or -signal if it
  // was killed by a signal. Idempotent (returns the same status).
  int stop(std::chrono::milliseconds grace = std::chrono::seconds(5));
  // Sends a signal without waiting.
  void signal(int sig);

 private:
  struct Output;
  ChildProcess() = default;

  std::shared_ptr<Output> output_;  // shared with the reader thread's callback
  std::unique_ptr<io::Subprocess> child_;
  std::optional<int> status_;
};

// Starts /usr/bin/redis-server on 127.0.0.1:`port` (no persistence) and waits until it
// accepts connections.
Result<std::unique_ptr<ChildProcess>> start_redis(int port);

}  // namespace kvgate::testing
