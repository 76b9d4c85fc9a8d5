// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "gateway/control/pool_discovery.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <deque>
#include <map>
#include <mutex>

#include "core/metrics/histogram.h"
#include "discovery/source.h"
#include "gateway/data/pool_runtime.h"

namespace kvgate::gateway {
namespace asio = boost::asio;
namespace json = boost::json;

namespace {

std::optional<KvEventsConfig> kv_config(const std::optional<discovery::KvEventsAddress>& k) {
  if (!k) return std::nullopt;
  return KvEventsConfig{.publisher = k->publisher, .replay = k->replay, .topic = k->topic};
}

// A source's refusal to start, as start() and check_discovery() both say it.
std::string source_refused(const std::string& pool, const std::string& source,
                           const std::string& why) {
  return fmt::format("pool {}: discovery source {}: {}", pool, source, why);
}

}  // namespace

struct PoolDiscovery::Impl : std::enable_shared_from_this<PoolDiscovery::Impl> {
  Impl(PoolRuntime& p, const discovery::DiscoveryConfig& c, asio::any_io_executor ex)
      : pool(p),
        config(c),
        strand(asio::make_strand(ex)),
        reconciler(
            {.grace = std::chrono::duration_cast<std::chrono::nanoseconds>(c.grace).count(),
             .hold_empty = c.hold_empty,
             .hold_empty_max =
                 std::chrono::duration_cast<std::chrono::nanoseconds>(c.hold_empty_max).count()}),
        apply_seconds({0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}) {}

  // One source's reports, into the reconciler.
  struct Sink : discovery::SourceSink {
    Impl* impl = nullptr;
    size_t index = 0;
    void report(std::vector<discovery::DiscoveredEndpoint> set, bool resync) override {
      impl->report(index, std::move(set), resync);
    }
    void error(std::string message) override {
      std::lock_guard lock(impl->mu);
      impl->reconciler.report_error(index, impl->pool.clock().now(), std::move(message));
    }
  };

  void report(size_t source, std::vector<discovery::DiscoveredEndpoint> set, bool resync) {
    const Nanos now = pool.clock().now();
    std::vector<discovery::Action> actions;
    {
      std::lock_guard lock(mu);
      actions = reconciler.report(source, now, std::move(set), resync);
    }
    enqueue(std::move(actions), now);
  }

  void enqueue(std::vector<discovery::Action> actions, Nanos seen) {
    if (actions.empty()) return;
    asio::post(strand, [self = shared_from_this(), actions = std::move(actions), seen]() mutable {
      for (discovery::Action& a : actions) {
        std::string url = a.endpoint.spec.url;
        auto& q = self->queues[url];
        q.push_back({std::move(a), seen});
        if (q.size() == 1) {
          // The function holds `self` until the coroutine has taken its own reference.
          asio::co_spawn(
              self->strand, [self, url] { return self->drain_queue(url); }, asio::detached);
        }
      }
    });
  }

  // Runs on the strand: the URL's actions, one after the other.
  asio::awaitable<void> drain_queue(std::string url) {
    auto self = shared_from_this();
    while (true) {
      auto it = queues.find(url);
      if (it == queues.end() || it->second.empty()) {
        if (it != queues.end()) queues.erase(it);
        co_return;
      }
      Queued q = it->second.front();  // a copy: the queue may grow meanwhile
      const bool ok = co_await apply(q.action, q.seen);
      {
        std::lock_guard lock(mu);
        (ok ? applied_ok : applied_failed)++;
        if (q.action.kind != discovery::Action::Kind::kRemove) {
          apply_seconds.observe(to_seconds(pool.clock().now() - q.seen));
        }
      }
      queues[url].pop_front();
    }
  }

  asio::awaitable<bool> apply(const discovery::Action& a, Nanos seen) {
    const std::string& url = a.endpoint.spec.url;
    auto id = ids.find(url);
    switch (a.kind) {
      case discovery::Action::Kind::kAdd: {
        auto added = co_await pool.add_endpoint(a.endpoint.spec, kv_config(a.endpoint.kv_events),
                                                "discovery:" + a.source);
        if (!added) {
          spdlog::warn("discovery: pool {}: {} not added: {}", pool.name(), url, added.error());
          std::lock_guard lock(mu);
          reconciler.add_failed(url);
          co_return false;
        }
        spdlog::info("discovery: pool {}: {} joined (source {})", pool.name(), url, a.source);
        ids[url] = *added;
        co_return true;
      }
      case discovery::Action::Kind::kSuspend:
      case discovery::Action::Kind::kResume: {
        if (id == ids.end()) co_return false;
        const bool held = a.kind == discovery::Action::Kind::kSuspend;
        spdlog::info("discovery: pool {}: {} {} (source {})", pool.name(), url,
                     held ? "vanished: held out of routing for the grace period" : "is back",
                     a.source);
        co_return co_await pool.set_held(id->second, held);
      }
      case discovery::Action::Kind::kRemove: {
        if (id == ids.end()) co_return false;
        const route::EndpointId eid = id->second;
        ids.erase(id);
        spdlog::info("discovery: pool {}: {} leaves (source {}): draining", pool.name(), url,
                     a.source);
        {
          // Out of routing from here: the drain begins with the removal's first step.
          std::lock_guard lock(mu);
          apply_seconds.observe(to_seconds(pool.clock().now() - seen));
        }
        auto drained = co_await pool.remove_endpoint(eid, config.drain_timeout);
        co_return drained.ok();
      }
    }
    co_return false;
  }

