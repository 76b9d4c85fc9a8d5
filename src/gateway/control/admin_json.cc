#include "gateway/control/admin_json.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <boost/json.hpp>
#include <charconv>
#include <cmath>

#include "core/route/config_yaml.h"
#include "discovery/endpoint_list.h"
#include "io/http_types.h"

namespace kvgate::gateway {
namespace json = boost::json;

namespace {

double ms(Nanos n) { return static_cast<double>(n) / 1e6; }

// A number as JSON: whole numbers as integers (Boost.JSON writes doubles as 2E0), and
// null for +-infinity or NaN, which JSON cannot express.
json::value num(double v) {
  if (!std::isfinite(v)) return nullptr;
  if (v == std::floor(v) && std::fabs(v) < 9e15) return static_cast<int64_t>(v);
  return v;
}

// A parameter's text as JSON: a number when it reads as one, else the string.
json::value param_value(const std::string& text) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc() && end == text.data() + text.size() && std::isfinite(v)) return num(v);
  return json::value(text);
}

json::object sequence_json(const kv::SequenceStats& s) {
  return {{"batches", s.batches},
          {"next_sequence", s.next_sequence},
          {"gaps", s.gaps},
          {"missed", s.missed},
          {"restarts", s.restarts},
          {"duplicates", s.duplicates},
          {"replays", s.replays},
          {"replayed", s.replayed},
          {"decode_errors", s.decode_errors}};
}

json::array strings(const std::vector<std::string>& v) {
  json::array a;
  for (const std::string& x : v) a.emplace_back(x);
  return a;
}

// The endpoint's LoRA state: what its last scrape reported (vllm:lora_requests_info) and
// what the pool's placement knows it holds; null when neither is known.
json::value lora_json(const route::Endpoint& e) {
  const bool reported = e.metrics && e.metrics->lora.max_loras > 0;
  if (!reported && !e.lora_placed) return nullptr;
  json::object o;
  if (reported) {
    const route::LoraActivity& a = e.metrics->lora;
    o["max_loras"] = a.max_loras;
    o["running"] = strings(a.running);
    o["waiting"] = strings(a.waiting);
  } else {
    o["max_loras"] = nullptr;
    o["running"] = json::array();
    o["waiting"] = json::array();
  }
  if (e.lora_placed) {
    o["placed"] = json::object{{"loaded", strings(e.lora_placed->loaded)},
                               {"loading", strings(e.lora_placed->loading)}};
  } else {
    o["placed"] = nullptr;
  }
  return o;
}

json::object effective_json(const route::EffectiveLoad& l) {
  return {{"waiting", num(l.waiting)},       {"running", num(l.running)},
          {"kv_usage", num(l.kv_usage)},     {"stale", l.stale},
          {"saturation", num(l.saturation)}, {"saturated", l.saturated()}};
}

Result<std::string> string_field(const json::object& o, std::string_view key,
                                 std::string_view field) {
  const json::value* v = o.if_contains(key);
  if (!v) return std::string();
  if (!v->is_string()) return Error(fmt::format("{}: expected a string", field));
  return std::string(v->as_string());
}

Result<json::object> parse_object(std::string_view body) {
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (ec) return Error(fmt::format("body is not valid JSON: {}", ec.message()));
  if (!v.is_object()) return Error("body must be a JSON object");
  return std::move(v.as_object());
}

}  // namespace

json::object endpoint_json(const EndpointSnapshot& s, Nanos now) {
  const route::Endpoint& e = s.endpoint;
  json::object labels;
  for (const auto& [k, v] : e.spec.labels) labels[k] = v;
  json::value metrics = nullptr;
  if (e.metrics) {
    metrics = json::object{{"waiting", e.metrics->waiting},
                           {"running", e.metrics->running},
                           {"kv_usage", num(e.metrics->kv_usage)},
                           {"age_ms", num(ms(now - e.metrics->scraped_at))}};
  }
  json::value events = nullptr;
  if (s.kv_events) {
    json::object o = sequence_json(s.kv_events->events);
    o["resyncs"] = s.kv_events->resyncs;
    o["publisher"] = s.kv_events->source.publisher;
    o["replay"] = s.kv_events->source.replay;
    o["topic"] = s.kv_events->source.topic;
    events = std::move(o);
  }
  const kv::EventStats& ix = s.index_events;
  json::object out{
      {"id", e.id},
      {"url", e.spec.url},
      {"role", std::string(to_string(e.spec.role))},
      {"zone", e.spec.zone},
      {"rack", e.spec.rack},
      {"labels", std::move(labels)},
      {"kv_capacity_blocks", e.spec.kv_capacity_blocks},
      {"source", s.origin},
      {"health", std::string(route::to_string(e.health))},
      {"breaker",
       {{"state", s.breaker.open ? "open" : "closed"},
        {"consecutive_failures", s.breaker.consecutive_failures},
        {"open_for_ms", num(ms(s.breaker.open_for))}}},
      {"metrics", std::move(metrics)},
      {"load",
       {{"in_flight", e.load.in_flight},
        {"active_prefill_tokens", e.load.active_prefill_tokens},
        {"unstarted_since_scrape", e.unstarted_since_scrape},
        {"active_decode_blocks", e.load.active_decode_blocks},
        {"routed_total", e.load.routed_total},
        {"failed_total", e.load.failed_total}}},
      {"effective_load", effective_json(s.effective)},
      {"cache",
       {{"precise_blocks", s.precise_blocks},
        {"approx_blocks", s.approx_blocks},
        {"stored_blocks", ix.stored_blocks},
        {"removed_blocks", ix.removed_blocks},
        {"cleared", ix.cleared},
        {"anomalies", ix.anomalies()}}},
      {"kv_events", std::move(events)},
      {"lora", lora_json(e)},
  };
  if (s.history) out["history"] = latency_history_json(*s.history);
  return out;
}

