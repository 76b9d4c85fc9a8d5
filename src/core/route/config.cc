#include "core/route/config.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

namespace kvgate::route {

ParamReader::ParamReader(const PolicyConfig& config)
    : config_(config), used_(config.params.size(), false) {}

double ParamReader::number(std::string_view key, double fallback) {
  double value = fallback;
  for (size_t i = 0; i < config_.params.size(); ++i) {
    if (config_.params[i].first != key) continue;
    used_[i] = true;
    const std::string& text = config_.params[i].second;
    double parsed = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), parsed);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(parsed)) {
      if (error_.empty()) {
        error_ = fmt::format("{}: parameter {}: not a number: '{}'", config_.name, key, text);
      }
    } else {
      value = parsed;
    }
  }
  return value;
}

double ParamReader::number(std::string_view key, double fallback, double lo, double hi) {
  double value = number(key, fallback);
  if ((value < lo || value > hi) && error_.empty()) {
    error_ =
        fmt::format("{}: parameter {} = {} is outside [{}, {}]", config_.name, key, value, lo, hi);
  }
  return value;
}

std::string ParamReader::text(std::string_view key, std::string_view fallback) {
  std::string value(fallback);
  for (size_t i = 0; i < config_.params.size(); ++i) {
    if (config_.params[i].first != key) continue;
    used_[i] = true;
    value = config_.params[i].second;
  }
  return value;
}

Status ParamReader::finish() const {
  if (!error_.empty()) return Error(error_);
  for (size_t i = 0; i < used_.size(); ++i) {
    if (!used_[i]) {
      return Error(
          fmt::format("{}: unknown parameter '{}'", config_.name, config_.params[i].first));
    }
  }
  return {};
}

std::string_view to_string(OverlapSource source) {
  switch (source) {
    case OverlapSource::kNone:
      return "none";
    case OverlapSource::kPrecise:
      return "precise";
    case OverlapSource::kApprox:
      return "approx";
    case OverlapSource::kBoth:
      return "both";
  }
  return "none";
}

std::optional<OverlapSource> parse_overlap_source(std::string_view text) {
  if (text == "none") return OverlapSource::kNone;
  if (text == "precise") return OverlapSource::kPrecise;
  if (text == "approx") return OverlapSource::kApprox;
  if (text == "both") return OverlapSource::kBoth;
  return std::nullopt;
}

std::optional<PdMode> parse_pd_mode(std::string_view text) {
  if (text == "auto") return PdMode::kAuto;
  if (text == "off") return PdMode::kOff;
  if (text == "on") return PdMode::kOn;
  return std::nullopt;
}

std::string_view to_string(SloAction action) {
  switch (action) {
    case SloAction::kQueue:
      return "queue";
    case SloAction::kReject:
      return "reject";
    case SloAction::kBestEffort:
      return "best_effort";
  }
  return "best_effort";
}

std::optional<SloAction> parse_slo_action(std::string_view text) {
  if (text == "queue") return SloAction::kQueue;
  if (text == "reject") return SloAction::kReject;
  if (text == "best_effort") return SloAction::kBestEffort;
  return std::nullopt;
}

Status RouterConfig::validate() const {
  if (policy.name.empty()) return Error("router: policy name is empty");
  if (block_size == 0) return Error("router: block_size must be > 0");
  if (!(prefill_tokens_per_second > 0))
    return Error("router: prefill_tokens_per_second must be > 0");
  if (!(saturation.queue_threshold > 0))
    return Error("router: saturation.queue_threshold must be > 0");
  if (!(saturation.kv_threshold > 0)) return Error("router: saturation.kv_threshold must be > 0");
  if (saturation.metrics_max_age < 0)
    return Error("router: saturation.metrics_max_age must be >= 0");
  if (!(pd.locality_weight >= 0)) return Error("router: pd.locality_weight must be >= 0");
  if (!(early_reject.max_usage > 0)) return Error("router: early_reject.max_usage must be > 0");
  if (!(early_reject.decode_seconds_per_token >= 0)) {
    return Error("router: early_reject.decode_seconds_per_token must be >= 0");
  }
  const SessionAffinityConfig& sa = session_affinity;
  if (sa.header.empty()) return Error("router: session_affinity.header is empty");
  for (char ch : sa.header) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_';
    if (!ok) {
      return Error(
          "router: session_affinity.header must be an HTTP header name (letters, digits, "
          "'-', '_')");
    }
  }
  if (sa.capacity == 0) return Error("router: session_affinity.capacity must be > 0");
  if (sa.idle_ttl < 0) return Error("router: session_affinity.idle_ttl must be >= 0");
  if (!(sa.max_extra_requests >= 0)) {
    return Error("router: session_affinity.max_extra_requests must be >= 0");
  }
  if (!(sa.max_load_ratio >= 1)) {
    return Error("router: session_affinity.max_load_ratio must be >= 1");
  }
  if (!(latency_targets.headroom >= 0))
    return Error("router: latency_targets.headroom must be >= 0");
  if (Status s = latency_targets.predictor.validate(); !s) {
    return Error(fmt::format("router: {}", s.error()));
  }
  return {};
}

}  // namespace kvgate::route
