// LoadGenerator: sends a `kvgate sim` workload to a live OpenAI-compatible endpoint
// (`kvgate serve`, a vLLM server, any proxy) and measures what a client sees.
//
// The workload is the scenario YAML's `workload:` section, so the same arrivals run in
// the simulator and against a real fleet. Each request streams (`stream_options.
// include_usage`, `ignore_eos` so the answer has exactly the asked length); TTFT is the
// first content chunk, the end is `[DONE]`, and the usage chunk gives prompt, cached
// and completion tokens. The result is a workload::PolicyRun, as a simulated run's, so
// `kvgate bench` prints the same table and plots as `kvgate sim` (workload/report.h).
//
// Prompts are the workload's token ids written as words ("t1234"), one word per token:
// prompts that share token ids share a text prefix, hence a token prefix on the engine.
//
// Time scale: arrivals are multiplied by `time_scale`, and every measured time divided
// by it, so against engines run with the same --time-scale the figures come out in
// unscaled seconds, comparable with the simulator's.
//
// Latency targets: a request the workload gives targets (its `targets:` option) carries
// them as headers (x-kvgate-ttft-ms / x-kvgate-tpot-ms, or llm-d's x-slo-*; the gateway's
// docs/router.md, "Latency targets"), in real milliseconds (the workload's times the time
// scale), and the report measures the share that met them from the TTFT and time per
// output token the client saw, as `kvgate sim` does.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/common/result.h"
#include "workload/report.h"
#include "workload/scenario.h"

namespace kvgate::loadgen {

// Which names a request's latency targets are sent under.
enum class TargetHeaders : uint8_t {
  kKvgate,  // x-kvgate-ttft-ms, x-kvgate-tpot-ms
  kLlmd,    // x-slo-ttft-ms, x-slo-tpot-ms (llm-d's router)
  kNone,    // not sent: the report still measures the workload's targets (a baseline)
};

struct LoadOptions {
  std::string url;      // "http://127.0.0.1:8080"
  std::string api_key;  // sent as Authorization: Bearer
  std::string model;    // empty: the scenario's gateway.model
  bool chat = false;    // /v1/chat/completions instead of /v1/completions
  double time_scale = 1.0;
  uint32_t concurrency = 0;   // 0: open loop at the workload's arrival times; N: N in flight
  uint64_t max_requests = 0;  // 0: the whole workload
  double request_timeout_s = 600;
  std::string label = "live";
  bool progress = true;
  TargetHeaders target_headers = TargetHeaders::kKvgate;
};

struct LoadResult {
  workload::PolicyRun run;
  std::vector<workload::StageInfo> stages;
  uint64_t errors = 0;  // transport errors and statuses other than 200 / 429 / 503
  std::vector<std::string> error_samples;  // the first few, for the user
};

// Runs the whole workload and returns when every request has finished.
Result<LoadResult> run_load(const workload::Scenario& scenario, const LoadOptions& options);

// The prompt text for token ids (exposed for tests).
std::string prompt_text(const std::vector<uint32_t>& tokens);

// The headers carrying a request's latency targets under `names` (none for a request
// without targets, or kNone): each in whole milliseconds of real time, the workload's
// target times `time_scale`, rounded up, at least 1. Exposed for tests.
std::vector<std::pair<std::string, std::string>> target_headers(const workload::WorkloadRequest& r,
                                                                TargetHeaders names,
                                                                double time_scale);

}  // namespace kvgate::loadgen