json::object latency_history_json(const LatencyHistoryView& h) {
  auto series = [](const std::vector<std::optional<double>>& seconds) {
    json::array a;
    a.reserve(seconds.size());
    for (const std::optional<double>& v : seconds) {
      a.push_back(v ? num(std::round(*v * 1e5) / 100) : json::value(nullptr));
    }
    return a;
  };
  return {{"ttft_ms", series(h.ttft)}, {"itl_ms", series(h.itl)}};
}

void PoolSummary::add(const route::Endpoint& e, bool breaker_open, size_t precise, size_t approx) {
  ++total;
  switch (e.health) {
    case route::Health::kHealthy:
      ++healthy;
      break;
    case route::Health::kUnhealthy:
      ++unhealthy;
      break;
    case route::Health::kDraining:
      ++draining;
      break;
    case route::Health::kStandby:
      ++standby;
      break;
  }
  if (breaker_open) ++breakers_open;
  if (e.metrics) {
    ++scraped;
    waiting += e.metrics->waiting;
    running += e.metrics->running;
    kv_usage_sum += e.metrics->kv_usage;
  }
  in_flight += e.load.in_flight;
  routed_total += e.load.routed_total;
  failed_total += e.load.failed_total;
  precise_blocks += precise;
  approx_blocks += approx;
}

json::object summary_json(const PoolSummary& s) {
  return {{"endpoints", s.total},
          {"healthy", s.healthy},
          {"unhealthy", s.unhealthy},
          {"draining", s.draining},
          {"standby", s.standby},
          {"breakers_open", s.breakers_open},
          {"waiting", s.waiting},
          {"running", s.running},
          {"kv_usage_mean", s.scraped > 0 ? num(s.kv_usage_sum / static_cast<double>(s.scraped))
                                          : json::value(nullptr)},
          {"in_flight", s.in_flight},
          {"routed_total", s.routed_total},
          {"failed_total", s.failed_total},
          {"precise_blocks", s.precise_blocks},
          {"approx_blocks", s.approx_blocks}};
}

