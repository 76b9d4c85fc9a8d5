#include "gateway/control/live_feed.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "core/kv/event_apply.h"
#include "core/metrics/prometheus_text.h"
#include "core/metrics/step_series.h"
#include "core/route/data_parallel.h"
#include "core/route/scrape.h"
#include "io/http_client.h"
#include "io/kv_event_subscriber.h"

namespace kvgate::gateway {

namespace {

struct Scrape {
  route::ScrapedMetrics metrics;
  std::optional<route::LatencyTotals> latency;  // the engine's own TTFT and ITL totals
};

// One scrape of `url`, read as the router reads every scrape (route/scrape.h). A
// data-parallel rank's (route/data_parallel.h): its address's page, its rank's series.
Result<Scrape> scrape(io::HttpKeepAliveClient& client, const std::string& url,
                      std::chrono::milliseconds timeout) {
  const route::DpUrl dp = route::split_dp_url(url);
  auto r = client.fetch("GET", std::string(dp.address) + "/metrics", {}, {}, timeout);
  if (!r) return Error(r.error());
  if (r->status != 200) return Error(fmt::format("status {}", r->status));
  auto m = metrics::parse_prometheus_text(r->body);
  if (!m) return Error(m.error());
  auto read = route::read_scrape(*m, dp.rank);
  if (!read) return Error(read.error());
  return Scrape{.metrics = *read, .latency = route::read_latency_totals(*m, dp.rank)};
}

// The history of an endpoint's (or the pool's) TTFT and ITL: channels 0 and 1.
using LatencySeries = metrics::StepSeries<2>;
LatencySeries latency_series() {
  return LatencySeries(LiveFeed::kHistoryStep, LiveFeed::kHistorySteps);
}

}  // namespace

// Consecutive failed scrapes after which an endpoint that answers again is treated as
// possibly restarted (resynced).
constexpr int kScrapesBeforeDown = 3;

struct LiveFeed::Impl {
  PoolRuntime& pool;
  GatewayMetrics& metrics;
  uint64_t observer = 0;  // PoolRuntime::on_change handle
  // Below: guarded by state_mu (the scraper thread and the pool's strand, through the
  // observer, both touch it).
  mutable std::mutex state_mu;
  std::unique_ptr<io::KvEventSubscriber> subscriber;
  std::map<route::EndpointId, io::KvEventSource> sources;  // as added, for a resync
  // Endpoints whose last scrape failed; counters of the sources replaced by a resync;
  // resyncs per endpoint.
  std::map<route::EndpointId, int> failed_scrapes;  // consecutive
  std::map<route::EndpointId, kv::SequenceStats> base;
  std::map<route::EndpointId, uint64_t> resyncs;
  // The engines' TTFT and ITL totals at their last scrape, and the history of their
  // differences, per endpoint and for the pool (the status page).
  struct Latency {
    route::LatencyTotals last;
    LatencySeries series = latency_series();
  };
  std::map<route::EndpointId, Latency> latency;
  LatencySeries pool_latency = latency_series();
  std::mutex mu;
  std::condition_variable wake;
  bool stopping = false;
  std::thread scraper;
  io::HttpKeepAliveClient scrape_client;  // the scraper thread's: a connection per endpoint

  Impl(PoolRuntime& p, GatewayMetrics& m) : pool(p), metrics(m) {}

  // Creates the subscriber (bind mode at start; connect mode with the first source).
  Status ensure_subscriber() {
    if (subscriber) return {};
    PoolRuntime* p = &pool;
    // Called on the subscriber's thread; the index lives on the pool's strand.
    auto sink = [p](io::KvEventDelivery d) {
      auto shared = std::make_shared<io::KvEventDelivery>(std::move(d));
      p->post([shared](route::Router&, kv::PreciseIndex& index) {
        if (shared->clear_first) index.clear_endpoint(shared->endpoint);
        for (const kv::EventBatch& b : shared->batches) {
          kv::apply_event_batch(index, shared->endpoint, b);
        }
      });
    };
    auto sub = io::KvEventSubscriber::create(
        {.bind_url = pool.config().kv_events_bind, .clock = &pool.clock()}, std::move(sink));
    if (!sub) return Error(fmt::format("pool {}: kv events: {}", pool.name(), sub.error()));
    subscriber = std::move(*sub);
    return {};
  }

  // With state_mu held.
  void subscribe(const EndpointAddress& e) {
    if (!e.kv_events) return;
    if (auto s = ensure_subscriber(); !s.ok()) {
      spdlog::error("{}", s.error());
      return;
    }
    const KvEventsConfig& k = *e.kv_events;
    io::KvEventSource source{
        .endpoint = e.id, .publisher = k.publisher, .topic = k.topic, .replay = k.replay};
    sources[e.id] = source;
    subscriber->add_source(std::move(source));
  }

