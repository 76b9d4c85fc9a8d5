#include "gateway/data/pool_flow.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/json.hpp>

#include "core/metrics/prometheus_text.h"
#include "gateway/data/pool_routing.h"

namespace kvgate::gateway {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

// Seconds a request may wait: scale-from-zero waits are minutes, interactive ones less.
std::vector<double> wait_buckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};
}

std::string band_name(route::Criticality c) { return std::string(route::to_string(c)); }

constexpr size_t kViewHead = 32;  // head entries in the admin view
constexpr Nanos kViewEvery = 50 * kMillisecond;

}  // namespace

PoolFlow::PoolFlow(route::Router& router, route::FlowQueueConfig config,
                   asio::any_io_executor strand, Rng& rng, const Clock& clock, std::string pool)
    : fc_(router, config),
      strand_(strand),
      rng_(rng),
      clock_(clock),
      pool_(std::move(pool)),
      timer_(strand, clock),
      view_timer_(strand, clock),
      alive_(std::make_shared<bool>(true)) {
  for (route::Criticality c : {route::Criticality::kCritical, route::Criticality::kStandard,
                               route::Criticality::kSheddable}) {
    wait_.emplace(band_name(c), metrics::Histogram(wait_buckets()));
  }
  view_ = queue_json(kViewHead, 0);
}

PoolFlow::~PoolFlow() { *alive_ = false; }

void PoolFlow::count_queued(route::Criticality band, std::string_view tenant, int64_t n,
                            int64_t tokens) {
  std::lock_guard lock(mu_);
  Counts& c = counts_[{band_name(band), std::string(tenant)}];
  c.queued += n;
  c.queued_tokens += tokens;
}

void PoolFlow::admit(const route::RouteRequest& request, const FlowTicket& ticket, Nanos now,
                     Deliver deliver) {
  out_.clear();
  route::FlowOutcome o = fc_.admit({.request = &request,
                                    .tenant = ticket.tenant,
                                    .weight = ticket.weight,
                                    .deadline = ticket.deadline},
                                   now, rng_, out_);
  // Outcomes of others first (evictions to make room, dispatches): their completions
  // post, they do not run anything here that could re-enter the queue.
  std::vector<route::FlowOutcome> others;
  others.swap(out_);
  if (o.kind == route::FlowOutcome::Kind::kQueued && stopping_) {
    // After refuse_all (the drain's cut-off): what would wait is refused at once, as
    // what waited was (a request that passed the front door just before the drain).
    (void)fc_.cancel(request.id);
    o.kind = route::FlowOutcome::Kind::kRefused;
    o.decision.reason = route::RejectReason::kNoHealthyEndpoints;  // 503
    {
      std::lock_guard lock(mu_);
      ++refused_[{band_name(request.criticality), std::string(ticket.tenant), "shutting_down"}];
    }
    deliver(o, End::kStopping);
  } else if (o.kind == route::FlowOutcome::Kind::kQueued) {
    const uint64_t tokens = uint64_t{request.prompt_tokens} +
                            fc_.queue().output_tokens_charged(request.expected_output_tokens);
    waiting_.emplace(request.id, Waiting{std::move(deliver), request.criticality,
                                         std::string(o.tenant), tokens});
    queued_.store(fc_.queue().size(), std::memory_order_relaxed);
    count_queued(request.criticality, o.tenant, 1, static_cast<int64_t>(tokens));
  } else {
    if (o.kind == route::FlowOutcome::Kind::kRefused) {
      std::lock_guard lock(mu_);
      const std::string reason(o.refusal != route::FlowRefusal::kNone
                                   ? route::to_string(o.refusal)
                                   : route::to_string(o.decision.reason));
      ++refused_[{band_name(o.band), std::string(o.tenant), reason}];
    } else {
      std::lock_guard lock(mu_);
      ++counts_[{band_name(o.band), std::string(o.tenant)}].dispatched;
      wait_.at(band_name(o.band)).observe(0);
    }
    deliver(o, End::kOutcome);
  }
  for (const route::FlowOutcome& x : others) settle(x, now, /*evicted=*/true);
  arm_timer(now);
  refresh_view(now);
}

