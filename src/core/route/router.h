// Router: places requests on endpoints. The one object the gateway and the simulator
// both drive.
//
// Owns the EndpointPool; borrows the kv indexes (the KV event subscriber feeds the
// precise one; the router itself feeds the approximate one after each decision). A
// decision runs:
//   1. candidates: healthy endpoints (not draining) of the right role;
//   2. filters from config (e.g. saturation: shed sheddable requests, keep critical
//      ones on endpoints with short queues), each rejection with a reason;
//   3. overlap: match the prompt's keys in the configured index (new endpoints hold
//      nothing), and the blocks the endpoint's in-flight requests already hold;
//   4. the policy's cost and pick; or, for a request of a session bound to a candidate
//      within the load bound (session_affinity.h), that candidate; with latency targets
//      enabled, a request that carries targets goes to the cheapest candidate predicted
//      to meet them (else per the configured action: queue, reject, best effort), and
//      its session stays on its endpoint only when that endpoint is predicted to meet
//      them (else the target rule decides among all the candidates, and the session
//      follows); then, when asked, the runners-up among the candidates left;
//   5. disaggregated pools: the decode endpoint by blocks in use + this request's
//      blocks + rack/zone distance from the prefill endpoint, no overlap credit;
//      remote prefill skipped when little of the prompt is uncached; early rejection
//      when no decode endpoint will have room once the prefill ends.
// commit() then records the request in the pool's load and, when configured, in the
// ApproxIndex and the session table. route() is decide() + commit().
//
//   auto router = Router::create(config, {.precise = &index});
//   if (!router) return Error(router.error());
//   Result<EndpointId> a = (*router)->add_endpoint({.url = "http://a:8000"}, now);
//   Decision d = (*router)->route(request, now, rng);
//   if (!d.accepted()) reply(http_status(d.reason), to_string(d.reason));
//   ... (*router)->on_first_token(request.id, t1);
//   ... (*router)->on_finished(request.id, t2, output_tokens);
//
// Deterministic: the same calls with the same Rng state give the same decisions.
// Thread-safety: none; owned by one strand.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/common/result.h"
#include "core/common/rng.h"
#include "core/common/time.h"
#include "core/kv/approx_index.h"
#include "core/kv/precise_index.h"
#include "core/route/config.h"
#include "core/route/decision.h"
#include "core/route/endpoint_pool.h"
#include "core/route/latency_predictor.h"
#include "core/route/policy.h"
#include "core/route/registry.h"
#include "core/route/request.h"
#include "core/route/session_affinity.h"

namespace kvgate::route {

// One endpoint as a decision saw it (Router::explain): what it holds of the prompt, its
// load, and the cost the policy gave it. A cost is absent when the endpoint was not
// scored at that stage (filtered out, wrong role, rejected before the policy ran, or a
// policy that costs only the candidates it compares, such as power-of-two).
struct CandidateView {
  EndpointId endpoint = 0;
  uint32_t gpu_blocks = 0;     // leading prompt blocks held in GPU memory (the index)
  uint32_t cached_blocks = 0;  // in any tier
  uint32_t active_prefix = 0;  // leading prompt blocks its in-flight requests hold
  EffectiveLoad load;
  std::optional<double> cost;         // whole request, or the prefill stage (disaggregated)
  std::optional<double> decode_cost;  // disaggregated: the decode stage
  std::vector<CostTerm> terms;        // the parts of `cost`, when the policy gives them
};

struct Explanation {
  Decision decision;
  std::vector<CandidateView> endpoints;  // every endpoint of the pool, by id
};

class Router {
 public:
  struct Indexes {
    kv::PreciseIndex* precise = nullptr;  // required for OverlapSource kPrecise / kBoth
    kv::ApproxIndex* approx = nullptr;    // required for kApprox / kBoth; recorded into
                                          // when RouterConfig::record_decisions
  };

  // Validates `config`, builds its filters and policy from `registry` (nullptr: the
  // built-ins). The indexes must outlive the router.
  static Result<std::unique_ptr<Router>> create(RouterConfig config, Indexes indexes,
                                                const Registry* registry = nullptr);
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // Endpoint membership; removal also forgets the endpoint in both indexes.
  Result<EndpointId> add_endpoint(EndpointSpec spec, Nanos now);
  bool remove_endpoint(EndpointId id);

  // Health, metrics and the request lifecycle after routing go straight to the pool.
  EndpointPool& pool() { return pool_; }
  const EndpointPool& pool() const { return pool_; }
  const RouterConfig& config() const { return config_; }
  const Indexes& indexes() const { return indexes_; }
  // The session bindings; null when the config keeps no session affinity.
  const SessionAffinity* sessions() const { return sessions_.get(); }

