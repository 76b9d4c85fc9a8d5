// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "gateway/control/lora_placer.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

#include "core/route/lora_placement.h"
#include "io/clock_timer.h"
#include "io/upstream_client.h"

namespace kvgate::gateway {
namespace asio = boost::asio;
namespace json = boost::json;

namespace {

// How often a request waiting for its adapter looks again (a condition, not a rule: on
// the OS's clock, its deadline compared with the pool's).
constexpr std::chrono::milliseconds kWaitPoll{10};
// A load's whole answer (vLLM answers once the adapter is loaded).
constexpr std::chrono::milliseconds kActionTimeout{120'000};

}  // namespace

struct LoraPlacer::Impl : std::enable_shared_from_this<LoraPlacer::Impl> {
  Impl(PoolRuntime& p, std::vector<Adapter> a, io::UpstreamClient& up, GatewayMetrics& m,
       asio::any_io_executor ex)
      : pool(p),
        adapters(std::move(a)),
        upstream(up),
        metrics(m),
        config(p.config().lora_placement),
        strand(asio::make_strand(std::move(ex))),
        tick(strand, p.clock()),
        placement(config) {}

  asio::awaitable<void> loop();
  asio::awaitable<void> round();
  asio::awaitable<void> act(route::LoraAction action);
  // A round soon (on the strand): now when the loop waits, else right after this one.
  void kick();
  // What each endpoint holds, to the router; then the adapters it can route to.
  void publish();
  const std::string& source_of(std::string_view adapter) const {
    for (const Adapter& a : adapters) {
      if (a.name == adapter) return a.source;
    }
    static const std::string kNone;
    return kNone;
  }

  PoolRuntime& pool;
  const std::vector<Adapter> adapters;
  io::UpstreamClient& upstream;
  GatewayMetrics& metrics;
  const route::LoraPlacementConfig config;

  // Touched on the strand only.
  asio::strand<asio::any_io_executor> strand;
  io::ClockTimer tick;
  bool kicked = false;

