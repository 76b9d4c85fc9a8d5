// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include <algorithm>
#include <cmath>

#include "gateway/gateway_impl.h"

namespace kvgate::gateway {

namespace {

// An awaitable for a request already answered (nothing to proxy).
asio::awaitable<void> answered() { co_return; }

}  // namespace

void Gateway::Impl::stop_all() {
  if (stopped.exchange(true)) return;
  for (auto& a : autoscalers) a->stop();  // while the I/O threads still serve the strands
  for (auto& d : discoveries) d->stop();
  if (cluster) cluster->stop();
  if (admin) admin->stop();
  for (auto& s : servers) s->stop(std::chrono::milliseconds(0));
  work.reset();
  io.stop();
  for (auto& t : threads) {
    if (t.joinable()) t.join();
  }
  upstream->close_idle();  // no thread runs the context now (see the hint in Impl())
  limiter.reset();         // its Redis connection's socket before the context goes
}

Gateway::Gateway(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Gateway::~Gateway() { impl_->stop_all(); }

namespace {

boost::json::object latency_json(const scale::LatencySummary& l) {
  return {{"p50", l.p50}, {"p90", l.p90}, {"p99", l.p99}, {"mean", l.mean}, {"samples", l.samples}};
}

// The replicas' last hour: {"step_s":10,"desired":[..],"current":[..],"ready":[..],
// "starting":[..],"draining":[..]}, oldest first, null for a step without a decision.
boost::json::object history_json(const AutoscaleLoop::History& h) {
  auto series = [](const std::vector<std::optional<double>>& v) {
    boost::json::array a;
    a.reserve(v.size());
    for (const std::optional<double>& x : v) {
      if (x) {
        a.emplace_back(static_cast<int64_t>(*x));
      } else {
        a.emplace_back(nullptr);
      }
    }
    return a;
  };
  return {{"step_s", h.step / kSecond},     {"desired", series(h.desired)},
          {"current", series(h.current)},   {"ready", series(h.ready)},
          {"starting", series(h.starting)}, {"draining", series(h.draining)}};
}

// {"store":"memory|redis","store_failed":..,"tenants":[{"tenant":..,"rules":[{"rule":..,
// "measure":..,"model":..|null,"limit":..,"used":..,"window_s":..}]}]}: the tenants nearest
// a limit first (the highest used/limit of their rules).
boost::json::object tenants_json(TenantLimiter::Usage& u, bool redis) {
  auto fullest = [](const TenantLimiter::TenantUsage& t) {
    double f = 0;
    for (const TenantLimiter::RuleUsage& r : t.rules) {
      if (r.limit > 0) f = std::max(f, r.used / r.limit);
    }
    return f;
  };
  std::stable_sort(u.tenants.begin(), u.tenants.end(),
                   [&](const auto& a, const auto& b) { return fullest(a) > fullest(b); });
  boost::json::array tenants;
  for (const TenantLimiter::TenantUsage& t : u.tenants) {
    boost::json::array rules;
    for (const TenantLimiter::RuleUsage& r : t.rules) {
      rules.push_back(boost::json::object{
          {"rule", r.rule},
          {"measure", std::string(limit::to_string(r.measure))},
          {"model", r.model.empty() ? boost::json::value(nullptr) : boost::json::value(r.model)},
          {"limit", static_cast<int64_t>(std::llround(r.limit))},
          {"used", std::round(r.used * 10) / 10},
          {"window_s", r.window / kSecond}});
    }
    tenants.push_back(boost::json::object{{"tenant", t.tenant}, {"rules", std::move(rules)}});
  }
  return {{"store", redis ? "redis" : "memory"},
          {"store_failed", u.store_failed},
          {"tenants", std::move(tenants)}};
}

}  // namespace

// GET /admin/warmup (every pool's warm-up state) and /admin/pools/{pool}/autoscaler (the
// latest decision, the signals it was made on, and the replicas' last hour).
void register_admin_sections(Gateway::Impl& impl) {
  Gateway::Impl* self = &impl;
  impl.admin->add_section(
      "warmup", [self] { return boost::json::parse(warmup_status_json(self->all_warmups())); });
  impl.admin->add_pool_section("discovery",
                               [self](std::string_view pool) -> std::optional<boost::json::value> {
                                 for (const auto& d : self->discoveries) {
                                   if (d->pool_name() == pool) return d->state_json();
                                 }
                                 return std::nullopt;
                               });
  impl.admin->add_pool_section("queue",
                               [self](std::string_view pool) -> std::optional<boost::json::value> {
                                 PoolRuntime* p = self->pool_named(pool);
                                 if (!p || !p->flow()) return std::nullopt;
                                 return boost::json::parse(p->flow()->queue_view());
                               });
  if (impl.keys) {
    impl.admin->add_async_section("tenants", [self]() -> asio::awaitable<boost::json::value> {
      TenantLimiter::Usage u =
          co_await self->limiter->usage_async(self->keys->tenants(), self->clock.wall_now());
      co_return tenants_json(u, self->limiter->shared_store());
    });
  }
  if (impl.cluster) {
    impl.admin->add_section("cluster",
                            [self] { return boost::json::parse(self->cluster->status_json()); });
  }
  impl.admin->add_pool_section(
      "autoscaler", [self](std::string_view pool) -> std::optional<boost::json::value> {
        for (const auto& a : self->autoscalers) {
          if (a->pool_name() != pool) continue;
          const AutoscaleLoop::State st = a->state();
          const scale::Decision& d = st.decision;
          const scale::PoolSignals& sig = st.signals;
          boost::json::object inputs;
          if (d.inputs) {
            for (const scale::NamedInput& in : scale::named_inputs(*d.inputs))
              inputs[in.name] = in.value;
          }
          return boost::json::object{
              {"inputs", std::move(inputs)},
              {"standby", d.standby},
              {"decisions", st.decisions},
              {"desired_replicas", st.leader_desired.value_or(d.desired_replicas)},
              {"own_desired_replicas", d.desired_replicas},
              {"acted", st.acted},
              {"current_replicas", d.current_replicas},
              {"needed", d.needed},
              {"demand", d.demand},
              {"min_replicas", d.min_replicas},
              {"max_replicas", d.max_replicas},
              {"panic", d.panic},
              {"limited_by", d.limited_by},
              {"reason", d.reason},
              {"horizon_s", static_cast<double>(d.horizon) / kSecond},
              {"signals",
               boost::json::object{{"waiting", sig.waiting},
                                   {"running", sig.running},
                                   {"kv_usage", sig.kv_usage},
                                   {"prompt_tokens_per_s", sig.prompt_tokens_per_s},
                                   {"generation_tokens_per_s", sig.generation_tokens_per_s},
                                   {"ttft", latency_json(sig.ttft)},
                                   {"itl", latency_json(sig.itl)},
                                   {"ready", sig.ready()},
                                   {"starting", sig.starting()}}},
              {"history", history_json(a->history())}};
        }
        return std::nullopt;
      });
}

Result<std::unique_ptr<Gateway>> Gateway::start(GatewayConfig config, GatewayOptions options) {
  const Clock& clock = options.clock ? *options.clock : env::system_clock();
  auto impl = std::make_unique<Impl>(config.threads, clock);
  impl->config = std::move(config);
  const GatewayConfig& c = impl->config;
  if (!c.keys_file.empty()) {
    auto keys = KeyStore::load(c.keys_file);
    if (!keys) return Error(keys.error());
    impl->keys = std::move(*keys);
  }
  // Redis calls on one strand (the context itself when it has one thread).
  impl->limiter = std::make_unique<TenantLimiter>(
      c.rate_limits,
      c.threads == 1 ? asio::any_io_executor(impl->io.get_executor())
                     : asio::any_io_executor(asio::make_strand(impl->io)),
      [m = &impl->metrics] { m->rate_limit_store_failure(); }, clock);
  if (c.tracing) impl->tracer = std::make_unique<Tracer>(*c.tracing, clock);
  impl->upstream = std::make_unique<io::UpstreamClient>(
      impl->io.get_executor(), io::UpstreamOptions{.connect_timeout = c.timeouts.connect,
                                                   .head_timeout = c.timeouts.upstream_header,
                                                   .lazy_idle_timers = true,
                                                   .single_threaded = c.threads == 1});
  // Full span batches are POSTed on the I/O context, as the gateway sends anything else
  // (tracer.h): no thread of the tracer's own in the steady state.
  if (impl->tracer) impl->tracer->export_on(impl->io.get_executor(), *impl->upstream);
  for (const PoolConfig& p : c.pools) {
    auto pool = PoolRuntime::create(p, c.breaker, impl->io.get_executor(), impl->metrics, clock,
                                    /*one_thread=*/c.threads == 1);
    if (!pool) return Error(pool.error());
    impl->pools.push_back(std::move(*pool));
  }
  for (auto& pool : impl->pools) {
    if (!pool->tokenize_plan().uses_engine()) continue;
    pool->set_engine_tokenizer(
        EngineTokenizer::create(*pool, *impl->upstream, impl->io.get_executor(), impl->metrics));
    spdlog::info("pool {}: {}; {}", pool->name(), pool->tokenize_plan().tokenizer,
                 pool->tokenize_plan().chat_template);
  }
  for (auto& pool : impl->pools) {
    std::string served = pool->name();
    for (const ModelConfig& m : c.models) {
      if (m.pool == pool->name()) {
        served = m.served_name;
        break;
      }
    }
    impl->warmups.push_back(
        PoolWarmup::create(*pool, std::move(served), *impl->upstream, impl->io.get_executor()));
  }
  for (auto& pool : impl->pools) {
    std::vector<LoraPlacer::Adapter> adapters;
    for (const ModelConfig& m : c.models) {
      if (!m.base.empty() && m.pool == pool->name()) {
        adapters.push_back(
            {.name = m.name, .source = m.adapter_source, .max_replicas = m.max_replicas});
      }
    }
    // Null unless the pool's lora_placement is on (and it has adapters).
    impl->lora_placers.push_back(LoraPlacer::create(*pool, std::move(adapters), *impl->upstream,
                                                    impl->metrics, impl->io.get_executor()));
  }
  // The request path asks them through its hooks (gateway/data/hooks.h), by pool index.
  for (size_t i = 0; i < impl->pools.size(); ++i) {
    impl->hooks.push_back(
        PoolHooks{.lora = impl->lora_placers[i].get(), .warmup = impl->warmups[i].get()});
  }
  for (auto& pool : impl->pools) {
    auto feed = LiveFeed::start(*pool, impl->metrics);
    if (!feed) return Error(feed.error());
    impl->feeds.push_back(std::move(*feed));
    // An endpoint that left takes its idle upstream connections with it.
    (void)pool->on_change([up = impl->upstream.get()](const EndpointChange& c) {
      if (c.kind == EndpointChange::Kind::kRemoved)
        up->close_idle(c.endpoint.host, c.endpoint.port);
    });
  }
  {
    boost::json::array data;
    for (const ModelConfig& m : c.models) {
      for (const std::string* name : [&] {
             std::vector<const std::string*> names{&m.name};
             for (const auto& a : m.aliases) names.push_back(&a);
             return names;
           }()) {
        boost::json::object card{{"id", *name},
                                 {"object", "model"},
                                 {"created", 0},
                                 {"owned_by", "kvgate"},
                                 {"root", m.served_name}};
        // An adapter names its base, as vLLM's model list does.
        if (!m.base.empty()) card["parent"] = m.base;
        data.push_back(std::move(card));
      }
    }
    impl->models_json =
        boost::json::serialize(boost::json::object{{"object", "list"}, {"data", std::move(data)}});
  }
  if (c.cluster) {
    std::vector<PoolRuntime*> pools;
    for (auto& p : impl->pools) pools.push_back(p.get());
    std::vector<PoolWarmup*> warmups;
    for (auto& w : impl->warmups) warmups.push_back(w.get());
    impl->cluster =
        ReplicaSync::start(*c.cluster, std::move(pools),
                           c.threads == 1 ? asio::any_io_executor(impl->io.get_executor())
                                          : asio::any_io_executor(asio::make_strand(impl->io)),
                           clock, std::move(warmups));
  }
  impl->work.emplace(impl->io.get_executor());
  for (int i = 0; i < c.threads; ++i) {
    impl->threads.emplace_back([io = &impl->io] { io->run(); });
  }
  Impl* self = impl.get();
  for (const ListenerConfig& l : c.listeners) {
    io::HttpServerOptions opts;
    opts.address = l.address;
    opts.port = l.port;
    opts.threads = c.threads;
    opts.max_header_bytes = c.limits.max_header_bytes;
    opts.max_body_bytes = c.limits.max_body_bytes;
    opts.idle_timeout = std::min(c.timeouts.header, c.timeouts.idle);
    opts.handshake_timeout = c.timeouts.header;
    // The listeners' own refusals (a bad head, 413, 431) in vLLM's words, as an engine's.
    opts.error_json = openai::vllm_error_json;
    if (l.tls) {
      opts.tls_cert_file = l.tls->cert_file;
      opts.tls_key_file = l.tls->key_file;
    }
    // The servers run on the gateway's own threads: no hop between the client's side
    // and the upstream's side of a request.
    opts.io_context = &impl->io;
    opts.single_threaded = c.threads == 1;  // streams are used on that thread only
    // Draining: shortly before the grace ends, a request whose response has not begun
    // (queued, on its way to an engine, or waiting for its first byte) is answered 503
    // shutting_down and its upstream exchange cancelled (the stream's on_close).
    opts.drain_answer = shutting_down_response();
    if (impl->keys) {
      opts.early_refusal = [self](const HttpRequest& head) {
        return self->refuse_before_body(head);
      };
    }
    // The proxy runs inside the connection's coroutine (no hand-off for a whole answer).
    io::AwaitableHttpHandler handler = [self](HttpRequest&& req,
                                              std::shared_ptr<ResponseStream> stream) {
      std::optional<ProxyCall> call;
      self->handle(std::move(req), std::move(stream), call);
      if (call && call->pool->flow()) {
        // A request that may wait in the queue runs apart from its connection, which
        // then watches for the client going away (the queue drops it at once). With more
        // than one thread it runs on a strand of its own: the connection's close callback
        // (another strand) cancels its upstream exchange through it, never beside it.
        if (self->config.threads == 1) {
          asio::co_spawn(self->io.get_executor(), self->proxy(std::move(*call)), asio::detached);
        } else {
          asio::co_spawn(asio::make_strand(self->io), self->proxy(std::move(*call)),
                         asio::detached);
        }
        return answered();
      }
      return call ? self->proxy(std::move(*call)) : answered();
    };
    auto server = io::HttpServer::start(opts, std::move(handler));
    if (!server) {
      impl->stop_all();
      return Error(fmt::format("listener {}:{}: {}", l.address, l.port, server.error()));
    }
    impl->servers.push_back(std::move(*server));
  }
  if (c.admin) {
    std::vector<AdminApi::PoolHandle> handles;
    for (size_t i = 0; i < impl->pools.size(); ++i) {
      AdminApi::PoolHandle h{.pool = impl->pools[i].get(), .feed = impl->feeds[i].get()};
      for (const ModelConfig& m : c.models) {
        if (!m.base.empty() && m.pool == impl->pools[i]->name()) h.adapters.push_back(m);
      }
      handles.push_back(std::move(h));
    }
    auto admin = AdminApi::start(*c.admin, impl->io.get_executor(), std::move(handles), clock);
    if (!admin) {
      impl->stop_all();
      return Error(admin.error());
    }
    impl->admin = std::move(*admin);
  }
  for (auto& pool : impl->pools) {
    if (!pool->config().autoscale) continue;
    std::vector<std::string> models;
    for (const ModelConfig& m : c.models) {
      if (m.pool == pool->name()) models.push_back(m.name);
    }
    // Several replicas: only the pool's leader actuates (gateway/sync/replica_sync.h).
    auto autoscaler = AutoscaleLoop::start(
        *pool, std::move(models), impl->metrics,
        impl->cluster ? impl->cluster->leader_link(pool->name()) : LeaderLink());
    if (!autoscaler) {
      impl->stop_all();
      return Error(autoscaler.error());
    }
    impl->autoscalers.push_back(std::move(*autoscaler));
  }
  for (auto& pool : impl->pools) {
    if (!pool->config().discovery) continue;
    auto d = PoolDiscovery::start(*pool, *pool->config().discovery, impl->io.get_executor());
    if (!d) {
      impl->stop_all();
      return Error(d.error());
    }
    impl->discoveries.push_back(std::move(*d));
  }
  if (impl->admin) register_admin_sections(*impl);
  return std::unique_ptr<Gateway>(new Gateway(std::move(impl)));
}

std::vector<uint16_t> Gateway::ports() const {
  std::vector<uint16_t> out;
  for (const auto& s : impl_->servers) out.push_back(s->port());
  return out;
}

void Gateway::drain() {
  if (impl_->not_ready.exchange(true)) return;
  // /ready says 503 while requests are still served, so load balancers and Kubernetes
  // endpoints stop sending new connections before the listeners close.
  if (const auto announce = impl_->config.timeouts.drain_announce; announce.count() > 0) {
    spdlog::info("draining: /ready answers 503; serving {} ms more before closing listeners",
                 announce.count());
    std::this_thread::sleep_for(announce);
  }
  impl_->draining = true;
  // Queued requests may still be served during the drain; those left are answered 503
  // shortly before the grace time ends (flow_glue.h), then every request whose response
  // has not begun (the listeners' drain_answer); streams go on to the end of the grace
  // (core/common/drain.h).
  auto refuse =
      refuse_queued_before(impl_->io, impl_->clock, impl_->config.timeouts.drain, pools());
  spdlog::info("draining: waiting up to {} ms for {} stream(s)",
               impl_->config.timeouts.drain.count(), impl_->metrics.active_streams());
  // Each server stops accepting at once and gives its responses in flight the grace time.
  std::vector<std::thread> stoppers;
  for (auto& s : impl_->servers) {
    stoppers.emplace_back([&s, grace = impl_->config.timeouts.drain] { s->stop(grace); });
  }
  for (auto& t : stoppers) t.join();
  impl_->stop_all();
}

bool Gateway::draining() const { return impl_->not_ready.load(); }

std::optional<std::string_view> Gateway::unready(bool discovered) const {
  return impl_->unready(discovered);
}

GatewayMetrics& Gateway::metrics() { return impl_->metrics; }

std::vector<PoolRuntime*> Gateway::pools() {
  std::vector<PoolRuntime*> out;
  for (auto& p : impl_->pools) out.push_back(p.get());
  return out;
}

PoolRuntime* Gateway::pool(std::string_view name) { return impl_->pool_named(name); }

AdminApi* Gateway::admin() { return impl_->admin.get(); }

std::optional<uint16_t> Gateway::admin_port() const {
  if (!impl_->admin) return std::nullopt;
  return impl_->admin->port();
}

std::function<void()> Gateway::pick_external(ExternalRequest request,
                                             std::function<void(ExternalPick)> done) {
  return impl_->pick_external(std::move(request), std::move(done));
}

void Gateway::external_done(ExternalPick pick, ExternalOutcome outcome) {
  impl_->external_done(std::move(pick), std::move(outcome));
}

std::string Gateway::warmup_status_json() const {
  return ::kvgate::gateway::warmup_status_json(impl_->all_warmups());
}

}  // namespace kvgate::gateway