Result<AddEndpointRequest> parse_add_endpoint(std::string_view body, bool bind_mode) {
  auto parsed = parse_object(body);
  if (!parsed) return Error(parsed.error());
  const json::object& o = *parsed;
  for (const auto& kv : o) {
    static constexpr std::string_view kKnown[] = {
        "url", "role", "zone", "rack", "labels", "kv_capacity_blocks", "kv_events"};
    if (std::find(std::begin(kKnown), std::end(kKnown), kv.key()) == std::end(kKnown)) {
      return Error(fmt::format("{}: unknown field", std::string_view(kv.key())));
    }
  }
  AddEndpointRequest r;
  const json::value* url = o.if_contains("url");
  if (!url) return Error("url: missing");
  if (!url->is_string()) return Error("url: expected a string");
  r.spec.url = std::string(url->as_string());
  while (r.spec.url.ends_with('/')) r.spec.url.pop_back();
  auto u = io::parse_url(r.spec.url);
  if (!u || !r.spec.url.starts_with("http://") || u->target != "/") {
    return Error(fmt::format("url: expected http://host:port, got '{}'", r.spec.url));
  }
  auto role = string_field(o, "role", "role");
  if (!role) return Error(role.error());
  if (!role->empty()) {
    auto parsed_role = route::parse_role(*role);
    if (!parsed_role) return Error("role: expected both, prefill or decode");
    r.spec.role = *parsed_role;
  }
  auto zone = string_field(o, "zone", "zone");
  if (!zone) return Error(zone.error());
  r.spec.zone = *zone;
  auto rack = string_field(o, "rack", "rack");
  if (!rack) return Error(rack.error());
  r.spec.rack = *rack;
  if (const json::value* v = o.if_contains("labels")) {
    if (!v->is_object()) return Error("labels: expected an object of strings");
    for (const auto& kv : v->as_object()) {
      if (!kv.value().is_string()) {
        return Error(fmt::format("labels.{}: expected a string", std::string_view(kv.key())));
      }
      r.spec.labels.emplace_back(std::string(kv.key()), std::string(kv.value().as_string()));
    }
  }
  if (const json::value* v = o.if_contains("kv_capacity_blocks")) {
    auto n = v->is_int64()    ? v->as_int64()
             : v->is_uint64() ? static_cast<int64_t>(v->as_uint64())
                              : -1;
    if (n < 0 || n > (1LL << 31)) {
      return Error("kv_capacity_blocks: expected a whole number in [0, 2147483648]");
    }
    r.spec.kv_capacity_blocks = static_cast<uint32_t>(n);
  }
  if (const json::value* v = o.if_contains("kv_events")) {
    if (!v->is_object()) return Error("kv_events: expected an object");
    const json::object& k = v->as_object();
    KvEventsConfig c;
    for (const auto& kv : k) {
      if (kv.key() != "publisher" && kv.key() != "replay" && kv.key() != "topic") {
        return Error(fmt::format("kv_events.{}: unknown field", std::string_view(kv.key())));
      }
    }
    auto pub = string_field(k, "publisher", "kv_events.publisher");
    auto replay = string_field(k, "replay", "kv_events.replay");
    auto topic = string_field(k, "topic", "kv_events.topic");
    for (auto* f : {&pub, &replay, &topic}) {
      if (!*f) return Error(f->error());
    }
    c.publisher = *pub;
    c.replay = *replay;
    c.topic = *topic;
    if (!bind_mode && c.publisher.empty()) {
      return Error("kv_events.publisher: missing (or set the pool's kv_events_bind)");
    }
    if (bind_mode && !c.publisher.empty()) {
      return Error(
          "kv_events.publisher: not used with the pool's kv_events_bind (engines connect to "
          "the gateway)");
    }
    if (bind_mode && c.topic.empty()) {
      return Error("kv_events.topic: required with the pool's kv_events_bind");
    }
    if (!c.publisher.empty() && !discovery::valid_zmq_url(c.publisher)) {
      return Error("kv_events.publisher: expected tcp://host:port");
    }
    if (!c.replay.empty() && !discovery::valid_zmq_url(c.replay)) {
      return Error("kv_events.replay: expected tcp://host:port");
    }
    r.kv_events = std::move(c);
  }
  return r;
}

json::object router_config_json(const route::RouterConfig& c) {
  json::object params;
  for (const auto& [k, v] : c.policy.params) params[k] = param_value(v);
  json::array filters;
  for (const route::PolicyConfig& f : c.filters) {
    if (f.params.empty()) {
      filters.push_back(json::value(f.name));
    } else {
      json::object fp;
      for (const auto& [k, v] : f.params) fp[k] = param_value(v);
      filters.push_back(json::object{{"name", f.name}, {"params", std::move(fp)}});
    }
  }
  const char* pd_mode = c.pd.mode == route::PdMode::kAuto ? "auto"
                        : c.pd.mode == route::PdMode::kOn ? "on"
                                                          : "off";
  return {
      {"policy", c.policy.name},
      {"params", std::move(params)},
      {"filters", std::move(filters)},
      {"overlap", std::string(route::to_string(c.overlap_source))},
      {"record_decisions", c.record_decisions},
      {"block_size", c.block_size},
      {"prefill_tokens_per_second", num(c.prefill_tokens_per_second)},
      {"saturation",
       {{"queue_threshold", num(c.saturation.queue_threshold)},
        {"kv_threshold", num(c.saturation.kv_threshold)},
        {"critical_max_waiting", c.saturation.critical_max_waiting},
        {"shed", c.saturation.shed},
        {"metrics_max_age", num(to_seconds(c.saturation.metrics_max_age))}}},  // seconds
      {"pd",
       {{"mode", pd_mode},
        {"locality_weight", num(c.pd.locality_weight)},
        {"local_prefill_max_tokens", c.pd.local_prefill_max_tokens}}},
      {"early_reject",
       {{"enabled", c.early_reject.enabled},
        {"max_usage", num(c.early_reject.max_usage)},
        {"decode_seconds_per_token", num(c.early_reject.decode_seconds_per_token)},
        {"predict", c.early_reject.predict}}},
      {"session_affinity",
       {{"enabled", c.session_affinity.enabled},
        {"header", c.session_affinity.header},
        {"capacity", c.session_affinity.capacity},
        {"idle_ttl", num(to_seconds(c.session_affinity.idle_ttl))},  // seconds
        {"max_extra_requests", num(c.session_affinity.max_extra_requests)},
        {"max_load_ratio", num(c.session_affinity.max_load_ratio)}}},
      {"latency_targets",
       {{"enabled", c.latency_targets.enabled},
        {"headroom", num(c.latency_targets.headroom)},
        {"action", std::string(route::to_string(c.latency_targets.action))},
        {"forgetting", num(c.latency_targets.predictor.forgetting)},
        {"min_samples", c.latency_targets.predictor.min_samples},
        {"prior_prefill_tokens_per_second",
         num(c.latency_targets.predictor.prior_prefill_tokens_per_second)},
        {"prior_tpot", num(to_seconds(c.latency_targets.predictor.prior_tpot))}}},  // seconds
  };
}

