// PoolRouting: one pool as the request path sees it: what a request needs from its pool
// between the front door and the end of its answer. The control plane's side of the pool
// (endpoints added, drained and held, observers, scrapes, the admin views) is
// PoolRuntime (gateway/data/pool_runtime.h), which is a PoolRouting and owns everything here;
// the gateway holds PoolRuntimes and hands the request path this part of them.
//
// What it holds:
//   - the tokenizer and chat template, loaded once at creation (TokenizePlan says which
//     path a pool's routing ids take), and the engine fallback (EngineTokenizer);
//   - the pool's Router (router core) and its kv indexes, the per-endpoint circuit
//     breakers (route::CircuitBreakers, the core's), why each endpoint is out of routing
//     (route::EndpointHolds) and the flow-control queue (PoolFlow), all on the pool's
//     strand;
//   - the endpoint table: each endpoint's address, by EndpointId;
//   - what the request path records for others: Responses API affinity, the recent
//     requests the admin page explains, the arrivals the autoscaler counts, the replica
//     sync hooks it calls after each decision.
//
// A request's calls: keys_for (or keys_of, on the engine's ids) -> admit / pick /
// pick_now -> first_token, finished, endpoint_result, exchange_done (through its
// RouteLease, gateway/data/route_lease.h).
//
// Circuit breakers: after `failures` consecutive failures an endpoint is marked unhealthy
// in the router for `open_for`; after that it is put back (half-open) and the next
// failure opens it again, a success closes it. Retries exclude the endpoints that failed
// the request: they go to the router as part of the route request
// (RouteRequest::excluded), for that one decision.
//
// Why an endpoint is out of routing (its warm-up, its breaker, the autoscaler's standby,
// a drain) is kept in a route::EndpointHolds, the rule the simulator follows too
// (core/route/endpoint_holds.h): the router's health is set only from it, so releasing
// one hold leaves the others (a breaker that half-opens does not end a standby). The
// request path sets and releases the breaker's hold; PoolRuntime the others.
//
//   pool.keys_for(request, body, kind, adapter, keys, prompt_tokens);
//   Pick p = co_await pool.admit(route_request, ticket);   // or pick(route_request, {})
//   if (!p.decision.accepted()) ...;                        // refused: p.flow_status or
//   RouteLease lease(pool, id, alive);                      // the decision's reason
//   ... lease.done(p.decision.endpoint, ok, now, first_token);
//
// Thread-safety:
//   - any thread: keys_for, keys_of and count_tokens (the tokenizer and chat template are
//     immutable after creation and thread-safe), the accessors of what never changes
//     after creation (name, config, clock, tokenizer, tokenize_plan, engine_tokenizer,
//     flow), endpoints()/endpoint() (snapshots, under a mutex), count_arrival/arrivals
//     and flow_queued (atomics), responses() (ResponseAffinity is thread-safe);
//   - everything that reads or changes router state (pick, admit, the lifecycle calls,
//     cancel_queued, flow_output, refuse_queued, tokenize_endpoint) runs on the pool's
//     strand: the calls hop there themselves (dispatch: at once when this thread already
//     runs it), so callers need no lock and the core none either. pick_now decides at
//     once only on the pool's one thread (`threads: 1`), else returns nullopt; pick_then
//     decides at once on a thread that is not an I/O thread when that thread may enter
//     the strand (EnterStrandsHere) and the strand is free, else queues the decision on
//     it (the strand is over an EnterableExecutor, gateway/data/enterable_executor.h: the
//     strand's exclusion is asio's own, only the thread that runs a free strand changes);
//   - the Router, the indexes, the breakers, the holds and the queue are never touched
//     off the strand; PoolRuntime's control-plane calls reach them through the same
//     strand.
//
// Time: every `now` the pool gives the core (and that the components around it compare
// with the router's times: warm-up, live feed, autoscaler, discovery, admin views) is
// read from one Clock (core/common/clock.h), given at creation: clock().
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/cluster/routing_event.h"
#include "core/common/clock.h"
#include "core/common/rng.h"
#include "core/kv/approx_index.h"
#include "core/kv/block_hash.h"
#include "core/kv/precise_index.h"
#include "core/route/circuit_breaker.h"
#include "core/route/endpoint_holds.h"
#include "core/route/router.h"
#include "core/tokenizer/chat_template.h"
#include "core/tokenizer/tokenizer.h"
#include "gateway/common/config.h"
#include "gateway/common/metrics.h"
#include "gateway/data/recent_requests.h"
#include "gateway/data/response_affinity.h"
#include "openai/request.h"

