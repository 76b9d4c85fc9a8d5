// DataPlane: the gateway's request path, the state it runs on and the code that runs it:
//   front_door.cc  the request's checks: key, body, model, tenant (DataPlane::handle*)
//   proxy.cc       routing, proxy attempts and retries, the stream pump, migration
//   external.cc    external routing (the Endpoint Picker): the pick handed back
// It knows no control plane and no replica sync: what it asks of them goes through the
// interfaces it declares (gateway/data/hooks.h: a pool's AdapterPlacement and
// PromptObserver; unready() and metrics_text() below), which the gateway's wiring
// implements and sets (Gateway::Impl, gateway/gateway_impl.h, derives from DataPlane).
// Not a public header: only the files above and the gateway's wiring include it.
//
// Thread-safety: handle* run on the listener's I/O thread (for pick_external's requests,
// on the caller's thread), proxy() and what it calls on the request's coroutine; the
// members set at start (config, keys, pools, hooks, ...) are read-only once traffic
// starts; the rest is atomic or has its own lock.
#pragma once

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
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/common/clock.h"
#include "gateway/common/config.h"
#include "gateway/common/metrics.h"
#include "gateway/data/disagg_flow.h"
#include "gateway/data/engine_tokenizer.h"
#include "gateway/data/external.h"
#include "gateway/data/fault_metrics.h"
#include "gateway/data/flow_glue.h"
#include "gateway/data/hooks.h"
#include "gateway/data/keys.h"
#include "gateway/data/pool_flow.h"
#include "gateway/data/pool_runtime.h"
#include "gateway/data/route_lease.h"
#include "gateway/data/stream_migration.h"
#include "gateway/data/tenant_limiter.h"
#include "gateway/data/tracer.h"
#include "io/http_server.h"
#include "io/upstream_client.h"
#include "openai/anthropic.h"
#include "openai/error.h"
#include "openai/request.h"
#include "openai/responses.h"
#include "openai/sse_tap.h"

