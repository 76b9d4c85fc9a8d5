// PoolDiscovery: a pool's endpoint sources (discovery/source.h) feeding its PoolRuntime.
// The gateway's wiring of discovery: the sources know no pool, this is where their
// reports meet one.
//
// Each source reports from its own thread; the reports go through one Reconciler
// (core/discovery/reconciler.h, under a mutex) and the actions it answers are applied
// to the pool on a strand of the gateway's executor, in order per URL (a removal drains
// before the same URL is added again): kAdd -> PoolRuntime::add_endpoint (warm-up before
// traffic and the KV event subscription follow as for any endpoint added at run time),
// kSuspend/kResume -> PoolRuntime::set_held, kRemove -> PoolRuntime::remove_endpoint
// (drained for `drain_timeout`, then out of the router and its indexes; the live feed
// unsubscribes). A timer runs the grace periods out.
//
// Endpoints discovery adds carry origin "discovery:SOURCE" (/admin/pools/NAME/endpoints
// shows it); endpoints from the config or the admin API are never touched by it.
//
//   auto d = PoolDiscovery::start(pool, *pool.config().discovery, executor);
//   Status ok = check_discovery(pool.name(), *pool.config().discovery);  // serve --check
//   std::string m = render_discovery_metrics({d->get()});   // appended to /metrics
//   boost::json::value v = (*d)->state_json();             // /admin/pools/NAME/discovery
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/json/value.hpp>
#include <memory>
#include <string>
#include <vector>

#include "core/common/result.h"
#include "core/discovery/reconciler.h"
#include "core/metrics/prometheus_text.h"
#include "discovery/discovery_config.h"

namespace kvgate::gateway {

class PoolRuntime;

struct DiscoverySourceState {
  std::string name;
  std::string kind;
  discovery::SourceStats stats;
};

struct DiscoveryCounters {
  std::string pool;
  Nanos taken = 0;  // when (the pool's clock): the sources' ages are measured to it
  std::vector<DiscoverySourceState> sources;
  uint64_t applied_ok = 0;      // actions the pool carried out
  uint64_t applied_failed = 0;  // refused (e.g. the URL was already in the pool)
  // From the report that caused an action to the action carried out in the pool
  // (seconds; a removal counts until its drain began, when it stopped taking requests).
  metrics::HistogramSnapshot apply;
};

class PoolDiscovery {
 public:
  // Starts every source. `pool` must outlive the object; coroutines on `executor` must
  // stop before it is destroyed (the gateway stops its io_context first).
  static Result<std::unique_ptr<PoolDiscovery>> start(PoolRuntime& pool,
                                                      const discovery::DiscoveryConfig& config,
                                                      boost::asio::any_io_executor executor);
  ~PoolDiscovery();  // stop()
  // Stops the sources (no report after it returns); actions already queued still run.
  void stop();

  const std::string& pool_name() const;
  // Whether every source has taken a first good list (maybe empty): until then the
  // pool's discovered endpoints are not all known. Any thread.
  bool synced() const;
  DiscoveryCounters counters() const;
  // {"sources":[{"name","kind","endpoints","reports","errors","changes",
  //   "resync_differences","held_empty","last_success_age_s","last_error"}],
  //  "endpoints":[{"url","sources":[..],"state":"active|suspended","missing_for_s"}]}
  boost::json::value state_json() const;

  struct Impl;

 private:
  explicit PoolDiscovery(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

// What PoolDiscovery::start would refuse for pool `pool`, with the same message, tried
// without starting a source (discovery::check_source on each, in order): the first
// refusal, as "pool NAME: discovery source SOURCE: why". `kvgate serve --check` runs it.
[[nodiscard]] Status check_discovery(const std::string& pool,
                                     const discovery::DiscoveryConfig& config);

// Prometheus text for several pools (docs/discovery.md, "Metrics").
std::string render_discovery_metrics(const std::vector<const PoolDiscovery*>& pools);

}  // namespace kvgate::gateway
