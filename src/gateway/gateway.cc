// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "gateway/gateway.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <charconv>
#include <thread>

#include "discovery/pool_discovery.h"
#include "gateway/admin_api.h"
#include "gateway/disagg_flow.h"
#include "gateway/engine_tokenizer.h"
#include "gateway/fault_metrics.h"
#include "gateway/flow_glue.h"
#include "gateway/keys.h"
#include "gateway/live_feed.h"
#include "gateway/pool_autoscaler.h"
#include "gateway/pool_flow.h"
#include "gateway/pool_runtime.h"
#include "gateway/replica_sync.h"
#include "gateway/route_lease.h"
#include "gateway/stream_migration.h"
#include "gateway/tenant_limiter.h"
#include "gateway/warmup.h"
#include "io/http_server.h"
#include "io/upstream_client.h"
#include "openai/error.h"
#include "openai/request.h"
#include "openai/sse_tap.h"

namespace kvgate::gateway {
namespace asio = boost::asio;
using io::HttpRequest;
using io::HttpResponse;
using io::ResponseStream;

namespace {

// A client this far behind on a stream makes the proxy wait for it (backpressure
// towards the engine) instead of queueing more.
constexpr size_t kMaxPendingBytes = 64 * 1024;

HttpResponse json_error(int status, std::string_view message, std::string_view param = {},
                        std::string_view code = {}) {
  HttpResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body = openai::error_json(status, message, param, code);
  return r;
}

// Writes `chunk` and resumes once it is on the socket (or the stream closed).
asio::awaitable<void> write_and_wait(ResponseStream& stream, std::string chunk) {
  co_await asio::async_initiate<decltype(asio::use_awaitable), void()>(
      [&stream, chunk = std::move(chunk)](auto handler) mutable {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        stream.write(std::move(chunk), [h]() {
          auto ex = asio::get_associated_executor(*h);
          asio::post(ex, std::move(*h));
        });
      },
      asio::use_awaitable);
}

double seconds_since(Nanos t0) { return to_seconds(monotonic_now() - t0); }

// The 429 of a request its tenant's limits (or a failed store, fail-closed) refused.
HttpResponse rate_limited_response(const limit::LimitDecision& d, std::string_view tenant) {
  std::string message =
      d.store_error
          ? "Rate limit store unavailable; request refused (fail-closed)"
          : fmt::format("Rate limit reached for {} on {}: used {:.0f} of {:.0f} per minute", tenant,
                        d.rule, d.used, d.limit);
  HttpResponse r = json_error(429, message, {}, "rate_limit_exceeded");
  r.headers.push_back({"Retry-After", std::to_string(d.retry_after_seconds())});
  r.headers.push_back({"x-kvgate-reject-reason", d.store_error ? "store" : "rate_limited"});
  r.headers.push_back({"x-kvgate-rate-limit-rule", d.rule});
  return r;
}

// An awaitable for a request already answered (nothing to proxy).
asio::awaitable<void> answered() { co_return; }

}  // namespace

// Flow control: what the pool's queue needs to know of the request (pool_flow.h).
struct FlowTicketData {
  double weight = 1;
  std::optional<Nanos> deadline;       // absolute, monotonic_now() time
  uint32_t charged_output_tokens = 0;  // set once dispatched: corrected at the end
};

struct ProxyCall {
  std::shared_ptr<ResponseStream> stream;
  std::string body;  // already rewritten for the upstream
  std::string target;
  openai::ApiKind kind;
  openai::InspectedRequest request;
  const ModelConfig* model;
  PoolRuntime* pool;
  std::string tenant;
  const Tenant* limited_tenant = nullptr;  // set when the tenant has rate limits
  route::Criticality criticality;
  FlowTicketData flow;  // flow control: the tenant's weight and the request's deadline
  Nanos received;
  std::optional<double> routing_seconds;  // keys through the first pick (once picked)
};

// A stream request whose engine answered 200: the events are passed through by a
// coroutine of its own (the connection writes them as they come).
struct StreamJob {
  // The client leaving cancels the exchange (declared first: it outlives the exchange).
  std::shared_ptr<io::UpstreamCancel> cancel;
  ProxyCall call;
  std::unique_ptr<io::UpstreamExchange> exchange;
  std::shared_ptr<const EndpointAddress> endpoint;
  RouteLease lease;
  std::string route_us;
  std::string prefill_url;
  // Pools with stream migration: the stream's state and what a continuation is routed on.
  std::optional<MigratingStream> migration;
  std::vector<kv::BlockKey> keys;
  int migrations = 0;  // done so far
};

struct Gateway::Impl {
  // One thread: the hint drops Asio's per-socket locks (six lock pairs per request) and
  // cross-thread wake-ups. That is safe because every socket of this context (client
  // connections, upstream connections, listeners once open) is used only from its one
  // thread: other threads reach it through posts and timers, which stay locked, and
  // stop_all() closes the idle upstream connections only after that thread has stopped.
  explicit Impl(int threads) : io(threads <= 1 ? BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO : threads) {}
  // Before any member goes: coroutine frames the context destroys later (with their
  // route leases) must not call the pools, which are destroyed first.
  ~Impl() { pools_alive->store(false, std::memory_order_release); }

  GatewayConfig config;
  std::optional<KeyStore> keys;
  GatewayMetrics metrics;
  FaultMetrics fault_metrics;  // cancellations, stream migrations
  std::unique_ptr<TenantLimiter> limiter;
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  std::unique_ptr<io::UpstreamClient> upstream;
  std::vector<std::unique_ptr<PoolRuntime>> pools;
  std::vector<std::unique_ptr<LiveFeed>> feeds;              // after pools: destroyed first
  std::vector<std::unique_ptr<PoolWarmup>> warmups;          // by pool index (gateway/warmup.h)
  std::vector<std::unique_ptr<PoolAutoscaler>> autoscalers;  // stopped first in stop_all
  std::vector<std::unique_ptr<discovery::PoolDiscovery>> discoveries;  // docs/discovery.md
  std::vector<std::unique_ptr<io::HttpServer>> servers;
  std::unique_ptr<AdminApi> admin;       // config.admin set; destroyed before the pools
  std::unique_ptr<ReplicaSync> cluster;  // config.cluster set (gateway/replica_sync.h)
  std::atomic<bool> not_ready{false};    // /ready answers 503 (drain announced)
  std::atomic<bool> draining{false};     // new requests get 503, listeners closed
  std::atomic<bool> stopped{false};
  std::atomic<uint64_t> next_request_id{1};
  // Whether the pools still exist, for route leases (route_lease.h).
  std::shared_ptr<std::atomic<bool>> pools_alive = std::make_shared<std::atomic<bool>>(true);
  std::string models_json;