Result<route::RouterConfig> apply_policy_body(const route::RouterConfig& current,
                                              std::string_view body, bool replace) {
  // A JSON object (checked first, for a clear error), then read as YAML (JSON is YAML)
  // by the router's one reader, the one `kvgate serve` and `kvgate sim` use.
  if (auto parsed = parse_object(body); !parsed) return Error(parsed.error());
  YAML::Node section;
  try {
    section = YAML::Load(std::string(body));
  } catch (const YAML::Exception& e) {
    return Error(std::string("body: ") + e.what());
  }
  // JSON and YAML disagree on a few texts (a body that starts with a bare carriage
  // return is a JSON object but a YAML scalar): refuse what YAML does not read as a map.
  if (!section.IsMap()) return Error("body: must be a JSON object");
  route::RouterConfig c = current;
  if (replace) {
    c = route::RouterConfig{};
    c.overlap_source = current.overlap_source;
  }
  // The block size is the pool's (its indexes and engines share it): shown, not changed.
  c.block_size = current.block_size;
  if (const YAML::Node b = section["block_size"]) {
    if (!b.IsScalar() || b.Scalar() != std::to_string(current.block_size)) {
      return Error(
          fmt::format("block_size: fixed by the pool's block_size ({})", current.block_size));
    }
  }
  if (Status s = route::read_router_section(section, "", c, {"block_size"}); !s) {
    return Error(s.error());
  }
  return c;
}

json::object explanation_json(const route::Explanation& x, uint32_t prompt_tokens,
                              const route::RouterConfig& config,
                              const std::function<std::string(route::EndpointId)>& url_of,
                              const std::function<route::Health(route::EndpointId)>& health_of) {
  const route::Decision& d = x.decision;
  json::object decision{{"accepted", d.accepted()},
                        {"reason", std::string(route::to_string(d.reason))}};
  if (d.accepted()) {
    decision["endpoint"] = d.endpoint;
    decision["url"] = url_of(d.endpoint);
    decision["prefill_endpoint"] =
        d.prefill_endpoint ? json::value(*d.prefill_endpoint) : json::value(nullptr);
    decision["matched_blocks"] = d.matched_blocks;
    decision["cached_blocks"] = d.cached_blocks;
    decision["prefill_tokens"] = d.prefill_tokens;
    decision["predicted_prefill_ms"] = num(ms(d.predicted_prefill));
    decision["cost"] = num(d.cost);
  } else {
    decision["http_status"] = route::http_status(d.reason);
  }
  json::array endpoints;
  for (const route::CandidateView& v : x.endpoints) {
    json::object terms;
    for (const route::CostTerm& t : v.terms) terms[t.name] = num(t.value);
    endpoints.push_back(json::object{
        {"id", v.endpoint},
        {"url", url_of(v.endpoint)},
        {"health", std::string(route::to_string(health_of(v.endpoint)))},
        {"matched_blocks", v.gpu_blocks},
        {"cached_blocks", v.cached_blocks},
        {"active_prefix_blocks", v.active_prefix},
        {"effective_load", effective_json(v.load)},
        {"cost", v.cost ? num(*v.cost) : json::value(nullptr)},
        {"decode_cost", v.decode_cost ? num(*v.decode_cost) : json::value(nullptr)},
        {"terms", std::move(terms)},
    });
  }
  return {{"prompt_tokens", prompt_tokens},
          {"prompt_blocks", d.prompt_blocks},
          {"block_size", config.block_size},
          {"policy", config.policy.name},
          {"overlap", std::string(route::to_string(config.overlap_source))},
          {"decision", std::move(decision)},
          {"endpoints", std::move(endpoints)}};
}

}  // namespace kvgate::gateway