  asio::awaitable<void> grace_timer() {
    auto self = shared_from_this();
    asio::steady_timer timer(strand);
    while (!stopped) {
      timer.expires_after(std::chrono::milliseconds(100));
      boost::system::error_code ec;
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (stopped) co_return;
      const Nanos now = pool.clock().now();
      std::vector<discovery::Action> due;
      {
        std::lock_guard lock(mu);
        auto next = reconciler.next_deadline();
        if (next && *next <= now) due = reconciler.tick(now);
      }
      enqueue(std::move(due), now);
    }
  }

  PoolRuntime& pool;
  const discovery::DiscoveryConfig config;
  asio::strand<asio::any_io_executor> strand;

  mutable std::mutex mu;  // guards the reconciler and the counters below
  discovery::Reconciler reconciler;
  metrics::Histogram apply_seconds;
  uint64_t applied_ok = 0;
  uint64_t applied_failed = 0;

  std::vector<std::unique_ptr<Sink>> sinks;
  std::vector<std::unique_ptr<discovery::EndpointSource>> sources;  // stopped before the sinks go
  std::atomic<bool> stopped{false};

  // On the strand only.
  struct Queued {
    discovery::Action action;
    Nanos seen = 0;  // when the report that caused it arrived
  };
  std::map<std::string, std::deque<Queued>> queues;
  std::map<std::string, route::EndpointId> ids;  // the endpoints discovery added
};

Result<std::unique_ptr<PoolDiscovery>> PoolDiscovery::start(
    PoolRuntime& pool, const discovery::DiscoveryConfig& config, asio::any_io_executor executor) {
  auto impl = std::make_shared<Impl>(pool, config, std::move(executor));
  for (const discovery::SourceConfig& sc : config.sources) {
    auto sink = std::make_unique<Impl::Sink>();
    sink->impl = impl.get();
    sink->index = impl->reconciler.add_source(sc.name);
    auto source = discovery::make_source(sc, *sink);
    if (!source) return Error(fmt::format("pool {}: discovery: {}", pool.name(), source.error()));
    impl->sinks.push_back(std::move(sink));
    impl->sources.push_back(std::move(*source));
  }
  std::unique_ptr<PoolDiscovery> d(new PoolDiscovery(impl));
  // The spawned function holds `impl`: the coroutine's own reference (shared_from_this)
  // is taken only once it first runs, which may be after a failed start below let go.
  asio::co_spawn(
      impl->strand, [impl] { return impl->grace_timer(); }, asio::detached);
  for (size_t i = 0; i < impl->sources.size(); ++i) {
    if (Status s = impl->sources[i]->start(); !s) {
      d->stop();
      return Error(source_refused(pool.name(), config.sources[i].name, s.error()));
    }
  }
  return d;
}

Status check_discovery(const std::string& pool, const discovery::DiscoveryConfig& config) {
  for (const discovery::SourceConfig& sc : config.sources) {
    if (Status s = discovery::check_source(sc); !s) {
      return Error(source_refused(pool, sc.name, s.error()));
    }
  }
  return {};
}

PoolDiscovery::PoolDiscovery(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

PoolDiscovery::~PoolDiscovery() { stop(); }

void PoolDiscovery::stop() {
  impl_->stopped = true;
  for (auto& s : impl_->sources) s->stop();
}

const std::string& PoolDiscovery::pool_name() const { return impl_->pool.name(); }

bool PoolDiscovery::synced() const {
  std::lock_guard lock(impl_->mu);
  for (size_t i = 0; i < impl_->reconciler.sources(); ++i) {
    if (impl_->reconciler.stats(i).reports == 0) return false;
  }
  return true;
}

DiscoveryCounters PoolDiscovery::counters() const {
  DiscoveryCounters c;
  c.pool = impl_->pool.name();
  std::lock_guard lock(impl_->mu);
  c.taken = impl_->pool.clock().now();
  for (size_t i = 0; i < impl_->reconciler.sources(); ++i) {
    c.sources.push_back({impl_->reconciler.source_name(i), impl_->config.sources[i].kind,
                         impl_->reconciler.stats(i)});
  }
  c.applied_ok = impl_->applied_ok;
  c.applied_failed = impl_->applied_failed;
  c.apply = impl_->apply_seconds.snapshot();
  return c;
}

json::value PoolDiscovery::state_json() const {
  const DiscoveryCounters c = counters();
  const Nanos now = c.taken;
  json::array sources;
  for (const DiscoverySourceState& s : c.sources) {
    const discovery::SourceStats& st = s.stats;
    sources.push_back(json::object{
        {"name", s.name},
        {"kind", s.kind},
        {"endpoints", st.endpoints},
        {"reports", st.reports},
        {"errors", st.errors},
        {"changes", st.changes},
        {"resync_differences", st.resync_differences},
        {"held_empty", st.held_empty},
        {"last_success_age_s", st.last_success < 0
                                   ? json::value(nullptr)
                                   : json::value(to_seconds(now - st.last_success))},
        {"last_error", st.last_error_message},
        {"last_error_age_s",
         st.last_error < 0 ? json::value(nullptr) : json::value(to_seconds(now - st.last_error))}});
  }
  json::array endpoints;
  {
    std::lock_guard lock(impl_->mu);
    for (const discovery::EntryView& e : impl_->reconciler.entries()) {
      json::array from;
      for (const std::string& s : e.sources) from.push_back(json::value(s));
      endpoints.push_back(json::object{
          {"url", e.url},
          {"sources", std::move(from)},
          {"owner", impl_->reconciler.owner(e.url)},
          {"state", e.suspended ? "suspended" : "active"},
          {"missing_for_s",
           e.suspended ? json::value(to_seconds(now - e.missing_since)) : json::value(nullptr)}});
    }
  }
  return json::object{
      {"pool", c.pool},
      {"grace_ms", impl_->config.grace.count()},
      {"hold_empty", impl_->config.hold_empty},
      {"sources", std::move(sources)},
      {"endpoints", std::move(endpoints)},
      {"applied", json::object{{"ok", c.applied_ok}, {"failed", c.applied_failed}}}};
}

std::string render_discovery_metrics(const std::vector<const PoolDiscovery*>& pools) {
  std::vector<DiscoveryCounters> cs;
  for (const PoolDiscovery* p : pools) cs.push_back(p->counters());
  if (cs.empty()) return {};
  metrics::PrometheusWriter w;
  auto each = [&](std::string_view name, std::string_view help, std::string_view type, auto value) {
    w.header(name, help, type);
    for (const DiscoveryCounters& c : cs) {
      for (const DiscoverySourceState& s : c.sources) {
        w.sample(name, {{"pool", c.pool}, {"source", s.name}, {"kind", s.kind}}, value(s.stats));
      }
    }
  };
  each("kvgate_discovery_endpoints", "Endpoints in the source's last good set (ready ones).",
       "gauge", [](const discovery::SourceStats& s) { return static_cast<double>(s.endpoints); });
  each("kvgate_discovery_reports_total", "Good reads of the source (full sets taken).", "counter",
       [](const discovery::SourceStats& s) { return static_cast<double>(s.reports); });
  each("kvgate_discovery_errors_total",
       "Reads, answers or watches that failed (the last good set was kept).", "counter",
       [](const discovery::SourceStats& s) { return static_cast<double>(s.errors); });
  each("kvgate_discovery_changes_total",
       "Changes the source caused in the pool (adds, suspends, resumes, removes).", "counter",
       [](const discovery::SourceStats& s) { return static_cast<double>(s.changes); });
  each("kvgate_discovery_resync_differences_total",
       "Endpoints a periodic full read found different from what the source held.", "counter",
       [](const discovery::SourceStats& s) { return static_cast<double>(s.resync_differences); });
  each("kvgate_discovery_held_empty_total", "Sudden empty sets held instead of applied.", "counter",
       [](const discovery::SourceStats& s) { return static_cast<double>(s.held_empty); });
  w.header("kvgate_discovery_last_success_age_seconds",
           "Seconds since the source's last good read (-1: none yet).", "gauge");
  for (const DiscoveryCounters& c : cs) {
    for (const DiscoverySourceState& s : c.sources) {
      const Nanos last = s.stats.last_success;
      w.sample("kvgate_discovery_last_success_age_seconds",
               {{"pool", c.pool}, {"source", s.name}, {"kind", s.kind}},
               last < 0 ? -1.0 : to_seconds(c.taken - last));
    }
  }
  w.header("kvgate_discovery_applied_total", "Discovery actions the pool carried out, by result.",
           "counter");
  for (const DiscoveryCounters& c : cs) {
    w.sample("kvgate_discovery_applied_total", {{"pool", c.pool}, {"result", "ok"}},
             static_cast<double>(c.applied_ok));
    w.sample("kvgate_discovery_applied_total", {{"pool", c.pool}, {"result", "failed"}},
             static_cast<double>(c.applied_failed));
  }
  w.header("kvgate_discovery_apply_seconds",
           "From a source's report to its change carried out in the pool.", "histogram");
  for (const DiscoveryCounters& c : cs) {
    w.histogram_series("kvgate_discovery_apply_seconds", {{"pool", c.pool}}, c.apply);
  }
  return w.take();
}

}  // namespace kvgate::gateway
