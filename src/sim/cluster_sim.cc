#include "sim/cluster_sim.h"

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <tuple>
#include <unordered_map>

#include "core/engine/engine_model.h"
#include "core/kv/approx_index.h"
#include "core/kv/block_hash.h"
#include "core/kv/event_apply.h"
#include "core/kv/hot_prefixes.h"
#include "core/kv/precise_index.h"
#include "core/kv/warmup_run.h"
#include "core/route/circuit_breaker.h"
#include "core/route/endpoint_holds.h"
#include "core/route/failover.h"
#include "core/route/flow_control.h"
#include "core/route/lora_placement.h"
#include "core/route/pool_signals.h"
#include "core/route/router.h"
#include "core/route/scrape.h"
#include "env/file.h"
#include "env/progress.h"
#include "sim/event_queue.h"
#include "sim/replica_group.h"
#include "sim/scale_decider.h"

namespace kvgate::sim {

using workload::ClusterSample;
using workload::EngineGroup;
using workload::PolicyRun;
using workload::PolicySpec;
using workload::ReplicaLife;
using workload::RequestRecord;
using workload::ScaleSample;
using workload::Scenario;

namespace {

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

enum class EventKind : uint8_t {
  kArrival,         // a request reaches the gateway
  kEngineReceive,   // a routed request reaches its engine
  kEngineStep,      // an engine runs one scheduler step
  kFirstToken,      // a request's first token reaches the gateway
  kFinished,        // a request's last token reaches the gateway
  kKvEvents,        // a batch of an engine's KV events reaches the precise index
  kScrape,          // the router scrapes every engine's metrics
  kPrefillDone,     // disaggregated: a prefill engine's answer reaches the gateway
  kPrefillRelease,  // disaggregated: the decode side has the KV; the prefill engine frees it
  kControl,         // the autoscaler decides (autoscaled runs)
  kReplicaReady,    // a launched replica passes its health check
  kWarmupSend,      // a warm-up answer reached the gateway: send the next ones
  kWarmupDeadline,  // a replica's warm-up budget ends
  kFailureStart,    // an injected failure (scenario.failures[id]) begins
  kFailureEnd,      // ... and ends
  kUpstreamFailed,  // a request's exchange with `engine` failed, seen at the gateway
  kLoraRound,       // LoRA placement: a planning round (id 0: the periodic one, 1: kicked)
  kLoraActionDone,  // LoRA placement: a load or unload answered (id: its slot)
  kLoraWaitEnd,     // LoRA placement: a request's wait for its adapter's load ends
};

// Engine request ids of warm-up requests: this bit, the engine index << 32, the index
// in its warm-up set (workload requests are numbered from 0 and never reach it).
constexpr uint64_t kWarmupId = uint64_t{1} << 63;

// Where a request is in its life on the engines.
enum class Phase : uint8_t {
  kWhole,    // one engine prefills and decodes
  kPrefill,  // disaggregated, on its prefill engine
  kDecode,   // disaggregated, on its decode engine (KV transferred)
};

// A replica's life in an autoscaled run (fixed fleets: every engine is kReady forever).
enum class ReplicaPhase : uint8_t { kStarting, kReady, kDraining, kStopped };

struct Replica {
  ReplicaPhase phase = ReplicaPhase::kReady;
  Nanos launched_at = 0;
  Nanos ready_at = 0;
  Nanos admitted_at = 0;  // joined routing (after its warm-up); -1: not yet
  Nanos drained_at = -1;
  Nanos stopped_at = -1;
  uint32_t in_flight = 0;               // routed to it and not yet finished at the gateway
  double busy_at_tick = 0;              // engine busy seconds at the last control tick
  uint64_t prefix_queries_at_tick = 0;  // engine prefix-cache counters then
  uint64_t prefix_hits_at_tick = 0;
};

struct Event {
  EventKind kind;
  uint32_t engine;
  uint64_t id;  // request id, or KV batch slot
  // A request's events carry the attempt they belong to: once an attempt failed, what
  // its engine had already sent is stale (RequestState::attempt moved on).
  uint32_t attempt = 0;
};

// An engine's injected failure state (scenario.failures), by engine index.
struct EngineFault {
  bool down = false;      // fail_stop: refuses connections, holds nothing
  double slow = 1;        // step-time multiplier
  double error_rate = 0;  // share of received requests answered 503
};

constexpr uint32_t kNoEngine = UINT32_MAX;

// A prompt the workload resends (keys_for): its router keys, hashed once, and each
// engine's block hashes of it, made by that engine the first time it receives it.
struct CachedPrompt {
  workload::PromptPtr prompt;  // held, so that its address names it while the entry exists
  std::shared_ptr<const std::vector<kv::BlockKey>> keys;
  // (engine index, its hashes): a prompt reaches few engines, however large the fleet.
  std::vector<std::pair<uint32_t, std::shared_ptr<const engine::PromptHashes>>> engine_hashes;
};

struct RequestState {
  workload::WorkloadRequest work;
  std::shared_ptr<const std::vector<kv::BlockKey>> keys;
  CachedPrompt* cached = nullptr;  // set when the prompt is a resent one
  RequestRecord record;
  bool open_loop = false;
  Phase phase = Phase::kWhole;
  uint32_t decode_engine = 0;
  // Failover (route/failover.h): the current attempt (stale events carry an older one),
  // endpoints tried for the current leg (the first, or a migrated stream's continuation),
  // stream migrations, the endpoints excluded from the leg's routing, whether the leg's
  // answer began (an engine accepted the stream and sent its head: every simulated
  // request is a stream, as `kvgate bench` sends them), and the engine that holds it now.
  uint32_t attempt = 0;
  int tried = 0;
  int migrations = 0;
  std::vector<route::EndpointId> excluded;
  bool began = false;
  // A continuation after the first token (an earlier leg sent it): the leg produces the
  // rest of the answer, and the request keeps its first leg's first token.
  bool resumed = false;
  uint32_t at_engine = kNoEngine;
  // LoRA (scenario.adapters): 0 for the base model, else 1 + the adapter's index; and
  // whether it waits at the gateway for its adapter to be loaded somewhere (placement).
  uint32_t adapter = 0;
  bool lora_waiting = false;
};

class Simulation {
 public:
  Simulation(const Scenario& scenario, const PolicySpec& policy, uint64_t seed,
             const RunOptions& options)
      : scenario_(scenario),
        policy_(policy),
        seed_(seed),
        options_(options),
        rng_(seed ^ 0x726f757465ULL),
        breakers_(scenario.gateway.breaker),
        failure_rng_(seed ^ 0x6661696cULL),
        startup_rng_(seed ^ 0x7374617274ULL),
        ttft_window_(scenario.scaling.signal_window),
        itl_window_(scenario.scaling.signal_window),
        prompt_window_(scenario.scaling.signal_window),
        output_window_(scenario.scaling.signal_window),
        adapter_rng_(seed ^ 0x6c6f7261ULL) {}

  Result<PolicyRun> run();

