// Prometheus text exposition format (version 0.0.4): a writer and a parser.
//
// The writer produces what Prometheus' Python client (and so vLLM) serves on /metrics:
// `# HELP`/`# TYPE` lines per family, counters named `..._total`, histograms as
// cumulative `_bucket{le="..."}` (ending with le="+Inf"), `_sum` and `_count`.
// The parser reads any exposition in that format (the gateway's scraper, tests).
//
//   PrometheusWriter w;
//   w.gauge("vllm:num_requests_running", "Running requests.", labels, 3);
//   std::string body = w.take();
//   Result<MetricSet> m = parse_prometheus_text(body);
//   std::optional<double> v = m->value("vllm:num_requests_running", {{"model_name","m"}});
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/common/result.h"

namespace kvgate::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

// Bucket counts of one histogram series, as the writer needs them.
// bounds are the finite upper bounds in increasing order; counts has bounds.size() + 1
// entries (the last one for +Inf), each the count of its own bucket (not cumulative).
struct HistogramSnapshot {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;
  double sum = 0;
  uint64_t count = 0;
};

class PrometheusWriter {
 public:
  // One family header: `# HELP name help` and `# TYPE name type`.
  void header(std::string_view name, std::string_view help, std::string_view type);
  // One sample line: name{labels} value.
  void sample(std::string_view name, const Labels& labels, double value);

  // Header plus one sample. A counter's name must end in "_total".
  void counter(std::string_view name, std::string_view help, const Labels& labels, double v);
  void gauge(std::string_view name, std::string_view help, const Labels& labels, double v);
  // Header plus the series' buckets, sum and count (use header() + histogram_series()
  // for several label sets in one family).
  void histogram(std::string_view name, std::string_view help, const Labels& labels,
                 const HistogramSnapshot& h);
  void histogram_series(std::string_view name, const Labels& labels, const HistogramSnapshot& h);

  const std::string& text() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// Formats a sample value as Prometheus does: "+Inf", "-Inf", "NaN", or the shortest
// decimal that reads back to the same double.
std::string format_value(double v);

struct Sample {
  std::string name;
  Labels labels;  // in the order they appeared
  double value = 0;
  std::optional<int64_t> timestamp_ms;
  // The value of label `key`, or nullptr.
  const std::string* label(std::string_view key) const;
};

struct MetricFamily {
  std::string name;
  std::string type;  // "counter", "gauge", "histogram", "summary", "untyped"
  std::string help;
};

class MetricSet {
 public:
  std::vector<Sample> samples;
  std::vector<MetricFamily> families;

  // The first sample named `name` whose labels include every pair of `match`.
  const Sample* find(std::string_view name, const Labels& match = {}) const;
  std::optional<double> value(std::string_view name, const Labels& match = {}) const;
  // Every sample named `name` whose labels include `match`.
  std::vector<const Sample*> all(std::string_view name, const Labels& match = {}) const;
  // The declared type of family `name`, or "" if none was declared.
  std::string type_of(std::string_view family) const;
};

// Parses a whole exposition. Errors name the line at fault.
Result<MetricSet> parse_prometheus_text(std::string_view text);

}  // namespace kvgate::metrics
