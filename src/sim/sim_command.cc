#include "sim/sim_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>

#include "env/exit_code.h"
#include "env/file.h"
#include "sim/cluster_sim.h"
#include "sim/flow_report.h"
#include "sim/scaling_report.h"
#include "sim/warmup_report.h"
#include "workload/pd_load_report.h"
#include "workload/report_files.h"
#include "workload/scenario.h"

namespace kvgate::sim {

using workload::format_table;
using workload::has_pd_samples;
using workload::load_scenario;
using workload::pd_load_table;
using workload::PolicyRun;
using workload::PolicySpec;
using workload::report_files;
using workload::ScenarioResults;
using workload::summarize;
using workload::summarize_pd_load;
using workload::Summary;

namespace {

struct SimArgs {
  std::string scenario;
  std::string out = "sim-out";
  uint64_t seed = 0;
  bool seed_given = false;
  std::string policies;
  bool no_progress = false;
  bool per_request = false;
  uint32_t replicas = 1;
  std::string sync = "on";
  double sync_lag_ms = 0;
  std::string fleet_fairness = "on";
};

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

int run_sim(const SimArgs& args) {
  auto scenario = load_scenario(args.scenario, env::read_file);
  if (!scenario) {
    fmt::print(stderr, "kvgate sim: {}\n", scenario.error());
    return 2;
  }
  const uint64_t seed = args.seed_given ? args.seed : scenario->seed;
  const ReplicaSyncOptions replicas{
      .replicas = args.replicas,
      .sync = args.sync == "on",
      .lag = static_cast<Nanos>(args.sync_lag_ms * static_cast<double>(kMillisecond)),
      .fleet_fairness = args.fleet_fairness == "on"};
  std::vector<const PolicySpec*> chosen;
  if (args.policies.empty()) {
    for (const PolicySpec& p : scenario->policies) chosen.push_back(&p);
  } else {
    for (const std::string& name : split_commas(args.policies)) {
      const PolicySpec* found = scenario->policy(name);
      if (!found) {
        std::string known;
        for (const PolicySpec& p : scenario->policies)
          known += (known.empty() ? "" : ", ") + p.name;
        fmt::print(stderr, "kvgate sim: no policy \"{}\" in the scenario (it has: {})\n", name,
                   known);
        return 2;
      }
      chosen.push_back(found);
    }
  }

  ScenarioResults results;
  results.scenario = scenario->name;
  results.seed = seed;
  fmt::print(stderr, "kvgate sim: {} ({} engines, {} policies, seed {})\n", scenario->name,
             scenario->engine_count(), chosen.size(), seed);
  if (replicas.replicas > 1) {
    fmt::print(stderr, "kvgate sim: {} gateway replicas, sync {}{}{}\n", replicas.replicas,
               args.sync, replicas.sync ? fmt::format(" (lag {} ms)", args.sync_lag_ms) : "",
               replicas.sync && !replicas.fleet_fairness ? ", queues on their own counters" : "");
  }
  for (const PolicySpec* p : chosen) {
    auto run =
        run_policy(*scenario, *p, seed, {.progress = !args.no_progress, .replicas = replicas});
    if (!run) {
      fmt::print(stderr, "kvgate sim: {}\n", run.error());
      return 1;
    }
    results.runs.push_back(std::move(*run));
  }
  // The stages are the workload's; build it once more to read them (cheap).
  if (auto w = workload::make_workload(scenario->workload, seed, env::read_file))
    results.stages = (*w)->stages();
  for (const PolicyRun& run : results.runs)
    results.summaries.push_back(summarize(run, results.stages));

  std::fputs(format_table(scenario->name, results.summaries).c_str(), stdout);
  if (has_pd_samples(results.runs)) {
    std::fputs(
        pd_load_table(summarize_pd_load(results.runs, results.summaries, results.stages)).c_str(),
        stdout);
  }
  for (const Summary& s : results.summaries) {
    const PolicyRun* run = nullptr;
    for (const PolicyRun& r : results.runs) {
      if (r.policy == s.policy) run = &r;
    }
    fmt::print(
        "  {:<14} {:.0f} s simulated in {:.2f} s wall, {:.2f} s CPU ({:.0f}x real time by CPU, "
        "{} events)\n",
        s.policy, to_seconds(run->end_time), run->wall_seconds, run->cpu_seconds, s.speedup_cpu,
        run->events);
  }
  // Multi-tenant workloads: per-tenant latency, service and fairness (flow_report.h).
  if (scenario->workload.kind == workload::WorkloadSpec::Kind::kTenants) {
    std::vector<FlowRunSummary> flow;
    for (const PolicyRun& r : results.runs)
      flow.push_back(summarize_flow(r, scenario->workload.tenants));
    std::fputs(flow_table(flow).c_str(), stdout);
    if (!args.out.empty()) {
      auto written = write_flow_files(results.runs, flow, scenario->workload.tenants, args.out);
      if (!written) {
        fmt::print(stderr, "kvgate sim: {}\n", written.error());
        return 1;
      }
    }
  }
  // Autoscaled runs: SLO attainment and GPU-hours (scaling_report.h).
  bool scaled = false;
  std::string oracle;
  for (const PolicyRun& r : results.runs) scaled = scaled || r.autoscaled;
  for (const PolicySpec* p : chosen) {
    if (p->oracle) oracle = p->name;
  }
  std::vector<ScalingSummary> scaling;
  if (scaled) {
    scaling = summarize_scaling(results.runs, results.stages, scenario->scaling.slo, oracle);
    std::fputs(scaling_table(scaling, scenario->scaling.slo).c_str(), stdout);
  }
  if (!args.out.empty() && scaled) {
    auto written = write_scaling_files(scenario->name, results.runs, scaling, args.out);
    if (!written) {
      fmt::print(stderr, "kvgate sim: {}\n", written.error());
      return 1;
    }
  }
  // Warm-up before traffic: new replicas' first minutes with and without it.
  const bool warmup = std::any_of(chosen.begin(), chosen.end(),
                                  [](const PolicySpec* p) { return p->warmup.enabled; });
  if (scaled && warmup) {
    const Nanos window = scenario->scaling.new_replica_window;
    auto rows = summarize_warmup(results.runs, results.stages, window);
    std::fputs(warmup_table(rows, window).c_str(), stdout);
    if (!args.out.empty()) {
      auto written = write_warmup_files(results.runs, results.stages, rows, window, args.out);
      if (!written) {
        fmt::print(stderr, "kvgate sim: {}\n", written.error());
        return 1;
      }
    }
  }
  if (!args.out.empty()) {
    auto written = env::write_files(args.out, report_files(results, args.per_request));
    if (!written) {
      fmt::print(stderr, "kvgate sim: {}\n", written.error());
      return 1;
    }
    fmt::print("wrote {} files to {}/ (summary.csv, stages.csv, report.json, *.svg)\n",
               written->size(), args.out);
  }
  return 0;
}

}  // namespace

void add_sim_command(CLI::App& app) {
  auto args = std::make_shared<SimArgs>();
  CLI::App* cmd = app.add_subcommand(
      "sim",
      "Discrete-event cluster simulation: run a scenario's routing policies side by side on "
      "the same arrivals (same engine model and router code as `kvgate serve`), print one "
      "table and write CSV, JSON and SVG charts.");
  cmd->add_option("scenario", args->scenario, "Scenario YAML file (see examples/sim/)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--out", args->out,
                  "Directory for summary.csv, stages.csv, report.json and the SVG charts, "
                  "plus pd_load.csv and pd_load_samples.csv for prefill/decode clusters "
                  "(created if needed; empty string: write nothing)")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Random seed (default: the scenario's `seed`)")
      ->each([args](const std::string&) { args->seed_given = true; });
  cmd->add_option("--policies", args->policies,
                  "Comma-separated policy names from the scenario to run (default: all)");
  cmd->add_flag("--no-progress", args->no_progress, "Do not draw the progress bar on stderr");
  cmd->add_flag("--requests-csv", args->per_request,
                "Also write requests.csv with one row per request");
  cmd->add_option("--replicas", args->replicas,
                  "Gateway replicas in front of the fleet, each with its own router; requests "
                  "spread over them at random (docs/replicas.md)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--sync", args->sync,
                  "on: the replicas share their routing events; off: each routes on its own")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--sync-lag-ms", args->sync_lag_ms,
                  "Delay from one replica's decision to its peers applying it")
      ->check(CLI::Range(0.0, 600000.0))
      ->capture_default_str();
  cmd->add_option("--fleet-fairness", args->fleet_fairness,
                  "With sync on and flow control: on, the replicas' queues order tenants by the "
                  "fleet's service; off, each by its own (docs/flow-control.md)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->callback([args] { env::set_exit_code(run_sim(*args)); });
}

}  // namespace kvgate::sim