 private:
  Status build();
  void on_arrival(Nanos now, uint64_t id);
  // The gateway routes an arrived request (or queues it in flow control).
  void route_arrival(Nanos now, uint64_t id);
  // LoRA placement, as gateway/control/lora_placer.cc drives the core's LoraPlacement: a round
  // (demand, the router's view of the endpoints, plan, publish, act), its actions carried
  // out on the engine models, their answers, and the requests that wait for a load.
  void lora_round(Nanos now);
  void lora_kick(Nanos now);
  void lora_act(Nanos now, const route::LoraAction& action);
  void on_lora_done(Nanos now, uint64_t slot);
  void lora_publish(Nanos now);
  void on_lora_wait_end(Nanos now, uint64_t id);
  const std::string& adapter_name(const RequestState& r) const {
    return adapter_names_[r.adapter - 1];
  }
  void on_engine_receive(Nanos now, uint32_t engine, uint64_t id);
  void on_engine_step(Nanos now, uint32_t engine);
  void on_finished(Nanos now, uint64_t id);
  void on_prefill_done(Nanos now, uint64_t id);
  void on_kv_events(uint32_t engine, uint64_t slot);
  void on_scrape(Nanos now);
  // Injected failures and the gateway's answer to them (breakers, retries, migration).
  void on_failure(Nanos now, const workload::FailureSpec& f, bool begins);
  void on_upstream_failed(Nanos now, uint32_t engine, uint64_t id);
  // The route request of r (its keys, lengths, tenant's criticality).
  route::RouteRequest route_request(uint64_t id) const;
  // One exchange's outcome for the endpoint's breaker; an opened breaker takes the
  // endpoint out of routing, as PoolRuntime does.
  void breaker_result(route::EndpointId ep, bool ok, Nanos now);
  // Half-opens the breakers whose period ended: the endpoints are routed to again.
  void close_expired_breakers(Nanos now);
  // The request fails at the client (lost).
  void lose(uint64_t id);
  // Autoscaling glue: engines come and go at run time.
  uint32_t create_engine(const EngineGroup& g);
  Status join_router(uint32_t engine, Nanos now);
  void on_control(Nanos now);
  void on_replica_ready(Nanos now, uint32_t engine);
  // Warm-up before traffic (policy_.warmup): the replica is in the router but unhealthy
  // until its WarmupRun finishes.
  void warmup_send(Nanos now, uint32_t engine);
  void admit_replica(Nanos now, uint32_t engine);
  scale::UsageRates usage_rates(Nanos now);
  scale::PoolSignals build_signals(Nanos now);
  void launch(Nanos now);
  void apply_standby(Nanos now, int32_t count);
  void drain(Nanos now, uint32_t engine);
  void stop(Nanos now, uint32_t engine);
  // A request routed to `engine` (its decode engine) is over; a draining replica stops
  // with its last one (route::drain_over; a simulated drain has no deadline).
  void release_in_flight(Nanos now, uint32_t engine) {
    const uint32_t left = --replicas_[engine].in_flight;
    if (replicas_[engine].phase == ReplicaPhase::kDraining &&
        route::drain_over(left, now, route::kNoDrainDeadline)) {
      stop(now, engine);
    }
  }
  // Sets or releases one of the endpoint's holds (route/endpoint_holds.h, the gateway's
  // rules): the router's health follows when it changes, in every gateway replica.
  void set_hold(route::EndpointId ep, route::Hold hold, bool on) {
    if (auto h = holds_.set(ep, hold, on)) group_->set_health(ep, *h);
  }
  bool live(uint32_t engine) const { return replicas_[engine].phase != ReplicaPhase::kStopped; }
  void schedule_step(uint32_t engine, Nanos at);
  uint64_t admit(workload::WorkloadRequest w);
  void pull_open_loop();
  // The router keys of r's prompt; sets r.cached for a prompt the workload resends.
  void set_keys(RequestState& r);
  // An accepted decision: the request goes to its engine(s).
  void send(Nanos now, uint64_t id, const route::Decision& d);
  void reject(uint64_t id, std::string_view reason);
  // Flow control: what one outcome of `replica`'s queue means for its request.
  void apply(Nanos now, const route::FlowOutcome& o, uint32_t replica);
  // Flow control: capacity may have appeared (and time passed): timeouts, then dispatch.
  void pump(Nanos now);
  // Requests queued in the gateway, in all its replicas' queues.
  size_t flow_queued() const {
    size_t n = 0;
    for (const auto& f : flows_) n += f->queue().size();
    return n;
  }
  bool done() const { return outstanding_ == 0 && open_loop_exhausted_; }

  const Scenario& scenario_;
  const PolicySpec& policy_;
  uint64_t seed_;
  RunOptions options_;
  Rng rng_;
  // The gateway's per-endpoint circuit breakers (one set for all gateway replicas), the
  // draws of erroring engines (their own stream: routing's is untouched), each engine's
  // fault state, and the counts for the report.
  route::CircuitBreakers breakers_;
  // Why each endpoint is out of routing (warm-up, breaker, standby, draining): the one
  // source of the router's health, as in PoolRuntime.
  route::EndpointHolds holds_;
  Rng failure_rng_;
  std::vector<EngineFault> faults_;
  uint64_t breaker_openings_ = 0;

  std::unique_ptr<workload::Workload> workload_;
  std::vector<std::unique_ptr<engine::EngineModel>> engines_;
  std::vector<kv::EndpointId> endpoint_of_;  // engine index -> router endpoint id
  std::vector<bool> step_pending_;
  std::unique_ptr<kv::PreciseIndex> precise_;
  // The gateway replicas (one unless RunOptions::replicas says more); router_ is the
  // first one's router, the view the autoscaler and the reports read.
  std::unique_ptr<ReplicaGroup> group_;
  route::Router* router_ = nullptr;
  // Flow control (policy_.flow.enabled): each gateway replica's queue in front of its
  // router (flows_[i] over group_->router(i); one replica: the single queue in front of
  // router_), and the RouteRequests they borrow while they wait (node-stable). With
  // several replicas: the replica whose queue took each request, and the one that
  // dispatches first at the next pump (in turn: none has the first claim on capacity).
  std::vector<std::unique_ptr<route::FlowController>> flows_;
  std::unordered_map<uint64_t, route::RouteRequest> waiting_;
  std::vector<route::FlowOutcome> flow_out_;
  std::vector<uint32_t> charged_output_;  // by request id: output tokens flow charged
  std::vector<uint32_t> flow_replica_;    // by request id (several replicas)
  uint32_t pump_first_ = 0;
  std::vector<bool> tenant_sends_;  // by tenant index: sends in this run
  bool want_events_ = false;
  uint32_t block_size_ = 16;
  uint64_t key_seed_ = 0;

  EventQueue<Event> queue_;
  std::vector<RequestState> requests_;
  std::unordered_map<const workload::Prompt*, CachedPrompt> key_cache_;
  std::vector<std::vector<kv::KvEvent>> kv_batches_;
  std::vector<uint64_t> free_batches_;
  engine::StepResult step_;
  uint64_t outstanding_ = 0;  // admitted (arrival queued or past) and not finished/rejected
  bool open_loop_exhausted_ = false;
  std::vector<uint32_t> engine_of_;  // router endpoint id -> engine index
  std::vector<ClusterSample> samples_;
  Nanos last_scrape_ = 0;
  std::vector<double> busy_attributed_;  // by engine: busy seconds counted in samples
  uint64_t events_ = 0;

  // Autoscaling (decider_ null: a fixed fleet).
  std::unique_ptr<ScaleDecider> decider_;
  std::vector<Replica> replicas_;  // by engine index
  Rng startup_rng_;
  LatencyWindow ttft_window_, itl_window_;       // seconds, observed at the gateway
  LatencyWindow prompt_window_, output_window_;  // tokens per finished request
  uint64_t arrivals_since_tick_ = 0;
  uint64_t arrivals_ = 0;            // every arrival so far
  scale::ArrivalRate arrival_rate_;  // of arrivals_, read at each control tick
  int32_t standby_ = 0;              // replicas kept out of routing (horizon policy's standby)
  double gpu_seconds_ = 0;
  int32_t gpus_per_replica_ = 1;
  uint32_t launches_ = 0;
  std::vector<ScaleSample> scale_samples_;
  std::unique_ptr<kv::HotPrefixes> hot_;                 // set when warm-up is on
  std::unordered_map<uint32_t, kv::WarmupRun> warmups_;  // by engine index