  PoolWarmup* warmup_of(const PoolRuntime* pool) {
    for (size_t i = 0; i < pools.size() && i < warmups.size(); ++i) {
      if (pools[i].get() == pool) return warmups[i].get();
    }
    return nullptr;
  }
  std::vector<const PoolWarmup*> all_warmups() const {
    std::vector<const PoolWarmup*> out;
    for (const auto& w : warmups) out.push_back(w.get());
    return out;
  }

  std::string discovery_metrics() const {
    std::vector<const discovery::PoolDiscovery*> d;
    for (const auto& p : discoveries) d.push_back(p.get());
    return discovery::render_discovery_metrics(d);
  }

  std::vector<const PoolFlow*> all_flows() const {
    std::vector<const PoolFlow*> out;
    for (const auto& p : pools) out.push_back(p->flow());
    return out;
  }

  PoolRuntime* pool_named(std::string_view name) {
    for (auto& p : pools) {
      if (p->name() == name) return p.get();
    }
    return nullptr;
  }

  // Answers what needs no engine at once; an inference request that passes every check
  // comes back in `to_proxy`.
  void handle(HttpRequest&& req, std::shared_ptr<ResponseStream> stream,
              std::optional<ProxyCall>& to_proxy);
  void handle_inference(HttpRequest&& req, std::shared_ptr<ResponseStream> stream,
                        openai::ApiKind kind, Nanos received, std::optional<ProxyCall>& to_proxy);
  // REQUIRES: keys. The 401 for a request without a valid API key, else nullopt and
  // `tenant` set.
  std::optional<HttpResponse> check_key(const HttpRequest& req, const Tenant*& tenant) const;
  // For the listeners' HttpServerOptions::early_refusal (with keys): an inference request
  // whose key is missing or wrong is refused on its head, before its body is read.
  std::optional<HttpResponse> refuse_before_body(const HttpRequest& head);
  // Routes, sends and retries; answers a whole response itself and hands a stream to
  // pump_stream, on a coroutine of its own.
  asio::awaitable<void> proxy(ProxyCall call);
  asio::awaitable<void> pump_stream(StreamJob job);
  // After the stream's engine failed mid-stream: a continuation on another endpoint
  // (stream_migration.h). kResumed: job.exchange, endpoint and lease are the new leg's.
  enum class Migrated { kResumed, kComplete, kCancelled, kFailed };
  asio::awaitable<Migrated> migrate(StreamJob& job);
  void stop_all();
  // Charges a finished request's usage to its tenant's token budget.
  void charge(const Tenant* tenant, std::string_view model, const openai::Usage& u);
};

void Gateway::Impl::handle(HttpRequest&& req, std::shared_ptr<ResponseStream> stream,
                           std::optional<ProxyCall>& to_proxy) {
  using namespace std::string_view_literals;  // comparisons by size first, no strlen
  const Nanos received = monotonic_now();
  const std::string_view path = req.path;
  const std::string_view method = req.method;
  const bool get = method == "GET"sv || method == "HEAD"sv;
  if (path == "/health"sv) {
    if (!get) return stream->respond(json_error(405, "Method not allowed"));
    return stream->respond(HttpResponse{200, "application/json", {}, "{\"status\":\"ok\"}"});
  }
  if (path == "/ready"sv) {
    if (!get) return stream->respond(json_error(405, "Method not allowed"));
    if (not_ready.load()) {
      return stream->respond(
          HttpResponse{503, "application/json", {}, "{\"status\":\"draining\"}"});
    }
    if (cluster && !cluster->started()) {
      return stream->respond(HttpResponse{503, "application/json", {}, "{\"status\":\"syncing\"}"});
    }
    return stream->respond(HttpResponse{200, "application/json", {}, "{\"status\":\"ready\"}"});
  }
  if (path == "/metrics"sv) {
    if (!get) return stream->respond(json_error(405, "Method not allowed"));
    return stream->respond(HttpResponse{200,
                                        "text/plain; version=0.0.4; charset=utf-8",
                                        {},
                                        metrics.render() + render_warmup_metrics(all_warmups()) +
                                            fault_metrics.render() + discovery_metrics() +
                                            render_flow_metrics(all_flows()) +
                                            (cluster ? cluster->render_metrics() : "")});
  }
  const bool is_chat = path == "/v1/chat/completions"sv;
  const bool is_completion = path == "/v1/completions"sv;
  const bool is_models = path == "/v1/models"sv;
  if (!is_chat && !is_completion && !is_models) {
    return stream->respond(json_error(404, fmt::format("Not found: {} {}", req.method, path)));
  }
  if (is_models ? !get : method != "POST"sv) {
    return stream->respond(
        json_error(405, fmt::format("Method {} not allowed on {}", req.method, path)));
  }
  if (is_models) {
    if (keys) {
      const auto auth = req.header("authorization");
      if (!auth || !keys->authenticate_header(*auth)) {
        return stream->respond(
            json_error(401, "Invalid or missing API key", {}, "invalid_api_key"));
      }
    }
    return stream->respond(HttpResponse{200, "application/json", {}, models_json});
  }
  handle_inference(std::move(req), std::move(stream),
                   is_chat ? openai::ApiKind::kChat : openai::ApiKind::kCompletion, received,
                   to_proxy);
}

std::optional<HttpResponse> Gateway::Impl::check_key(const HttpRequest& req,
                                                     const Tenant*& tenant) const {
  const auto auth = req.header("authorization");
  if (!auth) {
    return json_error(401,
                      "You didn't provide an API key. Send it as "
                      "'Authorization: Bearer <key>'.",
                      {}, "invalid_api_key");
  }
  tenant = keys->authenticate_header(*auth);
  if (!tenant) return json_error(401, "Incorrect API key provided.", {}, "invalid_api_key");
  return std::nullopt;
}

std::optional<HttpResponse> Gateway::Impl::refuse_before_body(const HttpRequest& head) {
  using namespace std::string_view_literals;
  if (head.method != "POST"sv ||
      (head.path != "/v1/chat/completions"sv && head.path != "/v1/completions"sv)) {
    return std::nullopt;
  }
  const Tenant* tenant = nullptr;
  std::optional<HttpResponse> r = check_key(head, tenant);
  if (r) metrics.request_done({}, {}, "anonymous", 401, 0);
  return r;
}

void Gateway::Impl::handle_inference(HttpRequest&& req, std::shared_ptr<ResponseStream> stream,
                                     openai::ApiKind kind, Nanos received,
                                     std::optional<ProxyCall>& to_proxy) {
  std::string tenant_name = "anonymous";
  const Tenant* tenant = nullptr;
  auto reject = [&](int status, HttpResponse r, std::string_view model = {},
                    std::string_view pool = {}) {
    metrics.request_done(model, pool, tenant_name, status, seconds_since(received));
    stream->respond(std::move(r));
  };
  if (keys) {
    if (std::optional<HttpResponse> r = check_key(req, tenant)) return reject(401, std::move(*r));
    tenant_name = tenant->name;
  }
  if (draining.load()) {
    return reject(503, json_error(503, "The gateway is shutting down"));
  }
  openai::Inspection inspection = openai::inspect_request(req.body, kind);
  if (inspection.error) {
    const openai::RequestError& e = *inspection.error;
    return reject(e.status, json_error(e.status, e.message, e.param));
  }
  const ModelConfig* model = config.find_model(inspection.request.model);
  if (!model) {
    return reject(
        404, json_error(404, fmt::format("The model '{}' does not exist", inspection.request.model),
                        "model", "model_not_found"));
  }
  if (tenant && !tenant->allows(model->name)) {
    return reject(403,
                  json_error(403, fmt::format("This key may not use the model '{}'", model->name),
                             "model", "model_not_allowed"),
                  model->name);
  }
  // An integer priority or a criticality name; anything else keeps the default.
  route::Criticality criticality = route::criticality_from_priority(tenant ? tenant->priority : 0);
  if (const auto p = req.header("x-kvgate-priority"); p && tenant && tenant->may_set_priority) {
    int v = 0;
    auto [end, ec] = std::from_chars(p->data(), p->data() + p->size(), v);
    if (ec == std::errc() && end == p->data() + p->size()) {
      criticality = route::criticality_from_priority(v);
    } else if (auto named = route::parse_criticality(*p)) {
      criticality = *named;
    }
  }
  FlowTicketData flow;
  if (tenant) flow.weight = tenant->weight;
  int64_t deadline_ms = tenant ? tenant->deadline_ms : 0;
  if (const auto d = req.header("x-kvgate-deadline-ms")) {
    auto [end, ec] = std::from_chars(d->data(), d->data() + d->size(), deadline_ms);
    if (ec != std::errc() || end != d->data() + d->size() || deadline_ms <= 0) {
      return reject(400,
                    json_error(400, "x-kvgate-deadline-ms: expected a positive integer",
                               "x-kvgate-deadline-ms", "invalid_header"),
                    model->name, model->pool);
    }
  }
  if (deadline_ms > 0) flow.deadline = received + deadline_ms * kMillisecond;
  ProxyCall& call = to_proxy.emplace();
  call.flow = flow;
  call.stream = std::move(stream);
  call.target = std::move(req.path);
  // The body goes upstream as it came (moved, not copied) when nothing in it changes.
  call.body = openai::sent_unchanged(inspection.request, model->served_name)
                  ? std::move(req.body)
                  : openai::upstream_body(req.body, inspection.request, model->served_name);
  call.kind = kind;
  call.request = std::move(inspection.request);
  call.model = model;
  call.pool = pool_named(model->pool);
  call.pool->count_arrival();
  call.tenant = std::move(tenant_name);
  if (tenant && TenantLimiter::limited(*tenant)) call.limited_tenant = tenant;
  call.criticality = criticality;
  call.received = received;
}

asio::awaitable<void> Gateway::Impl::proxy(ProxyCall call) {
  if (call.limited_tenant) {
    // Suspends this request alone until the store answers (Redis: pipelined, bounded by
    // its timeout); other requests go on meanwhile.
    const TenantLimiter::Checked c =
        co_await limiter->check_async(*call.limited_tenant, call.model->name, wall_now());
    if (!c.decision.allowed) {
      metrics.rate_limited(call.tenant, c.decision.rule);
      metrics.request_done(call.model->name, call.model->pool, call.tenant, 429,
                           seconds_since(call.received));
      call.stream->respond(rate_limited_response(c.decision, call.tenant));
      co_return;
    }
  }
  metrics.request_started();
  PoolRuntime& pool = *call.pool;
  const std::string& model = call.model->name;
  int final_status = 0;
  // Metrics are recorded before the last byte goes out, so that a client that reads
  // /metrics right after its answer sees it counted.
  // A whole answer from the engine also brings its TTFT (the whole answer) and usage, and
  // when it ended (`done`, monotonic_now(); read here when not given).
  auto respond = [&](int status, HttpResponse r, bool answered = false,
                     const openai::Usage* u = nullptr, Nanos done = 0) {
    final_status = status;
    const double seconds = done ? to_seconds(done - call.received) : seconds_since(call.received);
    GatewayMetrics::Finished f{.model = model,
                               .pool = pool.name(),
                               .tenant = call.tenant,
                               .status = status,
                               .seconds = seconds,
                               .routing_seconds = call.routing_seconds};
    if (answered) f.ttft = seconds;
    if (u && u->seen && call.flow.charged_output_tokens > 0) {
      pool.flow_output(call.tenant, call.flow.charged_output_tokens, u->completion_tokens);
    }
    if (u && u->seen) {
      f.has_tokens = true;
      f.prompt_tokens = u->prompt_tokens;
      f.completion_tokens = u->completion_tokens;
      f.cached_tokens = u->cached_tokens;
    }
    metrics.request_finished(f);
    call.stream->respond(std::move(r));
  };

  const Nanos route_start = monotonic_now();  // routing time: keys_for through the first pick
  std::string route_us;                       // x-kvgate-route-us
  std::vector<kv::BlockKey> keys;
  uint32_t prompt_tokens = 0;
  std::vector<uint32_t> token_ids;
  PoolWarmup* warmup = warmup_of(&pool);
  const bool track = warmup && warmup->enabled();
  EngineTokenizer* fallback = pool.engine_tokenizer();
  std::optional<tokenizer::TokenizeCall> fetch_after_pick;  // a follow-up's whole ids
  if (fallback && fallback->covers(call.kind)) {
    // The engine fallback: the ids come from the pool's engines (at most its timeout).
    EngineTokenizer::Ids got =
        co_await fallback->ids_for(call.request, call.body, call.kind, call.model->served_name);
    pool.keys_of(got.ids, keys);
    prompt_tokens = static_cast<uint32_t>(got.ids.size());
    if (track && got.exact) token_ids = std::move(got.ids);
    fetch_after_pick = std::move(got.later);
  } else {
    pool.keys_for(call.request, call.body, call.kind, call.model->served_name, keys, prompt_tokens,
                  track ? &token_ids : nullptr);
  }
  if (track) {
    // A chat prompt without real tokens cannot be replayed as a completion: not tracked.
    warmup->observe(keys, token_ids,
                    call.kind == openai::ApiKind::kCompletion ? call.request.prompt_text : "");
  }
  route::RouteRequest rr;
  rr.id = next_request_id.fetch_add(1);
  rr.keys = std::move(keys);
  rr.prompt_tokens = prompt_tokens;
  rr.expected_output_tokens = call.request.max_tokens;
  rr.criticality = call.criticality;

  io::UpstreamRequest up;
  up.method = "POST";
  up.target = std::move(call.target);
  up.fixed_headers = call.request.stream
                         ? "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
                         : "Content-Type: application/json\r\nAccept: application/json\r\n";
  up.body = std::move(call.body);
  // A client that leaves closes the upstream exchange at once (the engine then aborts the
  // request, as vLLM does on a disconnect) instead of keeping the engine busy to the end.
  auto cancel = std::make_shared<io::UpstreamCancel>();
  up.cancel = cancel.get();
  const asio::any_io_executor here = co_await asio::this_coro::executor;
  call.stream->on_close([here, cancel] { asio::dispatch(here, [cancel] { cancel->cancel(); }); });
  call.stream->watch_client();
  // Stream migration (opt-in per pool): the engine is asked for the token ids.
  std::optional<MigratingStream> migration;
  if (call.request.stream && pool.config().max_migrations > 0) {
    migration = MigratingStream::start(up.body, call.kind);
    if (migration) up.body = migration->first_body();
  }

  std::vector<route::EndpointId> excluded;
  RouteLease lease;  // the router's load for the attempt in progress
  auto client_left = [&] {
    // Released as finished: the endpoint did nothing wrong.
    lease.finish(true);
    fault_metrics.cancelled(pool.name(), /*after_first_byte=*/false);
    final_status = 499;  // nginx's "client closed request"
    metrics.request_finished({.model = model,
                              .pool = pool.name(),
                              .tenant = call.tenant,
                              .status = final_status,
                              .seconds = seconds_since(call.received),
                              .routing_seconds = call.routing_seconds});
  };
  std::unique_ptr<io::UpstreamExchange> exchange;
  std::shared_ptr<const EndpointAddress> endpoint;
  std::string prefill_url;  // disaggregated: the prefill endpoint of the decode hop below
  std::string last_error;   // set by a failed attempt (no allocation on the common path)
  const int attempts = config.retries.max_attempts;
  for (int attempt = 0; attempt < attempts && !exchange; ++attempt) {
    if (cancel->cancelled()) break;
    // At once on the pool's only thread; else on its strand.
    // (Not a conditional expression: GCC 12 mishandles co_await inside one.)
    // Flow control: the first attempt goes through the pool's queue (pool_flow.h).
    const bool queue = attempt == 0 && pool.flow() != nullptr;
    std::optional<Pick> now;
    if (queue) {
      // One close callback (a second would replace the first): leave the queue, cancel.
      auto* p = &pool;
      const route::RequestId id = rr.id;
      call.stream->on_close([p, id, here, cancel] {
        p->cancel_queued(id);
        asio::dispatch(here, [cancel] { cancel->cancel(); });
      });
      now = co_await pool.admit(
          rr, {.tenant = call.tenant, .weight = call.flow.weight, .deadline = call.flow.deadline});
    } else {
      now = pool.pick_now(rr, excluded, attempt == 0 ? route_start : monotonic_now());
    }
    if (!now) now = co_await pool.pick(rr, excluded);
    Pick& pick = *now;
    if (pick.flow_status != 0) {
      HttpResponse r = flow_refusal_response(pick, pool.flow()->config());
      respond(pick.flow_status, std::move(r));
      break;
    }
    if (queue) call.flow.charged_output_tokens = pick.charged_output_tokens;
    if (attempt == 0) {
      const Nanos took = monotonic_now() - route_start;
      call.routing_seconds = to_seconds(took);
      route_us = std::to_string((took + 500) / 1000);
      // Only now, so that the follow-up's own routing never waits behind it.
      if (fetch_after_pick) fallback->fetch_later(std::move(*fetch_after_pick));
    }
    if (!pick.decision.accepted()) {
      if (attempt > 0) break;  // retries exhausted the healthy endpoints: 502 below
      int status = route::http_status(pick.decision.reason);
      std::string reason(route::to_string(pick.decision.reason));
      HttpResponse r =
          json_error(status, fmt::format("Request not routed: {}", reason), {}, reason);
      r.headers.push_back({"x-kvgate-reject-reason", reason});
      respond(status, std::move(r));
      break;
    }
    lease = RouteLease(pool, rr.id, pools_alive);
    endpoint = std::move(pick.endpoint);
    if (attempt > 0) metrics.retry(pool.name());
    // Disaggregated: the prefill hop first; `endpoint` is then the decode endpoint.
    std::optional<io::UpstreamRequest> decode_up;
    prefill_url.clear();
    if (pick.decision.prefill_endpoint) {
      PrefillHopContext ctx{*upstream, pool, metrics, config.timeouts, pick.decision, lease, up};
      PrefillHop hop = co_await run_prefill_hop(ctx);
      if (hop.outcome == PrefillHop::kRetry) {
        last_error = std::move(hop.error);
        excluded.push_back(hop.failed_endpoint);
        continue;
      }
      if (hop.outcome == PrefillHop::kFail) {
        respond(hop.response.status, std::move(hop.response));
        break;
      }
      decode_up = std::move(hop.decode_request);
      prefill_url = std::move(hop.prefill_url);
    } else if (disaggregated(pool.config())) {
      metrics.pd_local_prefill(pool.name());
    }
    const io::UpstreamRequest& to_send = decode_up ? *decode_up : up;  // borrowed by send
    auto result = co_await upstream->send(endpoint->host, endpoint->port, to_send);
    if (!result && result.error().kind == io::UpstreamErrorKind::kCancelled) break;
    if (!result) {
      last_error = result.error().message;
      metrics.upstream_error(pool.name(), endpoint->url, io::to_string(result.error().kind));
      if (!prefill_url.empty()) {
        metrics.pd_hop_failure(pool.name(), "decode", io::to_string(result.error().kind));
      }
      lease.done(endpoint->id, false, monotonic_now());
      excluded.push_back(endpoint->id);
      continue;
    }
    if ((*result)->status() == 503) {
      // Overloaded or starting: nothing reached the client yet, try another endpoint.
      (void)co_await (*result)->read_all(config.timeouts.upstream_header, 1 << 20);
      last_error = fmt::format("{} answered 503", endpoint->url);
      metrics.upstream_error(pool.name(), endpoint->url, "status_503");
      if (!prefill_url.empty()) metrics.pd_hop_failure(pool.name(), "decode", "status_503");
      lease.done(endpoint->id, false, monotonic_now());
      excluded.push_back(endpoint->id);
      continue;
    }
    exchange = std::move(*result);
  }

  if (cancel->cancelled() && final_status == 0) {
    client_left();
  } else if (!exchange) {
    if (final_status == 0) {
      respond(502,
              json_error(502,
                         fmt::format("Upstream failed: {}",
                                     last_error.empty() ? "no endpoint available" : last_error),
                         {}, "upstream_unavailable"));
    }
  } else if (!call.request.stream || exchange->status() != 200) {
    // Whole response (or an engine error on a stream request): read it, pass it on.
    std::string content_type(exchange->headers().find("content-type").value_or("application/json"));
    auto body = co_await exchange->read_all(config.timeouts.stream, 64 << 20);
    if (!body && body.error().kind == io::UpstreamErrorKind::kCancelled) {
      client_left();
    } else if (!body) {
      metrics.upstream_error(pool.name(), endpoint->url, io::to_string(body.error().kind));
      if (!prefill_url.empty()) {
        metrics.pd_hop_failure(pool.name(), "decode", io::to_string(body.error().kind));
      }
      lease.done(endpoint->id, false, monotonic_now());
      respond(502,
              json_error(502, "Upstream failed: " + body.error().message, {}, "upstream_error"));
    } else {
      const Nanos done = monotonic_now();
      lease.done(endpoint->id, true, done, /*first_token=*/true);
      const bool answered = exchange->status() == 200;
      openai::Usage u;
      if (answered) {
        u = openai::parse_usage(*body);
        if (u.seen) charge(call.limited_tenant, model, u);
      }
      HttpResponse r{exchange->status(), std::move(content_type), {}, std::move(*body)};
      // The routing fields as one string of lines (three strings fewer per answer).
      using namespace std::string_view_literals;  // appends of literals without strlen
      std::string& lines = r.header_lines;
      lines.reserve(64 + endpoint->url.size() + prefill_url.size());
      lines.append("x-kvgate-endpoint: "sv).append(endpoint->url);
      lines.append("\r\nx-kvgate-route-us: "sv).append(route_us).append("\r\n"sv);
      if (!prefill_url.empty()) {
        lines.append("x-kvgate-prefill-endpoint: "sv).append(prefill_url).append("\r\n"sv);
      }
      respond(exchange->status(), std::move(r), answered, &u, done);
    }
  } else {
    // Stream: pass events through as they arrive, from a coroutine of its own (the
    // connection writes them meanwhile).
    StreamJob job{std::move(cancel),     std::move(call),  std::move(exchange),
                  std::move(endpoint),   std::move(lease), std::move(route_us),
                  std::move(prefill_url)};
    if (migration) {
      job.migration = std::move(migration);
      job.keys = std::move(keys);  // rr.keys views them
    }
    asio::co_spawn(co_await asio::this_coro::executor, pump_stream(std::move(job)), asio::detached);
  }
}

asio::awaitable<void> Gateway::Impl::pump_stream(StreamJob job) {
  ProxyCall& call = job.call;
  PoolRuntime& pool = *call.pool;
  const std::string& model = call.model->name;
  const std::string& prefill_url = job.prefill_url;
  metrics.stream_started();
  const int final_status = 200;
  std::vector<io::HttpHeader> head = {{"Cache-Control", "no-cache"},
                                      {"x-kvgate-endpoint", job.endpoint->url},
                                      {"x-kvgate-route-us", job.route_us}};
  if (!prefill_url.empty()) head.push_back({"x-kvgate-prefill-endpoint", prefill_url});
  call.stream->start(200, "text/event-stream", std::move(head));
  openai::SseTap tap(/*strip_usage_chunk=*/!call.request.client_wants_usage);
  const Nanos deadline =
      call.received +
      std::chrono::duration_cast<std::chrono::nanoseconds>(config.timeouts.stream).count();
  Nanos last_token = 0;
  bool ok = false;
  bool client_left = false;
  std::string out;
  std::string relayed;  // migration: the client's events of what came
  auto end_timed_out = [&] {
    out = "data: " + openai::error_json(504, "The stream exceeded the gateway's stream timeout") +
          "\n\ndata: [DONE]\n\n";
    call.stream->write(std::move(out));
    metrics.upstream_error(pool.name(), job.endpoint->url, "timeout");
  };
  while (true) {
    if (call.stream->closed()) {  // the client went away
      client_left = true;
      break;
    }
    Nanos left = deadline - monotonic_now();
    if (left <= 0) {
      end_timed_out();
      break;
    }
    auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::nanoseconds(left)) +
        std::chrono::milliseconds(1);
    bool until_deadline = true;  // else the idle timeout bounds this read
    if (const auto idle = config.timeouts.stream_idle; idle.count() > 0 && idle < wait) {
      wait = idle;
      until_deadline = false;
    }
    auto piece = co_await job.exchange->read_some(wait);
    if (!piece &&
        (piece.error().kind == io::UpstreamErrorKind::kCancelled || call.stream->closed())) {
      client_left = true;  // its on_close cancelled the exchange
      break;
    }
    // (The read's timer may fire a clock tick before `deadline`.)
    if (!piece && piece.error().kind == io::UpstreamErrorKind::kTimeout && until_deadline) {
      end_timed_out();  // the read waited out the gateway's stream timeout, not a silence
      break;
    }
    if (!piece) {
      const std::string kind(io::to_string(piece.error().kind));
      metrics.upstream_error(pool.name(), job.endpoint->url, kind);
      if (!prefill_url.empty()) metrics.pd_hop_failure(pool.name(), "decode", kind);
      pool.endpoint_result(job.endpoint->id, false);
      std::string error = piece.error().message;
      if (job.migration) {
        const Migrated m = co_await migrate(job);
        if (m == Migrated::kResumed) continue;
        if (m == Migrated::kCancelled) {
          client_left = true;
          break;
        }
        if (m == Migrated::kComplete) {
          // Every token went through before the engine died: end the answer here.
          out.clear();
          (void)tap.feed(job.migration->closing_events(), out);
          call.stream->write(std::move(out));
          ok = true;
          break;
        }
      }
      // Bytes already reached the client: end the stream with an error event.
      out = "data: " +
            openai::error_json(502, "The upstream engine failed mid-stream: " + error, {},
                               "upstream_error") +
            "\n\ndata: [DONE]\n\n";
      call.stream->write(std::move(out));
      break;
    }
    if (piece->empty()) {
      ok = true;
      break;
    }
    out.clear();
    std::string_view data = *piece;
    if (job.migration) {
      relayed.clear();
      job.migration->feed(data, relayed);
      data = relayed;
    }
    openai::SseTap::Step step = tap.feed(data, out);
    if (step.token_events > 0) {
      Nanos now = monotonic_now();
      if (last_token == 0) {
        metrics.ttft(model, to_seconds(now - call.received));
      } else {
        metrics.itl(model, to_seconds(now - last_token));
      }
      job.lease.first_token();  // once per leg
      for (size_t i = 1; i < step.token_events; ++i) metrics.itl(model, 0);
      last_token = now;
    }
    if (out.empty()) continue;
    if (call.stream->pending_bytes() > kMaxPendingBytes) {
      co_await write_and_wait(*call.stream, std::move(out));
    } else {
      call.stream->write(std::move(out));
    }
    out = std::string();
  }
  if (ok && job.lease.held()) pool.endpoint_result(job.endpoint->id, true);
  if (client_left) {
    job.exchange.reset();  // closes the upstream connection now: the engine aborts
    fault_metrics.cancelled(pool.name(), /*after_first_byte=*/true);
  }
  // A client that left is no failure of the endpoint's.
  job.lease.finish(ok || client_left);
  // Tokens count also when the client went away mid-stream, as long as the usage chunk came.
  const openai::Usage& u = tap.usage();
  if (u.seen) charge(call.limited_tenant, model, u);
  if (u.seen && call.flow.charged_output_tokens > 0) {
    pool.flow_output(call.tenant, call.flow.charged_output_tokens, u.completion_tokens);
  }
  metrics.stream_ended();
  metrics.request_finished({.model = model,
                            .pool = pool.name(),
                            .tenant = call.tenant,
                            .status = final_status,
                            .seconds = seconds_since(call.received),
                            .routing_seconds = call.routing_seconds,
                            .has_tokens = u.seen,
                            .prompt_tokens = u.prompt_tokens,
                            .completion_tokens = u.completion_tokens,
                            .cached_tokens = u.cached_tokens});
  call.stream->finish();
}

