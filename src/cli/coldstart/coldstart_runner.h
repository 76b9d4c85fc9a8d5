// The measuring loop of `kvgate coldstart`: launch the server command N times, time each
// phase from its log lines and the time to a 200 from /health, stop it, next run.
//
// Cache directories (what the tool does, exactly):
//   - `clean_dirs` are emptied (their contents removed, the directory kept) before every
//     run: every run starts without them.
//   - `keep_dirs` are emptied once, before the first run, unless `clean_first` is false;
//     afterwards they are left as the previous run left them.
//   - A run counts as "caches kept" when every keep dir is non-empty at its launch, as
//     "cold" otherwise. So with keep dirs and a server that fills them, run 1 is cold and
//     runs 2..N are "caches kept" -- the seed's second column. With no cache dir named at
//     all the tool cannot tell, and the runs are just "runs" (CacheState::kUnmanaged).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/coldstart/coldstart_report.h"
#include "core/coldstart/phase_patterns.h"
#include "core/common/result.h"

namespace kvgate::coldstart {

struct RunnerOptions {
  std::vector<std::string> command;  // argv of the server
  int runs = 1;
  std::string health_url;
  std::vector<std::string> clean_dirs;
  std::vector<std::string> keep_dirs;
  bool clean_first = true;
  PatternSet patterns;
  std::chrono::milliseconds run_timeout{std::chrono::minutes(15)};
  std::chrono::milliseconds poll_interval{100};
  std::chrono::milliseconds stop_grace{std::chrono::seconds(10)};
  std::string log_dir;       // if set: run-N.log per run (timestamped server output)
  bool echo_output = false;  // copy the server's lines to stderr as they come
  // When it becomes true (e.g. set by a SIGINT handler) the current server is stopped as
  // after a run, no further run starts, and the runs so far are returned.
  const std::atomic<bool>* interrupted = nullptr;
};

// Runs all runs (a failed run does not stop the others). Errors: bad options (URL, empty
// command, unusable cache dir), a command that cannot be executed. `progress` (may be
// null) gets one line per run.
Result<ColdstartReport> run_coldstart(const RunnerOptions& options, std::FILE* progress);

// Removes everything inside `dir` (keeps `dir`; creates it if missing). Refuses "/" and
// non-directories.
Status empty_directory(const std::string& dir);

}  // namespace kvgate::coldstart
