#include "cli/coldstart/coldstart_command.h"

#include <fmt/format.h>
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>

#include "cli/coldstart/coldstart_runner.h"
#include "core/coldstart/report_render.h"
#include "env/exit_code.h"
#include "env/file.h"

namespace kvgate::coldstart {
namespace {

// Set by SIGINT/SIGTERM: the runner stops the server it is timing and reports what it has.
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free, "used from a signal handler");
extern "C" void on_interrupt(int) { g_interrupted.store(true); }

struct Flags {
  int runs = 3;
  std::string health;
  std::vector<std::string> keep_cache;
  std::vector<std::string> clean_cache;
  bool no_clean_first = false;
  std::string patterns_file;
  std::string preset = "vllm";
  double timeout_s = 900;
  double poll_ms = 100;
  double warn_spread = 0.2;
  std::string out;
  bool echo = false;
  std::vector<std::string> command;
};

Status write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) return Error("cannot write " + path.string());
  return {};
}

int run(const Flags& flags) {
  RunnerOptions options;
  options.command = flags.command;
  options.runs = flags.runs;
  options.health_url = flags.health;
  options.keep_dirs = flags.keep_cache;
  options.clean_dirs = flags.clean_cache;
  options.clean_first = !flags.no_clean_first;
  options.run_timeout = std::chrono::milliseconds(static_cast<int64_t>(flags.timeout_s * 1000));
  options.poll_interval = std::chrono::milliseconds(static_cast<int64_t>(flags.poll_ms));
  options.echo_output = flags.echo;
  if (!flags.out.empty()) options.log_dir = flags.out;
  if (!flags.patterns_file.empty()) {
    Result<std::string> text = env::read_file(flags.patterns_file);
    if (!text) {
      std::fprintf(stderr, "kvgate coldstart: %s\n", text.error().c_str());
      return 2;
    }
    Result<PatternSet> set = parse_patterns_yaml(*text);
    if (!set) {
      std::fprintf(stderr, "kvgate coldstart: %s: %s\n", flags.patterns_file.c_str(),
                   set.error().c_str());
      return 2;
    }
    options.patterns = std::move(*set);
  } else {
    Result<PatternSet> set = preset_patterns(flags.preset);
    if (!set) {
      std::fprintf(stderr, "kvgate coldstart: %s\n", set.error().c_str());
      return 2;
    }
    options.patterns = std::move(*set);
  }

  options.interrupted = &g_interrupted;
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  Result<ColdstartReport> report = run_coldstart(options, stderr);
  if (!report) {
    std::fprintf(stderr, "kvgate coldstart: %s\n", report.error().c_str());
    return 2;
  }
  std::string table = format_table(*report);
  std::fputs(table.c_str(), stdout);
  std::vector<std::string> warnings = spread_warnings(*report, flags.warn_spread);
  for (const std::string& w : warnings) std::fprintf(stdout, "warning: %s\n", w.c_str());
  int failed = 0;
  for (const RunResult& r : report->runs) {
    if (!r.health_s) {
      std::fprintf(stdout, "run %d: %s\n", r.index, r.outcome.c_str());
      ++failed;
    }
  }
  std::fflush(stdout);
  if (!flags.out.empty()) {
    std::filesystem::path dir(flags.out);
    for (const auto& [name, text] : {std::pair<std::string, std::string>{
                                         "coldstart.json", report_json(*report, flags.warn_spread)},
                                     {"coldstart.svg", report_svg(*report)},
                                     {"table.txt", table}}) {
      if (Status s = write_file(dir / name, text); !s) {
        std::fprintf(stderr, "kvgate coldstart: %s\n", s.error().c_str());
        return 2;
      }
    }
    std::fprintf(stderr, "wrote %s/{coldstart.json,coldstart.svg,table.txt,run-N.log}\n",
                 flags.out.c_str());
  }
  if (g_interrupted.load()) return 130;
  return failed == 0 ? 0 : 1;
}

}  // namespace

void add_coldstart_command(CLI::App& app) {
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "coldstart",
      "Start a serving command N times and time each startup phase from its log lines and "
      "the time to a 200 from /health; print median and range per phase (the seed's "
      "cold-start table), write JSON and an SVG chart. Usage: kvgate coldstart --runs 4 "
      "--health http://127.0.0.1:8000/health [options] -- vllm serve MODEL ... Exit code: 0 all "
      "runs reached /health, 1 some did not, 2 usage error, 130 interrupted (SIGINT/SIGTERM: "
      "the server is stopped and the runs so far are reported).");
  cmd->add_option("--runs", flags->runs, "How many times to start the server")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--health", flags->health,
                  "URL polled until it answers 200 (e.g. http://127.0.0.1:8000/health)")
      ->required();
  cmd->add_option("--keep-cache", flags->keep_cache,
                  "Cache directory kept between runs (repeatable): emptied once before run 1 "
                  "(unless --no-clean-first), then left as each run leaves it. A run is "
                  "'caches kept' when all of them are non-empty at its launch, else 'cold'")
      ->allow_extra_args(false);
  cmd->add_option("--clean-cache", flags->clean_cache,
                  "Cache directory emptied before every run (repeatable): each run starts cold")
      ->allow_extra_args(false);
  cmd->add_flag("--no-clean-first", flags->no_clean_first,
                "Do not empty the --keep-cache directories before run 1");
  cmd->add_option("--patterns", flags->patterns_file,
                  "YAML file of phase patterns (overrides --preset; see docs/coldstart.md)");
  cmd->add_option("--preset", flags->preset, "Built-in phase patterns: vllm | kvgate-engine")
      ->check(CLI::IsMember({"vllm", "kvgate-engine"}))
      ->capture_default_str();
  cmd->add_option("--timeout", flags->timeout_s, "Seconds a run may take to answer /health")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--poll-interval", flags->poll_ms, "Milliseconds between /health polls")
      ->check(CLI::Range(1.0, 60000.0))
      ->capture_default_str();
  cmd->add_option("--warn-spread", flags->warn_spread,
                  "Warn when runs differ by more than this fraction of the median")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  cmd->add_option("--out", flags->out,
                  "Directory for coldstart.json, coldstart.svg, table.txt and run-N.log");
  cmd->add_flag("--echo", flags->echo, "Copy the server's output to stderr as it comes");
  cmd->add_option("command", flags->command, "The server command and its arguments, after --")
      ->required();
  cmd->callback([flags] { env::set_exit_code(run(*flags)); });
}

}  // namespace kvgate::coldstart
