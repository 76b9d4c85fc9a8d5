// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "gateway/data/external.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "core/route/decision.h"
#include "core/route/failover.h"
#include "gateway/data/data_plane.h"
#include "gateway/data/disagg_flow.h"
#include "gateway/data/enterable_executor.h"

namespace kvgate::gateway {

std::string destination_of(const EndpointAddress& endpoint) {
  if (endpoint.host.find(':') != std::string::npos) {
    return fmt::format("[{}]:{}", endpoint.host, endpoint.port);
  }
  return fmt::format("{}:{}", endpoint.host, endpoint.port);
}

bool external_served(ExternalPick& pick, std::string_view served) {
  if (pick.kind != PickKind::kRouted || !pick.pool || !pick.endpoint || !pick.lease.held()) {
    return false;
  }
  if (served.empty() || served == pick.destination) return false;
  for (EndpointAddress& e : pick.pool->endpoints()) {
    if (e.dp_rank != pick.dp_rank || destination_of(e) != served) continue;
    pick.pool->endpoint_result(pick.endpoint->id, false);  // the data plane left it
    pick.lease.moved(e.id);
    pick.endpoint = std::make_shared<const EndpointAddress>(std::move(e));
    pick.destination = std::string(served);
    return true;
  }
  return false;
}

std::optional<uint32_t> carried_rank(const EndpointAddress& endpoint,
                                     const EndpointAddress* prefill) {
  if (prefill && prefill->dp_rank != endpoint.dp_rank) return std::nullopt;
  return endpoint.dp_rank;
}

std::vector<std::string> fallback_destinations(const EndpointAddress& pick,
                                               std::optional<uint32_t> rank,
                                               const std::vector<EndpointAddress>& runners_up,
                                               size_t max) {
  std::vector<std::string> out;
  const std::string picked = destination_of(pick);
  for (const EndpointAddress& r : runners_up) {
    if (out.size() >= max) break;
    if (rank && r.dp_rank != rank) continue;
    std::string d = destination_of(r);
    if (d == picked || std::find(out.begin(), out.end(), d) != out.end()) continue;
    out.push_back(std::move(d));
  }
  return out;
}

// Takes what the front door and the proxy answer an external request (respond), or the
// pick that proxy() hands back (deliver): whichever comes first goes to `done`, once.
// Nothing is ever streamed to it: start, write and finish are not called for an
// external request (the proxy hands it back before any upstream exchange).
class ExternalStream final : public ResponseStream {
 public:
  ExternalStream(std::function<void(ExternalPick)> done,
                 std::optional<std::vector<std::string>> subset, uint8_t fallbacks)
      : subset_(std::move(subset)), fallbacks_(fallbacks), done_(std::move(done)) {}
  ~ExternalStream() override {
    // Neither answered nor picked (cancelled on its way): the data plane still hears.
    if (done_) {
      ExternalPick p;
      p.answer = json_error(503, "Request not routed: cancelled", {}, "cancelled");
      deliver(std::move(p));
    }
  }

  void deliver(ExternalPick pick) {
    std::function<void(ExternalPick)> done;
    {
      std::lock_guard lock(mu_);
      done.swap(done_);
    }
    if (done) done(std::move(pick));
  }

  // The data plane gave up before the pick: as a client that left (on_close).
  void cancel() {
    std::function<void()> callback;
    {
      std::lock_guard lock(mu_);
      if (!done_ || closed_) return;  // already answered: nothing waits any more
      closed_ = true;
      callback.swap(on_close_);
    }
    if (callback) callback();
  }

  const std::optional<std::vector<std::string>>& subset() const { return subset_; }
  uint8_t fallbacks() const { return fallbacks_; }

  void respond(HttpResponse response) override {
    ExternalPick p;
    p.answer = std::move(response);
    deliver(std::move(p));
  }
  void start(int, std::string, std::vector<io::HttpHeader>) override {}
  void write(std::string, std::function<void()> on_flushed) override {
    if (on_flushed) on_flushed();
  }
  void finish() override {}
  void abort() override {}
  size_t pending_bytes() const override { return 0; }
  bool closed() const override {
    std::lock_guard lock(mu_);
    return closed_;
  }
  void on_close(std::function<void()> callback) override {
    {
      std::lock_guard lock(mu_);
      if (!closed_) {
        on_close_ = std::move(callback);  // one callback: a later one replaces it
        return;
      }
    }
    if (callback) callback();
  }
  void watch_client() override {}

