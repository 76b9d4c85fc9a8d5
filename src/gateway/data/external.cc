// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "gateway/data/external.h"

#include <algorithm>
#include <mutex>

#include "core/route/failover.h"
#include "gateway/gateway_impl.h"

namespace kvgate::gateway {

std::string destination_of(const EndpointAddress& endpoint) {
  if (endpoint.host.find(':') != std::string::npos) {
    return fmt::format("[{}]:{}", endpoint.host, endpoint.port);
  }
  return fmt::format("{}:{}", endpoint.host, endpoint.port);
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

uint8_t external_fallbacks(const ExternalStream& stream) { return stream.fallbacks(); }

void Gateway::Impl::hand_off_external(ProxyCall& call, RouteLease lease,
                                      std::shared_ptr<const EndpointAddress> endpoint,
                                      std::string body, const route::Decision& decision) {
  ExternalPick p;
  p.destination = destination_of(*endpoint);
  for (uint8_t i = 0; i < decision.runner_count; ++i) {
    // An endpoint removed since the decision is left out.
    if (std::optional<EndpointAddress> e = call.pool->endpoint(decision.runners_up[i])) {
      p.fallbacks.push_back(destination_of(*e));
    }
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

void Gateway::Impl::finish_external(ExternalPick& p, const ExternalOutcome& o) {
  const Nanos now = clock.now();
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

std::function<void()> Gateway::pick_external(ExternalRequest request,
                                             std::function<void(ExternalPick)> done) {
  auto stream = std::make_shared<ExternalStream>(std::move(done), std::move(request.subset),
                                                 request.fallbacks);
  std::weak_ptr<ExternalStream> weak = stream;
  Impl* self = impl_.get();
  asio::post(self->io, [self, stream = std::move(stream), http = std::move(request.http),
                        priority = request.priority,
                        fairness_id = std::move(request.fairness_id)]() mutable {
    ExternalStream* raw = stream.get();
    // The objective's priority, as x-kvgate-priority: with API keys, only for a tenant
    // that may set its priority.
    bool may_set_priority = priority.has_value();
    if (priority && self->keys) {
      const Tenant* tenant = nullptr;
      const std::optional<HttpResponse> refused = self->check_key(http, tenant);
      may_set_priority = !refused && tenant && tenant->may_set_priority;
    }
    std::optional<ProxyCall> call;
    self->handle(std::move(http), std::move(stream), call);
    if (!call) return;  // answered by the front door
    if (call->serve == Serve::kRelay || call->serve == Serve::kStored) {
      // Relayed paths (tokenize, count_tokens, a stored response) are not routed: the
      // data plane sends them where it likes, or to `kvgate serve`.
      call->stream->respond(
          json_error(501, fmt::format("{} is not routed by the endpoint picker", call->target), {},
                     "not_routed"));
      return;
    }
    call->external = raw;
    if (may_set_priority && priority) {
      call->criticality = route::criticality_from_priority(*priority);
    }
    // The fairness id names the tenant only where no key does.
    if (!fairness_id.empty() && !self->keys) call->tenant = std::move(fairness_id);
    // As serve's requests that may queue: on a strand of its own with several threads.
    if (self->config.threads == 1) {
      asio::co_spawn(self->io.get_executor(), self->proxy(std::move(*call)), asio::detached);
    } else {
      asio::co_spawn(asio::make_strand(self->io), self->proxy(std::move(*call)), asio::detached);
    }
  });
  return [weak] {
    if (auto s = weak.lock()) s->cancel();
  };
}

void Gateway::external_done(ExternalPick pick, ExternalOutcome outcome) {
  if (!pick.pool || !pick.endpoint) return;  // an answer, not a pick: nothing to settle
  Impl* self = impl_.get();
  asio::post(self->io, [self, pick = std::move(pick), outcome = std::move(outcome)]() mutable {
    self->finish_external(pick, outcome);
  });
}

}  // namespace kvgate::gateway
