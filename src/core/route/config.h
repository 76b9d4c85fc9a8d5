// RouterConfig: everything that shapes routing decisions, read once by
// read_router_section (config_yaml.h) for the gateway, the simulator and the admin API
// alike, or built by hand in tests. Its defaults are the documented ones
// (docs/router.md). A policy's own parameters stay a flat list of
// key/value strings (PolicyConfig::params) that the policy's factory parses and
// validates when the router is built, so a typo is an error at startup, not a silent
// default.
//
//   RouterConfig config;
//   config.policy = {.name = "kv-cost", .params = {{"overlap_weight", "2"}}};
//   config.overlap_source = OverlapSource::kPrecise;
//   auto router = Router::create(config, {.precise = &index});
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/common/result.h"
#include "core/common/time.h"
#include "core/route/latency_predictor.h"

namespace kvgate::route {

// A policy (or filter, or scorer) by name plus its parameters, e.g.
// {"kv-cost", {{"overlap_weight", "2"}, {"temperature", "0"}}}.
struct PolicyConfig {
  std::string name;
  std::vector<std::pair<std::string, std::string>> params;
};

// Reads typed parameters out of a PolicyConfig and remembers which keys were used, so
// that a factory can reject unknown keys:
//
//   ParamReader p(config);
//   double w = p.number("overlap_weight", 1.0);
//   if (Status s = p.finish(); !s) return Error(s.error());
class ParamReader {
 public:
  explicit ParamReader(const PolicyConfig& config);
  // The value of `key` parsed as a number, or `fallback` when absent. A malformed value
  // is remembered and reported by finish().
  double number(std::string_view key, double fallback);
  // Same, and must lie within [lo, hi].
  double number(std::string_view key, double fallback, double lo, double hi);
  std::string text(std::string_view key, std::string_view fallback);
  // Error if a value was malformed or out of range, or a key was never read.
  Status finish() const;

