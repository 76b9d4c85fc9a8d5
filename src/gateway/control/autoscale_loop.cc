#include "gateway/control/autoscale_loop.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <future>
#include <iterator>
#include <mutex>
#include <thread>

#include "core/metrics/step_series.h"
#include "core/route/pool_signals.h"
#include "core/scale/usage_window.h"
#include "gateway/control/actuator.h"
#include "gateway/data/pool_runtime.h"

namespace kvgate::gateway {

struct AutoscaleLoop::Impl {
  PoolRuntime& pool;
  GatewayMetrics& metrics;
  const PoolAutoscaleConfig& config;
  const std::vector<std::string> models;
  // The pool's clock (router time); router time + clock_offset = nanoseconds since the
  // Unix epoch (as of the start).
  const Clock& clock;
  const Nanos clock_offset;
  scale::Autoscaler autoscaler;
  scale::UsageWindow usage;
  std::unique_ptr<Actuator> actuator;  // the loop's thread only (after start)
  int32_t last_desired = -1;           // the loop's thread only
  LeaderLink leader;                   // empty: always actuates
  bool standby_applied = false;        // the last decision held replicas out
  scale::ArrivalRate arrivals;         // of the pool's arrivals counter (the loop's thread)

  std::mutex mu;
  std::condition_variable wake;
  bool stopping = false;
  State state;  // guarded by mu
  // The replicas' last hour (router time), guarded by mu: desired, current, ready,
  // starting, draining.
  metrics::StepSeries<5> history;
  std::thread thread;

  Impl(PoolRuntime& p, GatewayMetrics& m, std::vector<std::string> names, scale::Autoscaler a)
      : pool(p),
        metrics(m),
        config(*p.config().autoscale),
        models(std::move(names)),
        clock(p.clock()),
        clock_offset(clock.wall_now() - clock.now()),
        autoscaler(std::move(a)),
        usage(config.window),
        history(history_step(config.interval), history_steps(config.interval)) {}

  static Nanos history_step(std::chrono::milliseconds interval) {
    return std::max<Nanos>(10 * kSecond, interval.count() * kMillisecond);
  }
  static size_t history_steps(std::chrono::milliseconds interval) {
    const Nanos step = history_step(interval);
    return static_cast<size_t>((3600 * kSecond + step - 1) / step);
  }

  Nanos now() const { return clock.now() + clock_offset; }

  // The router's endpoints, read on its strand. Empty if the strand does not answer
  // within a few seconds (the gateway is stopping).
  std::optional<std::vector<route::EndpointView>> read_endpoints() {
    auto done = std::make_shared<std::promise<std::vector<route::EndpointView>>>();
    auto result = done->get_future();
    pool.post([done](route::Router& router, kv::PreciseIndex&) {
      done->set_value(route::view_endpoints(router.pool()));
    });
    if (result.wait_for(std::chrono::seconds(5)) != std::future_status::ready) return std::nullopt;
    return result.get();
  }

  void tick() {
    actuator->poll();
    auto endpoints = read_endpoints();
    if (!endpoints) return;
    const Nanos router_now = clock.now();
    usage.add(router_now, metrics.usage(models));
    route::PoolInputs in{
        .usage = usage.rates(),
        .queued = static_cast<uint32_t>(pool.flow_queued()),
        .max_age = route::scrape_max_age(pool.config().scrape_interval.count() * kMillisecond)};
    arrivals.add(router_now, pool.arrivals());
    in.arrival_rate = arrivals.rate();
    scale::PoolSignals signals = route::build_pool_signals(*endpoints, in, router_now);
    signals.replicas = actuator->replicas(*endpoints);
    scale::Decision d = autoscaler.decide(signals, now());
    // Logged when the wanted size changes or replicas are drained: with actuator none the
    // gap between desired and current may last, and must not log every interval.
    if (d.desired_replicas != last_desired || !d.drain.empty()) {
      spdlog::info("pool {}: autoscaler: {}{}", pool.name(), d.reason,
                   d.drain.empty() ? "" : fmt::format(", draining {}", fmt::join(d.drain, ", ")));
    }
    last_desired = d.desired_replicas;
    const bool acted = !leader.may_actuate || leader.may_actuate(d.desired_replicas);
    if (acted) actuator->apply(d);
    const std::optional<int32_t> leader_desired =
        !acted && leader.leader_desired ? leader.leader_desired() : std::nullopt;
    // Standby replicas are this gateway's routing, not an actuation: every replica holds
    // them out (and puts them back) on its own decision.
    if (d.standby > 0 || standby_applied) pool.apply_standby(d.standby);
    standby_applied = d.standby > 0;
    export_decision(d, signals, leader_desired);
    std::lock_guard lock(mu);
    const double values[] = {static_cast<double>(leader_desired.value_or(d.desired_replicas)),
                             static_cast<double>(d.current_replicas),
                             static_cast<double>(signals.ready()),
                             static_cast<double>(signals.starting()),
                             static_cast<double>(signals.count(scale::ReplicaPhase::kDraining))};
    for (size_t i = 0; i < std::size(values); ++i) history.set(router_now, i, values[i]);
    state.decision = std::move(d);
    state.signals = std::move(signals);
    state.acted = acted;
    state.leader_desired = leader_desired;
    ++state.decisions;
  }

