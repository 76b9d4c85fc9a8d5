#include "core/route/scrape.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <string_view>

namespace kvgate::route {
namespace {

// Whether `s` is a series of engine core `rank` (vLLM's engine="<rank>"); any series
// when no rank is asked for.
bool of_rank(const metrics::Sample& s, std::optional<uint32_t> rank) {
  if (!rank) return true;
  const std::string* engine = s.label("engine");
  if (!engine) return false;
  uint32_t v = 0;
  auto [end, ec] = std::from_chars(engine->data(), engine->data() + engine->size(), v);
  return ec == std::errc() && end == engine->data() + engine->size() && v == *rank;
}

// Sums (or averages) every series of `name`: one per engine core behind the endpoint
// (only rank `rank`'s when given).
std::optional<double> combine(const metrics::MetricSet& m, std::string_view name, bool mean,
                              std::optional<uint32_t> rank) {
  double sum = 0;
  size_t n = 0;
  for (const metrics::Sample* s : m.all(name)) {
    if (!of_rank(*s, rank)) continue;
    sum += s->value;
    ++n;
  }
  if (n == 0) return std::nullopt;
  return mean ? sum / static_cast<double>(n) : sum;
}

// A gauge as a count: negative or absurd values (a broken exporter) read as 0 or clamp.
uint32_t count(double v) {
  if (!(v > 0)) return 0;
  return v >= 4e9 ? 4'000'000'000u : static_cast<uint32_t>(v);
}

// vLLM's vllm:lora_requests_info: one series per combination of labels ever seen, its
// value the time it was last seen, so the newest series is the current state.
LoraActivity read_lora(const metrics::MetricSet& m) {
  LoraActivity lora;
  const metrics::Sample* newest = nullptr;
  for (const metrics::Sample* s : m.all("vllm:lora_requests_info")) {
    if (!newest || s->value > newest->value) newest = s;
  }
  if (!newest) return lora;
  auto names = [](const std::string* csv, std::vector<std::string>& out) {
    if (!csv) return;
    std::string_view rest = *csv;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string_view name = rest.substr(0, comma);
      if (!name.empty()) out.emplace_back(name);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  };
  names(newest->label("running_lora_adapters"), lora.running);
  names(newest->label("waiting_lora_adapters"), lora.waiting);
  if (const std::string* max = newest->label("max_lora")) {
    uint32_t v = 0;
    auto [end, ec] = std::from_chars(max->data(), max->data() + max->size(), v);
    if (ec == std::errc() && end == max->data() + max->size()) lora.max_loras = v;
  }
  return lora;
}

}  // namespace

Result<ScrapedMetrics> read_scrape(const metrics::MetricSet& m, std::optional<uint32_t> rank) {
  auto waiting = combine(m, "vllm:num_requests_waiting", false, rank);
  auto running = combine(m, "vllm:num_requests_running", false, rank);
  auto usage = combine(m, "vllm:kv_cache_usage_perc", true, rank);
  if (!usage) usage = combine(m, "vllm:gpu_cache_usage_perc", true, rank);
  if (!waiting || !running || !usage) return Error("vllm:num_requests_* or KV usage missing");
  return ScrapedMetrics{.waiting = count(*waiting),
                        .running = count(*running),
                        .kv_usage = std::clamp(*usage, 0.0, 1.0),
                        .lora = read_lora(m)};
}

std::optional<LatencyTotals> read_latency_totals(const metrics::MetricSet& m,
                                                 std::optional<uint32_t> rank) {
  auto sum = [&](std::string_view name) { return combine(m, name, false, rank); };
  LatencyTotals t;
  bool any = false;
  if (auto s = sum("vllm:time_to_first_token_seconds_sum")) {
    t.ttft_sum = *s;
    t.ttft_count = static_cast<uint64_t>(
        std::max(0.0, sum("vllm:time_to_first_token_seconds_count").value_or(0)));
    any = true;
  }
  auto itl = sum("vllm:inter_token_latency_seconds_sum");
  auto itl_count = sum("vllm:inter_token_latency_seconds_count");
  if (!itl) {
    itl = sum("vllm:time_per_output_token_seconds_sum");
    itl_count = sum("vllm:time_per_output_token_seconds_count");
  }
  if (itl) {
    t.itl_sum = *itl;
    t.itl_count = static_cast<uint64_t>(std::max(0.0, itl_count.value_or(0)));
    any = true;
  }
  if (!any) return std::nullopt;
  return t;
}

}  // namespace kvgate::route
