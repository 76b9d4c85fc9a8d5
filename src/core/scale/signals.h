// PoolSignals: what the autoscaler knows about one pool at one instant.
//
// The caller (the gateway from its endpoint state and scraper, the simulator from its
// model) fills a plain struct and hands it to Autoscaler::decide. Everything here is
// something an inference engine or the gateway itself reports; GPU utilisation is there
// only so the simulator can show why scaling on it fails (see Signal::kGpuUtilization).
//
//   PoolSignals s;
//   s.waiting = 12; s.running = 40; s.kv_usage = 0.7;
//   s.replicas.push_back({.id = "r0", .phase = ReplicaPhase::kReady, .launched_at = 0,
//                         .ready_at = seconds(200)});
//   double per_replica = signal_value(s, Signal::kWaiting);  // 12 / ready replicas
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/time.h"

namespace kvgate::scale {

enum class ReplicaPhase : uint8_t {
  kStarting,  // launched, not yet healthy: no load, no measurements
  kReady,     // serving
  kDraining,  // told to stop taking new requests; leaves the pool when empty
};

// One replica of the pool. Ids are the caller's (endpoint names, pod names).
struct ReplicaSignal {
  std::string id;
  ReplicaPhase phase = ReplicaPhase::kStarting;
  // When the actuator asked for this replica. REQUIRES: the caller reports a replica as
  // kStarting from the moment it is requested, or the autoscaler will ask again.
  Nanos launched_at = 0;
  // When it first passed its health check; meaningful unless phase == kStarting.
  Nanos ready_at = 0;
  // Requests on it (running + waiting): scale-down prefers victims that drain fast.
  uint32_t in_flight = 0;
  // How it started, when the actuator knows: with its compile caches kept (a restart on
  // a node that ran it before) or cold. The horizon policy learns the two apart.
  std::optional<bool> caches_kept;
};

// Latency percentiles observed by the gateway over the last measurement window, seconds.
// `samples == 0` means nothing was measured (the percentiles are then meaningless).
struct LatencySummary {
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double mean = 0;
  uint64_t samples = 0;
};

struct PoolSignals {
  // Sums over the pool's ready replicas (vllm:num_requests_waiting / _running), plus
  // requests the gateway queues for the pool because no replica could take them.
  double waiting = 0;
  double running = 0;
  // Mean KV cache usage of the ready replicas, 0..1 (vllm:kv_cache_usage_perc).
  double kv_usage = 0;
  // Pool throughput over the last window: prompt (prefill) and generated tokens/s.
  double prompt_tokens_per_s = 0;
  double generation_tokens_per_s = 0;
  // Mean prompt and generated length of requests finished in the window (tokens), and
  // the generated length's standard deviation (0: unknown or all alike).
  double mean_prompt_tokens = 0;
  double mean_generation_tokens = 0;
  double generation_tokens_sd = 0;
  // Requests/s arriving for the pool over the last control interval, when the caller
  // counts them (the simulator); without it the horizon policy estimates arrivals as
  // finished requests/s plus the growth of waiting + running.
  std::optional<double> arrival_rate;
  // Requests finished per second over the window (0: derive from the token rates).
  double finished_per_s = 0;
  // Fraction of prompt tokens the engines found in their prefix caches over the window
  // (vllm:prefix_cache_hits_total / _queries_total); nullopt when not measured.
  std::optional<double> prefix_hit_rate;
  LatencySummary ttft;  // time to first token
  LatencySummary itl;   // inter-token latency
  // Mean GPU "utilisation" (fraction of time a kernel runs), 0..1. Only for the
  // gpu-utilization policy, which exists to show why it fails: a decode engine batching
  // 4 requests reads as busy as one batching 40.
  double gpu_utilization = 0;

  std::vector<ReplicaSignal> replicas;

  uint32_t count(ReplicaPhase phase) const;
  uint32_t ready() const { return count(ReplicaPhase::kReady); }
  uint32_t starting() const { return count(ReplicaPhase::kStarting); }
  // Replicas that belong to the pool's future: ready + starting (not draining).
  uint32_t active() const { return ready() + starting(); }
};

// A quantity target tracking can follow.
enum class Signal : uint8_t {
  kWaiting,               // per ready replica
  kRunning,               // per ready replica
  kConcurrency,           // waiting + running, per ready replica (Knative's concurrency)
  kKvUsage,               // pool mean, 0..1
  kPromptTokensPerS,      // per ready replica
  kGenerationTokensPerS,  // per ready replica
  kTtftP50,               // seconds, pool-wide
  kTtftP90,
  kTtftP99,
  kItlP50,
  kItlP90,
  kItlP99,
  kGpuUtilization,  // pool mean, 0..1 — a cautionary signal, see PoolSignals
};

// The signal's value "per replica" as Kubernetes' HPA reads a Pods metric: sums are
// divided by the ready replicas, means and percentiles are taken as they are.
// Returns nullopt when there is no ready replica or (for latencies) no sample.
std::optional<double> signal_value(const PoolSignals& s, Signal signal);

// Names used in configuration: "waiting", "running", "concurrency", "kv_usage",
// "prompt_tokens_per_s", "generation_tokens_per_s", "ttft_p50", "ttft_p90", "ttft_p99", "itl_p50",
// "itl_p90", "itl_p99", "gpu_utilization".
std::string_view signal_name(Signal signal);
std::optional<Signal> parse_signal(std::string_view name);

}  // namespace kvgate::scale