namespace kvgate::gateway {
namespace asio = boost::asio;
using io::HttpRequest;
using io::HttpResponse;
using io::ResponseStream;

// An OpenAI-style error answer.
inline HttpResponse json_error(int status, std::string_view message, std::string_view param = {},
                               std::string_view code = {}) {
  HttpResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body = openai::error_json(status, message, param, code);
  return r;
}

// The error answers of an Anthropic Messages request in Anthropic's shape (the rest of
// the gateway words them OpenAI's way, as the Responses API's are); any other answer as
// it is.
// In place, and nothing at all for the common dialect (it is on every answer's path).
inline void shape(openai::Dialect dialect, HttpResponse& r) {
  if (dialect == openai::Dialect::kAnthropic && r.status >= 400) [[unlikely]] {
    r.body = openai::anthropic::error_from_openai(r.status, r.body);
  }
}

// Flow control: what the pool's queue needs to know of the request (pool_flow.h).
struct FlowTicketData {
  double weight = 1;
  std::optional<Nanos> deadline;       // absolute, in DataPlane::clock's time
  uint32_t charged_output_tokens = 0;  // set once dispatched: corrected at the end
};

// What the gateway does with a request it proxies: generation (chat, completions,
// Messages, Responses) is routed on the prompt's blocks; embeddings, scores and reranking
// by load alone (no prefix is reused); tokenize, detokenize and Anthropic's count_tokens
// are relayed to any healthy endpoint of the pool, outside the queue and the router's
// load (the engine's API server answers them, not its GPU); a stored response (GET
// /v1/responses/{id}) is fetched from the one endpoint that answered it (kStored).
enum class Serve : uint8_t { kGenerate, kEmbed, kRelay, kStored };

// GET /v1/responses/{id}: the prefix of the path; the id follows it (no '/').
inline constexpr std::string_view kResponsesPrefix = "/v1/responses/";

// The 404 of a response id no endpoint of the gateway's holds (OpenAI's and vLLM's words).
inline HttpResponse response_not_found(std::string_view id) {
  return json_error(404, fmt::format("Response with id '{}' not found.", id));
}

// What the front door makes of a proxied path: how it is served, which body it carries
// (`aux`: for kEmbed and kRelay, openai::inspect_aux_request) and the dialect it speaks.
struct ApiRoute {
  openai::ApiKind kind;
  Serve serve;
  openai::AuxApi aux;
  openai::Dialect dialect;
};

// Anthropic Messages (POST /v1/messages) and Responses (POST /v1/responses) are routed on
// `route_body`, the chat request they stand for. Apart from ProxyCall, which every
// request moves around, so that the common dialect does not carry it.
struct Translation {
  std::string route_body;
  // Responses: the response this one continues ("" when none), whose endpoint holds the
  // conversation (PoolRouting::responses()).
  std::string previous_response;
};

// The stream of an external request (data/external.cc): it takes the gateway's answer,
// or the pick that proxy() hands back instead of sending the request upstream.
class ExternalStream;
// The endpoints of `pool` outside the stream's subset hint (none without a hint): the
// request's RouteRequest::excluded.
std::vector<route::EndpointId> outside_subset(const ExternalStream& stream,
                                              const PoolRuntime& pool);
// The request's RouteRequest::runners_up: all the router lists (Decision::kMaxRunnersUp)
// when the data plane asked for fallbacks, 0 when not; hand_off_external keeps as many as
// it asked for (fallback_destinations).
uint8_t external_fallbacks(const ExternalStream& stream);

struct ProxyCall {
  std::shared_ptr<ResponseStream> stream;
  // Gateway::pick_external's requests: `stream` itself, where the pick goes back instead
  // of the request going upstream. Null for the gateway's own requests.
  ExternalStream* external = nullptr;
  Serve serve = Serve::kGenerate;
  // Messages and Responses: their events, usage and errors are their own; they are routed
  // on `translation` (set exactly when the dialect is not kOpenAi).
  openai::Dialect dialect = openai::Dialect::kOpenAi;
  std::unique_ptr<Translation> translation;
  std::string body;  // already rewritten for the upstream
  std::string target;
  openai::ApiKind kind;
  openai::InspectedRequest request;
  const ModelConfig* model;
  PoolRuntime* pool;
  std::string tenant;
  // Set when the tenant has rate limits. kStored: the key's tenant, whatever its limits
  // (the response read must be of one of its models); null without keys.
  const Tenant* limited_tenant = nullptr;
  route::Criticality criticality;
  // The session header's value as route::session_key (with the model); 0 when absent.
  uint64_t session = 0;
  FlowTicketData flow;  // flow control: the tenant's weight and the request's deadline
  // Latency targets (x-kvgate-ttft-ms / x-kvgate-tpot-ms, llm-d's x-slo-*, or the
  // tenant's defaults); 0 = none. Become RouteRequest::ttft_target / tpot_target.
  Nanos ttft_target = 0;
  Nanos tpot_target = 0;
  Nanos received;
  std::optional<double> routing_seconds;  // keys through the first pick (once picked)
  // Traced requests only (tracing configured and sampled); null otherwise. Its end
  // queues the request's spans for export (tracer.h).
  RequestTracePtr trace;
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

struct DataPlane {
  // One thread: the hint drops Asio's per-socket locks (six lock pairs per request) and
  // cross-thread wake-ups. That is safe because every socket of this context (client
  // connections, upstream connections, listeners once open) is used only from its one
  // thread: other threads reach it through posts and timers, which stay locked, and
  // stop_all() closes the idle upstream connections only after that thread has stopped.
  DataPlane(int threads, const Clock& c)
      : clock(c), io(threads <= 1 ? BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO : threads) {}
  virtual ~DataPlane() = default;
  DataPlane(const DataPlane&) = delete;
  DataPlane& operator=(const DataPlane&) = delete;

