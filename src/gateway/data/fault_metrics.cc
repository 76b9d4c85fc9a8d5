#include "gateway/data/fault_metrics.h"

#include "core/metrics/prometheus_text.h"

namespace kvgate::gateway {

void FaultMetrics::cancelled(std::string_view pool, bool after_first_byte) {
  std::lock_guard lock(mu_);
  ++cancellations_[{std::string(pool),
                    after_first_byte ? "after_first_byte" : "before_first_byte"}];
}

void FaultMetrics::migration(std::string_view pool, std::string_view outcome,
                             uint64_t carried_tokens) {
  std::lock_guard lock(mu_);
  ++migrations_[{std::string(pool), std::string(outcome)}];
  migrated_tokens_[std::string(pool)] += carried_tokens;
}

std::string FaultMetrics::render() const {
  std::lock_guard lock(mu_);
  metrics::PrometheusWriter w;
  w.header("kvgate_client_cancellations_total",
           "Requests whose client went away before the answer ended (the upstream exchange "
           "was closed at once), by phase.",
           "counter");
  for (const auto& [k, v] : cancellations_) {
    w.sample("kvgate_client_cancellations_total", {{"pool", k.first}, {"phase", k.second}},
             static_cast<double>(v));
  }
  w.header("kvgate_stream_migrations_total",
           "Streams whose engine failed mid-stream, by what the gateway made of it.", "counter");
  for (const auto& [k, v] : migrations_) {
    w.sample("kvgate_stream_migrations_total", {{"pool", k.first}, {"outcome", k.second}},
             static_cast<double>(v));
  }
  w.header("kvgate_stream_migrated_tokens_total",
           "Tokens already streamed that migrations sent to another endpoint as prompt.",
           "counter");
  for (const auto& [pool, v] : migrated_tokens_) {
    w.sample("kvgate_stream_migrated_tokens_total", {{"pool", pool}}, static_cast<double>(v));
  }
  return w.take();
}

}  // namespace kvgate::gateway