 private:
  const PolicyConfig& config_;
  std::vector<bool> used_;
  std::string error_;
};

// Where the prefix overlap of a request comes from (which kv index the router matches).
enum class OverlapSource : uint8_t {
  kNone,     // no cache knowledge: every endpoint counts as holding nothing
  kPrecise,  // the PreciseIndex fed by the engines' KV events
  kApprox,   // the ApproxIndex fed by the router's own decisions
  kBoth,     // both, per endpoint the larger match (kv::merge_matches)
};
std::string_view to_string(OverlapSource source);
std::optional<OverlapSource> parse_overlap_source(
    std::string_view text);  // none|precise|approx|both

// When an endpoint counts as saturated, and what that means per criticality
// (Gateway API Inference Extension defaults).
struct SaturationConfig {
  // saturation = max(waiting / queue_threshold, kv_usage / kv_threshold); >= 1 saturated.
  double queue_threshold = 5;
  double kv_threshold = 0.8;
  // Critical requests prefer endpoints whose waiting queue is below this; when none
  // is, they go anywhere healthy (a critical request is never shed).
  uint32_t critical_max_waiting = 50;
  // Reject sheddable requests when every candidate is saturated.
  bool shed = true;
  // Scraped metrics older than this count as saturated (the endpoint may be wedged).
  // An endpoint never scraped gets this long after being added. 0 = never stale.
  Nanos metrics_max_age = 5 * kSecond;
};

enum class PdMode : uint8_t {
  kAuto,  // disaggregate when the pool has at least one prefill-role endpoint
  kOff,   // ignore roles: every healthy endpoint serves whole requests
  kOn,    // always disaggregate (reject with no_prefill/no_decode_endpoint if impossible)
};
std::optional<PdMode> parse_pd_mode(std::string_view text);  // auto|off|on

// Disaggregated prefill/decode pairing.
struct PdConfig {
  PdMode mode = PdMode::kAuto;
  // Decode choice: cost = blocks in use + this request's blocks + locality penalty,
  // where the penalty is 0 in the prefill endpoint's rack, locality_weight in its zone
  // but another rack, 2 x locality_weight elsewhere (blocks).
  double locality_weight = 64;
  // Prefill on the decode endpoint itself (no remote prefill, no KV transfer) when
  // fewer than this many of the prompt's tokens are uncached there. 0 = always remote.
  uint32_t local_prefill_max_tokens = 0;
};

// Mooncake-style early rejection (docs/router.md, "Early rejection").
struct EarlyRejectConfig {
  bool enabled = false;
  // A decode endpoint has room when its predicted blocks plus this request's stay at or
  // below this fraction of kv_capacity_blocks.
  double max_usage = 0.95;
  // Predicted time per output token, to tell when a decode finishes (prefill end
  // times come from RouterConfig::prefill_tokens_per_second).
  double decode_seconds_per_token = 0.03;
  // false: judge by the decode load now (requests whose prefill is done; the prefills
  // still running are ignored) instead of the load predicted for when the prefill
  // ends: the naive rule Mooncake shows to oscillate; for experiments and comparisons.
  bool predict = true;
};

// Session affinity (docs/router.md, "Session affinity"): requests that carry a session
// (the gateway reads it from `header`) stay on the endpoint the session was last routed
// to while that endpoint passes the filters and is not much busier than the least busy
// candidate. The load bound is the one SGLang's cache-aware router uses between cache
// affinity and shortest queue, in requests in flight (waiting + running): the session
// leaves its endpoint only when both
//   load(bound) > least + max_extra_requests   and   load(bound) > least * max_load_ratio.
// Otherwise the policy decides and the session is bound to its choice. Aggregated pools
// only; a Responses continuation's endpoint (RouteRequest::preferred) comes first. With
// latency_targets on, a request with targets stays only on an endpoint predicted to meet
// them.
struct SessionAffinityConfig {
  bool enabled = false;
  std::string header = "x-session-id";  // read by the gateway; names are case-insensitive
  uint32_t capacity = 100'000;          // sessions remembered (least recently used go)
  Nanos idle_ttl = 1800 * kSecond;      // a binding unused this long is forgotten; 0: never
  double max_extra_requests = 8;
  double max_load_ratio = 1.5;
};

// What the router does with a request that carries latency targets (RouteRequest's
// ttft_target / tpot_target) when no candidate's prediction meets them.
enum class SloAction : uint8_t {
  kQueue,       // refuse it `saturated`: the flow-control queue holds it until an
                // endpoint has capacity, and then it goes where predicted fastest
  kReject,      // refuse it `slo_unattainable` (429), before it costs anything
  kBestEffort,  // route it to the endpoint predicted fastest against its targets
};
std::string_view to_string(SloAction action);
std::optional<SloAction> parse_slo_action(std::string_view text);  // queue|reject|best_effort

// Latency-target routing (docs/router.md, "Latency targets"): a per-endpoint predictor
// (latency_predictor.h) learns TTFT and TPOT online; a request with targets goes to the
// cheapest candidate (by the policy's cost) whose prediction meets them with headroom.
// Requests without targets route as without it. Aggregated pools only for now: in a
// disaggregated pool the targets are ignored.
struct LatencyTargetsConfig {
  bool enabled = false;
  // A prediction meets a target when prediction x (1 + headroom) <= target.
  double headroom = 0.1;
  SloAction action = SloAction::kBestEffort;
  LatencyPredictorConfig predictor;
};

struct RouterConfig {
  PolicyConfig policy{"kv-cost", {}};
  // Filters applied in order before the policy, by name (see registry.h): "healthy"
  // (always applied first, listed or not), "saturation" (criticality/shedding).
  std::vector<PolicyConfig> filters{{"saturation", {}}};
  // The router's own history by default: it works without KV events configured.
  OverlapSource overlap_source = OverlapSource::kApprox;
  // After each accepted decision, record it in the ApproxIndex (when the router has
  // one), so that history-based overlap learns from it.
  bool record_decisions = true;
  uint32_t block_size = 16;  // tokens per KV block; must match the indexes and engines
  // For predicted_prefill and early rejection (prefill end time).
  double prefill_tokens_per_second = 10'000;
  SaturationConfig saturation;
  PdConfig pd;
  EarlyRejectConfig early_reject;
  SessionAffinityConfig session_affinity;
  LatencyTargetsConfig latency_targets;

  // Error naming the first field that is out of range.
  Status validate() const;
};

}  // namespace kvgate::route