asio::awaitable<Gateway::Impl::Migrated> Gateway::Impl::migrate(StreamJob& job) {
  PoolRuntime& pool = *job.call.pool;
  MigratingStream& m = *job.migration;
  const route::EndpointId failed = job.endpoint->id;
  job.lease.finish(false);  // the failed leg's load goes now
  job.exchange.reset();
  if (m.complete()) co_return Migrated::kComplete;
  if (!m.can_continue()) {  // the engine sent no token ids: nothing to continue from
    fault_metrics.migration(pool.name(), "failed", 0);
    co_return Migrated::kFailed;
  }
  if (job.migrations >= pool.config().max_migrations) {
    fault_metrics.migration(pool.name(), "exhausted", 0);
    co_return Migrated::kFailed;
  }
  ++job.migrations;
  // Routed like any request: the original prompt's blocks (the streamed tokens are in no
  // other engine's cache), so an endpoint holding the prefix is preferred.
  route::RouteRequest rr;
  rr.id = next_request_id.fetch_add(1);
  rr.keys = job.keys;
  rr.prompt_tokens = static_cast<uint32_t>(m.prompt_tokens() + m.generated());
  rr.expected_output_tokens = m.remaining().value_or(job.call.request.max_tokens);
  rr.criticality = job.call.criticality;
  io::UpstreamRequest up;
  up.method = "POST";
  up.target = "/v1/completions";
  up.fixed_headers = "Content-Type: application/json\r\nAccept: text/event-stream\r\n";
  up.body = m.continuation_body();
  up.cancel = job.cancel.get();
  std::vector<route::EndpointId> excluded{failed};
  for (int attempt = 0; attempt < config.retries.max_attempts; ++attempt) {
    std::optional<Pick> now = pool.pick_now(rr, excluded, monotonic_now());
    if (!now) now = co_await pool.pick(rr, excluded);
    if (!now->decision.accepted()) break;
    RouteLease lease(pool, rr.id, pools_alive);
    std::shared_ptr<const EndpointAddress> endpoint = std::move(now->endpoint);
    auto result = co_await upstream->send(endpoint->host, endpoint->port, up);
    if (!result && result.error().kind == io::UpstreamErrorKind::kCancelled) {
      lease.finish(true);  // the client left: no failure of this endpoint's
      co_return Migrated::kCancelled;
    }
    if (!result || (*result)->status() != 200) {
      const std::string kind = result ? fmt::format("status_{}", (*result)->status())
                                      : std::string(io::to_string(result.error().kind));
      metrics.upstream_error(pool.name(), endpoint->url, kind);
      lease.done(endpoint->id, false, monotonic_now());
      excluded.push_back(endpoint->id);
      continue;
    }
    fault_metrics.migration(pool.name(), "resumed", m.generated());
    spdlog::info("pool {}: stream migrated from endpoint {} to {} after {} tokens", pool.name(),
                 failed, endpoint->url, m.generated());
    m.begin_leg();
    job.exchange = std::move(*result);
    job.endpoint = std::move(endpoint);
    job.lease = std::move(lease);
    co_return Migrated::kResumed;
  }
  fault_metrics.migration(pool.name(), "failed", 0);
  co_return Migrated::kFailed;
}

