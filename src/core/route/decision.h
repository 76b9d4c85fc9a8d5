// Decision: what route() answers, and why a request was turned away.
//
// Every rejection carries a RejectReason: a stable snake_case code for logs, metrics
// labels and the error body, and the HTTP status the gateway answers with.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/common/time.h"
#include "core/kv/prefix_index.h"
#include "core/route/latency_predictor.h"

namespace kvgate::route {

enum class RejectReason : uint8_t {
  kNone,                // accepted
  kNoEndpoints,         // the pool is empty
  kNoHealthyEndpoints,  // every endpoint is unhealthy or draining
  kSaturated,           // sheddable request and every candidate is saturated (shed)
  kNoPrefillEndpoint,   // disaggregated: no healthy endpoint can prefill
  kNoDecodeEndpoint,    // disaggregated: no healthy endpoint can decode
  kDecodeFull,          // early rejection: no decode endpoint will have room when this
                        // request's prefill ends
  kDuplicateRequest,    // a request with this id is already in flight
  kSloUnattainable,     // latency targets: no candidate is predicted to meet them and
                        // the configured action is reject
};

// What session affinity made of a request that carries a session (RouteRequest::session),
// in a pool that keeps session affinity; kNone for every other request (no session,
// affinity off, a disaggregated pool, a request sent to a preferred endpoint).
enum class SessionOutcome : uint8_t {
  kNone,
  kNew,               // the session had no binding (its first turn, or evicted, or expired)
  kKept,              // it stayed on the endpoint it is bound to
  kMovedLoad,         // that endpoint was over the load bound: the policy chose
  kMovedUnavailable,  // that endpoint was no candidate (unhealthy, draining, held, filtered
                      // out, excluded by a retry, or no room): the policy chose
  kMovedTarget,       // that endpoint was predicted to miss the request's latency targets
};

// "none", "new", "kept", "moved_load", "moved_unavailable", "moved_target".
std::string_view to_string(SessionOutcome outcome);

// "ok", "no_endpoints", "no_healthy_endpoints", "saturated", "no_prefill_endpoint",
// "no_decode_endpoint", "decode_full", "duplicate_request", "slo_unattainable".
std::string_view to_string(RejectReason reason);

// The status the gateway answers a rejection with: 429 for load shedding and early
// rejection and unattainable latency targets (come back later), 503 when there is nothing to route
// to, 409 duplicate.
int http_status(RejectReason reason);

struct Decision {
  RejectReason reason = RejectReason::kNone;
  bool accepted() const { return reason == RejectReason::kNone; }

  // The endpoint that serves the request: generates its tokens (in a disaggregated
  // deployment, the decode endpoint). Meaningless when rejected.
  kv::EndpointId endpoint = 0;
  // Disaggregated only: the endpoint that computes the prompt's KV and hands it to
  // `endpoint`. nullopt: `endpoint` prefills itself (aggregated, or the remote prefill
  // was skipped because nearly all of the prompt is cached there).
  std::optional<kv::EndpointId> prefill_endpoint;

  // Of the prompt's full blocks, how many the prefilling endpoint holds in GPU memory
  // (matched) and in any tier (cached, >= matched), per the index the router consults.
  uint32_t matched_blocks = 0;
  uint32_t cached_blocks = 0;
  uint32_t prompt_blocks = 0;   // full blocks of the prompt (keys.size())
  uint32_t prefill_tokens = 0;  // tokens the prefilling endpoint has to compute
  Nanos predicted_prefill = 0;  // predicted time until the prefill is done (queue +
                                // this request), from RouterConfig's prefill rate
  double cost = 0;              // the winner's cost under the policy (lower is better;
                                // score-based policies report -score)
  SessionOutcome session = SessionOutcome::kNone;  // what session affinity made of it
  // Session affinity chose `endpoint` (the policy did not).
  bool session_kept() const { return session == SessionOutcome::kKept; }

  // When RouteRequest::runners_up asks: the next best candidates after `endpoint`, best
  // first, by the cost the policy gave them (for a disaggregated pool, the decode stage's
  // cost). Only candidates the policy costed count: one that compares two at random
  // (power-of-two) lists at most the one it did not take.
  static constexpr size_t kMaxRunnersUp = 4;
  std::array<kv::EndpointId, kMaxRunnersUp> runners_up{};
  uint8_t runner_count = 0;

  // Latency targets enabled (RouterConfig::latency_targets), aggregated pools: what the
  // predictor saw of the chosen endpoint and predicted there. Router::commit keeps the
  // features with the request, and Router::on_first_token / on_finished teach the
  // predictor with them. nullopt otherwise.
  std::optional<LatencyFeatures> latency_features;
  LatencyPrediction predicted_latency;
};

}  // namespace kvgate::route
