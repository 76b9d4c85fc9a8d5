#include "core/scale/signals.h"

#include <array>
#include <utility>

namespace kvgate::scale {

uint32_t PoolSignals::count(ReplicaPhase phase) const {
  uint32_t n = 0;
  for (const ReplicaSignal& r : replicas) n += r.phase == phase ? 1 : 0;
  return n;
}

namespace {

constexpr std::array<std::pair<Signal, std::string_view>, 13> kNames = {{
    {Signal::kWaiting, "waiting"},
    {Signal::kRunning, "running"},
    {Signal::kConcurrency, "concurrency"},
    {Signal::kKvUsage, "kv_usage"},
    {Signal::kPromptTokensPerS, "prompt_tokens_per_s"},
    {Signal::kGenerationTokensPerS, "generation_tokens_per_s"},
    {Signal::kTtftP50, "ttft_p50"},
    {Signal::kTtftP90, "ttft_p90"},
    {Signal::kTtftP99, "ttft_p99"},
    {Signal::kItlP50, "itl_p50"},
    {Signal::kItlP90, "itl_p90"},
    {Signal::kItlP99, "itl_p99"},
    {Signal::kGpuUtilization, "gpu_utilization"},
}};

std::optional<double> latency(const LatencySummary& l, double value) {
  if (l.samples == 0) return std::nullopt;
  return value;
}

}  // namespace

std::optional<double> signal_value(const PoolSignals& s, Signal signal) {
  const uint32_t ready = s.ready();
  if (ready == 0) return std::nullopt;
  const double n = ready;
  switch (signal) {
    case Signal::kWaiting:
      return s.waiting / n;
    case Signal::kRunning:
      return s.running / n;
    case Signal::kConcurrency:
      return (s.waiting + s.running) / n;
    case Signal::kKvUsage:
      return s.kv_usage;
    case Signal::kPromptTokensPerS:
      return s.prompt_tokens_per_s / n;
    case Signal::kGenerationTokensPerS:
      return s.generation_tokens_per_s / n;
    case Signal::kTtftP50:
      return latency(s.ttft, s.ttft.p50);
    case Signal::kTtftP90:
      return latency(s.ttft, s.ttft.p90);
    case Signal::kTtftP99:
      return latency(s.ttft, s.ttft.p99);
    case Signal::kItlP50:
      return latency(s.itl, s.itl.p50);
    case Signal::kItlP90:
      return latency(s.itl, s.itl.p90);
    case Signal::kItlP99:
      return latency(s.itl, s.itl.p99);
    case Signal::kGpuUtilization:
      return s.gpu_utilization;
  }
  return std::nullopt;
}

std::string_view signal_name(Signal signal) {
  for (const auto& [sig, name] : kNames) {
    if (sig == signal) return name;
  }
  return "unknown";
}

std::optional<Signal> parse_signal(std::string_view name) {
  for (const auto& [sig, n] : kNames) {
    if (n == name) return sig;
  }
  if (name == "gpu-utilization") return Signal::kGpuUtilization;
  return std::nullopt;
}

}  // namespace kvgate::scale
