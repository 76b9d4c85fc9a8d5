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
  return {};
}

namespace {

Result<double> to_number(std::string_view key, const std::string& text) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) {
    return Error(fmt::format("router: {}: not a number: '{}'", key, text));
  }
  return v;
}

Result<bool> to_bool(std::string_view key, const std::string& text) {
  if (text == "true") return true;
  if (text == "false") return false;
  return Error(fmt::format("router: {}: expected true or false, got '{}'", key, text));
}

Result<uint32_t> to_count(std::string_view key, const std::string& text) {
  auto v = to_number(key, text);
  if (!v) return Error(v.error());
  if (*v < 0 || *v > 4e9 || *v != std::floor(*v)) {
    return Error(fmt::format("router: {}: expected a whole number, got '{}'", key, text));
  }
  return static_cast<uint32_t>(*v);
}

}  // namespace

Result<RouterConfig> parse_router_config(
    std::span<const std::pair<std::string, std::string>> entries) {
  RouterConfig c;
  if (Status s = apply_router_entries(entries, c); !s) return Error(s.error());
  if (Status s = c.validate(); !s) return Error(s.error());
  return c;
}

Status apply_router_entries(std::span<const std::pair<std::string, std::string>> entries,
                            RouterConfig& c) {
  for (const auto& entry : entries) {
    // Named references, not a structured binding: clang 14 (the fuzz build) cannot
    // capture those in the lambdas below.
    const std::string& key = entry.first;
    const std::string& value = entry.second;
    auto number = [&](double& field) -> Status {
      auto v = to_number(key, value);
      if (!v) return Error(v.error());
      field = *v;
      return {};
    };
    auto count = [&](uint32_t& field) -> Status {
      auto v = to_count(key, value);
      if (!v) return Error(v.error());
      field = *v;
      return {};
    };
    auto boolean = [&](bool& field) -> Status {
      auto v = to_bool(key, value);
      if (!v) return Error(v.error());
      field = *v;
      return {};
    };
    Status s;
    if (key == "policy") {
      c.policy.name = value;
    } else if (key.starts_with("policy.")) {
      c.policy.params.emplace_back(key.substr(7), value);
    } else if (key == "filters") {
      c.filters.clear();
      size_t start = 0;
      while (start <= value.size()) {
        size_t comma = value.find(',', start);
        if (comma == std::string::npos) comma = value.size();
        std::string name = value.substr(start, comma - start);
        name.erase(0, name.find_first_not_of(' '));
        name.erase(name.find_last_not_of(' ') + 1);
        if (!name.empty()) c.filters.push_back({name, {}});
        start = comma + 1;
      }
    } else if (key == "overlap_source") {
      auto v = parse_overlap_source(value);
      if (!v)
        return Error(fmt::format(
            "router: overlap_source: expected none|precise|approx|both, got '{}'", value));
      c.overlap_source = *v;
    } else if (key == "record_decisions") {
      s = boolean(c.record_decisions);
    } else if (key == "block_size") {
      s = count(c.block_size);
    } else if (key == "prefill_tokens_per_second") {
      s = number(c.prefill_tokens_per_second);
    } else if (key == "saturation.queue_threshold") {
      s = number(c.saturation.queue_threshold);
    } else if (key == "saturation.kv_threshold") {
      s = number(c.saturation.kv_threshold);
    } else if (key == "saturation.critical_max_waiting") {
      s = count(c.saturation.critical_max_waiting);
    } else if (key == "saturation.shed") {
      s = boolean(c.saturation.shed);
    } else if (key == "saturation.metrics_max_age") {
      double secs = 0;
      s = number(secs);
      c.saturation.metrics_max_age = seconds(secs);
    } else if (key == "pd.mode") {
      auto v = parse_pd_mode(value);
      if (!v) return Error(fmt::format("router: pd.mode: expected auto|off|on, got '{}'", value));
      c.pd.mode = *v;
    } else if (key == "pd.locality_weight") {
      s = number(c.pd.locality_weight);
    } else if (key == "pd.local_prefill_max_tokens") {
      s = count(c.pd.local_prefill_max_tokens);
    } else if (key == "early_reject.enabled") {
      s = boolean(c.early_reject.enabled);
    } else if (key == "early_reject.max_usage") {
      s = number(c.early_reject.max_usage);
    } else if (key == "early_reject.decode_seconds_per_token") {
      s = number(c.early_reject.decode_seconds_per_token);
    } else if (key == "early_reject.predict") {
      s = boolean(c.early_reject.predict);
    } else {
      return Error(fmt::format("router: unknown key '{}'", key));
    }
    if (!s) return s;
  }
  return {};
}

}  // namespace kvgate::route
