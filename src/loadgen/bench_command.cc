#include "loadgen/bench_command.h"

#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "env/exit_code.h"
#include "env/file.h"
#include "loadgen/load_generator.h"
#include "workload/report.h"
#include "workload/report_files.h"
#include "workload/scenario.h"

namespace kvgate::loadgen {
namespace {

struct BenchArgs {
  std::string scenario;
  std::string out;
  LoadOptions load;
  bool no_progress = false;
  std::string target_headers = "kvgate";
};

int run_bench(BenchArgs& args) {
  Result<workload::Scenario> scenario = workload::load_scenario(args.scenario, env::read_file);
  if (!scenario) {
    fmt::print(stderr, "kvgate bench: {}\n", scenario.error());
    return 2;
  }
  args.load.progress = !args.no_progress;
  args.load.target_headers = args.target_headers == "llm-d"  ? TargetHeaders::kLlmd
                             : args.target_headers == "none" ? TargetHeaders::kNone
                                                             : TargetHeaders::kKvgate;
  Result<LoadResult> result = run_load(*scenario, args.load);
  if (!result) {
    fmt::print(stderr, "kvgate bench: {}\n", result.error());
    return 2;
  }
  workload::ScenarioResults report;
  report.scenario = scenario->name;
  report.seed = scenario->seed;
  report.stages = result->stages;
  report.runs.push_back(std::move(result->run));
  report.summaries.push_back(workload::summarize(report.runs.back(), report.stages));
  fmt::print("{}", workload::format_table(report.scenario + " (live: " + args.load.url + ")",
                                          report.summaries));
  if (result->errors > 0) {
    fmt::print(stderr, "kvgate bench: {} request(s) failed; first errors:\n", result->errors);
    for (const auto& e : result->error_samples) fmt::print(stderr, "  {}\n", e);
  }
  if (!args.out.empty()) {
    auto files = env::write_files(args.out, workload::report_files(report, /*per_request=*/true));
    if (!files) {
      fmt::print(stderr, "kvgate bench: {}\n", files.error());
      return 2;
    }
    for (const auto& f : *files) fmt::print("wrote {}\n", f);
  }
  const uint64_t sent = report.runs.back().requests.size();
  return sent > 0 && result->errors == sent ? 1 : 0;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Load generator: send a scenario's workload to a live OpenAI-compatible endpoint and "
      "report TTFT, ITL, throughput and errors (the same table and plots as `kvgate sim`)");
  cmd->add_option("scenario", args->scenario, "Scenario YAML file (its `workload:` is sent)")
      ->required();
  cmd->add_option("--url", args->load.url, "Base URL of the endpoint, e.g. http://127.0.0.1:8080")
      ->required();
  cmd->add_option("--api-key", args->load.api_key, "Sent as Authorization: Bearer KEY");
  cmd->add_option("--model", args->load.model, "Model name (default: the scenario's)");
  cmd->add_flag("--chat", args->load.chat, "Use /v1/chat/completions (default: /v1/completions)");
  cmd->add_option("--time-scale", args->load.time_scale,
                  "Multiply arrival times by this and divide measured times by it (match "
                  "the engines' --time-scale)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--concurrency", args->load.concurrency,
                  "Closed loop with N requests in flight (default 0: open loop at the "
                  "workload's arrival times)");
  cmd->add_option("--max-requests", args->load.max_requests,
                  "Stop after this many requests (default: the whole workload)");
  cmd->add_option("--timeout", args->load.request_timeout_s, "Per-request timeout, seconds");
  cmd->add_option("--label", args->load.label, "Name of this run in the table and plots");
  cmd->add_option("--out", args->out,
                  "Directory for summary.csv, stages.csv, report.json, requests.csv and SVGs");
  cmd->add_option("--target-headers", args->target_headers,
                  "Names the workload's latency targets (its `targets:`) are sent under: "
                  "kvgate (x-kvgate-ttft-ms, x-kvgate-tpot-ms), llm-d (x-slo-ttft-ms, "
                  "x-slo-tpot-ms) or none; the report measures them either way (default kvgate)")
      ->check(CLI::IsMember({"kvgate", "llm-d", "none"}));
  cmd->add_flag("--no-progress", args->no_progress, "Do not draw the progress bar on stderr");
  cmd->callback([args] { env::set_exit_code(run_bench(*args)); });
}

}  // namespace kvgate::loadgen