void Gateway::Impl::charge(const Tenant* tenant, std::string_view model, const openai::Usage& u) {
  if (!tenant) return;
  limiter->charge_async(
      *tenant, model, {.prompt_tokens = u.prompt_tokens, .completion_tokens = u.completion_tokens},
      wall_now());
}

void Gateway::Impl::stop_all() {
  if (stopped.exchange(true)) return;
  for (auto& a : autoscalers) a->stop();  // while the I/O threads still serve the strands
  for (auto& d : discoveries) d->stop();
  if (cluster) cluster->stop();
  if (admin) admin->stop();
  for (auto& s : servers) s->stop(std::chrono::milliseconds(0));
  work.reset();
  io.stop();
  for (auto& t : threads) {
    if (t.joinable()) t.join();
  }
  upstream->close_idle();  // no thread runs the context now (see the hint in Impl())
  limiter.reset();         // its Redis connection's socket before the context goes
}

Gateway::Gateway(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Gateway::~Gateway() { impl_->stop_all(); }

namespace {

boost::json::object latency_json(const scale::LatencySummary& l) {
  return {{"p50", l.p50}, {"p90", l.p90}, {"p99", l.p99}, {"mean", l.mean}, {"samples", l.samples}};
}

}  // namespace

// GET /admin/warmup (every pool's warm-up state) and /admin/pools/{pool}/autoscaler (the
// latest decision and the signals it was made on).
void register_admin_sections(Gateway::Impl& impl) {
  Gateway::Impl* self = &impl;
  impl.admin->add_section(
      "warmup", [self] { return boost::json::parse(warmup_status_json(self->all_warmups())); });
  impl.admin->add_pool_section("discovery",
                               [self](std::string_view pool) -> std::optional<boost::json::value> {
                                 for (const auto& d : self->discoveries) {
                                   if (d->pool_name() == pool) return d->state_json();
                                 }
                                 return std::nullopt;
                               });
  impl.admin->add_pool_section("queue",
                               [self](std::string_view pool) -> std::optional<boost::json::value> {
                                 PoolRuntime* p = self->pool_named(pool);
                                 if (!p || !p->flow()) return std::nullopt;
                                 return boost::json::parse(p->flow()->queue_view());
                               });
  if (impl.cluster) {
    impl.admin->add_section("cluster",
                            [self] { return boost::json::parse(self->cluster->status_json()); });
  }
  impl.admin->add_pool_section(
      "autoscaler", [self](std::string_view pool) -> std::optional<boost::json::value> {
        for (const auto& a : self->autoscalers) {
          if (a->pool_name() != pool) continue;
          const PoolAutoscaler::State st = a->state();
          const scale::Decision& d = st.decision;
          const scale::PoolSignals& sig = st.signals;
          boost::json::object inputs;
          if (d.inputs) {
            for (const scale::NamedInput& in : scale::named_inputs(*d.inputs))
              inputs[in.name] = in.value;
          }
          return boost::json::object{
              {"inputs", std::move(inputs)},
              {"standby", d.standby},
              {"decisions", st.decisions},
              {"desired_replicas", st.leader_desired.value_or(d.desired_replicas)},
              {"own_desired_replicas", d.desired_replicas},
              {"acted", st.acted},
              {"current_replicas", d.current_replicas},
              {"needed", d.needed},
              {"demand", d.demand},
              {"min_replicas", d.min_replicas},
              {"max_replicas", d.max_replicas},
              {"panic", d.panic},
              {"limited_by", d.limited_by},
              {"reason", d.reason},
              {"horizon_s", static_cast<double>(d.horizon) / kSecond},
              {"signals",
               boost::json::object{{"waiting", sig.waiting},
                                   {"running", sig.running},
                                   {"kv_usage", sig.kv_usage},
                                   {"prompt_tokens_per_s", sig.prompt_tokens_per_s},
                                   {"generation_tokens_per_s", sig.generation_tokens_per_s},
                                   {"ttft", latency_json(sig.ttft)},
                                   {"itl", latency_json(sig.itl)},
                                   {"ready", sig.ready()},
                                   {"starting", sig.starting()}}}};
        }
        return std::nullopt;
      });
}

Result<std::unique_ptr<Gateway>> Gateway::start(GatewayConfig config) {
  auto impl = std::make_unique<Impl>(config.threads);
  impl->config = std::move(config);
  const GatewayConfig& c = impl->config;
  if (!c.keys_file.empty()) {
    auto keys = KeyStore::load(c.keys_file);
    if (!keys) return Error(keys.error());
    impl->keys = std::move(*keys);
  }
  // Redis calls on one strand (the context itself when it has one thread).
  impl->limiter = std::make_unique<TenantLimiter>(
      c.rate_limits,
      c.threads == 1 ? asio::any_io_executor(impl->io.get_executor())
                     : asio::any_io_executor(asio::make_strand(impl->io)),
      [m = &impl->metrics] { m->rate_limit_store_failure(); });
  impl->upstream = std::make_unique<io::UpstreamClient>(
      impl->io.get_executor(), io::UpstreamOptions{.connect_timeout = c.timeouts.connect,
                                                   .head_timeout = c.timeouts.upstream_header,
                                                   .lazy_idle_timers = true,
                                                   .single_threaded = c.threads == 1});
  for (const PoolConfig& p : c.pools) {
    auto pool = PoolRuntime::create(p, c.breaker, impl->io.get_executor(), impl->metrics,
                                    /*one_thread=*/c.threads == 1);
    if (!pool) return Error(pool.error());
    impl->pools.push_back(std::move(*pool));
  }
  for (auto& pool : impl->pools) {
    if (!pool->tokenize_plan().uses_engine()) continue;
    pool->set_engine_tokenizer(
        EngineTokenizer::create(*pool, *impl->upstream, impl->io.get_executor(), impl->metrics));
    spdlog::info("pool {}: {}; {}", pool->name(), pool->tokenize_plan().tokenizer,
                 pool->tokenize_plan().chat_template);
  }
  for (auto& pool : impl->pools) {
    std::string served = pool->name();
    for (const ModelConfig& m : c.models) {
      if (m.pool == pool->name()) {
        served = m.served_name;
        break;
      }
    }
    impl->warmups.push_back(
        PoolWarmup::create(*pool, std::move(served), *impl->upstream, impl->io.get_executor()));
  }
  for (auto& pool : impl->pools) {
    auto feed = LiveFeed::start(*pool, impl->metrics);
    if (!feed) return Error(feed.error());
    impl->feeds.push_back(std::move(*feed));
    // An endpoint that left takes its idle upstream connections with it.
    (void)pool->on_change([up = impl->upstream.get()](const EndpointChange& c) {
      if (c.kind == EndpointChange::Kind::kRemoved)
        up->close_idle(c.endpoint.host, c.endpoint.port);
    });
  }
  {
    boost::json::array data;
    for (const ModelConfig& m : c.models) {
      for (const std::string* name : [&] {
             std::vector<const std::string*> names{&m.name};
             for (const auto& a : m.aliases) names.push_back(&a);
             return names;
           }()) {
        data.push_back(boost::json::object{{"id", *name},
                                           {"object", "model"},
                                           {"created", 0},
                                           {"owned_by", "kvgate"},
                                           {"root", m.served_name}});
      }
    }
    impl->models_json =
        boost::json::serialize(boost::json::object{{"object", "list"}, {"data", std::move(data)}});
  }
  if (c.cluster) {
    std::vector<PoolRuntime*> pools;
    for (auto& p : impl->pools) pools.push_back(p.get());
    std::vector<PoolWarmup*> warmups;
    for (auto& w : impl->warmups) warmups.push_back(w.get());
    impl->cluster =
        ReplicaSync::start(*c.cluster, std::move(pools),
                           c.threads == 1 ? asio::any_io_executor(impl->io.get_executor())
                                          : asio::any_io_executor(asio::make_strand(impl->io)),
                           std::move(warmups));
  }
  impl->work.emplace(impl->io.get_executor());
  for (int i = 0; i < c.threads; ++i) {
    impl->threads.emplace_back([io = &impl->io] { io->run(); });
  }
  Impl* self = impl.get();
  for (const ListenerConfig& l : c.listeners) {
    io::HttpServerOptions opts;
    opts.address = l.address;
    opts.port = l.port;
    opts.threads = c.threads;
    opts.max_header_bytes = c.limits.max_header_bytes;
    opts.max_body_bytes = c.limits.max_body_bytes;
    opts.idle_timeout = std::min(c.timeouts.header, c.timeouts.idle);
    opts.handshake_timeout = c.timeouts.header;
    if (l.tls) {
      opts.tls_cert_file = l.tls->cert_file;
      opts.tls_key_file = l.tls->key_file;
    }
    // The servers run on the gateway's own threads: no hop between the client's side
    // and the upstream's side of a request.
    opts.io_context = &impl->io;
    opts.single_threaded = c.threads == 1;  // streams are used on that thread only
    if (impl->keys) {
      opts.early_refusal = [self](const HttpRequest& head) {
        return self->refuse_before_body(head);
      };
    }
    // The proxy runs inside the connection's coroutine (no hand-off for a whole answer).
    io::AwaitableHttpHandler handler = [self](HttpRequest&& req,
                                              std::shared_ptr<ResponseStream> stream) {
      std::optional<ProxyCall> call;
      self->handle(std::move(req), std::move(stream), call);
      if (call && call->pool->flow()) {
        // A request that may wait in the queue runs apart from its connection, which
        // then watches for the client going away (the queue drops it at once).
        asio::co_spawn(self->io.get_executor(), self->proxy(std::move(*call)), asio::detached);
        return answered();
      }
      return call ? self->proxy(std::move(*call)) : answered();
    };
    auto server = io::HttpServer::start(opts, std::move(handler));
    if (!server) {
      impl->stop_all();
      return Error(fmt::format("listener {}:{}: {}", l.address, l.port, server.error()));
    }
    impl->servers.push_back(std::move(*server));
  }
  if (c.admin) {
    std::vector<AdminApi::PoolHandle> handles;
    for (size_t i = 0; i < impl->pools.size(); ++i) {
      handles.push_back({impl->pools[i].get(), impl->feeds[i].get()});
    }
    auto admin = AdminApi::start(*c.admin, impl->io.get_executor(), std::move(handles));
    if (!admin) {
      impl->stop_all();
      return Error(admin.error());
    }
    impl->admin = std::move(*admin);
  }
  for (auto& pool : impl->pools) {
    if (!pool->config().autoscale) continue;
    std::vector<std::string> models;
    for (const ModelConfig& m : c.models) {
      if (m.pool == pool->name()) models.push_back(m.name);
    }
    // Several replicas: only the pool's leader actuates (gateway/replica_sync.h).
    auto autoscaler = PoolAutoscaler::start(
        *pool, std::move(models), impl->metrics,
        impl->cluster ? impl->cluster->leader_link(pool->name()) : LeaderLink());
    if (!autoscaler) {
      impl->stop_all();
      return Error(autoscaler.error());
    }
    impl->autoscalers.push_back(std::move(*autoscaler));
  }
  for (auto& pool : impl->pools) {
    if (!pool->config().discovery) continue;
    auto d =
        discovery::PoolDiscovery::start(*pool, *pool->config().discovery, impl->io.get_executor());
    if (!d) {
      impl->stop_all();
      return Error(d.error());
    }
    impl->discoveries.push_back(std::move(*d));
  }
  if (impl->admin) register_admin_sections(*impl);
  return std::unique_ptr<Gateway>(new Gateway(std::move(impl)));
}

std::vector<uint16_t> Gateway::ports() const {
  std::vector<uint16_t> out;
  for (const auto& s : impl_->servers) out.push_back(s->port());
  return out;
}

void Gateway::drain() {
  if (impl_->not_ready.exchange(true)) return;
  // /ready says 503 while requests are still served, so load balancers and Kubernetes
  // endpoints stop sending new connections before the listeners close.
  if (const auto announce = impl_->config.timeouts.drain_announce; announce.count() > 0) {
    spdlog::info("draining: /ready answers 503; serving {} ms more before closing listeners",
                 announce.count());
    std::this_thread::sleep_for(announce);
  }
  impl_->draining = true;
  // Queued requests may still be served during the drain; those left are answered 503
  // shortly before the grace time ends (pool_flow_drain.h).
  auto refuse = refuse_queued_before(impl_->io, impl_->config.timeouts.drain, pools());
  spdlog::info("draining: waiting up to {} ms for {} stream(s)",
               impl_->config.timeouts.drain.count(), impl_->metrics.active_streams());
  // Each server stops accepting at once and gives its responses in flight the grace time.
  std::vector<std::thread> stoppers;
  for (auto& s : impl_->servers) {
    stoppers.emplace_back([&s, grace = impl_->config.timeouts.drain] { s->stop(grace); });
  }
  for (auto& t : stoppers) t.join();
  impl_->stop_all();
}

bool Gateway::draining() const { return impl_->not_ready.load(); }

GatewayMetrics& Gateway::metrics() { return impl_->metrics; }

std::vector<PoolRuntime*> Gateway::pools() {
  std::vector<PoolRuntime*> out;
  for (auto& p : impl_->pools) out.push_back(p.get());
  return out;
}

PoolRuntime* Gateway::pool(std::string_view name) { return impl_->pool_named(name); }

AdminApi* Gateway::admin() { return impl_->admin.get(); }

std::optional<uint16_t> Gateway::admin_port() const {
  if (!impl_->admin) return std::nullopt;
  return impl_->admin->port();
}

std::string Gateway::warmup_status_json() const {
  return ::kvgate::gateway::warmup_status_json(impl_->all_warmups());
}

}  // namespace kvgate::gateway
