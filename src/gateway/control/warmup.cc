// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "gateway/control/warmup.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <charconv>
#include <deque>
#include <mutex>

#include "core/kv/hot_prefixes.h"
#include "core/metrics/histogram.h"
#include "io/clock_timer.h"
#include "io/http_client.h"
#include "io/upstream_client.h"
#include "openai/usage.h"

namespace kvgate::gateway {
namespace asio = boost::asio;
namespace json = boost::json;

namespace {

constexpr size_t kKeptRuns = 16;  // finished warm-ups the admin API still shows
constexpr std::chrono::milliseconds kHealthPoll{200};

const std::vector<double>& duration_bounds() {
  static const std::vector<double> b{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320};
  return b;
}

std::chrono::nanoseconds nanos(Nanos n) { return std::chrono::nanoseconds(n); }

}  // namespace

// One warm-up. `record` is guarded by Impl::mu; the rest is touched on the strand only.
struct WarmupTask {
  WarmupTask(asio::any_io_executor ex, const Clock& clock) : wake(std::move(ex), clock) {}
  WarmupRecord record;
  std::string host;
  uint16_t port = 0;
  bool cancelled = false;  // guarded by Impl::mu
  std::optional<kv::WarmupRun> run;
  // On the pool's clock: the health polls, the readiness timeout and the budget are the
  // warm-up's rules, and a ManualClock moves them all.
  io::ClockTimer wake;
};

struct PoolWarmup::Impl : std::enable_shared_from_this<PoolWarmup::Impl> {
  Impl(PoolRuntime& p, std::string served, io::UpstreamClient& up, asio::any_io_executor ex)
      : pool(p),
        served_model(std::move(served)),
        upstream(up),
        strand(asio::make_strand(std::move(ex))),
        config(p.config().warmup),
        ready_timeout(p.config().warmup_ready_timeout),
        hot(p.config().router.block_size),
        duration(duration_bounds()) {}

  asio::awaitable<void> warm(std::shared_ptr<WarmupTask> task);
  asio::awaitable<bool> wait_ready(std::shared_ptr<WarmupTask> task);
  asio::awaitable<void> send_one(std::shared_ptr<WarmupTask> task, size_t index);
  bool cancelled(const WarmupTask& t) {
    std::lock_guard lock(mu);
    return t.cancelled;
  }
  void finish(WarmupTask& t, std::string state);

  PoolRuntime& pool;
  const std::string served_model;
  io::UpstreamClient& upstream;
  asio::strand<asio::any_io_executor> strand;
  const kv::WarmupConfig config;
  const std::chrono::milliseconds ready_timeout;