void PoolFlow::settle(const route::FlowOutcome& o, Nanos now, bool evicted) {
  (void)now;
  auto it = waiting_.find(o.id);
  if (it == waiting_.end()) return;
  Waiting w = std::move(it->second);
  waiting_.erase(it);
  queued_.store(fc_.queue().size(), std::memory_order_relaxed);
  {
    std::lock_guard lock(mu_);
    Counts& c = counts_[{band_name(w.band), w.tenant}];
    c.queued -= 1;
    c.queued_tokens -= static_cast<int64_t>(w.tokens);
    if (o.kind == route::FlowOutcome::Kind::kDispatched) {
      ++c.dispatched;
      wait_.at(band_name(w.band)).observe(to_seconds(o.waited));
    } else if (o.refusal == route::FlowRefusal::kQueueTimeout) {
      ++c.timed_out;
    } else if (evicted && o.refusal == route::FlowRefusal::kQueueFull) {
      ++c.evicted;
    } else {
      const std::string reason(o.refusal != route::FlowRefusal::kNone
                                   ? route::to_string(o.refusal)
                                   : route::to_string(o.decision.reason));
      ++refused_[{band_name(w.band), w.tenant, reason}];
    }
  }
  w.deliver(o, End::kOutcome);
}

void PoolFlow::pump(Nanos now) {
  if (fc_.queue().empty()) return;
  out_.clear();
  fc_.expire(now, out_);
  fc_.dispatch(now, rng_, out_);
  std::vector<route::FlowOutcome> done;
  done.swap(out_);
  for (const route::FlowOutcome& o : done) settle(o, now, false);
  arm_timer(now);
  refresh_view(now);
}

void PoolFlow::refresh_view(Nanos now) {
  if (view_at_ >= 0 && now - view_at_ < kViewEvery) {
    if (!view_timer_armed_) {
      view_timer_armed_ = true;
      view_timer_.expires_after(kViewEvery);
      view_timer_.async_wait([this, alive = alive_](const boost::system::error_code& ec) {
        if (ec || !*alive) return;
        view_timer_armed_ = false;
        view_at_ = -1;
        refresh_view(clock_.now());
      });
    }
    return;
  }
  view_at_ = now;
  std::string text = queue_json(kViewHead, now);
  std::lock_guard lock(mu_);
  view_ = std::move(text);
}

std::string PoolFlow::queue_view() const {
  std::lock_guard lock(mu_);
  return view_;
}

bool PoolFlow::cancel(route::RequestId id) {
  if (!fc_.cancel(id)) return false;
  auto it = waiting_.find(id);
  queued_.store(fc_.queue().size(), std::memory_order_relaxed);
  if (it == waiting_.end()) return true;
  Waiting w = std::move(it->second);
  waiting_.erase(it);
  {
    std::lock_guard lock(mu_);
    Counts& c = counts_[{band_name(w.band), w.tenant}];
    c.queued -= 1;
    c.queued_tokens -= static_cast<int64_t>(w.tokens);
    ++c.cancelled;
  }
  route::FlowOutcome o;
  o.kind = route::FlowOutcome::Kind::kRefused;
  o.id = id;
  o.band = w.band;
  w.deliver(o, End::kClientGone);
  refresh_view(clock_.now());
  return true;
}

void PoolFlow::refuse_all(Nanos now) {
  stopping_ = true;
  std::vector<route::RequestId> ids;
  for (const auto& [id, w] : waiting_) ids.push_back(id);
  for (route::RequestId id : ids) {
    auto it = waiting_.find(id);
    if (it == waiting_.end()) continue;
    Waiting w = std::move(it->second);
    waiting_.erase(it);
    (void)fc_.cancel(id);
    route::FlowOutcome o;
    o.kind = route::FlowOutcome::Kind::kRefused;
    o.id = id;
    o.band = w.band;
    o.decision.reason = route::RejectReason::kNoHealthyEndpoints;  // 503
    {
      std::lock_guard lock(mu_);
      Counts& c = counts_[{band_name(w.band), w.tenant}];
      c.queued -= 1;
      c.queued_tokens -= static_cast<int64_t>(w.tokens);
      ++refused_[{band_name(w.band), w.tenant, "shutting_down"}];
    }
    w.deliver(o, End::kStopping);
  }
  queued_.store(fc_.queue().size(), std::memory_order_relaxed);
  timer_.cancel();
  timer_at_ = 0;
  view_at_ = -1;
  refresh_view(now);
}

void PoolFlow::arm_timer(Nanos now) {
  // The queue's next expiry, or sooner the time room sharing may release more (a release
  // held back for the share while the pool had room: nothing else may wake the queue).
  std::optional<Nanos> at = fc_.queue().next_expiry();
  if (const std::optional<Nanos> retry = fc_.room_retry_at(); retry && !fc_.queue().empty()) {
    at = at ? std::min(*at, *retry) : *retry;
  }
  if (!at) return;
  if (timer_at_ != 0 && timer_at_ <= *at) return;  // an earlier wake-up is already set
  timer_at_ = *at;
  timer_.expires_after(std::max<Nanos>(*at - now, 0) + kMillisecond);
  timer_.async_wait([this, alive = alive_](const boost::system::error_code& ec) {
    if (ec || !*alive) return;
    timer_at_ = 0;
    pump(clock_.now());
  });
}

