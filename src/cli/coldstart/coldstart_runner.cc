#include "cli/coldstart/coldstart_runner.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "core/coldstart/phase_matcher.h"
#include "io/health_probe.h"
#include "io/subprocess.h"

namespace kvgate::coldstart {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string join_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !a.empty() && a.find_first_of(" \t\"'\\$`") == std::string::npos;
    out += plain ? a : "'" + a + "'";
  }
  return out;
}

bool directory_has_entries(const std::string& dir) {
  std::error_code ec;
  return fs::is_directory(dir, ec) && !fs::is_empty(dir, ec);
}

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// What one run's reader thread shares with the measuring loop.
struct RunLog {
  std::mutex mu;
  PhaseMatcher matcher;
  std::ofstream file;
  bool echo = false;
  Clock::time_point start;
};

}  // namespace

Status empty_directory(const std::string& dir) {
  std::error_code ec;
  fs::path path = fs::absolute(dir, ec).lexically_normal();
  if (ec || dir.empty() || path.empty() || path == path.root_path()) {
    return Error("refusing to empty '" + dir + "'");
  }
  if (!fs::exists(path, ec)) {
    fs::create_directories(path, ec);
    if (ec) return Error("cannot create cache dir '" + dir + "': " + ec.message());
    return {};
  }
  if (!fs::is_directory(path, ec)) return Error("cache dir '" + dir + "' is not a directory");
  for (const fs::directory_entry& entry : fs::directory_iterator(path, ec)) {
    fs::remove_all(entry.path(), ec);
    if (ec) return Error("cannot empty '" + dir + "': " + ec.message());
  }
  if (ec) return Error("cannot list '" + dir + "': " + ec.message());
  return {};
}

Result<ColdstartReport> run_coldstart(const RunnerOptions& options, std::FILE* progress) {
  if (options.command.empty()) return Error("no server command (give it after --)");
  if (options.runs < 1) return Error("--runs must be at least 1");
  Result<io::Url> url = io::parse_url(options.health_url);
  if (!url) return Error(url.error());
  Result<PhaseMatcher> probe_matcher = PhaseMatcher::compile(options.patterns);
  if (!probe_matcher) return Error(probe_matcher.error());
  if (!options.log_dir.empty()) {
    std::error_code ec;
    fs::create_directories(options.log_dir, ec);
    if (ec) return Error("cannot create '" + options.log_dir + "': " + ec.message());
  }

  ColdstartReport report;
  report.command = join_command(options.command);
  report.health_url = options.health_url;
  report.patterns = options.patterns.name;
  for (const PhasePattern& p : options.patterns.phases) {
    report.phase_names.push_back(p.name);
    report.phase_labels.push_back(p.label.empty() ? p.name : p.label);
  }

  auto interrupted = [&] { return options.interrupted != nullptr && options.interrupted->load(); };
  for (int run = 1; run <= options.runs && !interrupted(); ++run) {
    for (const std::string& dir : options.clean_dirs) {
      if (Status s = empty_directory(dir); !s) return Error(s.error());
    }
    if (run == 1 && options.clean_first) {
      for (const std::string& dir : options.keep_dirs) {
        if (Status s = empty_directory(dir); !s) return Error(s.error());
      }
    }
    bool kept = !options.keep_dirs.empty();
    for (const std::string& dir : options.keep_dirs) kept = kept && directory_has_entries(dir);

    RunResult result;
    result.index = run;
    result.cache = kept ? CacheState::kCachesKept
                   : options.keep_dirs.empty() && options.clean_dirs.empty()
                       ? CacheState::kUnmanaged
                       : CacheState::kCold;

    auto log = std::make_shared<RunLog>();
    log->matcher = *PhaseMatcher::compile(options.patterns);
    log->echo = options.echo_output;
    if (!options.log_dir.empty()) {
      log->file.open(fs::path(options.log_dir) / fmt::format("run-{}.log", run));
    }
    io::SubprocessOptions spawn;
    spawn.argv = options.command;
    spawn.on_line = [log](const io::OutputLine& line) {
      std::lock_guard lock(log->mu);
      double at = seconds_between(log->start, line.at);
      log->matcher.feed(static_cast<Nanos>(at * 1e9), line.text);
      if (log->file.is_open()) {
        log->file << fmt::format("+{:.3f} {} {}\n", at,
                                 line.stream == io::OutputStream::kStdout ? "out" : "err",
                                 line.text);
      }
      if (log->echo) std::fprintf(stderr, "  | %s\n", line.text.c_str());
    };
    {
      // The launch instant is the origin of every phase; set it before any line can come.
      std::lock_guard lock(log->mu);
      log->start = Clock::now();
    }
    Result<std::unique_ptr<io::Subprocess>> child = io::Subprocess::spawn(std::move(spawn));
    if (!child) return Error(child.error());

    auto deadline = log->start + options.run_timeout;
    result.outcome = "ok";
    while (true) {
      auto probe_budget = std::min<std::chrono::milliseconds>(
          std::chrono::milliseconds(1000),
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
      if (probe_budget.count() > 0 && io::probe_health(*url, probe_budget) == 200) {
        result.health_s = seconds_between(log->start, Clock::now());
        break;
      }
      if (std::optional<io::ExitStatus> status = (*child)->poll()) {
        result.outcome = status->describe() + " before /health answered 200";
        break;
      }
      if (interrupted()) {
        result.outcome = "interrupted";
        break;
      }
      if (Clock::now() >= deadline) {
        result.outcome = fmt::format("timed out after {:.0f} s",
                                     std::chrono::duration<double>(options.run_timeout).count());
        break;
      }
      auto next = std::min(Clock::now() + options.poll_interval, deadline);
      std::this_thread::sleep_until(next);
    }
    // Lines written just before /health came up may still be in the pipe.
    if (result.health_s) {
      auto settle = Clock::now() + std::chrono::milliseconds(300);
      while (Clock::now() < settle) {
        {
          std::lock_guard lock(log->mu);
          if (log->matcher.all_seen()) break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    (*child)->stop(options.stop_grace);
    {
      std::lock_guard lock(log->mu);
      for (const std::optional<Nanos>& d : log->matcher.durations()) {
        result.phase_s.push_back(d ? std::optional<double>(to_seconds(*d)) : std::nullopt);
      }
    }
    if (progress != nullptr) {
      std::fprintf(progress, "run %d/%d (%s): %s\n", run, options.runs,
                   std::string(cache_state_key(result.cache)).c_str(),
                   result.health_s
                       ? fmt::format("time to /health {:.3f} s", *result.health_s).c_str()
                       : result.outcome.c_str());
      std::fflush(progress);
    }
    report.runs.push_back(std::move(result));
  }
  return report;
}

}  // namespace kvgate::coldstart