  // The pool's desired count is the leader's when another replica leads (every replica
  // exports the same); the rest is this replica's own decision.
  void export_decision(const scale::Decision& d, const scale::PoolSignals& s,
                       std::optional<int32_t> leader_desired) {
    AutoscalerGauges g;
    g.desired = leader_desired.value_or(d.desired_replicas);
    g.current = d.current_replicas;
    g.ready = static_cast<int32_t>(s.ready());
    g.starting = static_cast<int32_t>(s.starting());
    g.draining = static_cast<int32_t>(s.count(scale::ReplicaPhase::kDraining));
    g.min = d.min_replicas;
    g.max = d.max_replicas;
    g.demand = d.demand;
    if (config.policy.policy != scale::PolicyKind::kPlanner &&
        config.policy.policy != scale::PolicyKind::kHorizon) {
      g.signal = std::string(scale::signal_name(config.policy.signal));
      g.signal_value = scale::signal_value(s, config.policy.signal);
    }
    g.panic = d.panic;
    g.direction = g.desired > d.current_replicas   ? "up"
                  : g.desired < d.current_replicas ? "down"
                                                   : "hold";
    g.limited_by = d.limited_by;
    g.restarts = actuator->restarts();
    g.horizon = d.inputs;
    metrics.autoscaler(pool.name(), g);
  }

  void run() {
    std::unique_lock lock(mu);
    while (!stopping) {
      lock.unlock();
      tick();
      lock.lock();
      wake.wait_for(lock, config.interval, [this] { return stopping; });
    }
  }
};

AutoscaleLoop::AutoscaleLoop(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

AutoscaleLoop::~AutoscaleLoop() { stop(); }

void AutoscaleLoop::stop() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->actuator.reset();
}

const std::string& AutoscaleLoop::pool_name() const { return impl_->pool.name(); }

AutoscaleLoop::State AutoscaleLoop::state() const {
  std::lock_guard lock(impl_->mu);
  return impl_->state;
}

AutoscaleLoop::History AutoscaleLoop::history() const {
  const Nanos now = impl_->clock.now();
  std::lock_guard lock(impl_->mu);
  const metrics::StepSeries<5>& h = impl_->history;
  return {.step = h.step(),
          .desired = h.means(now, 0),
          .current = h.means(now, 1),
          .ready = h.means(now, 2),
          .starting = h.means(now, 3),
          .draining = h.means(now, 4)};
}

Result<std::unique_ptr<AutoscaleLoop>> AutoscaleLoop::start(PoolRuntime& pool,
                                                            std::vector<std::string> models,
                                                            GatewayMetrics& metrics,
                                                            LeaderLink leader) {
  const PoolConfig& config = pool.config();
  if (!config.autoscale) return Error(fmt::format("pool {}: no autoscale section", config.name));
  auto autoscaler = scale::Autoscaler::make(config.autoscale->policy);
  if (!autoscaler) return Error(fmt::format("pool {}: {}", config.name, autoscaler.error()));
  auto impl = std::make_unique<Impl>(pool, metrics, std::move(models), std::move(*autoscaler));
  Impl* raw = impl.get();
  auto actuator = make_actuator(
      *config.autoscale,
      {.pool = pool, .now = [raw] { return raw->now(); }, .clock_offset = raw->clock_offset});
  if (!actuator) return Error(fmt::format("pool {}: {}", config.name, actuator.error()));
  impl->actuator = std::move(*actuator);
  impl->leader = std::move(leader);
  const scale::AutoscaleConfig& policy = config.autoscale->policy;
  spdlog::info("pool {}: autoscaler on: {}, replicas {}..{}, {} actuator", config.name,
               policy.policy == scale::PolicyKind::kPlanner ? std::string("planner")
               : policy.policy == scale::PolicyKind::kHorizon
                   ? std::string("horizon")
                   : fmt::format("{} target {} per replica", scale::signal_name(policy.signal),
                                 policy.target),
               policy.min_replicas, policy.max_replicas, actuator_name(config.autoscale->actuator));
  impl->thread = std::thread([raw] { raw->run(); });
  return std::unique_ptr<AutoscaleLoop>(new AutoscaleLoop(std::move(impl)));
}

}  // namespace kvgate::gateway
