// The admin API's JSON (admin_api.h): what it renders and what it parses.
//
// No I/O and no locking here: admin_api.cc gathers the state (on the pool's strand, and
// from the live feed) into the plain structs below and sends what these functions
// render; request bodies are parsed into config values the pool runtime and the router
// validate once more. Kept apart so that each piece is unit-tested on its own.
//
//   EndpointSnapshot s = ...;               // gathered on the strand
//   boost::json::object o = endpoint_json(s, pool.clock().now());
//   auto next = apply_policy_body(router.config(), body, /*replace=*/false);
//   if (!next) return 400 with next.error();
#pragma once

#include <boost/json/object.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"
#include "core/kv/event_sequencer.h"
#include "core/kv/precise_index.h"
#include "core/route/config.h"
#include "core/route/endpoint.h"
#include "core/route/load.h"
#include "core/route/router.h"
#include "gateway/common/config.h"

namespace kvgate::gateway {

// The circuit breaker of one endpoint (pool_runtime.h).
struct BreakerView {
  bool open = false;
  int consecutive_failures = 0;
  Nanos open_for = 0;  // left until half-open, while open
};

// What the live feed knows about one endpoint's KV event stream (live_feed.h).
struct EventFeedView {
  KvEventsConfig source;     // publisher / replay / topic
  kv::SequenceStats events;  // since the gateway started, across resyncs
  uint64_t resyncs = 0;      // subscriptions made afresh after /metrics came back
};

// The TTFT and ITL history of an endpoint or a pool (LiveFeed::latency_history): the
// mean in seconds per step, oldest first, nullopt for a step without requests.
struct LatencyHistoryView {
  std::vector<std::optional<double>> ttft;
  std::vector<std::optional<double>> itl;
};

// {"ttft_ms":[..],"itl_ms":[..]}: milliseconds to 0.01, null for a step without requests.
boost::json::object latency_history_json(const LatencyHistoryView& h);

// Everything the admin API shows about one endpoint, gathered at one instant.
struct EndpointSnapshot {
  route::Endpoint endpoint;        // spec, health, last scrape, router load
  route::EffectiveLoad effective;  // the load the router believes now (load.h)
  BreakerView breaker;
  size_t precise_blocks = 0;               // blocks held per the KV events (precise index)
  size_t approx_blocks = 0;                // blocks recorded by routing history (approx index)
  kv::EventStats index_events;             // what the precise index made of the events
  std::optional<EventFeedView> kv_events;  // none: no KV events configured
  std::string origin;  // who added it: config, admin, local_actuator, discovery:NAME
  std::optional<LatencyHistoryView> history;  // when asked for (?history=1) and known
};

// {"id":..,"url":..,"role":..,"zone":..,"rack":..,"labels":{..},"kv_capacity_blocks":..,
//  "health":"healthy|unhealthy|draining","breaker":{..},"metrics":{..,"age_ms":..}|null,
//  "load":{..},"effective_load":{..},"cache":{"precise_blocks":..,"approx_blocks":..,
//  "events_applied":{..}},"kv_events":{..}|null,"source":"config|admin|...",
//  "lora":{"max_loras":N|null,"running":[..],"waiting":[..],
//          "placed":{"loaded":[..],"loading":[..]}|null}|null}. `now` dates the metrics' age.
// "lora": the last scrape's vllm:lora_requests_info (max_loras null, the lists empty, when
// the engine did not report it) and the pool's LoRA placement's view (placed, null without
// placement); null when neither is known. With `s.history`, also
// "history":{"ttft_ms":[..],"itl_ms":[..]} (latency_history_json).
boost::json::object endpoint_json(const EndpointSnapshot& s, Nanos now);

// A pool's endpoints added up (GET .../endpoints answers it beside a page of them, so
// that a page of 1,000 endpoints still shows the whole pool).
struct PoolSummary {
  size_t total = 0;
  size_t healthy = 0, unhealthy = 0, draining = 0, standby = 0;
  size_t breakers_open = 0;
  size_t scraped = 0;                 // endpoints with a scrape (the mean KV usage is over these)
  uint64_t waiting = 0, running = 0;  // last scrapes, summed
  double kv_usage_sum = 0;
  uint64_t in_flight = 0;  // the router's
  uint64_t routed_total = 0, failed_total = 0;
  uint64_t precise_blocks = 0, approx_blocks = 0;

  // Adds one endpoint (its state as EndpointSnapshot holds it, without the copy).
  void add(const route::Endpoint& e, bool breaker_open, size_t precise, size_t approx);
};

// {"endpoints":..,"healthy":..,"unhealthy":..,"draining":..,"standby":..,
//  "breakers_open":..,"waiting":..,"running":..,"kv_usage_mean":..|null,"in_flight":..,
//  "routed_total":..,"failed_total":..,"precise_blocks":..,"approx_blocks":..}
boost::json::object summary_json(const PoolSummary& s);

// A request to add an endpoint: {"url":"http://host:port","role":"both|prefill|decode",
// "zone":..,"rack":..,"labels":{..},"kv_capacity_blocks":N,"kv_events":{"publisher":..,
// "replay":..,"topic":..}}. Only url is required. Errors name the field.
struct AddEndpointRequest {
  route::EndpointSpec spec;
  std::optional<KvEventsConfig> kv_events;
};
// `bind_mode`: the pool has kv_events_bind (engines connect to the gateway): a
// publisher is then an error and a topic required, as in the config file.
Result<AddEndpointRequest> parse_add_endpoint(std::string_view body, bool bind_mode);

// The routing parameters as the admin API shows them (GET .../policy):
// {"policy":..,"params":{..},"filters":[..],"overlap":..,"record_decisions":..,
//  "block_size":..,"prefill_tokens_per_second":..,"saturation":{..},"pd":{..},
//  "early_reject":{..}}. Parameters that read as numbers are shown as numbers.
boost::json::object router_config_json(const route::RouterConfig& config);

// A PATCH (replace = false: on top of `current`) or PUT (replace = true: on top of the
// defaults, keeping current's block_size and overlap) body in the shape
// router_config_json renders; nested sections may also be given as dotted keys
// ("saturation.kv_threshold": 0.9). Changing `policy` without `params` starts the new
// policy from its defaults; a param set to null is removed. Read by the router's one
// reader (route::read_router_section) after a JSON check; the result is validate()d;
// the policy's own parameters are checked when the router rebuilds it
// (Router::reconfigure). Errors name the field.
Result<route::RouterConfig> apply_policy_body(const route::RouterConfig& current,
                                              std::string_view body, bool replace);

// The router's view of one prompt (POST .../route):
// {"prompt_tokens":..,"prompt_blocks":..,"block_size":..,"overlap":..,
//  "decision":{"accepted":..,"reason":..,"endpoint":..,"url":..,"prefill_endpoint":..,
//  "matched_blocks":..,"cached_blocks":..,"prefill_tokens":..,"predicted_prefill_ms":..,
//  "cost":..},"endpoints":[{"id":..,"url":..,"health":..,"matched_blocks":..,
//  "cached_blocks":..,"active_prefix_blocks":..,"effective_load":{..},"cost":..|null,
//  "decode_cost":..|null,"terms":{"prefill":..,"decode":..}}]}: `terms` are the parts of
//  `cost` when the policy gives them (kv-cost), else {}. `url_of` names an endpoint id.
boost::json::object explanation_json(
    const route::Explanation& x, uint32_t prompt_tokens, const route::RouterConfig& config,
    const std::function<std::string(route::EndpointId)>& url_of,
    const std::function<route::Health(route::EndpointId)>& health_of);

}  // namespace kvgate::gateway