  // The pool's run-time changes (on its strand).
  void on_change(const EndpointChange& change) {
    std::lock_guard lock(state_mu);
    const route::EndpointId id = change.endpoint.id;
    switch (change.kind) {
      case EndpointChange::Kind::kAdded:
        subscribe(change.endpoint);
        break;
      case EndpointChange::Kind::kRemoving:
        break;  // still serving its requests in flight: keep its state current
      case EndpointChange::Kind::kRemoved:
        if (subscriber && sources.erase(id) > 0) subscriber->remove_source(id);
        failed_scrapes.erase(id);
        base.erase(id);
        resyncs.erase(id);
        latency.erase(id);
        break;
    }
  }

  void run() {
    const auto interval = pool.config().scrape_interval;
    // A scrape may take up to the interval (at least 100 ms: a busy engine answers late).
    const auto timeout = std::max(interval, std::chrono::milliseconds(100));
    std::unique_lock lock(mu);
    while (!stopping) {
      lock.unlock();
      scrape_all(timeout);
      export_event_stats();
      lock.lock();
      wake.wait_for(lock, interval, [this] { return stopping; });
    }
  }

  void scrape_all(std::chrono::milliseconds timeout) {
    const std::string& name = pool.name();
    const std::vector<EndpointAddress> endpoints = pool.endpoints();
    std::vector<std::string> urls;
    for (const EndpointAddress& e : endpoints) urls.push_back(e.url);
    scrape_client.retain(urls);  // no connection kept to a removed endpoint
    for (const EndpointAddress& e : endpoints) {
      if (e.url.empty()) continue;
      auto s = scrape(scrape_client, e.url, timeout);
      if (!s) {
        metrics.scrape(name, e.url, nullptr, nullptr, nullptr);
        std::lock_guard lock(state_mu);
        ++failed_scrapes[e.id];
        continue;
      }
      {
        // Down long enough to have been restarted: resync. One slow or lost scrape (a
        // busy engine, a loaded gateway) is not a restart and must not cost the index.
        std::lock_guard lock(state_mu);
        auto it = failed_scrapes.find(e.id);
        if (it != failed_scrapes.end()) {
          if (it->second >= kScrapesBeforeDown) resync(e.id);
          failed_scrapes.erase(it);
        }
      }
      if (s->latency) record_latency(e.id, *s->latency);
      const route::ScrapedMetrics sm = s->metrics;
      const double waiting = sm.waiting, running = sm.running;
      metrics.scrape(name, e.url, &waiting, &running, &sm.kv_usage);
      pool.post([id = e.id, url = e.url, sm, clock = &pool.clock()](route::Router& router,
                                                                    kv::PreciseIndex&) {
        // The endpoint may have been removed (and its id reused) since the scrape began.
        const route::Endpoint* now = router.pool().get(id);
        if (now && now->spec.url == url) router.pool().on_metrics(id, sm, clock->now());
      });
    }
  }

  // Adds what the endpoint's engine measured since its last scrape to its history and
  // the pool's. A total that went down is a restarted engine: counted from there.
  void record_latency(route::EndpointId id, const route::LatencyTotals& now_totals) {
    const Nanos now = pool.clock().now();
    std::lock_guard lock(state_mu);
    auto [it, added] = latency.try_emplace(id);
    Latency& l = it->second;
    const route::LatencyTotals& last = l.last;
    if (!added) {
      if (now_totals.ttft_count > last.ttft_count && now_totals.ttft_sum >= last.ttft_sum) {
        const double sum = now_totals.ttft_sum - last.ttft_sum;
        const uint64_t count = now_totals.ttft_count - last.ttft_count;
        l.series.add(now, 0, sum, count);
        pool_latency.add(now, 0, sum, count);
      }
      if (now_totals.itl_count > last.itl_count && now_totals.itl_sum >= last.itl_sum) {
        const double sum = now_totals.itl_sum - last.itl_sum;
        const uint64_t count = now_totals.itl_count - last.itl_count;
        l.series.add(now, 1, sum, count);
        pool_latency.add(now, 1, sum, count);
      }
    }
    l.last = now_totals;
  }

  // The endpoint stopped answering and is back: it may be a new process whose event
  // sequence restarted and whose first batches were lost while the SUB reconnected (a
  // restart the sequencer alone cannot always see). Forget what it held and subscribe
  // afresh, so the next batch it publishes starts a new sequence. With state_mu held.
  void resync(route::EndpointId id) {
    auto it = sources.find(id);
    if (!subscriber || it == sources.end()) return;
    kv::SequenceStats now = subscriber->stats(id);
    kv::SequenceStats& b = base[id];
    b.batches += now.batches;
    b.gaps += now.gaps;
    b.missed += now.missed;
    b.restarts += now.restarts;
    b.duplicates += now.duplicates;
    b.replays += now.replays;
    b.replayed += now.replayed;
    b.decode_errors += now.decode_errors;
    ++resyncs[id];
    subscriber->remove_source(id);
    subscriber->add_source(it->second);
    pool.post([id](route::Router&, kv::PreciseIndex& index) { index.clear_endpoint(id); });
  }