namespace kvgate::gateway {

struct EndpointAddress {
  route::EndpointId id = 0;
  std::string url;
  std::string host;
  uint16_t port = 0;
  std::optional<KvEventsConfig> kv_events;  // where its engine publishes KV events
  // The data-parallel rank it is (route/data_parallel.h: its URL ends with #dpN; host
  // and port are the engine's address); requests to it name the rank in a header.
  std::optional<uint32_t> dp_rank;
  // Who put it in the pool: "config", "admin", "local_actuator", "discovery:NAME".
  std::string origin;
};

struct Pick {
  route::Decision decision;
  // Set when accepted: shared with the pool, not copied (a string or two per request).
  std::shared_ptr<const EndpointAddress> endpoint;
  // Flow control (PoolRouting::admit): refused by the queue with this status (429/503)
  // and reason (queue_full, queue_timeout, deadline_unmeetable, shutting_down); 0 when
  // not (then `decision` says what happened). `queued`: how long it waited.
  int flow_status = 0;
  std::string_view flow_reason;
  Nanos queued = 0;
  uint32_t charged_output_tokens = 0;
};

class PoolFlow;
struct FlowTicket;
class EngineTokenizer;

// Where a pool's routing token ids come from, decided when it is created from its
// `tokenize:` mode and whether its tokenizer.json and chat template load (kvgate serve
// --check and kvgate tokenize --config print it).
struct TokenizePlan {
  // Asked of the pool's engines (POST /tokenize, gateway/data/engine_tokenizer.h).
  bool chat_from_engine = false;
  bool completion_from_engine = false;
  bool uses_engine() const { return chat_from_engine || completion_from_engine; }
  // One line each: which path and why, e.g. "tokenizer /m/tokenizer.json: fast path: ...".
  std::string tokenizer;
  std::string chat_template;
};

class PoolRouting {
 public:
  PoolRouting(const PoolRouting&) = delete;
  PoolRouting& operator=(const PoolRouting&) = delete;

  const std::string& name() const { return config_.name; }
  const PoolConfig& config() const { return config_; }
  // The pool's tokenizer (loaded from tokenizer.json by the general loader), or null.
  const tokenizer::Tokenizer* tokenizer() const { return tokenizer_ ? &*tokenizer_ : nullptr; }
  const TokenizePlan& tokenize_plan() const { return plan_; }
  // The pool's time (monotonic): the router's `now`, and that of whatever compares its
  // times with the router's.
  const Clock& clock() const { return clock_; }

  // The engine fallback (PoolRuntime::set_engine_tokenizer, for pools whose plan uses
  // the engines), or null: then keys_for computes every request's keys.
  EngineTokenizer* engine_tokenizer() const { return engine_tokenizer_.get(); }
  // Which endpoint answered each Responses API response (for previous_response_id).
  ResponseAffinity& responses() { return responses_; }
  // An endpoint to ask for token ids: the next healthy one in turn that is not in
  // `avoid`, or null when there is none. Decided on the strand.
  boost::asio::awaitable<std::shared_ptr<const EndpointAddress>> tokenize_endpoint(
      std::vector<route::EndpointId> avoid);