 private:
  const std::optional<std::vector<std::string>> subset_;
  const uint8_t fallbacks_;
  mutable std::mutex mu_;
  std::function<void(ExternalPick)> done_;
  std::function<void()> on_close_;
  bool closed_ = false;
};

std::vector<route::EndpointId> outside_subset(const ExternalStream& stream,
                                              const PoolRuntime& pool) {
  std::vector<route::EndpointId> out;
  if (!stream.subset()) return out;
  const std::vector<std::string>& subset = *stream.subset();
  for (const EndpointAddress& e : pool.endpoints()) {
    if (std::find(subset.begin(), subset.end(), destination_of(e)) == subset.end()) {
      out.push_back(e.id);
    }
  }
  // A subset with none of the pool's endpoints leaves nothing to pick from: every
  // endpoint is excluded and the router refuses (no endpoint), as the protocol's 503.
  return out;
}

// All the runners-up the router lists when any fallback is asked for: some may not be
// listable (fallback_destinations), and the next ones then take their place.
uint8_t external_fallbacks(const ExternalStream& stream) {
  return stream.fallbacks() > 0 ? static_cast<uint8_t>(route::Decision::kMaxRunnersUp) : 0;
}

void DataPlane::hand_off_external(ProxyCall& call, RouteLease lease,
                                  std::shared_ptr<const EndpointAddress> endpoint, std::string body,
                                  const route::Decision& decision) {
  ExternalPick p;
  p.destination = destination_of(*endpoint);
  // Disaggregated: the router's decision names the prefill endpoint (the same decision
  // serve's prefill hop runs); the decode side's sidecar runs that hop. An endpoint removed
  // since the decision is left out: the decode endpoint then prefills itself.
  std::optional<EndpointAddress> prefill;
  if (decision.prefill_endpoint) prefill = call.pool->endpoint(*decision.prefill_endpoint);
  if (prefill) {
    p.prefill = destination_of(*prefill);
  } else if (disaggregated(call.pool->config())) {
    metrics.pd_local_prefill(call.pool->name());  // as serve counts a skipped remote prefill
  }
  p.dp_rank = carried_rank(*endpoint, prefill ? &*prefill : nullptr);
  if (call.external->fallbacks() > 0) {
    std::vector<EndpointAddress> runners;
    for (uint8_t i = 0; i < decision.runner_count; ++i) {
      // An endpoint removed since the decision is left out.
      if (std::optional<EndpointAddress> e = call.pool->endpoint(decision.runners_up[i])) {
        runners.push_back(std::move(*e));
      }
    }
    p.fallbacks = fallback_destinations(*endpoint, p.dp_rank, runners, call.external->fallbacks());
  }
  p.endpoint = std::move(endpoint);
  p.body = std::move(body);
  p.stream = call.request.stream;
  p.strip_usage_chunk = !call.request.client_wants_usage;
  p.dialect = call.dialect;
  p.lease = std::move(lease);
  p.pool = call.pool;
  p.model = call.model->name;
  p.tenant = call.tenant;
  p.limited_tenant = call.limited_tenant;
  p.received = call.received;
  p.routing_seconds = call.routing_seconds;
  p.charged_output_tokens = call.flow.charged_output_tokens;
  p.embed = call.serve == Serve::kEmbed;
  call.external->deliver(std::move(p));
}

asio::awaitable<void> DataPlane::pick_relayed(ProxyCall call, ExternalStream* external) {
  std::shared_ptr<const EndpointAddress> endpoint;
  const bool stored = call.serve == Serve::kStored;
  if (stored) {
    // Serve checks a stored answer's model against a tenant limited to some models after
    // reading it; here the answer goes by in the data plane, unread before it reaches the
    // client: such a tenant's request is refused.
    if (call.limited_tenant && !call.limited_tenant->models.empty()) {
      metrics.request_done({}, call.pool->name(), call.tenant, 501, seconds_since(call.received));
      external->respond(json_error(
          501, "Stored responses are not routed by the endpoint picker for keys limited to models",
          {}, "not_routed"));
      co_return;
    }
    std::string id;
    std::optional<EndpointAddress> held = stored_endpoint(call, id);
    const std::vector<route::EndpointId> outside = outside_subset(*external, *call.pool);
    if (!held || std::find(outside.begin(), outside.end(), held->id) != outside.end()) {
      // Gone since the front door looked, or the data plane may not send it there: the
      // one endpoint that holds it is out of reach, as fetch_stored answers.
      metrics.request_done({}, call.pool->name(), call.tenant, 404, seconds_since(call.received));
      external->respond(response_not_found(id));
      co_return;
    }
    endpoint = std::make_shared<const EndpointAddress>(std::move(*held));
  } else {
    // As relay(): the pool's next healthy endpoint in turn, within the subset hint.
    endpoint = co_await call.pool->tokenize_endpoint(outside_subset(*external, *call.pool));
    if (!endpoint) {
      metrics.request_done(call.model ? call.model->name : std::string(), call.pool->name(),
                           call.tenant, 503, seconds_since(call.received));
      HttpResponse r = json_error(503, "No endpoint available", {}, "no_endpoint");
      shape(call.dialect, r);  // count_tokens: its errors are Anthropic's
      external->respond(std::move(r));
      co_return;
    }
    metrics.request_started();  // finished in finish_external, as relay()'s
  }
  ExternalPick p;
  p.kind = stored ? PickKind::kStored : PickKind::kRelay;
  p.destination = destination_of(*endpoint);
  p.dp_rank = endpoint->dp_rank;  // as relay() and fetch_stored() name it
  p.endpoint = std::move(endpoint);
  p.body = std::move(call.body);
  p.dialect = call.dialect;
  p.pool = call.pool;
  p.model = call.model ? call.model->name : std::string();
  p.tenant = call.tenant;
  p.received = call.received;
  external->deliver(std::move(p));
}

void DataPlane::finish_external(ExternalPick& p, const ExternalOutcome& o) {
  const Nanos now = clock.now();
  if (p.kind != PickKind::kRouted) {
    // As relay() and fetch_stored() count theirs: no lease, no usage.
    const int status = o.status == 0 ? 499 : o.status;
    if (p.kind == PickKind::kStored) {
      metrics.request_done({}, p.pool->name(), p.tenant, status, to_seconds(now - p.received));
    } else {
      metrics.request_finished({.model = p.model,
                                .pool = p.pool->name(),
                                .tenant = p.tenant,
                                .status = status,
                                .seconds = to_seconds(now - p.received)});
    }
    return;
  }
  if (p.lease.held()) {
    if (o.status == 0) {
      p.lease.finish(true);  // the client left: nothing the endpoint did wrong
    } else {
      // As serve's whole answers: a 503 (overloaded, starting) is the endpoint's failure.
      const bool ok = !route::failed_status(o.status, /*continuation=*/false);
      p.lease.done(p.endpoint->id, ok, now, /*first_token=*/true);
    }
  }
  const bool ok = o.status == 200;
  // As serve's Responses answers: the endpoint holds the response, for a later GET of it
  // and previous_response_id.
  if (ok && !o.response_id.empty()) p.pool->responses().remember(o.response_id, p.endpoint->id);
  if (ok && o.usage.seen && p.charged_output_tokens > 0) {
    p.pool->flow_output(p.tenant, p.charged_output_tokens,
                        static_cast<uint32_t>(o.usage.completion_tokens));
  }
  if (ok && o.usage.seen) charge(p.limited_tenant, p.model, o.usage);
  GatewayMetrics::Finished f{.model = p.model,
                             .pool = p.pool->name(),
                             .tenant = p.tenant,
                             .status = o.status == 0 ? 499 : o.status,
                             .seconds = to_seconds(now - p.received),
                             .routing_seconds = p.routing_seconds};
  if (ok && !p.embed) f.ttft = o.ttft;
  if (o.usage.seen) {
    f.has_tokens = true;
    f.prompt_tokens = o.usage.prompt_tokens;
    f.completion_tokens = o.usage.completion_tokens;
    f.cached_tokens = o.usage.cached_tokens;
  }
  metrics.request_finished(f);
}

namespace {

// An external request routed by external_now, alive until its decision's continuation
// ran: the call, and what its route request borrows (the keys, the endpoints outside the
// subset hint, the retries' exclusions: none on a first pick).
struct InlinePick {
  ProxyCall call;
  std::vector<kv::BlockKey> keys;
  std::vector<route::EndpointId> outside;
  const std::vector<route::EndpointId> excluded;
  route::RouteRequest rr;
  Nanos route_start = 0;
  // The data plane left before the decision (ExternalStream::cancel, from its thread).
  std::atomic<bool> cancelled{false};
  // The decision ran (on the strand's thread): nothing of the call is touched after it by
  // the thread that routed it.
  std::atomic<bool> decided{false};
};

}  // namespace

bool DataPlane::external_now(ProxyCall& call) {
  PoolRuntime& pool = *call.pool;
  const bool embed = call.serve == Serve::kEmbed;
  EngineTokenizer* const fallback = pool.engine_tokenizer();
  // What proxy() may wait for before its first pick: the tenant's rate limits
  // (limiter->check_async), the LoRA placement (placer->arrive), the engine's token ids
  // (fallback->ids_for), flow control's queue (admit). Those requests are proxy()'s.
  if (call.serve != Serve::kGenerate && !embed) return false;
  if (call.limited_tenant || pool.flow() != nullptr) return false;
  if (!call.model->base.empty() && lora_of(&pool) != nullptr) return false;
  if (!embed && fallback && fallback->covers(call.kind)) return false;

  // From here on, proxy()'s steps up to its first pick, in its order and with its
  // effects, without a suspension (each one is safe on any thread: data_plane.h,
  // pool_routing.h).
  auto s = std::make_shared<InlinePick>();
  s->call = std::move(call);
  ProxyCall& c = s->call;
  metrics.request_started();
  // A LoRA adapter's blocks are its own.
  const std::string_view adapter =
      c.model->base.empty() ? std::string_view() : std::string_view(c.model->name);
  s->route_start = clock.now();  // routing time: keys_for through the pick
  uint32_t prompt_tokens = 0;
  std::vector<uint32_t> token_ids;
  PromptObserver* warmup = warmup_of(&pool);
  const bool track = warmup && warmup->enabled();
  const bool translated = c.translation != nullptr;
  const std::string_view route_body = translated ? c.translation->route_body : c.body;
  if (embed) {
    // Routed by load: no blocks (an embedding reuses no prefix), its size for the load.
    prompt_tokens = pool.count_tokens(c.request.prompt_text) + c.request.given_tokens;
  } else {
    pool.keys_for(c.request, route_body, c.kind, adapter, s->keys, prompt_tokens,
                  track ? &token_ids : nullptr);
  }
  if (track && !embed && adapter.empty()) {  // warm-up replays base-model prompts only
    warmup->observe(s->keys, token_ids,
                    c.kind == openai::ApiKind::kCompletion ? c.request.prompt_text : "");
  }
  route::RouteRequest& rr = s->rr;
  rr = route_request_for(c, adapter, prompt_tokens);
  rr.keys = s->keys;
  // The data plane's subset hint: the endpoints outside it are excluded from the decision.
  ExternalStream* const external = c.external;
  s->outside = outside_subset(*external, pool);
  rr.excluded = s->outside;
  rr.runners_up = external_fallbacks(*external);

  // The decision, on the pool's strand: here at once when the strand is free, else
  // queued behind its work for an I/O thread (pick_then; enterable_executor.h says why
  // that keeps the strand's exclusion). Either way its continuation runs on the strand,
  // right after the decision, and `s` lives until it ran.
  {
    EnterStrandsHere here;
    pool.pick_then(s->rr, s->excluded, &s->cancelled, [this, s](std::optional<Pick> pick) {
      external_routed(s->call, s->rr.id, s->route_start, std::move(pick));
      s->decided.store(true, std::memory_order_release);
    });
  }
  // Queued: a data plane that leaves meanwhile cancels it, as proxy()'s check before its
  // pick. A weak reference: the stream (in s->call) must not own its own state.
  if (!s->decided.load(std::memory_order_acquire)) {
    external->on_close([w = std::weak_ptr<InlinePick>(s)] {
      if (auto state = w.lock()) state->cancelled.store(true, std::memory_order_release);
    });
  }
  return true;
}

void DataPlane::external_routed(ProxyCall& call, route::RequestId id, Nanos route_start,
                                std::optional<Pick> now) {
  if (!now) {
    // The data plane left first: as proxy()'s client_left() before any pick. The stream,
    // unanswered, tells the picker when it goes (~ExternalStream).
    (void)finish_client_left(call);
    return;
  }
  Pick& pick = *now;
  PoolRuntime& pool = *call.pool;
  call.routing_seconds = to_seconds(clock.now() - route_start);
  if (!pick.decision.accepted()) {
    HttpResponse r = not_routed(pool, pick.decision);
    const int status = r.status;
    // As proxy()'s respond(): the trace's status, the metrics, then the answer.
    record_done(call, status);
    shape(call.dialect, r);
    call.stream->respond(std::move(r));
    return;
  }
  RouteLease lease(pool, id, pools_alive);
  std::shared_ptr<const EndpointAddress> endpoint = std::move(pick.endpoint);
  if (call.trace) [[unlikely]] {
    trace_pick(*call.trace, call, *endpoint, pick);
  }
  std::string body = std::move(call.body);
  hand_off_external(call, std::move(lease), std::move(endpoint), std::move(body), pick.decision);
}

std::function<void()> DataPlane::pick_external(ExternalRequest request,
                                               std::function<void(ExternalPick)> done) {
  auto stream = std::make_shared<ExternalStream>(std::move(done), std::move(request.subset),
                                                 request.fallbacks);
  std::weak_ptr<ExternalStream> weak = stream;
  ExternalStream* raw = stream.get();
  // The front door on the calling thread (handle() runs on any thread: data_plane.h).
  // The objective's priority, as x-kvgate-priority: with API keys, only for a tenant that
  // may set its priority.
  const std::optional<int> priority = request.priority;
  bool may_set_priority = priority.has_value();
  if (priority && keys) {
    const Tenant* tenant = nullptr;
    const std::optional<HttpResponse> refused = check_key(request.http, tenant);
    may_set_priority = !refused && tenant && tenant->may_set_priority;
  }
  std::optional<ProxyCall> call;
  handle(std::move(request.http), std::move(stream), call);
  if (call) {
    call->external = raw;
    if (call->serve == Serve::kRelay || call->serve == Serve::kStored) {
      // Tokenize and its kin, a stored response: picked as serve relays them.
      asio::co_spawn(io.get_executor(), pick_relayed(std::move(*call), raw), asio::detached);
    } else {
      if (may_set_priority && priority) {
        call->criticality = route::criticality_from_priority(*priority);
      }
      // The fairness id names the tenant only where no key does.
      if (!request.fairness_id.empty() && !keys) call->tenant = std::move(request.fairness_id);
      if (external_now(*call)) {
        // Routed from here: decided, or queued on the pool's strand.
      } else if (config.threads == 1) {
        asio::co_spawn(io.get_executor(), proxy(std::move(*call)), asio::detached);
      } else {
        // As serve's requests that may queue: on a strand of its own with several threads.
        asio::co_spawn(asio::make_strand(io), proxy(std::move(*call)), asio::detached);
      }
    }
  }
  // Decided already (answered or picked, and the stream gone with its state): nothing
  // left to cancel, and no closure to allocate.
  if (weak.expired()) return [] {};
  return [weak] {
    if (auto s = weak.lock()) s->cancel();
  };
}

void DataPlane::external_done(ExternalPick pick, ExternalOutcome outcome) {
  if (!pick.pool || !pick.endpoint) return;  // an answer, not a pick: nothing to settle
  DataPlane* self = this;
  asio::post(self->io, [self, pick = std::move(pick), outcome = std::move(outcome)]() mutable {
    self->finish_external(pick, outcome);
  });
}

}  // namespace kvgate::gateway