  mutable std::mutex mu;  // guards everything below
  kv::HotPrefixes hot;
  std::function<std::vector<std::vector<kv::HotPrefix>>()> peers;  // empty: one replica
  std::deque<std::shared_ptr<WarmupTask>> tasks;  // running, then the last finished
  std::map<std::string, uint64_t> outcomes;
  uint64_t requests_ok = 0, requests_failed = 0, prompt_tokens = 0, cached_tokens = 0;
  metrics::Histogram duration;
};

void PoolWarmup::Impl::finish(WarmupTask& t, std::string state) {
  const Nanos now = pool.clock().now();
  std::lock_guard lock(mu);
  if (t.record.ended >= 0) return;
  t.record.state = std::move(state);
  t.record.ended = now;
  if (t.run) t.record.stats = t.run->stats();
  ++outcomes[t.record.state];
  if (t.record.state != "cancelled") duration.observe(to_seconds(now - t.record.started));
  size_t finished = 0;
  for (const auto& x : tasks) finished += x->record.ended >= 0;
  while (finished > kKeptRuns) {
    auto it = std::find_if(tasks.begin(), tasks.end(),
                           [](const auto& x) { return x->record.ended >= 0; });
    tasks.erase(it);
    --finished;
  }
}

asio::awaitable<bool> PoolWarmup::Impl::wait_ready(std::shared_ptr<WarmupTask> task) {
  const Nanos give_up = pool.clock().now() +
                        std::chrono::duration_cast<std::chrono::nanoseconds>(ready_timeout).count();
  while (!cancelled(*task)) {
    io::UpstreamRequest req{.method = "GET", .target = "/health", .headers = {}, .body = {}};
    auto ex = co_await upstream.send(task->host, task->port, std::move(req));
    if (ex) {
      auto body = co_await (*ex)->read_all(std::chrono::milliseconds(2000), 1 << 16);
      if (body && (*ex)->status() == 200) co_return true;
    }
    if (pool.clock().now() >= give_up) co_return false;
    task->wake.expires_after(kHealthPoll);
    boost::system::error_code ec;
    co_await task->wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  co_return false;
}

asio::awaitable<void> PoolWarmup::Impl::send_one(std::shared_ptr<WarmupTask> task, size_t index) {
  const kv::HotPrefix& p = task->run->set()[index];
  json::object body{{"model", served_model}, {"max_tokens", 1}, {"temperature", 0}};
  if (!p.token_ids.empty()) {
    json::array ids;
    ids.reserve(p.token_ids.size());
    for (kv::TokenId t : p.token_ids) ids.push_back(t);
    body["prompt"] = std::move(ids);
  } else {
    body["prompt"] = p.text;
  }
  io::UpstreamRequest req{.method = "POST",
                          .target = "/v1/completions",
                          .headers = {{"Content-Type", "application/json"}},
                          .body = json::serialize(body)};
  kv::WarmupResult result;
  auto ex = co_await upstream.send(task->host, task->port, std::move(req));
  if (ex) {
    // Bounded by the budget: an answer after it no longer matters.
    const Nanos left = std::max<Nanos>(task->run->deadline() - pool.clock().now(), kMillisecond);
    auto text = co_await (*ex)->read_all(
        std::chrono::duration_cast<std::chrono::milliseconds>(nanos(left)), 1 << 20);
    if (text && (*ex)->status() == 200) {
      openai::Usage u = openai::parse_usage(*text);
      result = {.ok = true,
                .prompt_tokens = static_cast<uint32_t>(u.prompt_tokens),
                .cached_tokens = static_cast<uint32_t>(u.cached_tokens)};
    }
  }
  task->run->done(index, result);
  {
    std::lock_guard lock(mu);
    (result.ok ? requests_ok : requests_failed) += 1;
    prompt_tokens += result.prompt_tokens;
    cached_tokens += result.cached_tokens;
    task->record.stats = task->run->stats();
  }
  task->wake.cancel();  // the coordinator sends the next ones
}

asio::awaitable<void> PoolWarmup::Impl::warm(std::shared_ptr<WarmupTask> task) {
  const route::EndpointId id = task->record.endpoint;
  // Held out of routing (route::Hold::kWarmup; the observer already held it on the pool's
  // strand). Released below: a drain begun meanwhile keeps it out (core/route/endpoint_holds.h).
  pool.set_warmup_hold(id, true);
  if (!co_await wait_ready(task)) {
    if (cancelled(*task)) {
      finish(*task, "cancelled");
      co_return;
    }
    spdlog::warn("warm-up: {} not ready after {} ms; admitted unwarmed", task->record.url,
                 ready_timeout.count());
    pool.set_warmup_hold(id, false);
    finish(*task, "not_ready");
    co_return;
  }
  {
    const Nanos now = pool.clock().now();
    std::vector<std::vector<kv::HotPrefix>> lists;
    std::function<std::vector<std::vector<kv::HotPrefix>>()> peers_now;
    {
      std::lock_guard lock(mu);
      peers_now = peers;
    }
    if (peers_now) lists = peers_now();  // outside mu: it takes the sync's own lock
    std::lock_guard lock(mu);
    lists.push_back(hot.top(config.prefixes, now));
    task->run.emplace(kv::merge_hot_prefixes(lists, config.prefixes), config, now);
    task->record.state = "warming";
    task->record.stats = task->run->stats();
  }
  kv::WarmupRun& run = *task->run;
  while (true) {
    if (cancelled(*task)) {
      finish(*task, "cancelled");
      co_return;
    }
    const Nanos now = pool.clock().now();
    for (size_t i : run.next(now)) asio::co_spawn(strand, send_one(task, i), asio::detached);
    if (run.finished(now)) break;
    // Woken by an answer (send_one cancels the timer) or by the deadline. Answers are
    // handled on this strand, so none can slip in between next() and this wait.
    task->wake.expires_after(nanos(run.deadline() - now));
    boost::system::error_code ec;
    co_await task->wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  pool.set_warmup_hold(id, false);
  const kv::WarmupStats& s = run.stats();
  const std::string state = s.planned == 0 ? "empty" : s.timed_out ? "timeout" : "complete";
  spdlog::info("warm-up: {} admitted after {:.2f} s: {}/{} prefixes warmed, {} tokens ({})",
               task->record.url, to_seconds(pool.clock().now() - task->record.started), s.succeeded,
               s.planned, s.tokens_warmed, state);
  finish(*task, state);
}

PoolWarmup::PoolWarmup(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
PoolWarmup::~PoolWarmup() = default;

std::unique_ptr<PoolWarmup> PoolWarmup::create(PoolRuntime& pool, std::string served_model,
                                               io::UpstreamClient& upstream,
                                               asio::any_io_executor executor) {
  auto impl = std::make_shared<Impl>(pool, std::move(served_model), upstream, std::move(executor));
  std::unique_ptr<PoolWarmup> w(new PoolWarmup(impl));
  if (impl->config.enabled) {
    PoolWarmup* self = w.get();
    // Kept for the pool's lifetime: the gateway destroys warm-ups and pools together.
    // Observers run on the pool's strand, in the same step as the add: the endpoint is
    // held out of routing before any request can be routed to it (the warm-up's own
    // hold, posted from its strand, would leave a window).
    pool.on_change([self, &pool](const EndpointChange& c) {
      if (c.kind == EndpointChange::Kind::kAdded) {
        pool.hold_on_strand(c.endpoint.id);
        self->start(c.endpoint.id, c.endpoint.url);
      } else {
        self->cancel(c.endpoint.id);
      }
    });
  }
  return w;
}

bool PoolWarmup::enabled() const { return impl_->config.enabled; }

PoolRuntime& PoolWarmup::pool() const { return impl_->pool; }
size_t PoolWarmup::prefixes() const { return impl_->config.prefixes; }

std::vector<kv::HotPrefix> PoolWarmup::top(size_t k) const {
  std::lock_guard lock(impl_->mu);
  return impl_->hot.top(k, impl_->pool.clock().now());
}

void PoolWarmup::set_peers(std::function<std::vector<std::vector<kv::HotPrefix>>()> peers) {
  std::lock_guard lock(impl_->mu);
  impl_->peers = std::move(peers);
}

void PoolWarmup::observe(std::span<const kv::BlockKey> keys, std::span<const kv::TokenId> token_ids,
                         std::string_view text) {
  if (!impl_->config.enabled || keys.empty()) return;
  if (token_ids.empty() && text.empty()) return;
  const Nanos now = impl_->pool.clock().now();
  std::lock_guard lock(impl_->mu);
  impl_->hot.observe(keys, {.token_ids = token_ids, .text = text, .bytes_per_token = 4}, now);
}

void PoolWarmup::start(route::EndpointId id, std::string url) {
  auto u = io::parse_url(url);
  auto task = std::make_shared<WarmupTask>(impl_->strand, impl_->pool.clock());
  task->record = {
      .url = url, .endpoint = id, .state = "waiting_ready", .started = impl_->pool.clock().now()};
  if (u) {
    task->host = u->host;
    std::from_chars(u->port.data(), u->port.data() + u->port.size(), task->port);
  }
  {
    std::lock_guard lock(impl_->mu);
    impl_->tasks.push_back(task);
  }
  if (!u) {
    impl_->finish(*task, "cancelled");
    return;
  }
  asio::co_spawn(impl_->strand, impl_->warm(task), asio::detached);
}

void PoolWarmup::cancel(route::EndpointId id) {
  std::lock_guard lock(impl_->mu);
  for (auto& t : impl_->tasks) {
    if (t->record.endpoint == id && t->record.ended < 0) {
      t->cancelled = true;
      asio::post(impl_->strand, [t] { t->wake.cancel(); });
    }
  }
}

WarmupStatus PoolWarmup::status() const {
  WarmupStatus s;
  s.pool = impl_->pool.name();
  s.config = impl_->config;
  std::lock_guard lock(impl_->mu);
  s.tracked_prefixes = impl_->hot.size();
  s.stored_tokens = impl_->hot.stored_tokens();
  for (const auto& t : impl_->tasks) s.runs.push_back(t->record);
  return s;
}

WarmupCounters PoolWarmup::counters() const {
  WarmupCounters c;
  c.pool = impl_->pool.name();
  std::lock_guard lock(impl_->mu);
  c.runs = impl_->outcomes;
  c.requests_ok = impl_->requests_ok;
  c.requests_failed = impl_->requests_failed;
  c.prompt_tokens = impl_->prompt_tokens;
  c.cached_tokens = impl_->cached_tokens;
  for (const auto& t : impl_->tasks) c.warming += t->record.ended < 0;
  c.tracked_prefixes = impl_->hot.size();
  c.duration = impl_->duration.snapshot();
  return c;
}

std::string render_warmup_metrics(const std::vector<const PoolWarmup*>& pools) {
  std::vector<WarmupCounters> cs;
  for (const PoolWarmup* p : pools) {
    if (p->enabled()) cs.push_back(p->counters());
  }
  if (cs.empty()) return {};
  metrics::PrometheusWriter w;
  w.header("kvgate_warmups_total", "Warm-ups of endpoints added at run time, by outcome.",
           "counter");
  for (const auto& c : cs) {
    for (const char* o : {"complete", "timeout", "not_ready", "empty", "cancelled"}) {
      auto it = c.runs.find(o);
      w.sample("kvgate_warmups_total", {{"pool", c.pool}, {"outcome", o}},
               it == c.runs.end() ? 0 : static_cast<double>(it->second));
    }
  }
  w.header("kvgate_warmup_requests_total", "Warm-up requests sent, by result.", "counter");
  for (const auto& c : cs) {
    w.sample("kvgate_warmup_requests_total", {{"pool", c.pool}, {"result", "ok"}},
             static_cast<double>(c.requests_ok));
    w.sample("kvgate_warmup_requests_total", {{"pool", c.pool}, {"result", "failed"}},
             static_cast<double>(c.requests_failed));
  }
  w.header("kvgate_warmup_prompt_tokens_total", "Prompt tokens of answered warm-up requests.",
           "counter");
  for (const auto& c : cs) {
    w.sample("kvgate_warmup_prompt_tokens_total", {{"pool", c.pool}},
             static_cast<double>(c.prompt_tokens));
  }
  w.header("kvgate_warmup_cached_tokens_total",
           "Of those, tokens the endpoint already held (prompt_tokens_details).", "counter");
  for (const auto& c : cs) {
    w.sample("kvgate_warmup_cached_tokens_total", {{"pool", c.pool}},
             static_cast<double>(c.cached_tokens));
  }
  w.header("kvgate_warmup_duration_seconds", "From an endpoint's addition to its admission.",
           "histogram");
  for (const auto& c : cs)
    w.histogram_series("kvgate_warmup_duration_seconds", {{"pool", c.pool}}, c.duration);
  w.header("kvgate_endpoints_warming", "Endpoints being warmed up (held out of routing).", "gauge");
  for (const auto& c : cs) {
    w.sample("kvgate_endpoints_warming", {{"pool", c.pool}}, c.warming);
  }
  w.header("kvgate_hot_prefixes", "Prompt prefixes tracked for warm-ups.", "gauge");
  for (const auto& c : cs) {
    w.sample("kvgate_hot_prefixes", {{"pool", c.pool}}, static_cast<double>(c.tracked_prefixes));
  }
  return w.take();
}

std::string warmup_status_json(const std::vector<const PoolWarmup*>& pools) {
  json::array out;
  for (const PoolWarmup* p : pools) {
    const Nanos now = p->pool().clock().now();
    WarmupStatus s = p->status();
    json::array runs;
    for (const WarmupRecord& r : s.runs) {
      const Nanos end = r.ended >= 0 ? r.ended : now;
      runs.push_back(json::object{{"url", r.url},
                                  {"endpoint_id", r.endpoint},
                                  {"state", r.state},
                                  {"running", r.ended < 0},
                                  {"age_s", to_seconds(now - r.started)},
                                  {"duration_s", to_seconds(end - r.started)},
                                  {"planned", r.stats.planned},
                                  {"sent", r.stats.sent},
                                  {"succeeded", r.stats.succeeded},
                                  {"failed", r.stats.failed},
                                  {"tokens_warmed", r.stats.tokens_warmed},
                                  {"tokens_cached", r.stats.tokens_cached},
                                  {"timed_out", r.stats.timed_out}});
    }
    out.push_back(
        json::object{{"pool", s.pool},
                     {"enabled", s.config.enabled},
                     {"config", json::object{{"prefixes", s.config.prefixes},
                                             {"budget_ms", s.config.budget / kMillisecond},
                                             {"concurrency", s.config.concurrency}}},
                     {"tracked_prefixes", s.tracked_prefixes},
                     {"stored_tokens", s.stored_tokens},
                     {"runs", std::move(runs)}});
  }
  return json::serialize(json::object{{"pools", std::move(out)}});
}

}  // namespace kvgate::gateway
