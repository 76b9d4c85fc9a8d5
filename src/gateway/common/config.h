// GatewayConfig: everything `kvgate serve` reads from its YAML file, parsed and validated
// once at start into an immutable value (Envoy's habit: one shared config, cheap
// per-request objects built from it).
//
// Every error names the file, the line and the field at fault:
//   "fleet.yaml:12:7: pools.main.endpoints[1].url: expected http://host:port"
// Relative paths in the file (keys file, tokenizer, TLS certificate and key) are
// resolved against the config file's directory.
//
//   Result<GatewayConfig> config = load_gateway_config("examples/local-fleet.yaml");
//   if (!config) { fmt::print(stderr, "{}\n", config.error()); return 2; }
//
// The format is documented in docs/gateway.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"
#include "core/kv/warmup_run.h"
#include "core/route/circuit_breaker.h"
#include "core/route/config.h"
#include "core/route/endpoint.h"
#include "core/route/failover.h"
#include "core/route/flow_queue.h"
#include "core/route/lora_placement.h"
#include "core/tokenizer/chat_template.h"
#include "discovery/discovery_config.h"
#include "gateway/common/autoscale_config.h"

namespace kvgate::gateway {

struct TlsConfig {
  std::string cert_file;  // PEM certificate chain
  std::string key_file;   // PEM private key
};

struct ListenerConfig {
  std::string address = "127.0.0.1";
  uint16_t port = 8080;  // 0: an ephemeral port (printed at start)
  std::optional<TlsConfig> tls;
};

struct TimeoutConfig {
  std::chrono::milliseconds header{10'000};           // a client must send its request head and
                                                      // body within this (slow-client guard)
  std::chrono::milliseconds idle{60'000};             // keep-alive between requests
  std::chrono::milliseconds connect{2'000};           // to an upstream endpoint
  std::chrono::milliseconds upstream_header{60'000};  // until the upstream's response head
  std::chrono::milliseconds stream{600'000};          // a whole streamed response (LLM answers
                                                      // stream for minutes)
  // A stream's engine silent this long (no byte) counts as failed mid-stream (an error
  // event, or a migration). 0: only `stream` bounds it.
  std::chrono::milliseconds stream_idle{0};
  std::chrono::milliseconds drain{30'000};      // on SIGTERM, how long streams may finish
  std::chrono::milliseconds drain_announce{0};  // on SIGTERM, how long /ready answers 503
                                                // while new requests are still served
                                                // (so load balancers notice first)
};

struct LimitConfig {
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 8 * 1024 * 1024;
};

// Token- and request-based rate limits (docs/rate-limits.md). The per-tenant budgets
// come from the keys file (keys.h, `limits:`); this section says where the counters
// live and what happens when that store cannot answer.
struct RedisConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 6379;
  std::string password;  // AUTH when not empty
  // Connect and command timeout (a command unanswered this long fails, and so does
  // every one pipelined behind it on the connection).
  std::chrono::milliseconds timeout{50};
};
struct RateLimitConfig {
  enum class Store : uint8_t { kMemory, kRedis };
  Store store = Store::kMemory;
  RedisConfig redis;
  bool fail_closed = false;  // on_store_failure: fail-open (default) | fail-closed
};

// Several `kvgate serve` replicas that route as one (docs/replicas.md): each publishes
// its routing events to a Redis stream per pool and applies the others'.
struct ClusterConfig {
  RedisConfig redis;
  std::string replica_id;                // unique per replica; default: hostname and process id
  bool sync = true;                      // sync: on | off (off: no stream, each routes on its own)
  std::string stream_prefix = "kvgate";  // keys: PREFIX:routing:POOL
  // Own events are published under a flush rule (cluster::FlushRule, docs/replicas.md):
  // checked every `flush`, they go out when they hold `flush_batch` requests' events or
  // when the oldest would otherwise wait more than `flush_max` (>= flush; left out of a
  // config, it is 25 ms or `flush`, whichever is larger). flush_max == flush: every
  // check publishes what is there (the rule before flush_batch and flush_max existed).
  std::chrono::milliseconds flush{5};
  std::chrono::milliseconds flush_max{25};
  uint32_t flush_batch = 8;
  // How the replica publishes and reads (docs/replicas.md, "Reading" and "One cycle per
  // tick"). kBlocking: a blocking XREAD on a connection of its own wakes at each peer's
  // entry, publishing runs under the flush rule's checks. kCycle: one timer; each tick
  // pipelines the XADD of the pending batch and a non-blocking XREAD in one round trip,
  // every flush_max (flush in a pool with room sharing), the wait doubling up to
  // cycle_idle_max while nothing moves (the default: half the CPU, docs/replicas.md).
  enum class SyncMode { kBlocking, kCycle };
  SyncMode sync_mode = SyncMode::kCycle;
  // Blocking mode: after a read that brought entries the next is sent this long after it
  // (0: at once), and a failed read is retried after this (5 ms at least).
  std::chrono::milliseconds poll{5};
  // Cycle mode: the longest wait between two cycles while nothing moves (>= flush_max;
  // left out of a config, 100 ms or flush_max, whichever is larger).
  std::chrono::milliseconds cycle_idle_max{100};
  // Cycle mode (`cycle_replies`): kPrompt reads a cycle's replies as they come; kDeferred
  // takes them at the next cycle, when the replica's thread is awake anyway (no wake-up
  // for them: docs/replicas.md, "Deferred replies"), at the price of a tick's staleness
  // for the peers' events. A pool with room sharing reads them promptly.
  enum class CycleReplies { kPrompt, kDeferred };
  CycleReplies cycle_replies = CycleReplies::kPrompt;
  int64_t max_len = 100000;                       // batches kept per stream (XADD MAXLEN ~)
  std::chrono::milliseconds replay{120000};       // tail read at start and after an outage
  std::chrono::milliseconds peer_timeout{15000};  // a silent replica's load expires
  // Each replica writes its approximate index this often (0: never), for replicas that
  // start later (PREFIX:snapshot:POOL).
  std::chrono::milliseconds snapshot{30000};
  // Autoscaled pools: one leader per pool actuates, under a Redis lease this long
  // (renewed every third of it).
  std::chrono::milliseconds lease{3000};
  // Pools with flow control (sync on): the replicas' queues order tenants by the fleet's
  // service, each replica publishing the service it gives beside its routing events
  // (cluster/fleet_fairness.h); off: each orders by its own.
  bool fleet_fairness = true;
};

// Where an endpoint's engine publishes its KV cache events (vLLM's ZmqEventPublisher).
struct KvEventsConfig {
  std::string publisher;  // connect mode: the engine's PUB address (tcp://host:port)
  std::string replay;     // the engine's replay ROUTER address; empty: no replay
  std::string topic;      // the engine's topic ("" subscribes to all in connect mode)
};

// The admin API (admin_api.h): its own listener, loopback by default, guarded by a
// bearer token. A listener on any other address must have a token.
struct AdminConfig {
  std::string address = "127.0.0.1";
  uint16_t port = 9090;    // 0: an ephemeral port (printed at start)
  std::string token;       // empty: no token (loopback only)
  std::string token_file;  // where `token` was read from (empty: given inline)
};

// `kvgate epp` (docs/epp.md): the Endpoint Picker's gRPC listener (Envoy's External
// Processing protocol). `kvgate serve` ignores the section.
struct EppConfig {
  std::string address = "0.0.0.0";
  uint16_t port = 9002;  // the Gateway API Inference Extension's usual port; 0: ephemeral
  // x-gateway-inference-objective's names (the InferenceObjectives) and their priorities.
  std::map<std::string, int, std::less<>> objectives;
  // Distinct x-gateway-inference-fairness-id values kept as tenants (new ones past it
  // count as none).
  uint32_t max_fairness_ids = 1000;
  // Fallbacks after the pick in x-gateway-destination-endpoint: the router's runners-up,
  // for the data plane's retries (0..4; 0: the pick alone).
  uint8_t fallbacks = 0;
  // TLS on the gRPC port (`tls:`): certificate files, checked as a listener's are, or a
  // certificate made at start. Absent: plaintext gRPC.
  struct Tls {
    bool self_signed = false;  // `self_signed: true`: a key and certificate made at start
    TlsConfig files;           // else `cert` and `key`
  };
  std::optional<Tls> tls;
  // A plaintext port with the gRPC health service alone, for probes that speak no TLS
  // (the kubelet's gRPC probes). Absent: none; 0: ephemeral.
  std::optional<uint16_t> health_port;
  // The threads that serve the ext_proc streams (1..64): each polls a completion queue of
  // its own, and a stream's whole exchange runs on the thread that accepted it.
  uint32_t threads = 1;
};

// Trace context and span export (docs/tracing.md). Absent: no tracing, and the request
// path does nothing for it beyond one branch.
struct TracingConfig {
  // Requests without a client traceparent are traced with this probability (a client's
  // sampled flag decides for its own requests).
  double ratio = 0.0;
  std::string collector;  // OTLP/HTTP traces URL: "http://host:port/v1/traces"
  std::string service_name = "kvgate";
  size_t batch_size = 512;                 // spans per export request at most
  size_t max_queue = 8192;                 // spans waiting for export; more are dropped
  std::chrono::milliseconds flush{1'000};  // how often the exporter sends what waits
};

// Where a pool's routing token ids come from (docs/tokenizer.md, "Engine fallback").
// YAML: `tokenize: engine`, or `tokenize: {mode: engine, timeout_ms: 50, cache_mb: 64}`.
enum class TokenizeMode : uint8_t {
  kAuto,    // the pool's tokenizer.json and chat template; one that is refused at load
            // falls back to the engines (the pool starts and says why)
  kLocal,   // the local files only: one that is refused fails the start
  kEngine,  // always the pool's engines (vLLM's POST /tokenize); the files are not used
};
std::string_view to_string(TokenizeMode mode);  // "auto", "local", "engine"

struct TokenizeConfig {
  TokenizeMode mode = TokenizeMode::kAuto;
  // The /tokenize call's whole budget (connect, send, answer): past it the request is
  // routed approximately (pseudo-tokens) and the reason counted.
  std::chrono::milliseconds timeout{50};
  size_t cache_bytes = size_t{64} << 20;  // ids kept per pool (tokenizer/engine_id_cache.h)
};

struct PoolConfig {
  std::string name;
  std::vector<route::EndpointSpec> endpoints;
  // By endpoint index; set for endpoints whose KV events the gateway subscribes to.
  std::vector<std::optional<KvEventsConfig>> kv_events;
  // Bind mode: one SUB socket bound here (tcp://*:PORT) that every engine connects to;
  // endpoints then name their `topic`. Empty: connect mode.
  std::string kv_events_bind;
  // GET /metrics of every endpoint this often; the YAML default is 200 ms, 0 (the
  // default of a config built in code, e.g. against fake upstreams) runs no scraper.
  std::chrono::milliseconds scrape_interval{0};
  route::RouterConfig router;      // policy and its params, filters, overlap, block size
  std::string tokenizer_file;      // tokenizer.json; empty: route on a byte-level fallback
  std::string chat_template_file;  // tokenizer_config.json (optional)
  // Render a request's own `chat_template`, as vLLM does with --trust-request-chat-template
  // (set it when the pool's engines run with that flag); else such a request routes
  // approximately, as the engine will refuse it.
  bool trust_request_chat_template = false;
  // vLLM's --chat-template-content-format of the pool's engines: auto (their default),
  // string or openai (tokenizer::ChatRenderOptions::ContentFormat).
  tokenizer::ChatRenderOptions::ContentFormat chat_template_content_format =
      tokenizer::ChatRenderOptions::ContentFormat::kAuto;
  TokenizeConfig tokenize;  // `tokenize:`; the default uses the files above
  // Warm-up before traffic (gateway/control/warmup.h): an endpoint added at run time is sent the
  // pool's hot prefixes before it is routed to. YAML:
  //   warmup: {enabled: true, prefixes: 16, budget_ms: 10000, concurrency: 4,
  //            ready_timeout_ms: 600000}
  kv::WarmupConfig warmup;
  // How long a warm-up waits for the new endpoint's GET /health to answer 200 before it
  // gives up and admits it unwarmed.
  std::chrono::milliseconds warmup_ready_timeout{600'000};
  // Set when the pool has an `autoscale:` section. With a local actuator the pool lists
  // no endpoints: its replicas are launched and registered at run time.
  std::optional<PoolAutoscaleConfig> autoscale;
  // Stream migration (gateway/data/stream_migration.h), opt-in: a stream whose engine fails
  // mid-stream continues on another endpoint, up to this many times per request (0: off).
  // YAML: migration: {max_migrations: 2}
  int max_migrations = 0;
  // Set when the pool has a `discovery:` section (docs/discovery.md): endpoints found in
  // a file, DNS or Kubernetes join and leave at run time, beside any in `endpoints`.
  std::optional<discovery::DiscoveryConfig> discovery;
  // Flow control (docs/flow-control.md): the pool's queue for requests that find every
  // endpoint saturated. YAML `flow_control:` (gateway/common/flow_config.h); off by default.
  route::FlowQueueConfig flow;
  // LoRA placement (route/lora_placement.h, docs/gateway.md "LoRA adapters"), opt-in:
  // the gateway loads the pool's adapters on its endpoints as their demand asks and
  // unloads idle ones. YAML:
  //   lora_placement: {enabled: true, interval_ms: 1000, idle_unload_ms: 300000,
  //                    replica_demand: 4, backoff_ms: 30000, max_wait_ms: 10000,
  //                    default_slots: 1}
  // Off: every endpoint is taken to serve every adapter (as today's fleets started with
  // --lora-modules).
  route::LoraPlacementConfig lora_placement;
};

// A model name clients send; resolves to a pool. Aliases resolve to the same pool, and
// the upstream sees `served_name` (what the engines call the model).
struct ModelConfig {
  std::string name;
  std::vector<std::string> aliases;
  std::string pool;
  std::string served_name;  // defaults to name
  // A LoRA adapter (the config's `adapters:`) of the model `base`, in base's pool: the
  // engines that loaded it serve it under its name, and its prompts' blocks are its own
  // (seeded by the name), so no prefix is reused across adapters or with the base.
  std::string base;            // "" for a base model
  std::string adapter_source;  // the path or URI engines load it from
  uint32_t max_replicas = 1;   // endpoints that may hold it at once
};

struct GatewayConfig {
  std::string file;  // where it was loaded from
  std::vector<ListenerConfig> listeners;
  std::string keys_file;  // empty: no authentication (every request is tenant "anonymous")
  TimeoutConfig timeouts;
  LimitConfig limits;
  // The core's structs: the simulator reads the same ones (route/failover.h: retries and
  // migration; route/circuit_breaker.h: after `failures` consecutive failures an
  // endpoint is out for `open_for`, then one request probes it).
  route::RetryConfig retries;
  route::BreakerConfig breaker;
  RateLimitConfig rate_limits;
  std::optional<ClusterConfig> cluster;  // absent: a lone replica
  int threads = 2;                       // I/O threads
  std::optional<AdminConfig> admin;      // absent: no admin listener
  std::optional<TracingConfig> tracing;  // absent: no tracing
  std::optional<EppConfig> epp;          // `kvgate epp` only; absent: its defaults
  std::vector<PoolConfig> pools;
  std::vector<ModelConfig> models;

  // The model (by name or alias), or nullptr.
  const ModelConfig* find_model(std::string_view name) const;
  const PoolConfig* find_pool(std::string_view name) const;
};

// Parses YAML text; `file` names it in errors and anchors relative paths.
Result<GatewayConfig> parse_gateway_config(std::string_view yaml, std::string_view file);
// Reads and parses a file.
Result<GatewayConfig> load_gateway_config(const std::string& file);

}  // namespace kvgate::gateway