  std::mutex mu;  // guards everything below
  route::LoraPlacement placement;
  std::vector<route::EndpointId> endpoints;  // as the last round saw them
  // Demand: arrivals per adapter in the current window (one interval long), the rate of
  // the last full window, and the requests waiting for a load.
  std::map<std::string, uint64_t, std::less<>> arrivals;
  std::map<std::string, double, std::less<>> rates;
  std::map<std::string, uint32_t, std::less<>> waiting;
  Nanos window_start = 0;
  // The adapters the router has on some endpoint (set once it has been told).
  std::set<std::string, std::less<>> routable;
};

void LoraPlacer::Impl::kick() {
  asio::post(strand, [self = shared_from_this()] {
    self->kicked = true;
    self->tick.cancel();
  });
}

void LoraPlacer::Impl::publish() {
  std::vector<std::pair<route::EndpointId, route::LoraPlaced>> placed;
  std::set<std::string, std::less<>> loaded;
  {
    std::lock_guard lock(mu);
    for (route::EndpointId id : endpoints) {
      route::LoraPlaced p = placement.placed(id);
      loaded.insert(p.loaded.begin(), p.loaded.end());
      placed.emplace_back(id, std::move(p));
    }
  }
  pool.post([self = shared_from_this(), placed = std::move(placed), loaded = std::move(loaded)](
                route::Router& router, kv::PreciseIndex&) {
    for (const auto& [id, p] : placed) router.pool().set_lora_placed(id, p);
    std::lock_guard lock(self->mu);
    self->routable = loaded;
  });
}

asio::awaitable<void> LoraPlacer::Impl::loop() {
  auto self = shared_from_this();  // the loop keeps its state alive
  while (true) {
    kicked = false;
    co_await round();
    if (kicked) continue;
    tick.expires_after(config.interval);
    boost::system::error_code ec;
    co_await tick.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

asio::awaitable<void> LoraPlacer::Impl::round() {
  std::vector<route::LoraEndpointView> views;
  co_await pool.with_router(
      [&views](route::Router& router) { views = route::lora_views(router.pool()); });
  const Nanos now = pool.clock().now();
  std::vector<route::LoraAction> actions;
  {
    std::lock_guard lock(mu);
    if (now - window_start >= config.interval) {
      const double secs = std::max(to_seconds(now - window_start), 1e-3);
      rates.clear();
      for (const auto& [name, n] : arrivals) rates[name] = static_cast<double>(n) / secs;
      arrivals.clear();
      window_start = now;
    }
    std::vector<route::AdapterDemand> demand;
    for (const Adapter& a : adapters) {
      route::AdapterDemand d{.name = a.name, .max_replicas = a.max_replicas};
      if (auto it = rates.find(a.name); it != rates.end()) d.rate = it->second;
      if (auto it = waiting.find(a.name); it != waiting.end()) d.waiting = it->second;
      demand.push_back(std::move(d));
    }
    endpoints.clear();
    for (const route::LoraEndpointView& v : views) endpoints.push_back(v.id);
    actions = placement.plan(views, demand, now);
  }
  publish();
  auto self = shared_from_this();
  for (route::LoraAction& a : actions) {
    asio::co_spawn(
        strand, [self, a = std::move(a)]() { return self->act(a); }, asio::detached);
  }
}

asio::awaitable<void> LoraPlacer::Impl::act(route::LoraAction action) {
  auto self = shared_from_this();
  const bool load = action.kind == route::LoraAction::Kind::kLoad;
  std::optional<EndpointAddress> addr = pool.endpoint(action.endpoint);
  bool ok = false;
  std::string why = "the endpoint left";
  if (addr) {
    json::object body{{"lora_name", action.adapter}};
    if (load) body["lora_path"] = source_of(action.adapter);
    io::UpstreamRequest req{.method = "POST",
                            .target = load ? "/v1/load_lora_adapter" : "/v1/unload_lora_adapter",
                            .headers = {{"Content-Type", "application/json"}},
                            .body = json::serialize(body)};
    auto ex = co_await upstream.send(addr->host, addr->port, req);
    if (!ex) {
      why = ex.error();
    } else {
      auto text = co_await (*ex)->read_all(kActionTimeout, 1 << 16);
      const int status = (*ex)->status();
      if (!text) {
        why = text.error();
      } else {
        // Loaded already (--lora-modules, another gateway replica): it is there.
        ok = status == 200 ||
             (load && status == 400 && text->find("already been loaded") != std::string::npos);
        why = fmt::format("{} {}", status, text->substr(0, 200));
      }
    }
  }
  {
    std::lock_guard lock(mu);
    placement.on_done(action, ok, pool.clock().now());
  }
  const std::string url = addr ? addr->url : std::string("?");
  if (ok) {
    spdlog::info("pool {}: LoRA adapter {} {}ed on {}", pool.name(), action.adapter,
                 route::to_string(action.kind), url);
  } else {
    spdlog::warn("pool {}: LoRA adapter {}: {} on {} failed: {}", pool.name(), action.adapter,
                 route::to_string(action.kind), url, why);
  }
  if (addr)
    metrics.lora_adapter(pool.name(), addr->url, action.adapter, load, ok ? "ok" : "failed");
  publish();
  kick();  // the next step (a load after an eviction, a replica elsewhere) at once
}

LoraPlacer::LoraPlacer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
LoraPlacer::~LoraPlacer() = default;

std::unique_ptr<LoraPlacer> LoraPlacer::create(PoolRuntime& pool, std::vector<Adapter> adapters,
                                               io::UpstreamClient& upstream,
                                               GatewayMetrics& metrics,
                                               asio::any_io_executor executor) {
  if (!pool.config().lora_placement.enabled || adapters.empty()) return nullptr;
  auto impl =
      std::make_shared<Impl>(pool, std::move(adapters), upstream, metrics, std::move(executor));
  impl->window_start = pool.clock().now();
  asio::co_spawn(
      impl->strand, [impl]() { return impl->loop(); }, asio::detached);
  return std::unique_ptr<LoraPlacer>(new LoraPlacer(impl));
}

asio::awaitable<void> LoraPlacer::arrive(std::string adapter) {
  std::shared_ptr<Impl> im = impl_;
  {
    std::lock_guard lock(im->mu);
    ++im->arrivals[adapter];
    if (im->routable.contains(adapter)) co_return;
    ++im->waiting[adapter];
  }
  im->kick();
  const Nanos give_up = im->pool.clock().now() + im->config.max_wait;
  asio::steady_timer poll(co_await asio::this_coro::executor);
  while (im->pool.clock().now() < give_up) {
    poll.expires_after(kWaitPoll);
    boost::system::error_code ec;
    co_await poll.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    std::lock_guard lock(im->mu);
    if (im->routable.contains(adapter)) break;
  }
  std::lock_guard lock(im->mu);
  if (uint32_t& n = im->waiting[adapter]; n > 0) --n;
}

void LoraPlacer::routed(route::EndpointId endpoint, std::string_view adapter) {
  const Nanos now = impl_->pool.clock().now();
  std::lock_guard lock(impl_->mu);
  impl_->placement.on_routed(endpoint, adapter, now);
}

}  // namespace kvgate::gateway