  // Block keys of the prompt for routing, and its token count. With a tokenizer the
  // chat template (when configured) and tokenizer.json give real tokens; without, a
  // byte-level fallback (4 bytes per pseudo-token) keeps prefix locality.
  // Runs on the caller's thread.
  // Warm-up hook (gateway/control/warmup.h): when `token_ids` is given it receives the
  // token ids the keys were hashed from if they are real tokens (a tokenizer ran), else
  // is cleared.
  // `adapter`: the request's LoRA adapter ("" for the base model), whose blocks are its
  // own (vLLM seeds an adapter's block hashes with it; so does the precise index).
  // `request.cache_salt` ("" for none) seeds them too: prompts of different salts share no
  // key (vLLM reuses no prefix across salts). Without either, the pool's precomputed seed.
  void keys_for(const openai::InspectedRequest& request, std::string_view body,
                openai::ApiKind kind, std::string_view adapter, std::vector<kv::BlockKey>& keys,
                uint32_t& prompt_tokens, std::vector<uint32_t>* token_ids = nullptr) const;
  // The token count of `text` for the router's load estimate (embeddings): the pool's
  // tokenizer's, else the byte-level fallback's (4 bytes a token). Any thread.
  uint32_t count_tokens(std::string_view text) const;
  // Block keys of token ids computed elsewhere (the engine fallback), as keys_for hashes.
  void keys_of(std::span<const uint32_t> ids, std::vector<kv::BlockKey>& keys,
               std::string_view adapter = {}, std::string_view cache_salt = {}) const;