  void export_event_stats() {
    std::lock_guard lock(state_mu);
    if (!subscriber) return;
    const std::string& name = pool.name();
    for (const auto& [id, source] : sources) {
      auto endpoint = pool.endpoint(id);
      if (!endpoint) continue;
      const std::string& url = endpoint->url;
      kv::SequenceStats s = subscriber->stats(id);
      const kv::SequenceStats& b = base[id];
      auto set = [&](const char* family, uint64_t v) {
        metrics.endpoint_value(family, name, url, static_cast<double>(v));
      };
      set("kvgate_kv_event_batches_total", b.batches + s.batches);
      set("kvgate_kv_event_gaps_total", b.gaps + s.gaps);
      set("kvgate_kv_event_missed_total", b.missed + s.missed);
      set("kvgate_kv_event_restarts_total", b.restarts + s.restarts + resyncs[id]);
      set("kvgate_kv_event_replayed_total", b.replayed + s.replayed);
      set("kvgate_kv_event_decode_errors_total", b.decode_errors + s.decode_errors);
      pool.post([m = &metrics, id, url, name](route::Router&, kv::PreciseIndex& index) {
        m->endpoint_value("kvgate_kv_event_anomalies_total", name, url,
                          static_cast<double>(index.stats(id).anomalies()));
      });
    }
  }
};

LiveFeed::LiveFeed(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

LiveFeed::~LiveFeed() {
  impl_->pool.remove_observer(impl_->observer);
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  if (impl_->scraper.joinable()) impl_->scraper.join();
  std::lock_guard lock(impl_->state_mu);
  impl_->subscriber.reset();
}

std::string LiveFeed::bound_endpoint() const {
  return impl_->subscriber && !impl_->pool.config().kv_events_bind.empty()
             ? impl_->subscriber->bound_endpoint()
             : std::string();
}

std::optional<LiveFeed::EndpointEvents> LiveFeed::endpoint_events(route::EndpointId id) const {
  std::lock_guard lock(impl_->state_mu);
  if (!impl_->subscriber || !impl_->sources.contains(id)) return std::nullopt;
  EndpointEvents out;
  const kv::SequenceStats s = impl_->subscriber->stats(id);
  kv::SequenceStats b;
  if (auto it = impl_->base.find(id); it != impl_->base.end()) b = it->second;
  out.events.batches = b.batches + s.batches;
  out.events.gaps = b.gaps + s.gaps;
  out.events.missed = b.missed + s.missed;
  out.events.restarts = b.restarts + s.restarts;
  out.events.duplicates = b.duplicates + s.duplicates;
  out.events.replays = b.replays + s.replays;
  out.events.replayed = b.replayed + s.replayed;
  out.events.decode_errors = b.decode_errors + s.decode_errors;
  out.events.next_sequence = s.next_sequence;
  if (auto it = impl_->resyncs.find(id); it != impl_->resyncs.end()) out.resyncs = it->second;
  return out;
}

namespace {

LiveFeed::LatencyHistory history_of(const LatencySeries& s, Nanos now) {
  return {.ttft = s.means(now, 0), .itl = s.means(now, 1)};
}

}  // namespace

std::optional<LiveFeed::LatencyHistory> LiveFeed::latency_history(route::EndpointId id) const {
  const Nanos now = impl_->pool.clock().now();
  std::lock_guard lock(impl_->state_mu);
  auto it = impl_->latency.find(id);
  if (it == impl_->latency.end()) return std::nullopt;
  return history_of(it->second.series, now);
}

LiveFeed::LatencyHistory LiveFeed::pool_latency_history() const {
  const Nanos now = impl_->pool.clock().now();
  std::lock_guard lock(impl_->state_mu);
  return history_of(impl_->pool_latency, now);
}

Result<std::unique_ptr<LiveFeed>> LiveFeed::start(PoolRuntime& pool, GatewayMetrics& metrics) {
  auto impl = std::make_unique<Impl>(pool, metrics);
  {
    std::lock_guard lock(impl->state_mu);
    if (!pool.config().kv_events_bind.empty()) {
      if (auto s = impl->ensure_subscriber(); !s.ok()) return Error(s.error());
    }
    for (const EndpointAddress& e : pool.endpoints()) impl->subscribe(e);
  }
  impl->observer =
      pool.on_change([raw = impl.get()](const EndpointChange& c) { raw->on_change(c); });
  Impl* raw = impl.get();
  if (pool.config().scrape_interval.count() > 0) raw->scraper = std::thread([raw] { raw->run(); });
  return std::unique_ptr<LiveFeed>(new LiveFeed(std::move(impl)));
}

}  // namespace kvgate::gateway