  // The request lifecycle through the router: the pool's on_first_token / on_finished,
  // and, with latency targets enabled, the predictor learns from the request (aggregated
  // pools): TTFT = first token - routing, TPOT = (end - first token) / (output_tokens -
  // 1), against the features its decision saw (Decision::latency_features). Return what
  // the pool's calls return. pool().on_first_token and on_finished remain for callers
  // that do not feed the predictor.
  bool on_first_token(RequestId id, Nanos now);
  bool on_finished(RequestId id, Nanos now, uint32_t output_tokens);
  // The latency predictor: nullptr unless latency_targets.enabled.
  const LatencyPredictor* predictor() const { return predictor_.get(); }

  // Changes the routing parameters at run time: policy and its parameters, filters,
  // saturation, P/D, early rejection, prefill rate, record_decisions. Validated and
  // built like create() does; on error nothing changes. The endpoints, their load and
  // the indexes stay. Error too when block_size changes (the indexes and the requests
  // in flight are cut in blocks of the old size) or the new overlap_source needs an
  // index the router was not given. The latency predictor keeps what it learned unless
  // its own parameters change (then it starts over from its priors).
  Status reconfigure(RouterConfig config, const Registry* registry = nullptr);

  // Decides without recording anything (but the index match counts as a use for the
  // indexes' LRU/TTL). The overlap comes from the configured index.
  Decision decide(const RouteRequest& request, Nanos now, Rng& rng);
  // Same with the overlap given by the caller instead of an index lookup (tests, or a
  // caller that matched already).
  Decision decide(const RouteRequest& request, std::span<const kv::EndpointMatch> overlap,
                  Nanos now, Rng& rng);
  // Records an accepted decision: the pool starts tracking the request's load, the
  // ApproxIndex learns where its prefix now is, and the request's session (if any, with
  // session affinity on) is bound to the endpoint that serves it. Error for a rejected decision or
  // a request id already in flight.
  Status commit(const RouteRequest& request, const Decision& decision, Nanos now);
  // decide + commit. A commit failure (duplicate id) turns into kDuplicateRequest.
  Decision route(const RouteRequest& request, Nanos now, Rng& rng);

  // The decision decide() would take, and how every endpoint looked to it: its match in
  // the configured index (looked up even when the policy ignores it), load and cost.
  // Records nothing (like decide). For inspection (the admin API), not the hot path.
  Explanation explain(const RouteRequest& request, Nanos now, Rng& rng);

 private:
  Router(RouterConfig config, Indexes indexes);
  // Builds the filters and policy of `config_` into the members below.
  Status build(const Registry* registry);
  // Session affinity: keeps alone the candidate ctx.request.session is bound to when it
  // is within the load bound and, for a request with latency targets (predictor_ on),
  // predicted to meet them: kKept. Otherwise nothing changed, and the outcome says why
  // (kNew: no binding; kMoved*: the bound endpoint could not keep it).
  SessionOutcome keep_session(const RouteContext& ctx, Nanos now);
  // The prompt's match in the configured index, into `out` (cleared first).
  void lookup_overlap(std::span<const kv::BlockKey> keys, Nanos now,
                      std::vector<kv::EndpointMatch>& out);
  // Latency targets: the candidate (index into candidates_) to route ctx.request to,
  // given the policy chose `chosen`: that one if predicted to meet the targets, else the
  // cheapest that is, else per the action (the one predicted nearest the targets, or
  // candidates_.size() to refuse). REQUIRES: predictor_, ctx.request.has_targets().
  size_t meet_targets(const RouteContext& ctx, size_t chosen);
  // The predictor (re)made for config_.latency_targets, keeping it when unchanged.
  void sync_predictor();

  RouterConfig config_;
  Indexes indexes_;
  EndpointPool pool_;
  std::vector<std::unique_ptr<Filter>> filters_;
  std::unique_ptr<Filter> healthy_;
  std::unique_ptr<Policy> policy_;
  std::unique_ptr<SessionAffinity> sessions_;    // with config_.session_affinity.enabled
  std::unique_ptr<LatencyPredictor> predictor_;  // latency_targets.enabled only
  // Scratch reused between decisions (no allocation on the hot path once warm).
  std::vector<kv::EndpointMatch> matches_;
  std::vector<kv::EndpointMatch> approx_matches_;
  std::vector<ActiveBlocks::Prefix> prefixes_;
  std::vector<kv::EndpointMatch> overlap_by_id_;
  std::vector<Candidate> candidates_;
  std::vector<Candidate> decode_candidates_;
  std::vector<double> lateness_;  // meet_targets: per candidate
};

}  // namespace kvgate::route