  // Routes on the strand; endpoints in `excluded` are skipped for this decision. Both
  // arguments are borrowed until the awaitable completes.
  boost::asio::awaitable<Pick> pick(const route::RouteRequest& request,
                                    const std::vector<route::EndpointId>& excluded);
  // The same decision at once, when the pool needs no strand (one thread runs its context)
  // and the caller runs on that thread; nullopt otherwise (then co_await pick()). `now` is
  // the caller's reading of clock().now() (one clock read fewer per request).
  std::optional<Pick> pick_now(const route::RouteRequest& request,
                               const std::vector<route::EndpointId>& excluded, Nanos now);
  // The same decision for a caller that is no coroutine, then `then(pick)` on the strand
  // right after it. Never blocks: at once on this thread when the strand is free and the
  // thread may run it (an I/O thread; or any thread inside an EnterStrandsHere,
  // gateway/data/enterable_executor.h: the Endpoint Picker's gRPC threads), else queued on
  // the strand, behind its work, and run by an I/O thread. When `*cancelled` (may be null)
  // is true by then, nothing is decided and `then` gets nullopt. `request`, `excluded` and
  // `cancelled` are borrowed until `then` ran; `then` must not block.
  template <class Then>
  void pick_then(const route::RouteRequest& request, const std::vector<route::EndpointId>& excluded,
                 const std::atomic<bool>* cancelled, Then&& then) {
    boost::asio::dispatch(
        strand_, [this, &request, &excluded, cancelled, then = std::forward<Then>(then)]() mutable {
          // On the strand, whichever thread runs it: the router is this handler's alone.
          std::optional<Pick> pick;
          if (!cancelled || !cancelled->load(std::memory_order_acquire)) {
            pick = decide_on_strand(request, excluded, clock_.now());
          }
          then(std::move(pick));
        });
  }
  // Flow control (pool_flow.h; the pool's `flow_control:` section): null without it.
  PoolFlow* flow() const { return flow_.get(); }
  // Routed at once while some endpoint has room, else waits in the pool's queue until it
  // is routed or refused (Pick::flow_status). `on_queued` runs (on the strand) when it
  // starts waiting. `request` is borrowed until the awaitable completes.
  boost::asio::awaitable<Pick> admit(const route::RouteRequest& request, FlowTicket ticket);
  // The client of a queued request went away: out of the queue at once (on the strand).
  void cancel_queued(route::RequestId id);
  // Stop: every queued request is answered 503 shutting_down (on the strand).
  void refuse_queued();
  // Requests waiting in the queue (thread-safe): the autoscaler counts them as waiting.
  size_t flow_queued() const;
  // Requests that arrived for the pool (a valid key and body for one of its models; its
  // tenant's limits not yet checked), counted by the front door: the autoscaler's
  // arrival rate, as the simulator counts arrivals (thread-safe).
  void count_arrival() { arrivals_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t arrivals() const { return arrivals_.load(std::memory_order_relaxed); }
  // A request dispatched by flow control ended with `actual` output tokens where
  // `charged` were counted: its tenant's counter is corrected (on the strand).
  void flow_output(std::string_view tenant, uint32_t charged, uint32_t actual);

  // Lifecycle, dispatched to the strand (fire and forget: run at once when the strand is
  // free and this thread runs its context, else queued in order).
  void first_token(route::RequestId id);
  // `output_tokens`: the answer's, when known (a stream's usage or token events; 0 when
  // not): with latency targets on, the predictor learns the time per output token.
  void finished(route::RequestId id, bool ok, uint32_t output_tokens = 0);
  // Breaker bookkeeping for one endpoint exchange.
  void endpoint_result(route::EndpointId endpoint, bool ok);
  // The request is served by `to` instead of the endpoint it was routed to (an external
  // data plane's fallback, Gateway::external_served): its load moves there
  // (route::EndpointPool::on_moved). Not sent to replica peers: theirs stays where the
  // decision put it until the request ends.
  void moved(route::RequestId id, route::EndpointId to);
  // One exchange with `endpoint` is over: finished(id, ok) and endpoint_result(endpoint,
  // ok), after first_token(id) when asked, in one hop onto the strand; `now` is when it
  // ended (clock().now(), read once by the caller for this and its own metrics).
  void exchange_done(route::RequestId id, route::EndpointId endpoint, bool ok, Nanos now,
                     bool first_token = false, uint32_t output_tokens = 0);

  // Copies the session table's counts and size (route::SessionAffinity) into the pool's
  // kvgate_session_affinity_* series; nothing without session affinity. On the strand:
  // after each decision of a request with a session, and after the peers' decisions are
  // applied (replica sync), which bind sessions too.
  void publish_sessions();

  // The current endpoints (a snapshot; thread-safe), in EndpointId order.
  std::vector<EndpointAddress> endpoints() const;
  std::optional<EndpointAddress> endpoint(route::EndpointId id) const;

  // Replica sync (gateway/sync/replica_sync.h): called on the strand after each of this
  // replica's own decisions (accepted ones) and lifecycle steps, never for the peers'
  // requests it applies. Set before traffic starts (PoolRuntime::set_routing_hooks).
  struct RoutingHooks {
    std::function<void(const route::Router&, const route::RouteRequest&, const route::Decision&,
                       Nanos)>
        routed;
    std::function<void(route::RequestId, cluster::EventKind, Nanos)> lifecycle;
  };

 protected:
  // Built by PoolRuntime::create, which loads the tokenizer, makes the router and the
  // queue and adds the config's endpoints before the pool is used.
  // `one_thread`: only one thread runs the executor's context, so the pool's work is
  // serialized by it without a strand (no strand's lock and queue on every request).
  // `metrics` and `clock` are borrowed: they must outlive the pool.
  PoolRouting(const PoolConfig& config, const route::BreakerConfig& breaker,
              boost::asio::any_io_executor executor, GatewayMetrics& metrics, const Clock& clock,
              bool one_thread);
  // Not deleted through this type: the gateway owns PoolRuntimes.
  ~PoolRouting();

  void close_expired_breakers(Nanos now);
  // True on the pool's one thread (`threads: 1`), where strand work may run at once.
  bool on_own_thread() const;
  // Runs `fn` on the strand: at once on the pool's one thread, else dispatched there.
  template <class F>
  void on_strand(F&& fn) {
    if (on_own_thread()) {
      fn();
    } else {
      boost::asio::dispatch(strand_, std::forward<F>(fn));
    }
  }
  Pick decide_on_strand(const route::RouteRequest& request,
                        const std::vector<route::EndpointId>& excluded, Nanos now);
  void finish_on_strand(route::RequestId id, bool ok, Nanos now, uint32_t output_tokens);
  // Latency targets on: the predictor's error, copied to the pool's metrics (on the
  // strand, after it learned).
  void publish_predictor();
  GatewayMetrics::PredictorSeries* predictor_series_ = nullptr;  // created on first use
  void endpoint_result_on_strand(route::EndpointId endpoint, bool ok);
  // Draining for removal or held by discovery (route::Hold::kDrain): the breaker neither
  // counts its results nor puts it back.
  bool removing(route::EndpointId id) const;
  // Sets or releases one hold of `id` (on the strand); the router's health follows when
  // it changes, which is returned.
  std::optional<route::Health> set_hold_on_strand(route::EndpointId id, route::Hold hold, bool on);

  // The state below is PoolRuntime's too: it loads the tokenizer (creation), sets the
  // engine fallback and the hooks (before traffic), and changes the router, the
  // breakers, the holds and the endpoint table on the strand (endpoints added, removed,
  // held).
  const PoolConfig config_;
  GatewayMetrics& metrics_;
  const Clock& clock_;
  std::optional<tokenizer::Tokenizer> tokenizer_;
  std::optional<tokenizer::ChatTemplate> chat_template_;
  TokenizePlan plan_;
  std::shared_ptr<EngineTokenizer> engine_tokenizer_;
  ResponseAffinity responses_;

  // State below is touched only on strand_ (a strand, or the context's one thread).
  boost::asio::any_io_executor strand_;
  const bool one_thread_;
  kv::PreciseIndex precise_;
  kv::ApproxIndex approx_;
  std::unique_ptr<route::Router> router_;
  Rng rng_;
  route::CircuitBreakers breakers_;
  route::EndpointHolds holds_;      // why each endpoint is out of routing
  size_t tokenize_turn_ = 0;        // tokenize_endpoint: where the next search starts
  std::unique_ptr<PoolFlow> flow_;  // after router_ and rng_, which it borrows
  // Capacity may have appeared: the queue dispatches (no-op without flow control).
  void pump_flow(Nanos now);
  // kvgate_routing_decisions_total's counters, by RejectReason (kNone: accepted).
  std::array<std::atomic<uint64_t>*, 9> decision_counters_{};
  // kvgate_routing_decisions_total: one more decision (the router's, or the queue's
  // dispatch). On the strand.
  void count_decision(route::RejectReason reason);
  // kvgate_session_affinity_requests_total's counters, by route::SessionOutcome (kNone
  // unused), and the pool's session table series (publish_sessions).
  std::array<std::atomic<uint64_t>*, 6> session_counters_{};
  GatewayMetrics::SessionTable* session_table_ = nullptr;
  // One more decision of a request with a session (an accepted one: the outcome counted,
  // the table published). On the strand.
  void count_session(const route::Decision& decision);
  uint64_t block_seed_ = 0;  // of the pool's block keys (keys_for): no adapter, no salt
  // The seed of a request's first block: block_seed_ unless it has an adapter or a salt.
  uint64_t seed_for(std::string_view adapter, std::string_view cache_salt) const {
    if (adapter.empty() && cache_salt.empty()) [[likely]]
      return block_seed_;
    return kv::block_seed(config_.name, adapter, cache_salt);
  }
  RoutingHooks hooks_;
  RecentRequests recent_;  // recorded on the strand while watched
  std::atomic<uint64_t> arrivals_{0};

  // Read from any thread (the scraper, admin), written on the strand.
  mutable std::mutex endpoints_mu_;
  std::vector<std::shared_ptr<const EndpointAddress>> endpoints_;  // by EndpointId
};

}  // namespace kvgate::gateway
