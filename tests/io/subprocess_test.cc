#include "io/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>

namespace kvgate::io {
namespace {

using namespace std::chrono_literals;

// Collects a child's lines (on_line runs on the reader thread).
struct Lines {
  std::mutex mu;
  std::vector<OutputLine> lines;
  std::function<void(const OutputLine&)> sink() {
    return [this](const OutputLine& l) {
      std::lock_guard lock(mu);
      lines.push_back(l);
    };
  }
  std::vector<std::string> texts(OutputStream s) {
    std::lock_guard lock(mu);
    std::vector<std::string> out;
    for (const auto& l : lines) {
      if (l.stream == s) out.push_back(l.text);
    }
    return out;
  }
};

std::unique_ptr<Subprocess> spawn_sh(const std::string& script, Lines* lines,
                                     SubprocessOptions options = {}) {
  options.argv = {"/bin/sh", "-c", script};
  if (lines != nullptr) options.on_line = lines->sink();
  Result<std::unique_ptr<Subprocess>> child = Subprocess::spawn(std::move(options));
  EXPECT_TRUE(child.ok()) << (child.ok() ? "" : child.error());
  return child.ok() ? std::move(*child) : nullptr;
}

// Running (a zombie waiting for a reaper that is not us counts as dead: in a container the
// init process may never reap an orphaned grandchild).
bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

TEST(SubprocessTest, CapturesStdoutAndStderrLineByLineAndExitCode) {
  Lines lines;
  auto child = spawn_sh("echo one; echo two 1>&2; printf 'three\\r\\nfour'; exit 3", &lines);
  ASSERT_NE(child, nullptr);
  std::optional<ExitStatus> status = child->wait_for(10s);
  ASSERT_TRUE(status);
  EXPECT_EQ(status->exit_code, 3);
  EXPECT_TRUE(status->exited());
  child->stop(1s);  // drains the output
  EXPECT_EQ(lines.texts(OutputStream::kStdout), (std::vector<std::string>{"one", "three", "four"}));
  EXPECT_EQ(lines.texts(OutputStream::kStderr), (std::vector<std::string>{"two"}));
}

TEST(SubprocessTest, TimestampsFollowTheOutput) {
  Lines lines;
  auto child = spawn_sh("echo a; sleep 0.2; echo b", &lines);
  ASSERT_NE(child, nullptr);
  ASSERT_TRUE(child->wait_for(10s));
  child->stop(1s);
  std::lock_guard lock(lines.mu);
  ASSERT_EQ(lines.lines.size(), 2u);
  auto gap = lines.lines[1].at - lines.lines[0].at;
  EXPECT_GE(gap, 150ms);
  EXPECT_LT(gap, 2s);
  EXPECT_GE(lines.lines[0].at, child->started_at());
}

TEST(SubprocessTest, SetsEnvironmentAndWorkingDirectory) {
  Lines lines;
  SubprocessOptions options;
  options.env = {{"KVGATE_TEST_VAR", "hello"}, {"PATH", "/usr/bin:/bin"}};
  options.working_dir = "/tmp";
  auto child = spawn_sh("echo $KVGATE_TEST_VAR; pwd; echo ${HOME:-nohome}", &lines, options);
  ASSERT_NE(child, nullptr);
  ASSERT_TRUE(child->wait_for(10s));
  child->stop(1s);
  auto out = lines.texts(OutputStream::kStdout);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], "hello");
  EXPECT_EQ(out[1], "/tmp");

  Lines clean;
  SubprocessOptions only;
  only.inherit_env = false;
  only.env = {{"A", "1"}};
  auto bare = spawn_sh("echo ${HOME:-nohome} $A", &clean, only);
  ASSERT_NE(bare, nullptr);
  ASSERT_TRUE(bare->wait_for(10s));
  bare->stop(1s);
  EXPECT_EQ(clean.texts(OutputStream::kStdout), (std::vector<std::string>{"nohome 1"}));
}

TEST(SubprocessTest, ReportsCommandsThatCannotRun) {
  SubprocessOptions missing;
  missing.argv = {"/nonexistent/kvgate-no-such-binary"};
  Result<std::unique_ptr<Subprocess>> a = Subprocess::spawn(missing);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().find("No such file"), std::string::npos) << a.error();

  SubprocessOptions bad_dir;
  bad_dir.argv = {"/bin/true"};
  bad_dir.working_dir = "/nonexistent/dir";
  Result<std::unique_ptr<Subprocess>> b = Subprocess::spawn(bad_dir);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().find("chdir"), std::string::npos) << b.error();

  EXPECT_FALSE(Subprocess::spawn(SubprocessOptions{}).ok());
}

TEST(SubprocessTest, StopSendsSigtermFirst) {
  Lines lines;
  auto child = spawn_sh(
      "trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.01; done", &lines);
  ASSERT_NE(child, nullptr);
  for (int i = 0; i < 500 && lines.texts(OutputStream::kStdout).empty(); ++i) {
    // Waits for the child shell to set its trap and say "ready".
    std::this_thread::sleep_for(10ms);
  }
  ExitStatus status = child->stop(5s);
  EXPECT_EQ(status.exit_code, 7);
  auto out = lines.texts(OutputStream::kStdout);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1], "got-term");
}

TEST(SubprocessTest, StopKillsAChildThatIgnoresSigtermAndItsDescendants) {
  Lines lines;
  // The shell ignores TERM and starts a grandchild that inherits the ignoring.
  auto child = spawn_sh("trap '' TERM; sh -c 'echo grandchild $$; exec sleep 60' & wait", &lines);
  ASSERT_NE(child, nullptr);
  pid_t grandchild = 0;
  for (int i = 0; i < 500 && grandchild == 0; ++i) {
    for (const std::string& t : lines.texts(OutputStream::kStdout)) {
      if (t.rfind("grandchild ", 0) == 0) grandchild = std::stoi(t.substr(11));
    }
    // Waits for the child shell's grandchild to start and print its pid.
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_GT(grandchild, 0);
  auto before = std::chrono::steady_clock::now();
  ExitStatus status = child->stop(200ms);
  EXPECT_EQ(status.signal, SIGKILL);
  EXPECT_LT(std::chrono::steady_clock::now() - before, 5s);
  // The grandchild was in the group: killed (it is reaped by init, so poll briefly).
  for (int i = 0; i < 200 && alive(grandchild); ++i) {
    // Waits for the killed grandchild process to be reaped by init.
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_FALSE(alive(grandchild));
}

TEST(SubprocessTest, DestructorStopsARunningChild) {
  pid_t pid = 0;
  {
    auto child = spawn_sh("exec sleep 60", nullptr);
    ASSERT_NE(child, nullptr);
    pid = child->pid();
    EXPECT_FALSE(child->poll());
  }
  EXPECT_FALSE(alive(pid));  // reaped, so not even a zombie
}

TEST(SubprocessTest, WaitForTimesOutOnARunningChild) {
  auto child = spawn_sh("exec sleep 60", nullptr);
  ASSERT_NE(child, nullptr);
  auto before = std::chrono::steady_clock::now();
  EXPECT_FALSE(child->wait_for(50ms));
  EXPECT_GE(std::chrono::steady_clock::now() - before, 50ms);
  EXPECT_EQ(child->stop(5s).signal, SIGTERM);
}

}  // namespace
}  // namespace kvgate::io
