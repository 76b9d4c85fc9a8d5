// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "gateway/data/pool_runtime.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/kv/pseudo_tokens.h"
#include "core/route/data_parallel.h"
#include "env/file.h"
#include "gateway/data/pool_flow.h"
#include "io/http_client.h"

namespace kvgate::gateway {
namespace asio = boost::asio;

namespace {

using env::read_file;

// "http://host:port[/][#dpN]" -> the endpoint's address (and data-parallel rank).
Result<EndpointAddress> address_of(const route::EndpointSpec& spec) {
  auto url = io::parse_url(spec.url);
  if (!url) return Error(fmt::format("endpoint url {}: {}", spec.url, url.error()));
  if (url->target != "/") {
    return Error(
        fmt::format("endpoint url {}: expected http://host:port, without a path", spec.url));
  }
  EndpointAddress a{.url = spec.url, .host = url->host};
  a.port = static_cast<uint16_t>(std::stoi(url->port));  // checked by parse_url
  a.dp_rank = route::split_dp_url(spec.url).rank;
  return a;
}

}  // namespace

PoolRuntime::PoolRuntime(const PoolConfig& config, const route::BreakerConfig& breaker,
                         asio::any_io_executor executor, GatewayMetrics& metrics,
                         const Clock& clock, bool one_thread)
    : PoolRouting(config, breaker, std::move(executor), metrics, clock, one_thread) {}

PoolRuntime::~PoolRuntime() = default;

Result<std::unique_ptr<PoolRuntime>> PoolRuntime::create(const PoolConfig& config,
                                                         const route::BreakerConfig& breaker,
                                                         asio::any_io_executor executor,
                                                         GatewayMetrics& metrics,
                                                         const Clock& clock, bool one_thread) {
  std::unique_ptr<PoolRuntime> p(
      new PoolRuntime(config, breaker, std::move(executor), metrics, clock, one_thread));
  if (Status st = p->load_tokenize(); !st) return Error(st.error());
  auto router =
      route::Router::create(config.router, {.precise = &p->precise_, .approx = &p->approx_});
  if (!router) return Error(fmt::format("pool {}: {}", config.name, router.error()));
  p->router_ = std::move(*router);
  if (config.flow.enabled) {
    p->flow_ = std::make_unique<PoolFlow>(*p->router_, config.flow, p->strand_, p->rng_, clock,
                                          config.name);
  }
  // The strand runs nothing yet: adding directly is safe.
  for (size_t i = 0; i < config.endpoints.size(); ++i) {
    std::optional<KvEventsConfig> events;
    if (i < config.kv_events.size()) events = config.kv_events[i];
    auto id = p->add_on_strand(config.endpoints[i], std::move(events), "config");
    if (!id) return Error(fmt::format("pool {}: {}", config.name, id.error()));
  }
  return p;
}

Status PoolRuntime::load_tokenize() {
  const PoolConfig& config = config_;
  const TokenizeMode mode = config.tokenize.mode;
  constexpr std::string_view kFallback =
      "-> engine fallback (POST /tokenize to the pool's engines)";
  if (mode == TokenizeMode::kEngine) {
    plan_.chat_from_engine = plan_.completion_from_engine = true;
    plan_.tokenizer = "tokenizer: engine fallback (tokenize: engine)";
    plan_.chat_template = "chat template: engine fallback (tokenize: engine)";
    return {};
  }
  // A file that is refused fails the start with `tokenize: local`; otherwise the pool
  // asks its engines instead, and says why.
  auto refused = [&](std::string_view what, const std::string& file,
                     const std::string& why) -> Status {
    if (mode == TokenizeMode::kLocal) {
      return Error(fmt::format("pool {}: {}: {}", config.name, file, why));
    }
    spdlog::warn(
        "pool {}: {} {} refused ({}): routing ids come from the pool's engines "
        "(POST /tokenize)",
        config.name, what, file, why);
    return {};
  };
  if (config.tokenizer_file.empty()) {
    plan_.tokenizer = "tokenizer: none: approximate routing on pseudo-tokens (4 bytes each)";
  } else {
    auto text = read_file(config.tokenizer_file);
    if (!text)
      return Error(fmt::format("pool {}: cannot read {}", config.name, config.tokenizer_file));
    auto tok = tokenizer::Tokenizer::load(*text);
    if (tok) {
      tokenizer_ = std::move(*tok);
      plan_.tokenizer =
          fmt::format("tokenizer {}: {} path: {}", config.tokenizer_file,
                      tokenizer_->path().fast ? "fast" : "general", tokenizer_->path().why);
    } else {
      KVGATE_TRY(refused("tokenizer", config.tokenizer_file, tok.error()));
      plan_.chat_from_engine = plan_.completion_from_engine = true;
      plan_.tokenizer = fmt::format("tokenizer {}: refused ({}) {}", config.tokenizer_file,
                                    tok.error(), kFallback);
    }
  }
  if (!config.chat_template_file.empty()) {
    auto text = read_file(config.chat_template_file);
    if (!text) {
      return Error(fmt::format("pool {}: cannot read {}", config.name, config.chat_template_file));
    }
    auto tpl = tokenizer::ChatTemplate::load(*text);
    if (tpl) {
      chat_template_ = std::move(*tpl);
      plan_.chat_template = fmt::format(
          "chat template {}: {}{}", config.chat_template_file, chat_template_->describe(),
          plan_.chat_from_engine ? " (not used: the tokenizer was refused -> engine fallback)"
          : !tokenizer_          ? " (not used: no tokenizer, chat requests route approximately)"
                                 : "");
    } else {
      KVGATE_TRY(refused("chat template", config.chat_template_file, tpl.error()));
      plan_.chat_from_engine = true;
      plan_.chat_template = fmt::format("chat template {}: refused ({}) {}",
                                        config.chat_template_file, tpl.error(), kFallback);
    }
  } else if (plan_.chat_from_engine) {
    plan_.chat_template = "chat template: engine fallback (the tokenizer was refused)";
  } else {
    plan_.chat_template = "chat template: none: chat requests route approximately on pseudo-tokens";
  }
  return {};
}

Result<route::EndpointId> PoolRuntime::add_on_strand(route::EndpointSpec spec,
                                                     std::optional<KvEventsConfig> kv_events,
                                                     std::string origin) {
  auto addr = address_of(spec);
  if (!addr) return Error(addr.error());
  auto id = router_->add_endpoint(std::move(spec), clock_.now());
  if (!id) return Error(id.error());
  addr->id = *id;
  addr->kv_events = std::move(kv_events);
  addr->origin = std::move(origin);
  breakers_.reset(*id);
  holds_.reset(*id);
  if (removal_started_.size() <= *id) removal_started_.resize(*id + 1);
  removal_started_[*id] = false;
  {
    std::lock_guard lock(endpoints_mu_);
    if (endpoints_.size() <= *id) endpoints_.resize(*id + 1);
    endpoints_[*id] = std::make_shared<const EndpointAddress>(*addr);
  }
  pump_flow(clock_.now());
  return *id;
}

asio::awaitable<Result<route::EndpointId>> PoolRuntime::add_endpoint(
    route::EndpointSpec spec, std::optional<KvEventsConfig> kv_events, std::string origin) {
  co_return *co_await asio::co_spawn(
      strand_, add_task(std::move(spec), std::move(kv_events), std::move(origin)),
      asio::use_awaitable);
}

void PoolRuntime::hold_on_strand(route::EndpointId id) {
  set_hold_on_strand(id, route::Hold::kWarmup, true);
}

void PoolRuntime::set_warmup_hold(route::EndpointId id, bool on) {
  asio::post(strand_, [this, id, on] {
    set_hold_on_strand(id, route::Hold::kWarmup, on);
    pump_flow(clock_.now());  // an endpoint admitted: capacity
  });
}

void PoolRuntime::apply_standby(int32_t count) {
  asio::dispatch(strand_, [this, count] {
    route::EndpointPool& pool = router_->pool();
    std::vector<route::EndpointId> ids;
    std::vector<Nanos> ready_at;
    for (route::EndpointId id : pool.ids()) {
      const route::Endpoint* e = pool.get(id);
      if (!e) continue;
      ids.push_back(id);
      ready_at.push_back(e->added_at);
    }
    const route::StandbyPlan plan = route::plan_standby(holds_, ids, ready_at, count);
    bool returned = false;
    for (const route::StandbyPlan::Change& c : plan.changes) {
      pool.set_health(c.id, c.health);
      returned |= c.health == route::Health::kHealthy;
    }
    if (returned) pump_flow(clock_.now());
  });
}

asio::awaitable<bool> PoolRuntime::set_held(route::EndpointId id, bool held) {
  co_return co_await asio::co_spawn(strand_, held_task(id, held), asio::use_awaitable);
}

asio::awaitable<bool> PoolRuntime::held_task(route::EndpointId id, bool held) {
  if (!router_->pool().get(id) || (id < removal_started_.size() && removal_started_[id])) {
    co_return false;
  }
  set_hold_on_strand(id, route::Hold::kDrain, held);
  co_return true;
}

asio::awaitable<Result<bool>> PoolRuntime::remove_endpoint(route::EndpointId id,
                                                           std::chrono::milliseconds timeout) {
  co_return *co_await asio::co_spawn(strand_, remove_task(id, timeout), asio::use_awaitable);
}

Result<route::EndpointId> PoolRuntime::add_endpoint_sync(route::EndpointSpec spec,
                                                         std::optional<KvEventsConfig> kv_events,
                                                         std::string origin) {
  auto done =
      asio::co_spawn(strand_, add_task(std::move(spec), std::move(kv_events), std::move(origin)),
                     asio::use_future);
  return *done.get();
}

Result<bool> PoolRuntime::remove_endpoint_sync(route::EndpointId id,
                                               std::chrono::milliseconds timeout) {
  return *asio::co_spawn(strand_, remove_task(id, timeout), asio::use_future).get();
}

asio::awaitable<std::optional<Result<route::EndpointId>>> PoolRuntime::add_task(
    route::EndpointSpec spec, std::optional<KvEventsConfig> kv_events, std::string origin) {
  auto id = add_on_strand(std::move(spec), std::move(kv_events), std::move(origin));
  if (id) {
    spdlog::info("pool {}: endpoint {} added", config_.name, endpoint(*id)->url);
    notify(EndpointChange::Kind::kAdded, *endpoint(*id));
  }
  co_return id;
}

asio::awaitable<std::optional<Result<bool>>> PoolRuntime::remove_task(
    route::EndpointId id, std::chrono::milliseconds timeout) {
  std::optional<EndpointAddress> addr = endpoint(id);
  if (!addr || !router_->pool().get(id) || id >= removal_started_.size() || removal_started_[id]) {
    co_return Error(fmt::format("pool {}: no endpoint {}", config_.name, id));
  }
  removal_started_[id] = true;  // a held (draining) endpoint may still be removed
  set_hold_on_strand(id, route::Hold::kDrain, true);
  notify(EndpointChange::Kind::kRemoving, *addr);
  // Requests in flight (including remote prefills running there) finish first.
  const Nanos deadline =
      clock_.now() + std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count();
  asio::steady_timer timer(co_await asio::this_coro::executor);
  auto in_flight = [&]() -> uint32_t {
    const route::Endpoint* e = router_->pool().get(id);
    return e ? e->load.in_flight : 0;
  };
  while (!route::drain_over(in_flight(), clock_.now(), deadline)) {
    timer.expires_after(std::chrono::milliseconds(20));
    co_await timer.async_wait(asio::use_awaitable);
  }
  const bool drained = in_flight() == 0;
  router_->remove_endpoint(id);  // and its entries in both indexes
  breakers_.reset(id);
  holds_.reset(id);
  {
    std::lock_guard lock(endpoints_mu_);
    endpoints_[id].reset();
  }
  spdlog::info("pool {}: endpoint {} removed ({})", config_.name, addr->url,
               drained ? "drained" : "drain timed out");
  notify(EndpointChange::Kind::kRemoved, *addr);
  co_return drained;
}

uint64_t PoolRuntime::on_change(Observer fn) {
  std::lock_guard lock(observers_mu_);
  observers_.emplace_back(next_observer_, std::move(fn));
  return next_observer_++;
}

void PoolRuntime::remove_observer(uint64_t handle) {
  std::lock_guard lock(observers_mu_);
  std::erase_if(observers_, [handle](const auto& o) { return o.first == handle; });
}

void PoolRuntime::notify(EndpointChange::Kind kind, const EndpointAddress& endpoint) {
  // Held while the observers run, so remove_observer waits for a call in progress.
  std::lock_guard lock(observers_mu_);
  EndpointChange change{.kind = kind, .endpoint = endpoint};
  for (const auto& [handle, fn] : observers_) fn(change);
}

route::CircuitBreakers::State PoolRuntime::breaker_state(route::EndpointId id) const {
  return breakers_.state(id);
}

void PoolRuntime::post(std::function<void(route::Router&, kv::PreciseIndex&)> fn) {
  asio::post(strand_, [this, fn = std::move(fn)] {
    fn(*router_, precise_);
    pump_flow(clock_.now());  // a scrape may show room
  });
}

asio::awaitable<void> PoolRuntime::with_router(std::function<void(route::Router&)> fn) {
  co_await asio::co_spawn(strand_, router_task(std::move(fn)), asio::use_awaitable);
}

asio::awaitable<void> PoolRuntime::router_task(std::function<void(route::Router&)> fn) {
  fn(*router_);
  co_return;
}

}  // namespace kvgate::gateway
