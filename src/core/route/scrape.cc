#include "core/route/scrape.h"

#include <algorithm>
#include <optional>
#include <string_view>

namespace kvgate::route {
namespace {

// Sums (or averages) every series of `name`: one per engine core behind the endpoint.
std::optional<double> combine(const metrics::MetricSet& m, std::string_view name, bool mean) {
  auto samples = m.all(name);
  if (samples.empty()) return std::nullopt;
  double sum = 0;
  for (const metrics::Sample* s : samples) sum += s->value;
  return mean ? sum / static_cast<double>(samples.size()) : sum;
}

// A gauge as a count: negative or absurd values (a broken exporter) read as 0 or clamp.
uint32_t count(double v) {
  if (!(v > 0)) return 0;
  return v >= 4e9 ? 4'000'000'000u : static_cast<uint32_t>(v);
}

}  // namespace

Result<ScrapedMetrics> read_scrape(const metrics::MetricSet& m) {
  auto waiting = combine(m, "vllm:num_requests_waiting", false);
  auto running = combine(m, "vllm:num_requests_running", false);
  auto usage = combine(m, "vllm:kv_cache_usage_perc", true);
  if (!usage) usage = combine(m, "vllm:gpu_cache_usage_perc", true);
  if (!waiting || !running || !usage) return Error("vllm:num_requests_* or KV usage missing");
  return ScrapedMetrics{.waiting = count(*waiting),
                        .running = count(*running),
                        .kv_usage = std::clamp(*usage, 0.0, 1.0)};
}

}  // namespace kvgate::route