  // Every time the gateway reads (GatewayOptions::clock): given to the pools, the limiter's
  // store, the admin API and replica sync; the rest reads it through its pool.
  const Clock& clock;
  GatewayConfig config;
  std::optional<KeyStore> keys;
  GatewayMetrics metrics;
  FaultMetrics fault_metrics;  // cancellations, stream migrations
  std::unique_ptr<TenantLimiter> limiter;
  // Set when `tracing:` is configured. Before `io`: the coroutine frames the context
  // destroys hold RequestTraces, which record into it.
  std::unique_ptr<Tracer> tracer;
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  std::unique_ptr<io::UpstreamClient> upstream;
  std::vector<std::unique_ptr<PoolRuntime>> pools;
  // By pool index: what the request path asks of the control plane (hooks.h), set by the
  // gateway's wiring before traffic; a pool without an entry has none.
  std::vector<PoolHooks> hooks;
  std::atomic<bool> not_ready{false};  // /ready answers 503 (drain announced)
  std::atomic<bool> draining{false};   // new requests get 503, listeners closed
  std::atomic<bool> stopped{false};
  std::atomic<uint64_t> next_request_id{1};
  // Whether the pools still exist, for route leases (route_lease.h).
  std::shared_ptr<std::atomic<bool>> pools_alive = std::make_shared<std::atomic<bool>>(true);
  std::string models_json;

  // Seconds from `t0` (a reading of `clock`) to now.
  double seconds_since(Nanos t0) const { return to_seconds(clock.now() - t0); }

  // The pool's hooks (null: none).
  PromptObserver* warmup_of(const PoolRuntime* pool) const {
    for (size_t i = 0; i < pools.size() && i < hooks.size(); ++i) {
      if (pools[i].get() == pool) return hooks[i].warmup;
    }
    return nullptr;
  }
  AdapterPlacement* lora_of(const PoolRuntime* pool) const {
    for (size_t i = 0; i < pools.size() && i < hooks.size(); ++i) {
      if (pools[i].get() == pool) return hooks[i].lora;
    }
    return nullptr;
  }

