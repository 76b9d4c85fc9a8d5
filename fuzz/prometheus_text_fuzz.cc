// Prometheus text exposition (core/metrics/prometheus_text.h), as the scraper reads an
// engine's /metrics: any text parses or is an error naming a line; what parses, written
// back by PrometheusWriter, parses again to the same samples (values bit for bit, NaN as
// NaN).
#include <cmath>
#include <cstring>
#include <string>

#include "core/metrics/prometheus_text.h"
#include "fuzz/fuzz_support.h"

namespace {

using namespace kvgate::metrics;

bool same_value(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof a) == 0 || a == b;  // 0 and -0 print alike
}

std::string show(const Sample& s) {
  std::string out = s.name + "{";
  for (const auto& [k, v] : s.labels) out += k + "=[" + v + "]";
  return out + "} " + format_value(s.value);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const kvgate::Result<MetricSet> parsed = parse_prometheus_text(text);
  if (!parsed) {
    KVGATE_FUZZ_CHECK(!parsed.error().empty(), "an error without a message");
    return 0;
  }
  PrometheusWriter w;
  for (const Sample& s : parsed->samples) w.sample(s.name, s.labels, s.value);
  const std::string written = w.take();
  const kvgate::Result<MetricSet> again = parse_prometheus_text(written);
  KVGATE_FUZZ_CHECK(
      static_cast<bool>(again),
      "written text does not parse: " + (again ? std::string() : again.error()) + "\n" + written);
  KVGATE_FUZZ_CHECK(again->samples.size() == parsed->samples.size(), written);
  for (size_t i = 0; i < parsed->samples.size(); ++i) {
    const Sample& a = parsed->samples[i];
    const Sample& b = again->samples[i];
    KVGATE_FUZZ_CHECK(a.name == b.name && a.labels == b.labels && same_value(a.value, b.value),
                      show(a) + " came back as " + show(b));
  }
  return 0;
}