  // LoRA (scenario_.adapters enabled): the adapters' names and key seeds, the draws of
  // each request's adapter (a stream of their own), and, with placement, the planner, the
  // demand per adapter (arrivals in the current window, the last window's rate, requests
  // waiting for a load somewhere), the actions in flight by slot and the requests
  // waiting per adapter.
  std::optional<workload::AdapterPicker> adapter_picker_;
  Rng adapter_rng_;
  std::vector<std::string> adapter_names_;
  std::vector<uint64_t> adapter_key_seeds_;
  std::unique_ptr<route::LoraPlacement> placement_;
  struct LoraDemand {
    uint64_t arrivals = 0;
    double rate = 0;
    uint32_t waiting = 0;
    std::vector<uint64_t> waiters;  // request ids, in arrival order
  };
  std::vector<LoraDemand> lora_demand_;
  Nanos lora_window_start_ = 0;
  bool lora_kicked_ = false;  // a kicked round is queued
  struct LoraInFlight {
    route::LoraAction action;
    bool ok = false;
  };
  std::vector<LoraInFlight> lora_actions_;
  std::vector<uint64_t> free_lora_slots_;
  uint64_t lora_placement_actions_ = 0;
};

Status Simulation::build() {
  auto w = workload::make_workload(scenario_.workload, seed_, env::read_file);
  if (!w) return Error(w.error());
  workload_ = std::move(*w);

  const auto src = policy_.router.overlap_source;
  want_events_ = src == route::OverlapSource::kPrecise || src == route::OverlapSource::kBoth;
  // Decisions are recorded into an ApproxIndex only where a policy reads it.
  const bool want_approx =
      src == route::OverlapSource::kApprox || src == route::OverlapSource::kBoth;

  auto decider = make_scale_decider(scenario_, policy_);
  if (!decider) return Error(decider.error());
  decider_ = std::move(*decider);
  if (decider_) {
    gpus_per_replica_ = decider_->gpus_per_replica();
  } else if (scenario_.autoscale) {
    gpus_per_replica_ = scenario_.autoscale->gpus_per_replica;
  }
  for (const EngineGroup& g : scenario_.engines) {
    for (uint32_t i = 0; i < g.count; ++i) create_engine(g);
  }
  if (engines_.empty()) {
    // A pool that scales from zero: the block size its replicas will have.
    const EngineGroup& g = scenario_.engines.front();
    block_size_ = engine::EngineModel(g.config, g.profile).config().block_size;
  } else {
    block_size_ = engines_.front()->config().block_size;
  }
  for (const auto& e : engines_) {
    if (e->config().block_size != block_size_) {
      return Error("all engines of a scenario must use the same block size");
    }
  }
  key_seed_ = kv::block_seed(scenario_.gateway.model, "", "");
  if (scenario_.adapters.enabled()) {
    adapter_picker_.emplace(scenario_.adapters);
    for (uint32_t i = 0; i < scenario_.adapters.count; ++i) {
      adapter_names_.push_back(workload::AdapterSpec::name(i));
      adapter_key_seeds_.push_back(
          kv::block_seed(scenario_.gateway.model, adapter_names_.back(), ""));
    }
    lora_demand_.resize(scenario_.adapters.count);
    if (policy_.lora_aware && policy_.lora_placement.enabled) {
      placement_ = std::make_unique<route::LoraPlacement>(policy_.lora_placement);
    }
  }

  if (want_events_) {
    precise_ = std::make_unique<kv::PreciseIndex>(
        kv::PreciseIndex::Options{.model = scenario_.gateway.model, .block_size = block_size_});
  }
  if (policy_.warmup.enabled) hot_ = std::make_unique<kv::HotPrefixes>(block_size_);

  route::RouterConfig config = policy_.router;
  config.block_size = block_size_;
  auto group = ReplicaGroup::create(config, precise_.get(), want_approx, policy_.approx,
                                    options_.replicas, seed_);
  if (!group) return Error("policy " + policy_.name + ": " + group.error());
  group_ = std::move(*group);
  router_ = &group_->primary();
  if (policy_.flow.enabled) {
    // A queue per gateway replica, each in front of its replica's router; with sync on
    // they order by the fleet's service (ReplicaGroup::enable_fleet_fairness).
    // With sync on, each releases only its share of the pool's room (room_share).
    std::vector<route::FlowQueue*> queues;
    std::vector<route::FlowController*> controllers;
    for (uint32_t i = 0; i < group_->size(); ++i) {
      flows_.push_back(std::make_unique<route::FlowController>(group_->router(i), policy_.flow));
      queues.push_back(&flows_.back()->queue());
      controllers.push_back(flows_.back().get());
    }
    group_->enable_fleet_fairness(queues);
    group_->enable_room_share(controllers);
  }
  const auto& tenants = scenario_.workload.tenants;
  tenant_sends_.assign(std::max<size_t>(tenants.size(), 1), policy_.tenants.empty());
  for (const std::string& name : policy_.tenants) {
    auto it = std::find_if(tenants.begin(), tenants.end(),
                           [&](const workload::TenantSpec& t) { return t.name == name; });
    if (it == tenants.end()) {
      return Error("policy " + policy_.name + ": no tenant \"" + name + "\" in the workload");
    }
    tenant_sends_[static_cast<size_t>(it - tenants.begin())] = true;
  }

  for (uint32_t index = 0; index < engines_.size(); ++index) {
    if (Status s = join_router(index, 0); !s) return s;
  }
  return {};
}

uint32_t Simulation::create_engine(const EngineGroup& g) {
  const uint32_t index = static_cast<uint32_t>(engines_.size());
  engine::EngineConfig config = g.config;
  config.emit_kv_events = want_events_;
  config.report_decode_tokens = false;  // on_engine_step reads first and last tokens only
  config.hash_seed = (seed_ * 0x9e3779b97f4a7c15ULL) ^ (0x6b76000000000000ULL + index);
  config.vocab_size = scenario_.workload.vocab_size;
  if (scenario_.adapters.enabled()) {
    config.max_loras = scenario_.adapters.max_loras;
    config.lora_load_time = scenario_.adapters.load_time;
    config.lora_step_cost = scenario_.adapters.step_cost;
  }
  engines_.push_back(std::make_unique<engine::EngineModel>(config, g.profile));
  step_pending_.push_back(false);
  faults_.emplace_back();
  endpoint_of_.push_back(0);
  replicas_.emplace_back();
  return index;
}

// Index of the group engine `index` belongs to (new replicas copy the first group).
const EngineGroup& group_of(const Scenario& s, uint32_t index) {
  for (const EngineGroup& g : s.engines) {
    if (index < g.count) return g;
    index -= g.count;
  }
  return s.engines.front();
}

Status Simulation::join_router(uint32_t index, Nanos now) {
  const EngineGroup& g = group_of(scenario_, index);
  route::EndpointSpec spec;
  spec.url = fmt::format("sim://engine-{}", index);
  spec.role = g.role;
  spec.zone = g.zone;
  spec.rack = g.rack;
  spec.kv_capacity_blocks = engines_[index]->config().num_gpu_blocks;
  auto id = group_->add_endpoint(spec, now);
  if (!id) return Error(id.error());
  endpoint_of_[index] = *id;
  breakers_.reset(*id);  // a new endpoint, or a reused id: closed
  holds_.reset(*id);     // ... and held for nothing
  if (engine_of_.size() <= *id) engine_of_.resize(*id + 1, 0);
  engine_of_[*id] = index;
  return {};
}

void Simulation::set_keys(RequestState& r) {
  // Workloads that resend the same prompts (shared_prefix) keep them alive themselves
  // (use_count > 1 here): hash each of those once. The cache also holds the prompt, so
  // its address can never be reused by another prompt while the entry exists.
  const workload::PromptPtr& prompt = r.work.prompt;
  if (r.adapter > 0) {
    // An adapter's blocks are its own: the gateway seeds their keys with its name (and
    // each engine hashes the prompt under the adapter itself).
    auto keys = std::make_shared<std::vector<kv::BlockKey>>();
    keys->reserve(prompt->size() / block_size_);
    kv::hash_blocks(*prompt, block_size_, adapter_key_seeds_[r.adapter - 1], *keys);
    r.keys = std::move(keys);
    return;
  }
  const bool shared = prompt.use_count() > 1;
  if (shared) {
    auto it = key_cache_.find(prompt.get());
    if (it != key_cache_.end()) {
      r.keys = it->second.keys;
      r.cached = &it->second;
      return;
    }
  }
  auto keys = std::make_shared<std::vector<kv::BlockKey>>();
  keys->reserve(prompt->size() / block_size_);
  kv::hash_blocks(*prompt, block_size_, key_seed_, *keys);
  r.keys = keys;
  if (shared) {
    // unordered_map nodes are stable: r.cached stays valid as the cache grows.
    r.cached =
        &key_cache_.emplace(prompt.get(), CachedPrompt{prompt, std::move(keys), {}}).first->second;
  }
}

uint64_t Simulation::admit(workload::WorkloadRequest w) {
  const uint64_t id = requests_.size();
  RequestState& r = requests_.emplace_back();
  r.record.arrival = w.arrival;
  r.record.stage = w.stage;
  r.record.prompt_tokens = static_cast<uint32_t>(w.prompt->size());
  r.record.tenant = w.tenant;
  r.record.ttft_target = w.ttft_target;
  r.record.tpot_target = w.tpot_target;
  if (adapter_picker_) r.adapter = adapter_picker_->pick(adapter_rng_);
  r.work = std::move(w);
  ++outstanding_;
  queue_.push(r.record.arrival, Event{EventKind::kArrival, 0, id});
  return id;
}

void Simulation::pull_open_loop() {
  // Exactly one future open-loop arrival is queued at a time, so a long workload never
  // sits in memory.
  auto w = workload_->next();
  while (w && w->tenant < tenant_sends_.size() && !tenant_sends_[w->tenant]) w = workload_->next();
  if (!w) {
    open_loop_exhausted_ = true;
    return;
  }
  requests_[admit(std::move(*w))].open_loop = true;
}

route::RouteRequest Simulation::route_request(uint64_t id) const {
  const RequestState& r = requests_[id];
  route::RouteRequest rr;
  rr.id = id;
  rr.keys = *r.keys;
  rr.prompt_tokens = static_cast<uint32_t>(r.work.prompt->size());
  rr.expected_output_tokens = r.work.output_tokens;
  const auto& tenants = scenario_.workload.tenants;
  if (r.work.tenant < tenants.size()) rr.criticality = tenants[r.work.tenant].criticality;
  if (r.adapter > 0 && policy_.lora_aware) rr.adapter = adapter_name(r);
  // A chat conversation's turns carry its session, as a client sends x-session-id (the
  // tenant in the high bits: each tenant's workload numbers its sessions from 1).
  if (r.work.session != 0 && policy_.router.session_affinity.enabled) {
    rr.session = route::session_key((uint64_t{r.work.tenant} << 48) ^ r.work.session);
  }
  // The workload's latency targets (the router honours them when the policy has
  // latency_targets on; flow control's targets_first orders its queue by them either way).
  rr.ttft_target = r.work.ttft_target;
  rr.tpot_target = r.work.tpot_target;
  return rr;
}

void Simulation::on_arrival(Nanos now, uint64_t id) {
  if (requests_[id].open_loop) pull_open_loop();  // may grow requests_
  RequestState& r = requests_[id];
  set_keys(r);
  if (hot_) hot_->observe(*r.keys, {.token_ids = *r.work.prompt}, now);
  if (placement_ && r.adapter > 0) {
    // As LoraPlacer::arrive: counted as demand; when the adapter is loaded nowhere, the
    // request waits (up to max_wait) for the load its arrival asks for.
    LoraDemand& d = lora_demand_[r.adapter - 1];
    ++d.arrivals;
    if (!placement_->loaded_anywhere(adapter_name(r))) {
      r.lora_waiting = true;
      ++d.waiting;
      d.waiters.push_back(id);
      queue_.push(now + policy_.lora_placement.max_wait, Event{EventKind::kLoraWaitEnd, 0, id});
      lora_kick(now);
      return;
    }
  }
  route_arrival(now, id);
}

void Simulation::route_arrival(Nanos now, uint64_t id) {
  RequestState& r = requests_[id];
  route::RouteRequest rr = route_request(id);
  const auto& tenants = scenario_.workload.tenants;
  const workload::TenantSpec* tenant =
      r.work.tenant < tenants.size() ? &tenants[r.work.tenant] : nullptr;
  close_expired_breakers(now);
  if (flows_.empty()) {
    const route::Decision d = group_->route(rr, now, rng_);
    if (!d.accepted()) return reject(id, route::to_string(d.reason));
    return send(now, id, d);
  }
  route::RouteRequest& held = waiting_.try_emplace(id, rr).first->second;
  route::FlowRequest fr{.request = &held};
  if (tenant) {
    fr.tenant = tenant->name;
    fr.weight = tenant->weight;
    if (tenant->deadline > 0) fr.deadline = now + tenant->deadline;
  }
  // The replica the client reached (one: the single gateway, no draw).
  const uint32_t replica = flows_.size() > 1 ? group_->pick_replica(now) : 0;
  if (flows_.size() > 1) {
    if (flow_replica_.size() <= id) flow_replica_.resize(id + 1, 0);
    flow_replica_[id] = replica;
  }
  flow_out_.clear();
  const route::FlowOutcome o = flows_[replica]->admit(fr, now, rng_, flow_out_);
  apply(now, o, replica);
  for (const route::FlowOutcome& other : flow_out_) apply(now, other, replica);
  if (flows_.size() > 1) {
    group_->service_changed(replica, now);
    group_->demand_changed(replica, now);
  }
}

void Simulation::reject(uint64_t id, std::string_view reason) {
  RequestState& r = requests_[id];
  r.record.rejected = true;
  r.record.reject_reason = reason;
  r.work.prompt.reset();
  --outstanding_;
}

void Simulation::apply(Nanos now, const route::FlowOutcome& o, uint32_t replica) {
  if (o.kind == route::FlowOutcome::Kind::kQueued) {
    requests_[o.id].record.queue_wait = 0;
    return;
  }
  if (o.kind == route::FlowOutcome::Kind::kDispatched && flows_.size() > 1 && o.request) {
    group_->committed(replica, *o.request, o.decision, now);  // before `o.request` goes
  }
  waiting_.erase(o.id);
  RequestState& r = requests_[o.id];
  if (r.record.queue_wait >= 0 || o.waited > 0) r.record.queue_wait = o.waited;
  if (o.kind == route::FlowOutcome::Kind::kRefused) {
    reject(o.id, o.refusal != route::FlowRefusal::kNone ? route::to_string(o.refusal)
                                                        : route::to_string(o.decision.reason));
    return;
  }
  if (charged_output_.size() <= o.id) charged_output_.resize(o.id + 1, 0);
  charged_output_[o.id] = o.charged_output_tokens;
  send(now, o.id, o.decision);
}

void Simulation::pump(Nanos now) {
  if (flows_.size() > 1) {
    // Each replica dispatches on its own view (what reached it by now), a different one
    // first each time.
    group_->catch_up(now);
    const auto n = static_cast<uint32_t>(flows_.size());
    const uint32_t first = pump_first_;
    pump_first_ = (pump_first_ + 1) % n;
    bool closed = false;
    for (uint32_t k = 0; k < n; ++k) {
      const uint32_t i = (first + k) % n;
      route::FlowController& flow = *flows_[i];
      if (flow.queue().empty()) continue;
      if (!closed) close_expired_breakers(now);
      closed = true;
      flow_out_.clear();
      flow.expire(now, flow_out_);
      flow.dispatch(now, rng_, flow_out_);
      for (const route::FlowOutcome& o : flow_out_) apply(now, o, i);
      group_->service_changed(i, now);
      group_->demand_changed(i, now);
    }
    return;
  }
  if (flows_.empty() || flows_[0]->queue().empty()) return;
  route::FlowController& flow = *flows_[0];
  close_expired_breakers(now);
  flow_out_.clear();
  flow.expire(now, flow_out_);
  flow.dispatch(now, rng_, flow_out_);
  // apply() may grow requests_ (no: only on_finished admits), but not flow_out_.
  for (const route::FlowOutcome& o : flow_out_) apply(now, o, 0);
}

void Simulation::send(Nanos now, uint64_t id, const route::Decision& d) {
  RequestState& r = requests_[id];
  const uint32_t engine = engine_of_[d.endpoint];
  r.record.endpoint = engine;
  r.decode_engine = engine;
  if (placement_ && r.adapter > 0) placement_->on_routed(d.endpoint, adapter_name(r), now);
  const bool first_attempt = r.tried++ == 0 && r.migrations == 0;
  if (first_attempt && d.session != route::SessionOutcome::kNone) {
    r.record.session = true;
    r.record.session_kept = d.session_kept();
    r.record.session_moved = d.session != route::SessionOutcome::kNew && !d.session_kept();
  }
  ++replicas_[engine].in_flight;
  if (first_attempt) {  // a retry is no new arrival for the autoscaler
    ++arrivals_since_tick_;
    ++arrivals_;
  }
  uint32_t first = engine;
  if (d.prefill_endpoint) {
    // Disaggregated: prefill there first, then hand the KV to `engine`.
    r.phase = Phase::kPrefill;
    first = engine_of_[*d.prefill_endpoint];
    r.record.prefill_engine = first;
  }
  queue_.push(now + scenario_.gateway.hop_delay,
              Event{EventKind::kEngineReceive, first, id, r.attempt});
}

void Simulation::on_engine_receive(Nanos now, uint32_t engine, uint64_t id) {
  RequestState& r = requests_[id];
  if (!scenario_.failures.empty()) {
    // A dead engine refuses the connection; an erroring one answers 503 at once. Either
    // way the gateway learns it a hop later (route/failover.h decides what follows).
    const EngineFault& f = faults_[engine];
    if (f.down || (f.error_rate > 0 && failure_rng_.uniform() < f.error_rate)) {
      queue_.push(now + scenario_.gateway.hop_delay,
                  Event{EventKind::kUpstreamFailed, engine, id, r.attempt});
      return;
    }
  }
  engine::EngineRequest er;
  er.id = id;
  er.max_tokens = r.work.output_tokens;
  if (r.resumed) {
    // A migrated stream's continuation: the answer's rest after the first token (the
    // simulator follows first and last tokens only, so the tokens a failed leg streamed
    // past the first are produced again).
    er.max_tokens = std::max<uint32_t>(r.work.output_tokens, 2) - 1;
  }
  er.shared_prompt = r.work.prompt;  // shared, not copied
  if (r.adapter > 0) er.lora_name = adapter_name(r);
  if (r.cached != nullptr) {
    // A resent prompt: each engine hashes it once (exact, see engine::PromptHashes).
    auto& known = r.cached->engine_hashes;
    auto it = std::find_if(known.begin(), known.end(),
                           [&](const auto& entry) { return entry.first == engine; });
    if (it == known.end()) {
      known.emplace_back(engine, engines_[engine]->hash_prompt(r.work.prompt));
      it = known.end() - 1;
    }
    er.prompt_hashes = it->second;
  }
  if (r.work.reply && !r.resumed) er.output_tokens = *r.work.reply;
  if (r.phase == Phase::kPrefill) {
    er.max_tokens = 1;               // vLLM's P/D proxy: the prefill request asks for one token
    er.hold_kv_after_finish = true;  // until the decode engine has read the KV
  } else if (r.phase == Phase::kDecode) {
    const uint32_t prefill_engine = r.record.prefill_engine;
    // Usage once the prompt's KV is in: with long prompts one request is a sizeable
    // share of the pool, so the engine's current usage alone would admit requests that
    // cannot fit, to wait in its queue.
    const engine::EngineConfig& dc = engines_[engine]->config();
    const double prompt_blocks =
        static_cast<double>((r.work.prompt->size() + dc.block_size) / dc.block_size);
    const double usage = engines_[engine]->metrics().kv_cache_usage +
                         prompt_blocks / std::max<uint32_t>(dc.num_gpu_blocks, 1);
    if (scenario_.gateway.decode_reject_kv_usage > 0 &&
        usage > scenario_.gateway.decode_reject_kv_usage) {
      // Mooncake section 7: the decode instance is too loaded and refuses a request
      // whose prefill is already done; the prefill work is wasted.
      r.record.rejected = true;
      r.record.rejected_after_prefill = true;
      queue_.push(now, Event{EventKind::kPrefillRelease, prefill_engine, id});
      group_->on_failed(id, now + scenario_.gateway.hop_delay);
      r.work.prompt.reset();
      --outstanding_;
      release_in_flight(now, engine);
      return;
    }
    er.remote_kv = true;
    er.kv_transfer_time = scenario_.gateway.kv_transfer_per_1k_tokens *
                          static_cast<Nanos>(r.work.prompt->size()) / 1000;
    queue_.push(now + er.kv_transfer_time, Event{EventKind::kPrefillRelease, prefill_engine, id});
  }
  Status s = engines_[engine]->add(std::move(er), now);
  if (s) {
    r.at_engine = engine;
    // Accepted: a streaming engine sends its head now, before any token (kvgate engine,
    // vLLM), and the gateway passes it on; a prefill hop's answer comes whole, later.
    if (r.phase != Phase::kPrefill) r.began = true;
  }
  if (!s) {
    // The engine refused it (too long for its context or its KV pool): a 400 upstream.
    r.record.rejected = true;
    group_->on_failed(id, now + scenario_.gateway.hop_delay);
    --outstanding_;
    release_in_flight(now, r.decode_engine);
    return;
  }
  if (!step_pending_[engine]) {
    if (auto t = engines_[engine]->next_step_time(now)) schedule_step(engine, std::max(*t, now));
  }
}

void Simulation::schedule_step(uint32_t engine, Nanos at) {
  step_pending_[engine] = true;
  queue_.push(at, Event{EventKind::kEngineStep, engine, 0});
}

void Simulation::on_engine_step(Nanos now, uint32_t engine) {
  step_pending_[engine] = false;
  if (!live(engine) || faults_[engine].down) return;
  engine::EngineModel& e = *engines_[engine];
  e.step(now, step_);
  if (faults_[engine].slow != 1 && step_.duration > 0) {
    step_.duration = static_cast<Nanos>(static_cast<double>(step_.duration) * faults_[engine].slow);
  }
  const Nanos end = step_.end();
  const Nanos at_gateway = end + scenario_.gateway.hop_delay;
  for (const engine::RequestUpdate& u : step_.updates) {
    // A plain decode token changes nothing here (a prefill engine's only update is a
    // first token, so this skips no prefill phase).
    if (u.output_index != 0 && !u.finished) continue;
    if (u.id & kWarmupId) {
      if (u.finished) {
        auto it = warmups_.find(engine);
        if (it != warmups_.end()) {
          it->second.done(
              u.id & 0xffffffffULL,
              {.ok = true, .prompt_tokens = u.prompt_tokens, .cached_tokens = u.cached_tokens});
          queue_.push(at_gateway, Event{EventKind::kWarmupSend, engine, 0});
        }
      }
      continue;
    }
    RequestState& r = requests_[u.id];
    if (u.finished) r.at_engine = kNoEngine;
    if (r.phase == Phase::kPrefill) {
      // The prefill engine's one token: the prompt's KV is ready to move.
      r.record.prompt_tokens = u.prompt_tokens;
      r.record.cached_tokens = u.cached_tokens;
      if (u.finished) {
        queue_.push(at_gateway, Event{EventKind::kPrefillDone, engine, u.id, r.attempt});
      }
      continue;
    }
    // A stream migrated after its first token keeps that leg's first token and cache
    // figures.
    const bool first_leg = !r.resumed;
    if (u.output_index == 0 && r.phase == Phase::kDecode) {
      // The prompt was prefilled elsewhere: keep the prefill engine's cache figures.
      if (first_leg) r.record.first_token = at_gateway;
      queue_.push(at_gateway, Event{EventKind::kFirstToken, engine, u.id, r.attempt});
    } else if (u.output_index == 0) {
      if (first_leg) {
        r.record.first_token = at_gateway;
        r.record.prompt_tokens = u.prompt_tokens;
        r.record.cached_tokens = u.cached_tokens;
      }
      queue_.push(at_gateway, Event{EventKind::kFirstToken, engine, u.id, r.attempt});
    }
    if (u.finished) {
      r.record.finish = at_gateway;
      r.record.output_tokens = u.output_index + 1 + (first_leg ? 0 : 1);
      queue_.push(at_gateway, Event{EventKind::kFinished, engine, u.id, r.attempt});
    }
  }
  if (want_events_ && !step_.kv_events.empty()) {
    uint64_t slot;
    if (!free_batches_.empty()) {
      slot = free_batches_.back();
      free_batches_.pop_back();
    } else {
      slot = kv_batches_.size();
      kv_batches_.emplace_back();
    }
    kv_batches_[slot].swap(step_.kv_events);
    queue_.push(end + scenario_.gateway.kv_event_delay, Event{EventKind::kKvEvents, engine, slot});
  }
  auto next = e.next_step_time(end);
  if (!next) return;
  if (step_.duration == 0 && *next <= now) {
    // Work that cannot be scheduled yet (should not happen with a sane pool); poll
    // rather than spin at one instant.
    *next = now + kMillisecond;
  }
  schedule_step(engine, std::max(*next, end));
}

void Simulation::on_finished(Nanos now, uint64_t id) {
  group_->on_finished(id, now, requests_[id].record.output_tokens);
  {
    const RequestRecord& rec = requests_[id].record;
    if (live(rec.endpoint)) breaker_result(endpoint_of_[rec.endpoint], true, now);
  }
  --outstanding_;
  if (!flows_.empty()) {
    const RequestRecord& rec = requests_[id].record;
    const auto& tenants = scenario_.workload.tenants;
    const uint32_t charged = id < charged_output_.size() ? charged_output_[id] : 0;
    if (charged > 0) {
      const uint32_t replica = id < flow_replica_.size() ? flow_replica_[id] : 0;
      flows_[replica]->finished(
          rec.tenant < tenants.size() ? std::string_view(tenants[rec.tenant].name) : "", charged,
          rec.output_tokens);
      if (flows_.size() > 1) group_->service_changed(replica, now);
    }
    pump(now);
  }
  {
    const RequestRecord& rec = requests_[id].record;
    if (rec.output_tokens > 1) {
      itl_window_.add(now, to_seconds(rec.finish - rec.first_token) / (rec.output_tokens - 1));
    }
    prompt_window_.add(now, rec.prompt_tokens);
    output_window_.add(now, rec.output_tokens);
    release_in_flight(now, rec.endpoint);
  }
  auto next = workload_->follow_up(requests_[id].work, now);
  RequestState& r = requests_[id];
  r.work.prompt.reset();
  r.work.reply.reset();
  r.keys.reset();
  if (next) admit(std::move(*next));  // may grow requests_: `r` is dead after this
}

void Simulation::on_prefill_done(Nanos now, uint64_t id) {
  RequestState& r = requests_[id];
  r.phase = Phase::kDecode;
  // The gateway's P/D flow does the same when the prefill answer comes back: the
  // prefill endpoint's load goes, and the request counts as landed on decode.
  group_->on_first_token(id, now);
  queue_.push(now + scenario_.gateway.hop_delay,
              Event{EventKind::kEngineReceive, r.decode_engine, id, r.attempt});
  pump(now);
}

void Simulation::on_kv_events(uint32_t engine, uint64_t slot) {
  const kv::EndpointId ep = endpoint_of_[engine];
  if (!live(engine)) {
    // A stopped replica's endpoint id may already belong to a new one: drop its events.
    step_.recycle(kv_batches_[slot]);
    free_batches_.push_back(slot);
    return;
  }
  kv::apply_events(*precise_, ep, kv_batches_[slot]);
  step_.recycle(kv_batches_[slot]);  // the engines refill these vectors: no allocation
  free_batches_.push_back(slot);
}

void Simulation::on_scrape(Nanos now) {
  double waiting = 0, usage = 0, prefill_waiting = 0, decode_usage = 0, prefill_queued = 0;
  uint32_t prefillers = 0, decoders = 0;
  double prefillers_busy = 0;
  busy_attributed_.resize(engines_.size(), 0.0);
  size_t serving = 0;
  for (uint32_t i = 0; i < engines_.size(); ++i) {
    const ReplicaPhase phase = replicas_[i].phase;
    if (phase != ReplicaPhase::kReady && phase != ReplicaPhase::kDraining) continue;
    ++serving;
    const engine::EngineMetrics& m = engines_[i]->metrics();
    const engine::Role role = engines_[i]->config().role;
    if (role == engine::Role::kPrefill) {
      prefill_waiting += m.num_requests_waiting;
      if (const route::Endpoint* ep = router_->pool().get(endpoint_of_[i]))
        prefill_queued += static_cast<double>(ep->load.active_prefill_tokens);
      // Busy time since the last scrape. A step's whole duration is counted when it
      // starts, so a long step's time is spread over the intervals it covers (at most
      // one interval's worth each).
      const double dt = to_seconds(now - last_scrape_);
      if (dt > 0) {
        const double take = std::min(dt, m.busy_seconds - busy_attributed_[i]);
        busy_attributed_[i] += take;
        prefillers_busy += take / dt;
      }
      ++prefillers;
    } else if (role == engine::Role::kDecode) {
      decode_usage += m.kv_cache_usage;
      ++decoders;
    }
    // A dead engine's scrape fails: the router keeps what it saw last.
    if (!faults_[i].down) {
      route::ScrapedMetrics scraped = route::scrape_of(m);
      if (!adapter_names_.empty()) {
        // vllm:lora_requests_info, as `kvgate engine` exports it.
        scraped.lora.max_loras = engines_[i]->config().max_loras;
        engines_[i]->lora_adapters(scraped.lora.running, scraped.lora.waiting);
      }
      group_->on_metrics(endpoint_of_[i], scraped, now);
    }
    waiting += m.num_requests_waiting;
    usage += m.kv_cache_usage;
  }
  const double n = static_cast<double>(std::max<size_t>(serving, 1));
  last_scrape_ = now;
  const double p = std::max<uint32_t>(prefillers, 1);
  samples_.push_back({.at = now,
                      .mean_waiting = waiting / n,
                      .mean_kv_usage = usage / n,
                      .prefill_waiting = prefill_waiting / p,
                      .decode_kv_usage = decoders ? decode_usage / decoders : 0,
                      .prefill_queued_tokens = prefill_queued / p,
                      .prefill_busy = prefillers_busy / p,
                      .queued = static_cast<double>(flow_queued())});
  pump(now);
  if (!done())
    queue_.push(now + scenario_.gateway.scrape_interval, Event{EventKind::kScrape, 0, 0});
}

void Simulation::on_failure(Nanos now, const workload::FailureSpec& f, bool begins) {
  using Kind = workload::FailureSpec::Kind;
  const uint32_t engine = f.engine;
  if (engine >= engines_.size()) return;
  EngineFault& fault = faults_[engine];
  switch (f.kind) {
    case Kind::kSlow:
      fault.slow = begins ? f.factor : 1;
      return;
    case Kind::kErroring:
      fault.error_rate = begins ? f.error_rate : 0;
      return;
    case Kind::kFailStop:
      break;
  }
  if (!live(engine)) return;
  if (!begins) {
    if (!fault.down) return;
    // Back up as a restarted process: an empty prefix cache, and the KV-event feed says
    // so (AllBlocksCleared), as a restarted vLLM's publisher would.
    fault.down = false;
    std::vector<kv::KvEvent> cleared;
    if (engines_[engine]->reset_prefix_cache(cleared) && precise_) {
      kv::apply_events(*precise_, endpoint_of_[engine], cleared);
    }
    return;
  }
  if (fault.down) return;
  fault.down = true;
  // Every request it holds is dropped with the process; the gateway sees each
  // connection fail a hop later (what already reached it stands, route/failover.h).
  for (uint64_t id = 0; id < requests_.size(); ++id) {
    RequestState& r = requests_[id];
    if (r.at_engine != engine) continue;
    r.at_engine = kNoEngine;
    if (!engines_[engine]->abort(id)) continue;
    queue_.push(now + scenario_.gateway.hop_delay,
                Event{EventKind::kUpstreamFailed, engine, id, r.attempt});
  }
}

void Simulation::breaker_result(route::EndpointId ep, bool ok, Nanos now) {
  if (breakers_.on_result(ep, ok, now) != route::CircuitBreakers::Transition::kOpened) return;
  ++breaker_openings_;
  set_hold(ep, route::Hold::kBreaker, true);
}

void Simulation::close_expired_breakers(Nanos now) {
  for (route::EndpointId ep : breakers_.expire(now)) {
    if (ep >= engine_of_.size()) continue;
    // Half-open: routed to again, unless it left or another hold stays (it warms up,
    // waits in standby or drains: route/endpoint_holds.h).
    if (!live(engine_of_[ep])) continue;
    set_hold(ep, route::Hold::kBreaker, false);
  }
}

void Simulation::lose(uint64_t id) {
  RequestState& r = requests_[id];
  r.record.failed = true;
  r.record.finish = -1;
  r.work.prompt.reset();
  r.work.reply.reset();
  r.keys.reset();
  --outstanding_;
}

void Simulation::on_upstream_failed(Nanos now, uint32_t engine, uint64_t id) {
  RequestState& r = requests_[id];
  const route::EndpointId failed = endpoint_of_[engine];
  // As PoolRouting::exchange_done(ok = false): the router's load for the attempt goes,
  // and the endpoint's breaker counts a failure.
  group_->on_failed(id, now);
  breaker_result(failed, false, now);
  release_in_flight(now, r.decode_engine);
  ++r.attempt;  // what the failed attempt's engine sent is stale from here on
  r.at_engine = kNoEngine;
  r.phase = Phase::kWhole;
  const route::FailoverAction action = route::after_failure(
      scenario_.gateway.retries, scenario_.gateway.max_migrations, r.began, r.tried, r.migrations);
  if (action == route::FailoverAction::kLost) return lose(id);
  close_expired_breakers(now);
  route::RouteRequest rr = route_request(id);
  if (action == route::FailoverAction::kRetry) {
    r.excluded.push_back(failed);
  } else {
    // A new leg: the continuation is routed on the original prompt's keys, the endpoint
    // the stream left excluded, its own endpoints retried as the first leg's were
    // (gateway/data/proxy.cc, migrate).
    r.excluded.assign(1, failed);
    r.tried = 0;
    r.began = false;
    r.resumed = r.record.first_token >= 0;
    ++r.migrations;
    r.record.migrated = true;
  }
  rr.excluded = r.excluded;
  // Retries and continuations skip the flow-control queue, as in the gateway.
  const route::Decision d = group_->route(rr, now, rng_);
  if (!d.accepted()) return lose(id);
  // Counted as the gateway counts kvgate_upstream_retries_total: a first leg's retry
  // that was routed.
  if (action == route::FailoverAction::kRetry && r.migrations == 0) ++r.record.retries;
  send(now, id, d);
}

void Simulation::lora_kick(Nanos now) {
  if (lora_kicked_) return;
  lora_kicked_ = true;
  queue_.push(now, Event{EventKind::kLoraRound, 0, 1});
}

void Simulation::lora_round(Nanos now) {
  // LoraPlacer::round: the demand of the last full window, the pool as the router sees it
  // (health, its load, the scraped vllm:lora_requests_info), then the core's plan.
  const route::LoraPlacementConfig& config = policy_.lora_placement;
  if (now - lora_window_start_ >= config.interval) {
    const double secs = std::max(to_seconds(now - lora_window_start_), 1e-3);
    for (LoraDemand& d : lora_demand_) {
      d.rate = static_cast<double>(d.arrivals) / secs;
      d.arrivals = 0;
    }
    lora_window_start_ = now;
  }
  std::vector<route::AdapterDemand> demand;
  demand.reserve(lora_demand_.size());
  for (size_t a = 0; a < lora_demand_.size(); ++a) {
    demand.push_back({.name = adapter_names_[a],
                      .rate = lora_demand_[a].rate,
                      .waiting = lora_demand_[a].waiting,
                      .max_replicas = scenario_.adapters.max_replicas});
  }
  const std::vector<route::LoraEndpointView> views = route::lora_views(router_->pool());
  const std::vector<route::LoraAction> actions = placement_->plan(views, demand, now);
  lora_publish(now);
  for (const route::LoraAction& a : actions) lora_act(now, a);
}

void Simulation::lora_act(Nanos now, const route::LoraAction& action) {
  // The POST reaches the engine and its answer comes back a hop each way; the engine
  // model loads (or drops) the adapter at once, and answers a load once it is loaded.
  ++lora_placement_actions_;
  uint64_t slot;
  if (!free_lora_slots_.empty()) {
    slot = free_lora_slots_.back();
    free_lora_slots_.pop_back();
  } else {
    slot = lora_actions_.size();
    lora_actions_.emplace_back();
  }
  LoraInFlight& f = lora_actions_[slot];
  f.action = action;
  f.ok = false;
  Nanos answered = now;
  const uint32_t engine =
      action.endpoint < engine_of_.size() ? engine_of_[action.endpoint] : kNoEngine;
  if (engine != kNoEngine && live(engine) && !faults_[engine].down &&
      endpoint_of_[engine] == action.endpoint) {
    engine::EngineModel& e = *engines_[engine];
    if (action.kind == route::LoraAction::Kind::kLoad) {
      Result<Nanos> ready = e.load_adapter(action.adapter, now);
      if (ready) {
        f.ok = true;
        answered = *ready;
      }
    } else {
      f.ok = e.unload_adapter(action.adapter);
    }
  }
  queue_.push(answered + 2 * scenario_.gateway.hop_delay,
              Event{EventKind::kLoraActionDone, 0, slot});
}

void Simulation::on_lora_done(Nanos now, uint64_t slot) {
  const LoraInFlight f = lora_actions_[slot];
  free_lora_slots_.push_back(slot);
  placement_->on_done(f.action, f.ok, now);
  lora_publish(now);
  lora_kick(now);  // the next step (a load after an eviction, a replica elsewhere) at once
}

void Simulation::lora_publish(Nanos now) {
  // What each endpoint holds, to the router (every gateway replica's).
  for (route::EndpointId id : router_->pool().ids()) {
    group_->set_lora_placed(id, placement_->placed(id));
  }
  // The requests whose adapter is now loaded somewhere go on.
  for (size_t a = 0; a < lora_demand_.size(); ++a) {
    LoraDemand& d = lora_demand_[a];
    if (d.waiters.empty() || !placement_->loaded_anywhere(adapter_names_[a])) continue;
    std::vector<uint64_t> go;
    go.swap(d.waiters);
    for (uint64_t id : go) {
      RequestState& r = requests_[id];
      if (!r.lora_waiting) continue;
      r.lora_waiting = false;
      if (d.waiting > 0) --d.waiting;
      route_arrival(now, id);
    }
  }
}

void Simulation::on_lora_wait_end(Nanos now, uint64_t id) {
  RequestState& r = requests_[id];
  if (!r.lora_waiting) return;
  // max_wait is over: the router decides as it can (gateway/data/proxy.cc).
  r.lora_waiting = false;
  LoraDemand& d = lora_demand_[r.adapter - 1];
  std::erase(d.waiters, id);
  if (d.waiting > 0) --d.waiting;
  route_arrival(now, id);
}

scale::UsageRates Simulation::usage_rates(Nanos now) {
  // What the gateway observed of finished requests over the signal window.
  scale::UsageRates u;
  for (LatencyWindow* w : {&ttft_window_, &itl_window_, &prompt_window_, &output_window_})
    w->prune(now);
  const double window = to_seconds(std::min(now, scenario_.scaling.signal_window));
  if (window > 0) {
    u.prompt_tokens_per_s = prompt_window_.sum() / window;
    u.generation_tokens_per_s = output_window_.sum() / window;
  }
  if (prompt_window_.size() > 0) {
    u.mean_prompt_tokens = prompt_window_.sum() / static_cast<double>(prompt_window_.size());
    u.mean_generation_tokens = output_window_.sum() / static_cast<double>(output_window_.size());
    u.generation_tokens_sd = output_window_.stddev();
    if (window > 0) u.requests_per_s = static_cast<double>(output_window_.size()) / window;
  }
  u.ttft = ttft_window_.summary();
  u.itl = itl_window_.summary();
  return u;
}

scale::PoolSignals Simulation::build_signals(Nanos now) {
  // The pool as the gateway sees it, built by the same core call `kvgate serve` makes
  // (route/pool_signals.h): the router's scraped endpoints, the gateway's queue, the
  // usage it observed over the window and the arrivals it counted; then the replicas it
  // launched (as an actuator reports them) and what only a simulator can see.
  const double interval = to_seconds(scenario_.scaling.control_interval);
  const std::vector<route::EndpointView> endpoints = route::view_endpoints(router_->pool());
  arrival_rate_.add(now, arrivals_);
  scale::PoolSignals s = route::build_pool_signals(
      endpoints,
      {.usage = usage_rates(now),
       .queued = static_cast<uint32_t>(flow_queued()),
       .arrival_rate = arrival_rate_.rate(),
       .max_age = route::scrape_max_age(scenario_.gateway.scrape_interval)},
      now);
  double busy = 0;
  uint64_t prefix_queries = 0, prefix_hits = 0;
  for (uint32_t i = 0; i < replicas_.size(); ++i) {
    Replica& r = replicas_[i];
    if (!live(i)) continue;
    scale::ReplicaSignal rs;
    rs.id = fmt::format("engine-{}", i);
    rs.phase = r.phase == ReplicaPhase::kStarting ? scale::ReplicaPhase::kStarting
               : r.phase == ReplicaPhase::kReady  ? scale::ReplicaPhase::kReady
                                                  : scale::ReplicaPhase::kDraining;
    rs.launched_at = r.launched_at;
    rs.ready_at = r.ready_at;
    rs.in_flight = r.in_flight;
    s.replicas.push_back(std::move(rs));
    if (r.phase == ReplicaPhase::kStarting) continue;
    const double engine_busy = engines_[i]->metrics().busy_seconds;
    if (r.phase == ReplicaPhase::kReady) {
      // GPU "utilisation" as nvidia-smi reports it: the fraction of the interval in which
      // a kernel ran, i.e. the engine was stepping a batch of any size.
      const double span = std::min(interval, to_seconds(now - r.ready_at));
      if (span > 0) busy += std::min(1.0, (engine_busy - r.busy_at_tick) / span);
    }
    r.busy_at_tick = engine_busy;
    const engine::EngineMetrics& m = engines_[i]->metrics();
    prefix_queries += m.prefix_cache_queries - r.prefix_queries_at_tick;
    prefix_hits += m.prefix_cache_hits - r.prefix_hits_at_tick;
    r.prefix_queries_at_tick = m.prefix_cache_queries;
    r.prefix_hits_at_tick = m.prefix_cache_hits;
  }
  if (const uint32_t ready = s.ready(); ready > 0) s.gpu_utilization = busy / ready;
  // The engines' prefix-cache counters since the last tick.
  if (prefix_queries > 0) {
    s.prefix_hit_rate = static_cast<double>(prefix_hits) / static_cast<double>(prefix_queries);
  }
  return s;
}

void Simulation::on_control(Nanos now) {
  const scale::PoolSignals s = build_signals(now);
  const scale::Decision d = decider_->decide(s, now);
  for (const std::string& id : d.drain) {
    const uint32_t engine = static_cast<uint32_t>(std::stoul(id.substr(id.find('-') + 1)));
    drain(now, engine);
  }
  const int32_t keep = d.current_replicas - static_cast<int32_t>(d.drain.size());
  for (int32_t i = keep; i < d.desired_replicas; ++i) launch(now);
  if (d.standby > 0 || standby_ > 0) apply_standby(now, d.standby);

  ScaleSample sample;
  sample.at = now;
  for (const Replica& r : replicas_) {
    sample.ready += r.phase == ReplicaPhase::kReady;
    sample.starting += r.phase == ReplicaPhase::kStarting;
    sample.draining += r.phase == ReplicaPhase::kDraining;
  }
  sample.desired = d.desired_replicas;
  sample.arrival_qps =
      static_cast<double>(arrivals_since_tick_) / to_seconds(scenario_.scaling.control_interval);
  sample.waiting = s.waiting;
  sample.gpu_utilization = s.gpu_utilization;
  scale_samples_.push_back(sample);
  arrivals_since_tick_ = 0;
  if (!done()) {
    queue_.push(now + scenario_.scaling.control_interval, Event{EventKind::kControl, 0, 0});
  }
}

void Simulation::apply_standby(Nanos, int32_t count) {
  // Among the ready replicas held for nothing else (not warming up: they joined routing),
  // the youngest (route::plan_standby, as PoolRuntime::apply_standby): out of routing
  // (their requests in flight finish), back in at once when the count falls.
  std::vector<route::EndpointId> ready;
  std::vector<Nanos> ready_at;
  for (uint32_t i = 0; i < replicas_.size(); ++i) {
    const Replica& r = replicas_[i];
    if (r.phase == ReplicaPhase::kReady) {
      ready.push_back(endpoint_of_[i]);
      ready_at.push_back(r.ready_at);
    }
  }
  const route::StandbyPlan plan = route::plan_standby(holds_, ready, ready_at, count);
  for (const route::StandbyPlan::Change& c : plan.changes) group_->set_health(c.id, c.health);
  standby_ = static_cast<int32_t>(plan.in_standby);
}

void Simulation::launch(Nanos now) {
  const uint32_t engine = create_engine(scenario_.engines.front());
  Replica& r = replicas_[engine];
  r.phase = ReplicaPhase::kStarting;
  r.launched_at = now;
  r.ready_at = -1;
  r.admitted_at = -1;
  ++launches_;
  Nanos startup = scenario_.scaling.startup_fixed;
  const engine::Profile& profile = scenario_.engines.front().profile;
  if (startup == 0 && profile.startup) {
    startup = engine::total_duration(
        engine::sample_startup(*profile.startup, scenario_.scaling.startup, startup_rng_));
  }
  queue_.push(now + startup, Event{EventKind::kReplicaReady, engine, 0});
}

void Simulation::on_replica_ready(Nanos now, uint32_t engine) {
  Replica& r = replicas_[engine];
  if (r.phase != ReplicaPhase::kStarting) return;  // cancelled while it booted
  r.phase = ReplicaPhase::kReady;
  r.ready_at = now;
  // It joins the router with an empty prefix cache (a fresh EngineModel) and unscraped.
  if (Status s = join_router(engine, now); !s) {
    stop(now, engine);
    return;
  }
  if (!hot_) {
    r.admitted_at = now;
    pump(now);  // an endpoint joined: capacity
    return;
  }
  // Warm-up: out of routing until the pool's hot prefixes are in its cache.
  set_hold(endpoint_of_[engine], route::Hold::kWarmup, true);
  auto [it, inserted] = warmups_.insert_or_assign(
      engine, kv::WarmupRun(hot_->top(policy_.warmup.prefixes, now), policy_.warmup, now));
  queue_.push(it->second.deadline(), Event{EventKind::kWarmupDeadline, engine, 0});
  warmup_send(now, engine);
}

void Simulation::warmup_send(Nanos now, uint32_t engine) {
  auto it = warmups_.find(engine);
  if (it == warmups_.end() || !live(engine) || replicas_[engine].admitted_at >= 0) return;
  kv::WarmupRun& run = it->second;
  // The hop to the engine is left out: a warm-up request is added at `now`.
  for (size_t i : run.next(now)) {
    engine::EngineRequest er;
    er.id = kWarmupId | uint64_t{engine} << 32 | i;
    er.prompt = run.set()[i].token_ids;
    er.max_tokens = 1;
    if (er.prompt.empty() || !engines_[engine]->add(std::move(er), now)) {
      run.done(i, {.ok = false});
    }
  }
  if (!step_pending_[engine]) {
    if (auto t = engines_[engine]->next_step_time(now)) schedule_step(engine, std::max(*t, now));
  }
  if (run.finished(now)) admit_replica(now, engine);
}

void Simulation::admit_replica(Nanos now, uint32_t engine) {
  Replica& r = replicas_[engine];
  if (r.phase != ReplicaPhase::kReady || r.admitted_at >= 0) return;  // draining, or done
  r.admitted_at = now;
  set_hold(endpoint_of_[engine], route::Hold::kWarmup, false);
  pump(now);
}

void Simulation::drain(Nanos now, uint32_t engine) {
  Replica& r = replicas_[engine];
  if (r.phase == ReplicaPhase::kStarting) {
    stop(now, engine);  // nothing to wait for
    return;
  }
  if (r.phase != ReplicaPhase::kReady) return;
  r.phase = ReplicaPhase::kDraining;
  r.drained_at = now;
  set_hold(endpoint_of_[engine], route::Hold::kDrain, true);
  if (route::drain_over(r.in_flight, now, route::kNoDrainDeadline)) stop(now, engine);
}

void Simulation::stop(Nanos now, uint32_t engine) {
  Replica& r = replicas_[engine];
  if (r.phase == ReplicaPhase::kReady || r.phase == ReplicaPhase::kDraining) {
    group_->remove_endpoint(endpoint_of_[engine]);
  }
  r.phase = ReplicaPhase::kStopped;
  r.stopped_at = now;
  gpu_seconds_ += to_seconds(now - r.launched_at) * gpus_per_replica_;
  engines_[engine].reset();
}

Result<PolicyRun> Simulation::run() {
  const auto wall_start = std::chrono::steady_clock::now();
  const double cpu_start = process_cpu_seconds();
  if (Status s = build(); !s) return Error(s.error());
  pull_open_loop();
  queue_.push(0, Event{EventKind::kScrape, 0, 0});
  for (uint64_t i = 0; i < scenario_.failures.size(); ++i) {
    const workload::FailureSpec& f = scenario_.failures[i];
    queue_.push(f.at, Event{EventKind::kFailureStart, f.engine, i});
    if (f.end() >= 0) queue_.push(f.end(), Event{EventKind::kFailureEnd, f.engine, i});
  }
  if (placement_) queue_.push(0, Event{EventKind::kLoraRound, 0, 0});
  if (decider_) {
    arrival_rate_.add(0, 0);
    queue_.push(scenario_.scaling.control_interval, Event{EventKind::kControl, 0, 0});
  }

  const auto& stages = workload_->stages();
  const Nanos planned_end = stages.empty() ? 1 : std::max<Nanos>(stages.back().end, 1);
  env::ProgressBar bar(policy_.name, options_.progress, options_.force_progress);
  Nanos now = 0;
  while (!queue_.empty()) {
    auto e = queue_.pop();
    // Failures after the last request change nothing: the run is over.
    if ((e.payload.kind == EventKind::kFailureStart || e.payload.kind == EventKind::kFailureEnd) &&
        done()) {
      break;
    }
    now = e.at;
    if (scenario_.max_time > 0 && now > scenario_.max_time) {
      now = scenario_.max_time;
      break;
    }
    ++events_;
    if (!scenario_.failures.empty()) {
      // What a failed attempt's engine had sent is dropped with its connection.
      const EventKind k = e.payload.kind;
      const bool of_request = k == EventKind::kEngineReceive || k == EventKind::kFirstToken ||
                              k == EventKind::kFinished || k == EventKind::kPrefillDone ||
                              k == EventKind::kUpstreamFailed;
      if (of_request && e.payload.attempt != requests_[e.payload.id].attempt) continue;
    }
    switch (e.payload.kind) {
      case EventKind::kArrival:
        on_arrival(now, e.payload.id);
        break;
      case EventKind::kEngineReceive:
        on_engine_receive(now, e.payload.engine, e.payload.id);
        break;
      case EventKind::kEngineStep:
        on_engine_step(now, e.payload.engine);
        break;
      case EventKind::kFirstToken: {
        group_->on_first_token(e.payload.id, now);
        const RequestState& r = requests_[e.payload.id];
        const RequestRecord& rec = r.record;
        if (!r.resumed) ttft_window_.add(now, to_seconds(rec.first_token - rec.arrival));
        pump(now);  // a prefill done
        break;
      }
      case EventKind::kFinished:
        on_finished(now, e.payload.id);
        break;
      case EventKind::kKvEvents:
        on_kv_events(e.payload.engine, e.payload.id);
        break;
      case EventKind::kScrape:
        on_scrape(now);
        break;
      case EventKind::kControl:
        on_control(now);
        break;
      case EventKind::kReplicaReady:
        on_replica_ready(now, e.payload.engine);
        break;
      case EventKind::kWarmupSend:
        warmup_send(now, e.payload.engine);
        break;
      case EventKind::kWarmupDeadline:
        if (live(e.payload.engine)) admit_replica(now, e.payload.engine);
        break;
      case EventKind::kPrefillDone:
        on_prefill_done(now, e.payload.id);
        break;
      case EventKind::kPrefillRelease:
        if (live(e.payload.engine)) engines_[e.payload.engine]->release(e.payload.id);
        break;
      case EventKind::kFailureStart:
      case EventKind::kFailureEnd:
        on_failure(now, scenario_.failures[e.payload.id],
                   e.payload.kind == EventKind::kFailureStart);
        break;
      case EventKind::kUpstreamFailed:
        on_upstream_failed(now, e.payload.engine, e.payload.id);
        break;
      case EventKind::kLoraRound:
        if (e.payload.id == 0) {
          if (!done()) {
            queue_.push(now + policy_.lora_placement.interval, Event{EventKind::kLoraRound, 0, 0});
          }
        } else {
          lora_kicked_ = false;
        }
        lora_round(now);
        break;
      case EventKind::kLoraActionDone:
        on_lora_done(now, e.payload.id);
        break;
      case EventKind::kLoraWaitEnd:
        on_lora_wait_end(now, e.payload.id);
        break;
    }
    if ((events_ & 0xffff) == 0 && options_.progress) {
      bar.update(std::min(0.999, static_cast<double>(now) / static_cast<double>(planned_end)),
                 fmt::format("t={:.0f}s  in flight {}", to_seconds(now), outstanding_));
    }
    if (done() &&
        (e.payload.kind == EventKind::kFinished || e.payload.kind == EventKind::kUpstreamFailed)) {
      break;
    }
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  if (options_.progress) bar.finish(fmt::format("t={:.0f}s  {:.1f}s wall", to_seconds(now), wall));

  PolicyRun out;
  out.policy = policy_.name;
  out.requests.reserve(requests_.size());
  for (const RequestState& r : requests_) out.requests.push_back(r.record);
  out.samples = std::move(samples_);
  out.end_time = now;
  out.wall_seconds = wall;
  out.cpu_seconds = process_cpu_seconds() - cpu_start;
  out.events = events_;
  out.failures_injected = !scenario_.failures.empty();
  out.breaker_openings = breaker_openings_;
  out.sessions = policy_.router.session_affinity.enabled;
  out.latency_targets = policy_.router.latency_targets.enabled || scenario_.workload.any_targets();
  out.predictor = policy_.router.latency_targets.enabled;
  out.predictor_ttft = group_->ttft_error();
  out.predictor_tpot = group_->tpot_error();
  if (!adapter_names_.empty()) {
    out.lora = true;
    for (uint32_t i = 0; i < engines_.size(); ++i) {
      if (!engines_[i]) continue;  // a stopped replica's counts went with it
      out.adapter_loads += engines_[i]->metrics().lora_loads;
      out.adapter_evictions += engines_[i]->metrics().lora_evictions;
    }
    out.placement_actions = lora_placement_actions_;
  }
  for (uint32_t i = 0; i < replicas_.size(); ++i) {
    if (live(i)) gpu_seconds_ += to_seconds(now - replicas_[i].launched_at) * gpus_per_replica_;
  }
  out.autoscaled = decider_ != nullptr;
  out.gpu_seconds = gpu_seconds_;
  out.launches = launches_;
  out.scale = std::move(scale_samples_);
  for (uint32_t i = 0; i < replicas_.size(); ++i) {
    const Replica& r = replicas_[i];
    ReplicaLife life{.launched_at = r.launched_at,
                     .ready_at = r.ready_at,
                     .drained_at = r.drained_at,
                     .stopped_at = r.stopped_at,
                     .admitted_at = r.admitted_at};
    if (auto it = warmups_.find(i); it != warmups_.end()) {
      life.warmup_requests = it->second.stats().succeeded;
      life.warmup_tokens = it->second.stats().tokens_warmed;
    }
    out.replicas.push_back(life);
  }
  return out;
}

}  // namespace

Result<PolicyRun> run_policy(const Scenario& scenario, const PolicySpec& policy, uint64_t seed,
                             const RunOptions& options) {
  RunOptions o = options;
  if (policy.gateway_replicas) {
    // The policy's own gateway replicas win over the command line's.
    const workload::GatewayReplicasSpec& g = *policy.gateway_replicas;
    o.replicas = {
        .replicas = g.count, .sync = g.sync, .lag = g.lag, .fleet_fairness = g.fleet_fairness};
  }
  Simulation sim(scenario, policy, seed, o);
  return sim.run();
}

}  // namespace kvgate::sim