  // What the listener answers for the planes above (the gateway's wiring implements
  // them): why the gateway takes no traffic now (Gateway::unready's rule, GET /ready
  // without `discovered`), and the whole of GET /metrics. Any thread.
  virtual std::optional<std::string_view> unready(bool discovered) const = 0;
  virtual std::string metrics_text() const = 0;

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
  void handle_inference(HttpRequest&& req, std::shared_ptr<ResponseStream> stream, ApiRoute route,
                        Nanos received, std::optional<ProxyCall>& to_proxy);
  // GET /v1/responses/{id}: the key checked, the pool whose endpoint answered the id
  // found (ResponseAffinity), else 404 at once; the fetch comes back in `to_proxy`.
  void handle_stored_response(HttpRequest&& req, std::shared_ptr<ResponseStream> stream,
                              Nanos received, std::optional<ProxyCall>& to_proxy);
  // REQUIRES: keys. The 401 for a request without a valid API key, else nullopt and
  // `tenant` set.
  std::optional<HttpResponse> check_key(const HttpRequest& req, const Tenant*& tenant) const;
  // For the listeners' HttpServerOptions::early_refusal (with keys): an inference request
  // whose key is missing or wrong is refused on its head, before its body is read.
  std::optional<HttpResponse> refuse_before_body(const HttpRequest& head);
  // Routes, sends and retries; answers a whole response itself and hands a stream to
  // pump_stream, on a coroutine of its own.
  asio::awaitable<void> proxy(ProxyCall call);
  // The answer to a request the router did not route (its RejectReason's status and
  // reason; kvgate_slo_requests_total counts a latency target it could not meet).
  HttpResponse not_routed(const PoolRuntime& pool, const route::Decision& decision);
  // The first pick's decision on the request's server span.
  static void trace_pick(RequestTrace& t, const ProxyCall& call, const EndpointAddress& endpoint,
                         const Pick& pick);
  asio::awaitable<void> pump_stream(StreamJob job);
  // Serve::kRelay: the request to a healthy endpoint (another one after a connection
  // failure or a 503), its answer back as it came.
  asio::awaitable<void> relay(ProxyCall call);
  // Serve::kStored: GET /v1/responses/{id} from the endpoint that answered it (no other
  // holds it: no retry elsewhere), its answer back as it came; 404 when that endpoint is
  // gone, or when the response's model is none of the key's tenant's.
  asio::awaitable<void> fetch_stored(ProxyCall call);
  // The end of a proxied request (request_started's pair) whose client left before its
  // answer began: counted cancelled, and finished with nginx's 499 "client closed
  // request", or the drain's 503 when the listener answered it. Returns that status.
  int finish_client_left(const ProxyCall& call);
  // The end of `call` in its trace and the metrics: the trace's status, the request
  // counted (its routing time with it, when it was routed).
  void record_done(const ProxyCall& call, int status);
  // `call` answered with `status` at `at` (clock.now() when 0): its trace's status and
  // end. Returns `at`, which the request's metrics time it by too (one reading for both).
  Nanos answered_at(const ProxyCall& call, int status, Nanos at = 0) const;
  // After the stream's engine failed mid-stream: a continuation on another endpoint
  // (stream_migration.h). kResumed: job.exchange, endpoint and lease are the new leg's.
  enum class Migrated { kResumed, kComplete, kCancelled, kFailed };
  asio::awaitable<Migrated> migrate(StreamJob& job);
  // External routing (data/external.h; Gateway::pick_external and external_done): the
  // request checked and routed as the gateway's own, the pick handed back through
  // `done`; the end of its answer (on an I/O thread). Any thread.
  std::function<void()> pick_external(ExternalRequest request,
                                      std::function<void(ExternalPick)> done);
  void external_done(ExternalPick pick, ExternalOutcome outcome);
  // The accepted pick and its lease back to the data plane, through call.external; the
  // end of its answer (external_done, on an I/O thread).
  void hand_off_external(ProxyCall& call, RouteLease lease,
                         std::shared_ptr<const EndpointAddress> endpoint, std::string body,
                         const route::Decision& decision);
  void finish_external(ExternalPick& pick, const ExternalOutcome& outcome);
  // An external request that proxy() would route without waiting for anything before its
  // pick (no rate limits to ask, no LoRA placement, no token ids from the engines, no
  // flow-control queue): routed from the calling thread as proxy() routes it, the decision
  // on the pool's strand at once when the strand is free (PoolRouting::pick_then inside an
  // EnterStrandsHere), else queued there. False, with `call` untouched, for every other
  // request (proxy() routes it).
  bool external_now(ProxyCall& call);
  // The router's request for `call`, its id drawn here: everything but its keys and its
  // exclusions, as proxy() and external_now() route it.
  route::RouteRequest route_request_for(const ProxyCall& call, std::string_view adapter,
                                        uint32_t prompt_tokens);
  // external_now's decision (nullopt: the data plane left before it), on the pool's strand:
  // the pick and its lease handed back, or the refusal answered, as proxy() does.
  void external_routed(ProxyCall& call, route::RequestId id, Nanos route_start,
                       std::optional<Pick> pick);
  // External routing of Serve::kRelay and kStored: the endpoint serve's relay() or
  // fetch_stored() would send it to, handed back through `external` (or their refusal).
  asio::awaitable<void> pick_relayed(ProxyCall call, ExternalStream* external);
  // Serve::kStored: the id in call.target, and the endpoint that holds that response
  // (nullopt: none, or gone since the front door looked).
  std::optional<EndpointAddress> stored_endpoint(const ProxyCall& call, std::string& id);
  // Charges a finished request's usage to its tenant's token budget.
  void charge(const Tenant* tenant, std::string_view model, const openai::Usage& u);
  // A request with latency targets answered well: kvgate_slo_requests_total counts it met
  // or missed, its TTFT from its arrival to `first_token`, its time per output token from
  // there to `end` over `tokens` - 1 (not judged under 2 tokens).
  void slo_outcome(const ProxyCall& call, Nanos first_token, Nanos end, uint64_t tokens);
};

}  // namespace kvgate::gateway