std::string PoolFlow::queue_json(size_t limit, Nanos now) const {
  const route::FlowQueue& q = fc_.queue();
  json::object o;
  o["pool"] = pool_;
  o["enabled"] = q.config().enabled;
  o["queued"] = q.size();
  o["queued_tokens"] = q.queued_tokens();
  json::object bands;
  for (route::Criticality c : {route::Criticality::kCritical, route::Criticality::kStandard,
                               route::Criticality::kSheddable}) {
    bands[route::to_string(c)] =
        json::object{{"queued", q.band_size(c)}, {"queued_tokens", q.band_tokens(c)}};
  }
  o["bands"] = std::move(bands);
  json::array head;
  for (const route::FlowQueue::HeadView& h : q.head(limit)) {
    head.push_back(json::object{{"band", route::to_string(h.band)},
                                {"tenant", h.tenant},
                                {"request_id", h.id},
                                {"waited_s", to_seconds(now - h.enqueued_at)},
                                {"counter", h.counter}});
  }
  o["head"] = std::move(head);
  json::array tenants;
  for (const route::FlowTenantStats& t : q.tenants()) {
    tenants.push_back(json::object{{"tenant", t.name},
                                   {"weight", t.weight},
                                   {"counter", t.counter},
                                   {"queued", json::object{{"critical", t.queued[0]},
                                                           {"standard", t.queued[1]},
                                                           {"sheddable", t.queued[2]}}},
                                   {"queued_tokens", t.queued_tokens},
                                   {"dispatched", t.dispatched},
                                   {"evicted", t.evicted},
                                   {"timed_out", t.timed_out},
                                   {"deadline_missed", t.deadline_missed},
                                   {"served_tokens", t.served_tokens},
                                   {"peer_service", t.peer_service}});
  }
  o["tenants"] = std::move(tenants);
  return json::serialize(o);
}

PoolFlow::Snapshot PoolFlow::snapshot() const {
  Snapshot s;
  s.pool = pool_;
  std::lock_guard lock(mu_);
  s.counts = counts_;
  s.refused = refused_;
  for (const auto& [band, h] : wait_) s.wait.emplace(band, h.snapshot());
  return s;
}

std::string render_flow_metrics(const std::vector<const PoolFlow*>& flows) {
  std::vector<PoolFlow::Snapshot> snaps;
  for (const PoolFlow* f : flows) {
    if (f) snaps.push_back(f->snapshot());
  }
  if (snaps.empty()) return {};
  metrics::PrometheusWriter w;
  auto family = [&](const char* name, const char* help, const char* type, auto value) {
    w.header(name, help, type);
    for (const PoolFlow::Snapshot& s : snaps) {
      for (const auto& [key, c] : s.counts) {
        w.sample(name, {{"pool", s.pool}, {"band", std::get<0>(key)}, {"tenant", std::get<1>(key)}},
                 static_cast<double>(value(c)));
      }
    }
  };
  using C = PoolFlow::Counts;
  family("kvgate_flow_queued_requests", "Requests waiting in the pool's flow-control queue.",
         "gauge", [](const C& c) { return c.queued; });
  family("kvgate_flow_queued_tokens",
         "Prompt + expected output tokens of the requests waiting in the queue.", "gauge",
         [](const C& c) { return c.queued_tokens; });
  family("kvgate_flow_dispatched_total", "Requests routed by flow control (at once or queued).",
         "counter", [](const C& c) { return c.dispatched; });
  family("kvgate_flow_evicted_total", "Queued requests evicted to make room for a higher band.",
         "counter", [](const C& c) { return c.evicted; });
  family("kvgate_flow_timed_out_total", "Queued requests that waited their band's max_wait.",
         "counter", [](const C& c) { return c.timed_out; });
  family("kvgate_flow_cancelled_total", "Queued requests whose client went away.", "counter",
         [](const C& c) { return c.cancelled; });
  w.header("kvgate_flow_refused_total", "Requests refused by flow control, by reason.", "counter");
  for (const PoolFlow::Snapshot& s : snaps) {
    for (const auto& [key, n] : s.refused) {
      w.sample("kvgate_flow_refused_total",
               {{"pool", s.pool},
                {"band", std::get<0>(key)},
                {"tenant", std::get<1>(key)},
                {"reason", std::get<2>(key)}},
               static_cast<double>(n));
    }
  }
  w.header("kvgate_flow_wait_seconds", "Time dispatched requests waited in the queue.",
           "histogram");
  for (const PoolFlow::Snapshot& s : snaps) {
    for (const auto& [band, h] : s.wait) {
      w.histogram_series("kvgate_flow_wait_seconds", {{"pool", s.pool}, {"band", band}}, h);
    }
  }
  return w.take();
}

}  // namespace kvgate::gateway
