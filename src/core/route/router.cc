#include "core/route/router.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvgate::route {

Router::Router(RouterConfig config, Indexes indexes)
    : config_(std::move(config)), indexes_(indexes), pool_(config_.block_size) {}
Router::~Router() = default;

namespace {

Status check_indexes(const RouterConfig& config, const Router::Indexes& indexes) {
  const OverlapSource src = config.overlap_source;
  if ((src == OverlapSource::kPrecise || src == OverlapSource::kBoth) && !indexes.precise) {
    return Error(fmt::format("router: overlap_source {} needs a precise index", to_string(src)));
  }
  if ((src == OverlapSource::kApprox || src == OverlapSource::kBoth) && !indexes.approx) {
    return Error(
        fmt::format("router: overlap_source {} needs an approximate index", to_string(src)));
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<Router>> Router::create(RouterConfig config, Indexes indexes,
                                               const Registry* registry) {
  if (Status s = config.validate(); !s) return Error(s.error());
  if (Status s = check_indexes(config, indexes); !s) return Error(s.error());
  std::unique_ptr<Router> router(new Router(std::move(config), indexes));
  if (Status s = router->build(registry); !s) return Error(s.error());
  const SessionAffinityConfig& sa = router->config_.session_affinity;
  if (sa.enabled) router->sessions_ = std::make_unique<SessionAffinity>(sa.capacity, sa.idle_ttl);
  router->sync_predictor();
  return router;
}

void Router::sync_predictor() {
  const LatencyTargetsConfig& t = config_.latency_targets;
  if (!t.enabled) {
    predictor_.reset();
  } else if (!predictor_ || !(predictor_->config() == t.predictor)) {
    predictor_ = std::make_unique<LatencyPredictor>(t.predictor);
  }
}

Status Router::build(const Registry* registry) {
  Registry builtins;
  if (!registry) {
    register_builtins(builtins);
    registry = &builtins;
  }
  auto policy = registry->make_policy(config_.policy);
  if (!policy) return Error(fmt::format("router: {}", policy.error()));
  auto healthy = registry->make_filter({"healthy", {}});
  if (!healthy) return Error(fmt::format("router: {}", healthy.error()));
  std::vector<std::unique_ptr<Filter>> filters;
  for (const PolicyConfig& f : config_.filters) {
    if (f.name == "healthy" && f.params.empty()) continue;  // always applied first
    auto filter = registry->make_filter(f);
    if (!filter) return Error(fmt::format("router: {}", filter.error()));
    filters.push_back(std::move(*filter));
  }
  policy_ = std::move(*policy);
  healthy_ = std::move(*healthy);
  filters_ = std::move(filters);
  return {};
}

Status Router::reconfigure(RouterConfig config, const Registry* registry) {
  if (Status s = config.validate(); !s) return s;
  if (config.block_size != config_.block_size) {
    return Error(fmt::format("router: block_size cannot change at run time ({} -> {})",
                             config_.block_size, config.block_size));
  }
  if (Status s = check_indexes(config, indexes_); !s) return s;
  // Build into a scratch router first, so that a bad policy or filter changes nothing.
  Router trial(config, indexes_);
  if (Status s = trial.build(registry); !s) return s;
  config_ = std::move(trial.config_);
  policy_ = std::move(trial.policy_);
  healthy_ = std::move(trial.healthy_);
  filters_ = std::move(trial.filters_);
  // The bindings stay unless the table's size changes (or affinity is turned off).
  const SessionAffinityConfig& sa = config_.session_affinity;
  if (!sa.enabled) {
    sessions_.reset();
  } else if (!sessions_ || sessions_->capacity() != sa.capacity) {
    sessions_ = std::make_unique<SessionAffinity>(sa.capacity, sa.idle_ttl);
  } else {
    sessions_->set_idle_ttl(sa.idle_ttl);
  }
  sync_predictor();
  return {};
}

Result<EndpointId> Router::add_endpoint(EndpointSpec spec, Nanos now) {
  auto id = pool_.add(std::move(spec), now);
  if (!id) return id;
  // A reused id must not inherit what its previous owner held.
  if (indexes_.precise) indexes_.precise->remove_endpoint(*id);
  if (indexes_.approx) indexes_.approx->remove_endpoint(*id);
  if (predictor_) predictor_->forget(*id);
  return id;
}

bool Router::remove_endpoint(EndpointId id) {
  if (!pool_.remove(id)) return false;
  if (indexes_.precise) indexes_.precise->remove_endpoint(id);
  if (indexes_.approx) indexes_.approx->remove_endpoint(id);
  if (sessions_) sessions_->forget_endpoint(id);  // its id may be reused
  if (predictor_) predictor_->forget(id);
  return true;
}

bool Router::on_first_token(RequestId id, Nanos now) {
  if (predictor_) {
    const TrackedRequest* r = pool_.request(id);
    if (r && r->latency_features && !r->first_token_at) {
      predictor_->observe_ttft(r->endpoint, *r->latency_features, now - r->routed_at);
    }
  }
  return pool_.on_first_token(id, now);
}

bool Router::on_finished(RequestId id, Nanos now, uint32_t output_tokens) {
  if (predictor_) {
    const TrackedRequest* r = pool_.request(id);
    if (r && r->latency_features && r->first_token_at && output_tokens >= 2) {
      const Nanos decode = now - *r->first_token_at;
      predictor_->observe_tpot(r->endpoint, *r->latency_features,
                               decode / static_cast<Nanos>(output_tokens - 1));
    }
  }
  return pool_.on_finished(id, now);
}

void Router::lookup_overlap(std::span<const kv::BlockKey> keys, Nanos now,
                            std::vector<kv::EndpointMatch>& out) {
  out.clear();
  if (keys.empty()) return;
  switch (config_.overlap_source) {
    case OverlapSource::kNone:
      break;
    case OverlapSource::kPrecise:
      indexes_.precise->match(keys, now, out);
      break;
    case OverlapSource::kApprox:
      indexes_.approx->match(keys, now, out);
      break;
    case OverlapSource::kBoth:
      indexes_.precise->match(keys, now, out);
      approx_matches_.clear();
      indexes_.approx->match(keys, now, approx_matches_);
      kv::merge_matches(out, approx_matches_);
      break;
  }
}

Decision Router::decide(const RouteRequest& request, Nanos now, Rng& rng) {
  matches_.clear();
  const bool need_overlap = policy_->uses_overlap() || config_.pd.local_prefill_max_tokens > 0 ||
                            config_.early_reject.enabled;
  if (need_overlap) lookup_overlap(request.keys, now, matches_);
  return decide(request, matches_, now, rng);
}

namespace {

// Blocks a decode endpoint has in use: the router's count, or what the scrape shows
// when that is more (other routers' load).
double decode_blocks_in_use(const Candidate& c) {
  double blocks = static_cast<double>(c.endpoint->load.active_decode_blocks);
  if (c.endpoint->spec.kv_capacity_blocks > 0) {
    blocks = std::max(blocks, c.load.kv_usage * c.endpoint->spec.kv_capacity_blocks);
  }
  return blocks;
}

// LoRA affinity, three tiers: where `adapter` is held (its requests run or wait there per
// the scrape, or the placement loaded it there), else where a slot is free, else every
// candidate (each must evict another adapter); the policy picks among the tier kept.
// Runs after the filters, so a holder the saturation filter dropped cannot trap the
// adapter's requests. An endpoint not scraped yet counts as having a free slot.
enum class LoraTier : uint8_t { kHolds, kFreeSlot, kEvicts };

LoraTier lora_tier(std::string_view adapter, const Candidate& x) {
  const std::optional<ScrapedMetrics>& m = x.endpoint->metrics;
  if (m && m->lora.active(adapter)) return LoraTier::kHolds;
  if (x.endpoint->lora_placed && x.endpoint->lora_placed->has(adapter)) return LoraTier::kHolds;
  return !m || m->lora.has_free_slot() ? LoraTier::kFreeSlot : LoraTier::kEvicts;
}

void keep_lora_tier(std::string_view adapter, std::vector<Candidate>& c) {
  LoraTier best = LoraTier::kEvicts;
  for (const Candidate& x : c) {
    best = std::min(best, lora_tier(adapter, x));
    if (best == LoraTier::kHolds) break;
  }
  if (best == LoraTier::kEvicts) return;  // every one must evict: the policy decides
  std::erase_if(c, [&](const Candidate& x) { return lora_tier(adapter, x) != best; });
}

// LoRA placement: an adapter's request goes only where the placement loaded it, while
// some candidate has it; else only where its load is in flight (the request then waits
// in the engine's queue behind the load, as vLLM queues a request for an adapter it is
// adding); else the candidates stay as they are (a pool without placement sets no
// endpoint's lora_placed, so nothing changes there). Endpoints the placement has not
// described yet (just added) hold nothing.
void keep_lora_placed(std::string_view adapter, std::vector<Candidate>& c) {
  auto placed = [adapter](const Candidate& x) {
    return x.endpoint->lora_placed && x.endpoint->lora_placed->has(adapter);
  };
  auto loading = [adapter](const Candidate& x) {
    return x.endpoint->lora_placed && x.endpoint->lora_placed->is_loading(adapter);
  };
  if (std::any_of(c.begin(), c.end(), placed)) {
    std::erase_if(c, [&](const Candidate& x) { return !placed(x); });
  } else if (std::any_of(c.begin(), c.end(), loading)) {
    std::erase_if(c, [&](const Candidate& x) { return !loading(x); });
  }
}

// What the latency predictor knows of candidate `c` for this request: with the prefill
// queued there, how long the endpoint has been computing that queue since it last moved
// (its position: what is left of it ahead of this request).
LatencyFeatures latency_features(const RouteContext& ctx, const Candidate& c) {
  const RouterLoad& load = c.endpoint->load;
  const Nanos elapsed = load.active_prefill_tokens > 0 && ctx.now > load.prefill_moved_at
                            ? ctx.now - load.prefill_moved_at
                            : 0;
  return {.prefill_tokens = static_cast<double>(ctx.uncached_tokens(c)),
          .queued_prefill_tokens = static_cast<double>(load.active_prefill_tokens),
          .prefill_elapsed = to_seconds(elapsed),
          .waiting = c.load.waiting,
          .running = c.load.running,
          .kv_usage = c.load.kv_usage};
}

// A cost to compare by: a candidate the policy did not cost (NaN) comes last.
double comparable_cost(const Candidate& c) {
  return std::isnan(c.cost) ? std::numeric_limits<double>::infinity() : c.cost;
}

// Latency targets: the largest of prediction x (1 + headroom) / target over the targets
// `r` sets; <= 1 meets them.
double lateness(const RouteRequest& r, double headroom, const LatencyPrediction& p) {
  const double margin = 1 + headroom;
  double x = 0;
  if (r.ttft_target > 0) {
    x = std::max(x, static_cast<double>(p.ttft) * margin / static_cast<double>(r.ttft_target));
  }
  if (r.tpot_target > 0) {
    x = std::max(x, static_cast<double>(p.tpot) * margin / static_cast<double>(r.tpot_target));
  }
  return x;
}

// Rack/zone distance in units of locality_weight: same rack 0, same zone 1, else 2.
// An empty rack or zone never matches anything.
int distance(const Endpoint& a, const Endpoint& b) {
  if (!a.spec.zone.empty() && a.spec.zone == b.spec.zone) {
    return !a.spec.rack.empty() && a.spec.rack == b.spec.rack ? 0 : 1;
  }
  return 2;
}

// Decision::runners_up: of the candidates but the winner `won`, those the policy costed,
// lowest cost first (ties: the lower id, as the candidates are in id order); up to `want`.
void rank_runners_up(std::span<const Candidate> c, size_t won, uint8_t want, Decision& d) {
  d.runner_count = 0;
  const size_t n = std::min<size_t>(want, Decision::kMaxRunnersUp);
  while (static_cast<size_t>(d.runner_count) < n) {
    const auto listed = d.runners_up.begin() + d.runner_count;
    const Candidate* best = nullptr;
    for (size_t i = 0; i < c.size(); ++i) {
      if (i == won || std::isnan(c[i].cost)) continue;
      if (std::find(d.runners_up.begin(), listed, c[i].endpoint->id) != listed) continue;
      if (!best || c[i].cost < best->cost) best = &c[i];
    }
    if (!best) break;
    d.runners_up[d.runner_count++] = best->endpoint->id;
  }
}

}  // namespace

Decision Router::decide(const RouteRequest& request, std::span<const kv::EndpointMatch> overlap,
                        Nanos now, Rng& rng) {
  Decision d;
  d.prompt_blocks = static_cast<uint32_t>(request.keys.size());
  if (pool_.size() == 0) {
    d.reason = RejectReason::kNoEndpoints;
    return d;
  }
  bool has_prefill_role = false;
  for (EndpointId id : pool_.ids()) has_prefill_role |= pool_.get(id)->spec.role == Role::kPrefill;
  const bool disaggregated =
      config_.pd.mode == PdMode::kOn || (config_.pd.mode == PdMode::kAuto && has_prefill_role);

  RouteContext ctx{request, config_, pool_, now};
  ctx.block_size = config_.block_size;
  ctx.request_blocks = pool_.request_blocks(request.prompt_tokens, request.expected_output_tokens,
                                            request.keys.size());

  // Every endpoint as a candidate, with its overlap and active prefix.
  candidates_.clear();
  overlap_by_id_.assign(pool_.ids().back() + 1, kv::EndpointMatch{0, 0, 0});
  for (const kv::EndpointMatch& m : overlap) {
    if (m.endpoint < overlap_by_id_.size()) overlap_by_id_[m.endpoint] = m;
  }
  prefixes_.clear();
  if (!request.keys.empty() && (policy_->uses_overlap()))
    pool_.active_prefix(request.keys, prefixes_);
  for (EndpointId id : pool_.ids()) {
    const Endpoint* e = pool_.get(id);
    Candidate c;
    c.endpoint = e;
    c.cost = std::numeric_limits<double>::quiet_NaN();  // until the policy costs it
    c.load = effective_load(*e, now, config_.saturation);
    const uint32_t n = d.prompt_blocks;
    c.gpu_blocks = std::min(overlap_by_id_[id].gpu_blocks, n);
    c.cached_blocks = std::max(c.gpu_blocks, std::min(overlap_by_id_[id].total_blocks, n));
    c.disk_blocks = std::min(overlap_by_id_[id].disk_blocks, c.cached_blocks - c.gpu_blocks);
    candidates_.push_back(c);
  }
  for (const ActiveBlocks::Prefix& p : prefixes_) {
    // candidates_ is in id order, ids ascending: find by binary search.
    auto it =
        std::lower_bound(candidates_.begin(), candidates_.end(), p.endpoint,
                         [](const Candidate& c, EndpointId id) { return c.endpoint->id < id; });
    if (it != candidates_.end() && it->endpoint->id == p.endpoint) it->active_prefix = p.blocks;
  }

  auto predicted_prefill = [&](const Candidate& prefiller) {
    const double tokens = static_cast<double>(prefiller.endpoint->load.active_prefill_tokens) +
                          ctx.uncached_tokens(prefiller);
    return seconds(tokens / config_.prefill_tokens_per_second);
  };
  // Early rejection: keep the decode candidates that will have room for this request
  // when its prefill (on `prefiller`, or on the candidate itself when null) ends.
  auto keep_with_room = [&](std::vector<Candidate>& c, const Candidate* prefiller) {
    const EarlyRejectConfig& er = config_.early_reject;
    if (!er.enabled) return;
    std::erase_if(c, [&](const Candidate& x) {
      const uint32_t capacity = x.endpoint->spec.kv_capacity_blocks;
      if (capacity == 0) return false;
      const double predicted =
          er.predict ? pool_.predicted_decode_blocks(
                           x.endpoint->id, now + predicted_prefill(prefiller ? *prefiller : x),
                           er.decode_seconds_per_token)
                     : pool_.decode_blocks_now(x.endpoint->id);
      return predicted + ctx.request_blocks > er.max_usage * capacity;
    });
  };
  auto run_filters = [&](std::vector<Candidate>& c, RejectReason if_none_healthy) {
    RejectReason r = healthy_->apply(ctx, c);
    if (r != RejectReason::kNone) return if_none_healthy;
    for (auto& f : filters_) {
      r = f->apply(ctx, c);
      if (r != RejectReason::kNone) return r;
      if (c.empty()) return RejectReason::kNoHealthyEndpoints;  // a filter broke its contract
    }
    return RejectReason::kNone;
  };
  auto fill = [&](const Candidate& prefiller) {
    d.matched_blocks = prefiller.gpu_blocks;
    d.cached_blocks = prefiller.cached_blocks;
    d.prefill_tokens = ctx.uncached_tokens(prefiller);
    d.predicted_prefill = predicted_prefill(prefiller);
  };
  // Latency targets enabled (aggregated): what the predictor sees of the chosen endpoint.
  auto note_latency = [&](const Candidate& chosen) {
    if (!predictor_) return;
    d.latency_features = latency_features(ctx, chosen);
    d.predicted_latency = predictor_->predict(chosen.endpoint->id, *d.latency_features);
  };

  if (!disaggregated) {
    ctx.stage = Stage::kWhole;
    // A continuation (a Responses conversation's previous_response_id) goes where its
    // conversation is stored whenever that endpoint is healthy, whatever its load or the
    // age of its metrics: any other endpoint would answer 404.
    if (request.preferred) {
      if ((d.reason = healthy_->apply(ctx, candidates_)) != RejectReason::kNone) return d;
      const auto it = std::find_if(candidates_.begin(), candidates_.end(), [&](const Candidate& c) {
        return c.endpoint->id == *request.preferred;
      });
      if (it != candidates_.end()) {
        std::iter_swap(candidates_.begin(), it);
        candidates_.resize(1);
        policy_->pick(ctx, candidates_, rng);  // costs it
        d.endpoint = candidates_[0].endpoint->id;
        d.cost = candidates_[0].cost;
        fill(candidates_[0]);
        note_latency(candidates_[0]);
        return d;
      }
    }
    if ((d.reason = run_filters(candidates_, RejectReason::kNoHealthyEndpoints)) !=
        RejectReason::kNone) {
      return d;
    }
    keep_with_room(candidates_, nullptr);
    if (candidates_.empty()) {
      d.reason = RejectReason::kDecodeFull;
      return d;
    }
    if (!request.adapter.empty()) {
      keep_lora_placed(request.adapter, candidates_);
      keep_lora_tier(request.adapter, candidates_);
    }
    // A session's next turn goes back to its endpoint while that stays within the bound
    // and, for a request with latency targets, is predicted to meet them (one hash
    // lookup; nothing at all for a request without a session).
    if (request.session != 0 && sessions_) [[unlikely]] {
      d.session = keep_session(ctx, now);
    }
    size_t i = policy_->pick(ctx, candidates_, rng);  // costs every candidate
    // Latency targets (a kept session's endpoint was checked against them already).
    if (predictor_ && request.has_targets() && !d.session_kept()) {
      const size_t meets = meet_targets(ctx, i);
      if (meets == candidates_.size()) {
        d.reason = config_.latency_targets.action == SloAction::kReject
                       ? RejectReason::kSloUnattainable
                       : RejectReason::kSaturated;
        return d;
      }
      i = meets;
    }
    d.endpoint = candidates_[i].endpoint->id;
    d.cost = candidates_[i].cost;
    fill(candidates_[i]);
    note_latency(candidates_[i]);
    if (request.runners_up > 0) rank_runners_up(candidates_, i, request.runners_up, d);
    return d;
  }

  // Disaggregated. The prefill endpoint: the policy among prefill-capable endpoints.
  decode_candidates_.clear();
  for (const Candidate& c : candidates_) {
    if (can_decode(c.endpoint->spec.role)) decode_candidates_.push_back(c);
  }
  std::erase_if(candidates_,
                [](const Candidate& c) { return !can_prefill(c.endpoint->spec.role); });
  if (candidates_.empty()) {
    d.reason = RejectReason::kNoPrefillEndpoint;
    return d;
  }
  if (decode_candidates_.empty()) {
    d.reason = RejectReason::kNoDecodeEndpoint;
    return d;
  }
  ctx.stage = Stage::kPrefill;
  if ((d.reason = run_filters(candidates_, RejectReason::kNoPrefillEndpoint)) !=
      RejectReason::kNone) {
    return d;
  }
  const size_t pi = policy_->pick(ctx, candidates_, rng);
  const Candidate prefiller = candidates_[pi];

  // The decode endpoint: blocks in use + this request's blocks + distance from the
  // prefill endpoint; no credit for cached prefixes (the KV arrives from prefill).
  ctx.stage = Stage::kDecode;
  ctx.prefill_endpoint = prefiller.endpoint;
  if ((d.reason = run_filters(decode_candidates_, RejectReason::kNoDecodeEndpoint)) !=
      RejectReason::kNone) {
    return d;
  }
  keep_with_room(decode_candidates_, &prefiller);
  if (decode_candidates_.empty()) {
    d.reason = RejectReason::kDecodeFull;
    return d;
  }
  for (Candidate& c : decode_candidates_) {
    c.cost = decode_blocks_in_use(c) + ctx.request_blocks +
             config_.pd.locality_weight * distance(*prefiller.endpoint, *c.endpoint);
  }
  const size_t di = pick_lowest_cost(decode_candidates_, rng);
  const Candidate& decoder = decode_candidates_[di];
  d.endpoint = decoder.endpoint->id;
  if (request.runners_up > 0) rank_runners_up(decode_candidates_, di, request.runners_up, d);
  d.cost = prefiller.cost;
  // Skip the remote prefill when the decode endpoint itself has nearly all of the
  // prompt cached (or is the prefill endpoint, a role-both endpoint chosen twice).
  if (decoder.endpoint->id == prefiller.endpoint->id ||
      ctx.uncached_tokens(decoder) < config_.pd.local_prefill_max_tokens) {
    fill(decoder);
  } else {
    d.prefill_endpoint = prefiller.endpoint->id;
    fill(prefiller);
  }
  return d;
}

SessionOutcome Router::keep_session(const RouteContext& ctx, Nanos now) {
  const std::optional<EndpointId> bound = sessions_->find(ctx.request.session, now);
  if (!bound) return SessionOutcome::kNew;
  const auto it = std::find_if(candidates_.begin(), candidates_.end(),
                               [&](const Candidate& c) { return c.endpoint->id == *bound; });
  // Unhealthy, held, filtered out, excluded by a retry, or left.
  if (it == candidates_.end()) return SessionOutcome::kMovedUnavailable;
  // Requests in flight: waiting (scraped + routed since) and running.
  auto in_flight = [](const Candidate& c) { return c.load.waiting + c.load.running; };
  double least = in_flight(*it);
  for (const Candidate& c : candidates_) least = std::min(least, in_flight(c));
  if (!keeps_session(in_flight(*it), least, config_.session_affinity)) {
    return SessionOutcome::kMovedLoad;
  }
  // Latency targets come before affinity: an endpoint predicted to miss them is left to
  // the policy and the target rule over every candidate (the session follows at commit).
  if (predictor_ && ctx.request.has_targets()) {
    const LatencyPrediction p = predictor_->predict(*bound, latency_features(ctx, *it));
    if (lateness(ctx.request, config_.latency_targets.headroom, p) > 1) {
      return SessionOutcome::kMovedTarget;
    }
  }
  std::iter_swap(candidates_.begin(), it);
  candidates_.resize(1);
  return SessionOutcome::kKept;
}

size_t Router::meet_targets(const RouteContext& ctx, size_t chosen) {
  const RouteRequest& r = ctx.request;
  const double headroom = config_.latency_targets.headroom;
  lateness_.clear();
  for (const Candidate& c : candidates_) {
    lateness_.push_back(
        lateness(r, headroom, predictor_->predict(c.endpoint->id, latency_features(ctx, c))));
  }
  if (lateness_[chosen] <= 1) return chosen;
  // The cheapest that meets them; among equal costs the one predicted faster.
  const size_t none = candidates_.size();
  size_t best = none;
  for (size_t k = 0; k < candidates_.size(); ++k) {
    if (lateness_[k] > 1) continue;
    if (best == none) {
      best = k;
      continue;
    }
    const double ck = comparable_cost(candidates_[k]);
    const double cb = comparable_cost(candidates_[best]);
    if (ck < cb || (ck == cb && lateness_[k] < lateness_[best])) best = k;
  }
  if (best != none) return best;
  const SloAction action = config_.latency_targets.action;
  if (action == SloAction::kReject || (action == SloAction::kQueue && !r.dequeued)) {
    return none;
  }
  // Best effort (or it waited in the queue already): the one predicted nearest.
  size_t nearest = 0;
  for (size_t k = 1; k < candidates_.size(); ++k) {
    if (lateness_[k] < lateness_[nearest]) nearest = k;
  }
  return nearest;
}

Status Router::commit(const RouteRequest& request, const Decision& decision, Nanos now) {
  if (!decision.accepted()) {
    return Error(fmt::format("request {} was rejected ({}), nothing to commit", request.id,
                             to_string(decision.reason)));
  }
  Placement p;
  p.endpoint = decision.endpoint;
  p.prefill_endpoint = decision.prefill_endpoint;
  p.keys = request.keys;
  p.prompt_tokens = request.prompt_tokens;
  p.expected_output_tokens = request.expected_output_tokens;
  p.prefill_tokens = decision.prefill_tokens;
  p.predicted_prefill_end = now + decision.predicted_prefill;
  p.latency_features = decision.latency_features;
  if (Status s = pool_.on_routed(request.id, p, now); !s) return s;
  if (config_.record_decisions && indexes_.approx && !request.keys.empty()) {
    indexes_.approx->record(decision.prefill_endpoint.value_or(decision.endpoint), request.keys,
                            now);
  }
  // Aggregated decisions only (the session rule does not apply to disaggregated pools).
  if (request.session != 0 && sessions_ && !decision.prefill_endpoint) {
    sessions_->bind(request.session, decision.endpoint, now);
  }
  return {};
}

Decision Router::route(const RouteRequest& request, Nanos now, Rng& rng) {
  Decision d = decide(request, now, rng);
  if (!d.accepted()) return d;
  if (Status s = commit(request, d, now); !s) {
    Decision rejected;
    rejected.reason = RejectReason::kDuplicateRequest;
    rejected.prompt_blocks = d.prompt_blocks;
    return rejected;
  }
  return d;
}

Explanation Router::explain(const RouteRequest& request, Nanos now, Rng& rng) {
  Explanation out;
  std::vector<kv::EndpointMatch> overlap;
  lookup_overlap(request.keys, now, overlap);
  // decide() leaves the candidates it scored in candidates_ (whole or prefill stage)
  // and decode_candidates_ (decode stage); read them before anything else runs.
  candidates_.clear();
  decode_candidates_.clear();
  out.decision = decide(request, overlap, now, rng);
  std::vector<ActiveBlocks::Prefix> prefixes;
  if (!request.keys.empty()) pool_.active_prefix(request.keys, prefixes);
  const uint32_t n = static_cast<uint32_t>(request.keys.size());
  for (EndpointId id : pool_.ids()) {
    CandidateView v;
    v.endpoint = id;
    v.load = effective_load(*pool_.get(id), now, config_.saturation);
    for (const kv::EndpointMatch& m : overlap) {
      if (m.endpoint != id) continue;
      v.gpu_blocks = std::min(m.gpu_blocks, n);
      v.cached_blocks = std::max(v.gpu_blocks, std::min(m.total_blocks, n));
    }
    for (const ActiveBlocks::Prefix& p : prefixes) {
      if (p.endpoint == id) v.active_prefix = p.blocks;
    }
    out.endpoints.push_back(v);
  }
  auto find = [&](EndpointId id) -> CandidateView* {
    auto it = std::lower_bound(out.endpoints.begin(), out.endpoints.end(), id,
                               [](const CandidateView& v, EndpointId x) { return v.endpoint < x; });
    return it != out.endpoints.end() && it->endpoint == id ? &*it : nullptr;
  };
  // The parts of each cost, in the context the policy costed the candidates in.
  RouteContext ctx{request, config_, pool_, now};
  ctx.block_size = config_.block_size;
  ctx.request_blocks = pool_.request_blocks(request.prompt_tokens, request.expected_output_tokens,
                                            request.keys.size());
  ctx.stage = decode_candidates_.empty() ? Stage::kWhole : Stage::kPrefill;
  for (const Candidate& c : candidates_) {
    CandidateView* v = find(c.endpoint->id);
    if (!v || std::isnan(c.cost)) continue;
    v->cost = c.cost;
    policy_->cost_terms(ctx, c, v->terms);
  }
  for (const Candidate& c : decode_candidates_) {
    CandidateView* v = find(c.endpoint->id);
    if (v && !std::isnan(c.cost)) v->decode_cost = c.cost;
  }
  return out;
}

}  // namespace kvgate::route
