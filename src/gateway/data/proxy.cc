// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include <algorithm>
#include <cstdint>

#include "core/route/failover.h"
#include "gateway/data/data_plane.h"
#include "gateway/data/rank_header.h"
#include "io/text_pieces.h"

namespace kvgate::gateway {

namespace {

// A client this far behind on a stream makes the proxy wait for it (backpressure
// towards the engine) instead of queueing more.
constexpr size_t kMaxPendingBytes = 64 * 1024;

// Writes `chunk` and resumes once it is on the socket (or the stream closed).
asio::awaitable<void> write_and_wait(ResponseStream& stream, std::string chunk) {
  co_await asio::async_initiate<decltype(asio::use_awaitable), void()>(
      [&stream, chunk = std::move(chunk)](auto handler) mutable {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        stream.write(std::move(chunk), [h]() {
          auto ex = asio::get_associated_executor(*h);
          asio::post(ex, std::move(*h));
        });
      },
      asio::use_awaitable);
}

// `up`'s exchange cancelled as soon as the client leaves (on `here`, the request's
// executor): the stream watches the client, and its close callback cancels.
std::shared_ptr<io::UpstreamCancel> cancel_when_client_leaves(ResponseStream& stream,
                                                              io::UpstreamRequest& up,
                                                              const asio::any_io_executor& here) {
  auto cancel = std::make_shared<io::UpstreamCancel>();
  up.cancel = cancel.get();
  stream.on_close([here, cancel] { asio::dispatch(here, [cancel] { cancel->cancel(); }); });
  stream.watch_client();
  return cancel;
}

// The 429 of a request its tenant's limits (or a failed store, fail-closed) refused.
HttpResponse rate_limited_response(const limit::LimitDecision& d, std::string_view tenant) {
  std::string message =
      d.store_error
          ? "Rate limit store unavailable; request refused (fail-closed)"
          : fmt::format("Rate limit reached for {} on {}: used {:.0f} of {:.0f} per minute", tenant,
                        d.rule, d.used, d.limit);
  HttpResponse r = json_error(429, message, {}, "rate_limit_exceeded");
  r.headers.push_back({"Retry-After", std::to_string(d.retry_after_seconds())});
  r.headers.push_back({"x-kvgate-reject-reason", d.store_error ? "store" : "rate_limited"});
  r.headers.push_back({"x-kvgate-rate-limit-rule", d.rule});
  return r;
}

// The status of a request whose client left before its answer: nginx's "client closed
// request"; or the drain's 503, answered by the listener (io::HttpServerOptions::drain_answer),
// which cancelled the exchange.
int client_left_status(const ResponseStream& stream) { return stream.preempted() ? 503 : 499; }

}  // namespace

HttpResponse DataPlane::not_routed(const PoolRuntime& pool, const route::Decision& decision) {
  const int status = route::http_status(decision.reason);
  std::string reason(route::to_string(decision.reason));
  HttpResponse r = json_error(status, fmt::format("Request not routed: {}", reason), {}, reason);
  r.headers.push_back({"x-kvgate-reject-reason", reason});
  if (decision.reason == route::RejectReason::kSloUnattainable) {
    metrics.slo_outcome(pool.name(), "rejected");
  }
  return r;
}

void DataPlane::trace_pick(RequestTrace& t, const ProxyCall& call, const EndpointAddress& endpoint,
                           const Pick& pick) {
  const route::Decision& d = pick.decision;
  t.set_routing(endpoint.url,
                {.route_us = static_cast<int64_t>(call.routing_seconds.value_or(0) * 1e6 + 0.5),
                 .matched_blocks = static_cast<int64_t>(d.matched_blocks),
                 .cached_blocks = static_cast<int64_t>(d.cached_blocks),
                 .prompt_blocks = static_cast<int64_t>(d.prompt_blocks),
                 .prefill_tokens = static_cast<int64_t>(d.prefill_tokens),
                 .cost = d.cost,
                 .queued_us = static_cast<int64_t>(pick.queued / kMicrosecond),
                 .disaggregated = d.prefill_endpoint.has_value()});
}

route::RouteRequest DataPlane::route_request_for(const ProxyCall& call, std::string_view adapter,
                                                 uint32_t prompt_tokens) {
  route::RouteRequest rr;
  rr.id = next_request_id.fetch_add(1);
  rr.prompt_tokens = prompt_tokens;
  // An embedding is a prefill: done at its first token (0 would mean "unknown length").
  rr.expected_output_tokens = call.serve == Serve::kEmbed ? 1 : call.request.max_tokens;
  rr.criticality = call.criticality;
  rr.adapter = adapter;
  rr.session = call.session;
  rr.ttft_target = call.ttft_target;
  rr.tpot_target = call.tpot_target;
  // A Responses conversation goes back to the endpoint that holds it, while it can.
  if (call.translation && !call.translation->previous_response.empty()) {
    rr.preferred = call.pool->responses().find(call.translation->previous_response);
  }
  return rr;
}

asio::awaitable<void> DataPlane::proxy(ProxyCall call) {
  if (call.serve == Serve::kRelay) {
    co_await relay(std::move(call));
    co_return;
  }
  if (call.serve == Serve::kStored) {
    co_await fetch_stored(std::move(call));
    co_return;
  }
  if (call.limited_tenant) {
    // Suspends this request alone until the store answers (Redis: pipelined, bounded by
    // its timeout); other requests go on meanwhile.
    const TenantLimiter::Checked c =
        co_await limiter->check_async(*call.limited_tenant, call.model->name, clock.wall_now());
    if (!c.decision.allowed) {
      metrics.rate_limited(call.tenant, c.decision.rule);
      metrics.request_done(call.model->name, call.model->pool, call.tenant, 429,
                           seconds_since(call.received));
      HttpResponse r = rate_limited_response(c.decision, call.tenant);
      shape(call.dialect, r);
      call.stream->respond(std::move(r));
      co_return;
    }
  }
  metrics.request_started();
  PoolRuntime& pool = *call.pool;
  const std::string& model = call.model->name;
  int final_status = 0;
  // Metrics are recorded before the last byte goes out, so that a client that reads
  // /metrics right after its answer sees it counted.
  // A whole answer from the engine also brings its TTFT (the whole answer) and usage, and
  // when it ended (`done`, clock.now(); read here when not given).
  auto respond = [&](int status, HttpResponse r, bool answered = false,
                     const openai::Usage* u = nullptr, Nanos done = 0) {
    final_status = status;
    const double seconds = to_seconds(answered_at(call, status, done) - call.received);
    GatewayMetrics::Finished f{.model = model,
                               .pool = pool.name(),
                               .tenant = call.tenant,
                               .status = status,
                               .seconds = seconds,
                               .routing_seconds = call.routing_seconds};
    if (answered) f.ttft = seconds;
    if (u && u->seen && call.flow.charged_output_tokens > 0) {
      pool.flow_output(call.tenant, call.flow.charged_output_tokens, u->completion_tokens);
    }
    if (u && u->seen) {
      f.has_tokens = true;
      f.prompt_tokens = u->prompt_tokens;
      f.completion_tokens = u->completion_tokens;
      f.cached_tokens = u->cached_tokens;
    }
    metrics.request_finished(f);
    shape(call.dialect, r);
    call.stream->respond(std::move(r));
  };

  // LoRA placement: a request for an adapter counts as its demand, and waits (up to the
  // pool's lora_placement.max_wait_ms) while the adapter is loaded on no endpoint, rather
  // than going to an engine that would answer 404.
  AdapterPlacement* const placer = call.model->base.empty() ? nullptr : lora_of(&pool);
  if (placer) co_await placer->arrive(call.model->name);
  const Nanos route_start = clock.now();  // routing time: keys_for through the first pick
  std::string route_us;                   // x-kvgate-route-us
  std::vector<kv::BlockKey> keys;
  uint32_t prompt_tokens = 0;
  std::vector<uint32_t> token_ids;
  PromptObserver* warmup = warmup_of(&pool);
  const bool track = warmup && warmup->enabled();
  EngineTokenizer* fallback = pool.engine_tokenizer();
  std::optional<tokenizer::TokenizeCall> fetch_after_pick;  // a follow-up's whole ids
  const bool embed = call.serve == Serve::kEmbed;
  // A LoRA adapter's blocks are its own.
  const std::string_view adapter =
      call.model->base.empty() ? std::string_view() : std::string_view(call.model->name);
  // What the prompt is read from: the chat request a Messages request stands for.
  const bool translated = call.translation != nullptr;
  const std::string_view route_body = translated ? call.translation->route_body : call.body;
  if (embed) {
    // Routed by load: no blocks (an embedding reuses no prefix), its size for the load.
    prompt_tokens = pool.count_tokens(call.request.prompt_text) + call.request.given_tokens;
  } else if (fallback && fallback->covers(call.kind)) {
    // The engine fallback: the ids come from the pool's engines (at most its timeout).
    EngineTokenizer::Ids got = co_await fallback->ids_for(
        call.request, route_body, call.kind, call.model->served_name, call.trace.get());
    pool.keys_of(got.ids, keys, adapter, call.request.cache_salt);
    prompt_tokens = static_cast<uint32_t>(got.ids.size());
    if (track && got.exact) token_ids = std::move(got.ids);
    fetch_after_pick = std::move(got.later);
  } else {
    pool.keys_for(call.request, route_body, call.kind, adapter, keys, prompt_tokens,
                  track ? &token_ids : nullptr);
  }
  if (track && !embed && adapter.empty()) {  // warm-up replays base-model prompts only
    // A chat prompt without real tokens cannot be replayed as a completion: not tracked.
    warmup->observe(keys, token_ids,
                    call.kind == openai::ApiKind::kCompletion ? call.request.prompt_text : "");
  }
  route::RouteRequest rr = route_request_for(call, adapter, prompt_tokens);
  rr.keys = std::move(keys);
  // An external data plane's subset hint (external.h): the endpoints outside it are
  // excluded from the decision, the queue's included.
  std::vector<route::EndpointId> outside;
  if (call.external) [[unlikely]] {
    outside = outside_subset(*call.external, pool);
    rr.excluded = outside;
    rr.runners_up = external_fallbacks(*call.external);
  }

  io::UpstreamRequest up;
  up.method = "POST";
  up.target = std::move(call.target);
  up.fixed_headers = call.request.stream
                         ? "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
                         : "Content-Type: application/json\r\nAccept: application/json\r\n";
  up.body = std::move(call.body);
  // A client that leaves closes the upstream exchange at once (the engine then aborts the
  // request, as vLLM does on a disconnect) instead of keeping the engine busy to the end.
  const asio::any_io_executor here = co_await asio::this_coro::executor;
  auto cancel = cancel_when_client_leaves(*call.stream, up, here);
  // Stream migration (opt-in per pool): the engine is asked for the token ids.
  std::optional<MigratingStream> migration;
  if (call.request.stream && pool.config().max_migrations > 0 && !translated && !call.external) {
    migration = MigratingStream::start(up.body, call.kind);
    if (migration) up.body = migration->first_body();
  }

  std::vector<route::EndpointId> excluded;
  RouteLease lease;  // the router's load for the attempt in progress
  auto client_left = [&] {
    lease.finish(true);  // released as finished: the endpoint did nothing wrong
    final_status = finish_client_left(call);
  };
  std::unique_ptr<io::UpstreamExchange> exchange;
  std::shared_ptr<const EndpointAddress> endpoint;
  std::string prefill_url;  // disaggregated: the prefill endpoint of the decode hop below
  std::string last_error;   // set by a failed attempt (no allocation on the common path)
  // After a failed attempt the core's rule (route/failover.h) says whether another
  // endpoint may have the request: nothing of the answer had begun, so it retries while
  // the endpoints tried are fewer than retries.max_attempts.
  bool retry = true;
  auto may_retry = [this](int tried) {
    return route::after_failure(config.retries, /*max_migrations=*/0, /*began=*/false, tried,
                                /*migrations=*/0) == route::FailoverAction::kRetry;
  };
  for (int attempt = 0; retry && !exchange; ++attempt) {
    if (cancel->cancelled()) break;
    // At once on the pool's only thread; else on its strand.
    // (Not a conditional expression: GCC 12 mishandles co_await inside one.)
    // Flow control: the first attempt goes through the pool's queue (pool_flow.h).
    const bool queue = attempt == 0 && pool.flow() != nullptr;
    std::optional<Pick> now;
    if (queue) {
      // One close callback (a second would replace the first): leave the queue, cancel.
      auto* p = &pool;
      const route::RequestId id = rr.id;
      call.stream->on_close([p, id, here, cancel] {
        p->cancel_queued(id);
        asio::dispatch(here, [cancel] { cancel->cancel(); });
      });
      now = co_await pool.admit(
          rr, {.tenant = call.tenant, .weight = call.flow.weight, .deadline = call.flow.deadline});
    } else {
      now = pool.pick_now(rr, excluded, attempt == 0 ? route_start : clock.now());
    }
    if (!now) now = co_await pool.pick(rr, excluded);
    Pick& pick = *now;
    if (pick.flow_status != 0) {
      HttpResponse r = flow_refusal_response(pick, pool.flow()->config());
      // Left the queue because the listener answered it (draining): that answer's 503.
      const int status =
          pick.flow_status == 499 ? client_left_status(*call.stream) : pick.flow_status;
      respond(status, std::move(r));
      break;
    }
    if (queue) call.flow.charged_output_tokens = pick.charged_output_tokens;
    Nanos picked = 0;  // the first pick's end: its hop starts there (read anyway)
    if (attempt == 0) {
      picked = clock.now();
      const Nanos took = picked - route_start;
      call.routing_seconds = to_seconds(took);
      route_us = std::to_string((took + 500) / 1000);
      // Only now, so that the follow-up's own routing never waits behind it.
      if (fetch_after_pick) fallback->fetch_later(std::move(*fetch_after_pick));
    }
    if (!pick.decision.accepted()) {
      if (attempt > 0) break;  // retries exhausted the healthy endpoints: 502 below
      HttpResponse r = not_routed(pool, pick.decision);
      const int status = r.status;
      respond(status, std::move(r));
      break;
    }
    lease = RouteLease(pool, rr.id, pools_alive);
    endpoint = std::move(pick.endpoint);
    if (call.trace && attempt == 0) [[unlikely]] {
      // The routing decision, on the server span (the first pick: retries are hop spans).
      trace_pick(*call.trace, call, *endpoint, pick);
    }
    if (placer) placer->routed(endpoint->id, call.model->name);
    if (call.external) [[unlikely]] {
      // The external data plane sends it (external.h): the pick and its lease go back.
      hand_off_external(call, std::move(lease), std::move(endpoint), std::move(up.body),
                        pick.decision);
      co_return;
    }
    if (attempt > 0) metrics.retry(pool.name());
    // Disaggregated: the prefill hop first; `endpoint` is then the decode endpoint.
    std::optional<io::UpstreamRequest> decode_up;
    prefill_url.clear();
    if (pick.decision.prefill_endpoint) {
      PrefillHopContext ctx{*upstream,     pool,  metrics, config.timeouts,
                            pick.decision, lease, up,      call.trace.get()};
      PrefillHop hop = co_await run_prefill_hop(ctx);
      if (hop.outcome == PrefillHop::kRetry) {
        last_error = std::move(hop.error);
        excluded.push_back(hop.failed_endpoint);
        retry = may_retry(attempt + 1);
        continue;
      }
      if (hop.outcome == PrefillHop::kFail) {
        respond(hop.response.status, std::move(hop.response));
        break;
      }
      decode_up = std::move(hop.decode_request);
      prefill_url = std::move(hop.prefill_url);
    } else if (disaggregated(pool.config())) {
      metrics.pd_local_prefill(pool.name());
    }
    io::UpstreamRequest& to_send = decode_up ? *decode_up : up;  // borrowed by send
    set_rank_header(to_send.headers, *endpoint);
    // Traced: the hop's own span id goes to the engine in its traceparent.
    // It starts at the first pick's reading (a retry's or a decode hop's at one of its
    // own) and, when the engine's answer is to be the client's, ends with that answer.
    TracedHop traced(call.trace.get(), decode_up ? "kvgate.decode" : "kvgate.upstream",
                     endpoint->url, to_send, decode_up ? 0 : picked);
    auto result = co_await upstream->send(endpoint->host, endpoint->port, to_send);
    traced.end_with_answer(result);
    if (!result && result.code() == ErrorCode::kCancelled) break;
    if (!result) {
      last_error = result.error();
      metrics.upstream_error(pool.name(), endpoint->url, io::upstream_failure(result.code()));
      if (!prefill_url.empty()) {
        metrics.pd_hop_failure(pool.name(), "decode", io::upstream_failure(result.code()));
      }
      lease.done(endpoint->id, false, clock.now());
      excluded.push_back(endpoint->id);
      retry = may_retry(attempt + 1);
      continue;
    }
    if (route::failed_status((*result)->status(), /*continuation=*/false)) {
      // A 503, overloaded or starting: nothing reached the client yet.
      (void)co_await (*result)->read_all(config.timeouts.upstream_header, 1 << 20);
      last_error = fmt::format("{} answered 503", endpoint->url);
      metrics.upstream_error(pool.name(), endpoint->url, "status_503");
      if (!prefill_url.empty()) metrics.pd_hop_failure(pool.name(), "decode", "status_503");
      lease.done(endpoint->id, false, clock.now());
      excluded.push_back(endpoint->id);
      retry = may_retry(attempt + 1);
      continue;
    }
    exchange = std::move(*result);
  }

  if (cancel->cancelled() && final_status == 0) {
    client_left();
  } else if (!exchange) {
    if (final_status == 0) {
      respond(502,
              json_error(502,
                         fmt::format("Upstream failed: {}",
                                     last_error.empty() ? "no endpoint available" : last_error),
                         {}, "upstream_unavailable"));
    }
  } else if (!call.request.stream || exchange->status() != 200) {
    // Whole response (or an engine error on a stream request): read it, pass it on.
    std::string content_type(exchange->headers().find("content-type").value_or("application/json"));
    auto body = co_await exchange->read_all(config.timeouts.stream, 64 << 20);
    if (!body && body.code() == ErrorCode::kCancelled) {
      client_left();
    } else if (!body) {
      // The answer had begun (its head came) and a whole answer does not migrate: lost,
      // as route::after_failure decides for a request that cannot migrate.
      metrics.upstream_error(pool.name(), endpoint->url, io::upstream_failure(body.code()));
      if (!prefill_url.empty()) {
        metrics.pd_hop_failure(pool.name(), "decode", io::upstream_failure(body.code()));
      }
      lease.done(endpoint->id, false, clock.now());
      respond(502, json_error(502, "Upstream failed: " + body.error(), {}, "upstream_error"));
    } else {
      const Nanos done = clock.now();
      lease.done(endpoint->id, true, done, /*first_token=*/true);
      const bool ok = exchange->status() == 200;
      openai::Usage u;
      if (ok) {
        switch (call.dialect) {
          case openai::Dialect::kOpenAi:
            u = openai::parse_usage(*body);
            break;
          case openai::Dialect::kAnthropic:
            u = openai::anthropic::parse_usage(*body);
            break;
          case openai::Dialect::kResponses: {
            openai::responses::Answered a = openai::responses::read_answer(*body);
            u = a.usage;
            pool.responses().remember(std::move(a.id), endpoint->id);
            break;
          }
        }
        if (u.seen) charge(call.limited_tenant, model, u);
      }
      const bool answered = ok && !embed;  // an embedding has no first token to time
      if (answered && (call.ttft_target > 0 || call.tpot_target > 0)) {
        slo_outcome(call, done, done, /*tokens=*/0);  // the first token came with the end
      }
      HttpResponse r{exchange->status(), std::move(content_type), {}, std::move(*body)};
      // The routing fields as one string of lines (three strings fewer per answer).
      using namespace std::string_view_literals;  // appends of literals without strlen
      io::TextPieces<8> lines;
      lines << "x-kvgate-endpoint: "sv << endpoint->url << "\r\nx-kvgate-route-us: "sv << route_us
            << "\r\n"sv;
      if (!prefill_url.empty()) {
        lines << "x-kvgate-prefill-endpoint: "sv << prefill_url << "\r\n"sv;
      }
      lines.write_to(r.header_lines);
      respond(exchange->status(), std::move(r), answered, &u, done);
    }
  } else {
    // Stream: pass events through as they arrive, from a coroutine of its own (the
    // connection writes them meanwhile).
    StreamJob job{std::move(cancel),     std::move(call),  std::move(exchange),
                  std::move(endpoint),   std::move(lease), std::move(route_us),
                  std::move(prefill_url)};
    if (migration) {
      job.migration = std::move(migration);
      job.keys = std::move(keys);  // rr.keys views them
    }
    asio::co_spawn(co_await asio::this_coro::executor, pump_stream(std::move(job)), asio::detached);
  }
}

asio::awaitable<void> DataPlane::pump_stream(StreamJob job) {
  ProxyCall& call = job.call;
  PoolRuntime& pool = *call.pool;
  const std::string& model = call.model->name;
  const std::string& prefill_url = job.prefill_url;
  metrics.stream_started();
  const int final_status = 200;
  std::vector<io::HttpHeader> head = {{"Cache-Control", "no-cache"},
                                      {"x-kvgate-endpoint", job.endpoint->url},
                                      {"x-kvgate-route-us", job.route_us}};
  if (!prefill_url.empty()) head.push_back({"x-kvgate-prefill-endpoint", prefill_url});
  call.stream->start(200, "text/event-stream", std::move(head));
  if (call.trace) [[unlikely]] {
    call.trace->set_status(200);
  }
  openai::SseTap tap(/*strip_usage_chunk=*/!call.request.client_wants_usage, call.dialect);
  // Bytes already reached the client: a failure ends the stream with an error event.
  auto error_event = [&call](int status, std::string_view message, std::string_view code) {
    if (call.dialect == openai::Dialect::kAnthropic) {
      return openai::anthropic::render_error_event(status, message);
    }
    if (call.dialect == openai::Dialect::kResponses) {
      return openai::responses::render_error_event(code, message);
    }
    return "data: " + openai::error_json(status, message, {}, code) + "\n\ndata: [DONE]\n\n";
  };
  const Nanos deadline =
      call.received +
      std::chrono::duration_cast<std::chrono::nanoseconds>(config.timeouts.stream).count();
  Nanos last_token = 0;
  Nanos first_token_at = 0;  // latency targets: the stream's first token (0: none yet)
  uint64_t token_events = 0, leg_token_events = 0;  // in all, and on the current leg
  bool ok = false;
  bool client_left = false;
  std::string out;
  std::string relayed;  // migration: the client's events of what came
  auto end_timed_out = [&] {
    out = error_event(504, "The stream exceeded the gateway's stream timeout", {});
    call.stream->write(std::move(out));
    metrics.upstream_error(pool.name(), job.endpoint->url, "timeout");
  };
  while (true) {
    if (call.stream->closed()) {  // the client went away
      client_left = true;
      break;
    }
    Nanos left = deadline - clock.now();
    if (left <= 0) {
      end_timed_out();
      break;
    }
    auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::nanoseconds(left)) +
        std::chrono::milliseconds(1);
    bool until_deadline = true;  // else the idle timeout bounds this read
    if (const auto idle = config.timeouts.stream_idle; idle.count() > 0 && idle < wait) {
      wait = idle;
      until_deadline = false;
    }
    auto piece = co_await job.exchange->read_some(wait);
    if (!piece && (piece.code() == ErrorCode::kCancelled || call.stream->closed())) {
      client_left = true;  // its on_close cancelled the exchange
      break;
    }
    // (The read's timer may fire a clock tick before `deadline`.)
    if (!piece && piece.code() == ErrorCode::kDeadlineExceeded && until_deadline) {
      end_timed_out();  // the read waited out the gateway's stream timeout, not a silence
      break;
    }
    if (!piece) {
      const std::string kind(io::upstream_failure(piece.code()));
      metrics.upstream_error(pool.name(), job.endpoint->url, kind);
      if (!prefill_url.empty()) metrics.pd_hop_failure(pool.name(), "decode", kind);
      pool.endpoint_result(job.endpoint->id, false);
      std::string error = piece.error();
      // The stream had begun: migrate() asks route::after_failure whether it moves; a
      // stream that cannot migrate (no MigratingStream) is lost.
      if (job.migration) {
        const Migrated m = co_await migrate(job);
        if (m == Migrated::kResumed) {
          leg_token_events = 0;  // the new leg's lease counts its own tokens
          continue;
        }
        if (m == Migrated::kCancelled) {
          client_left = true;
          break;
        }
        if (m == Migrated::kComplete) {
          // Every token went through before the engine died: end the answer here.
          out.clear();
          (void)tap.feed(job.migration->closing_events(), out);
          call.stream->write(std::move(out));
          ok = true;
          break;
        }
      }
      // Bytes already reached the client: end the stream with an error event.
      out = error_event(502, "The upstream engine failed mid-stream: " + error, "upstream_error");
      call.stream->write(std::move(out));
      break;
    }
    if (piece->empty()) {
      ok = true;
      break;
    }
    out.clear();
    std::string_view data = *piece;
    if (job.migration) {
      relayed.clear();
      job.migration->feed(data, relayed);
      data = relayed;
    }
    openai::SseTap::Step step = tap.feed(data, out);
    if (step.token_events > 0) {
      Nanos now = clock.now();
      token_events += step.token_events;
      leg_token_events += step.token_events;
      if (first_token_at == 0) first_token_at = now;
      if (last_token == 0) {
        metrics.ttft(model, to_seconds(now - call.received));
      } else {
        metrics.itl(model, to_seconds(now - last_token));
      }
      job.lease.first_token();  // once per leg
      for (size_t i = 1; i < step.token_events; ++i) metrics.itl(model, 0);
      last_token = now;
    }
    if (out.empty()) continue;
    if (call.stream->pending_bytes() > kMaxPendingBytes) {
      co_await write_and_wait(*call.stream, std::move(out));
    } else {
      call.stream->write(std::move(out));
    }
    out = std::string();
  }
  if (ok && job.lease.held()) pool.endpoint_result(job.endpoint->id, true);
  if (!tap.response_id().empty()) pool.responses().remember(tap.response_id(), job.endpoint->id);
  if (client_left) {
    job.exchange.reset();  // closes the upstream connection now: the engine aborts
    fault_metrics.cancelled(pool.name(), /*after_first_byte=*/true);
  }
  // Tokens count also when the client went away mid-stream, as long as the usage chunk came.
  const openai::Usage& u = tap.usage();
  // A client that left is no failure of the endpoint's. An answer that ended well teaches
  // the latency predictor its leg's time per output token: the usage's count when no
  // migration split the answer, else the token events of the last leg.
  const uint64_t leg_tokens =
      job.migrations == 0 && u.seen ? u.completion_tokens : leg_token_events;
  job.lease.finish(ok || client_left,
                   ok ? static_cast<uint32_t>(std::min<uint64_t>(leg_tokens, UINT32_MAX)) : 0);
  const Nanos ended = answered_at(call, final_status);  // its trace's end, its metrics'
  if (ok && first_token_at > 0 && (call.ttft_target > 0 || call.tpot_target > 0)) {
    const uint64_t tokens = u.seen ? u.completion_tokens : token_events;
    slo_outcome(call, first_token_at, ended, tokens);
  }
  if (u.seen) charge(call.limited_tenant, model, u);
  if (u.seen && call.flow.charged_output_tokens > 0) {
    pool.flow_output(call.tenant, call.flow.charged_output_tokens, u.completion_tokens);
  }
  metrics.stream_ended();
  metrics.request_finished({.model = model,
                            .pool = pool.name(),
                            .tenant = call.tenant,
                            .status = final_status,
                            .seconds = to_seconds(ended - call.received),
                            .routing_seconds = call.routing_seconds,
                            .has_tokens = u.seen,
                            .prompt_tokens = u.prompt_tokens,
                            .completion_tokens = u.completion_tokens,
                            .cached_tokens = u.cached_tokens});
  call.stream->finish();
}

asio::awaitable<DataPlane::Migrated> DataPlane::migrate(StreamJob& job) {
  PoolRuntime& pool = *job.call.pool;
  MigratingStream& m = *job.migration;
  const route::EndpointId failed = job.endpoint->id;
  job.lease.finish(false);  // the failed leg's load goes now
  job.exchange.reset();
  if (m.complete()) co_return Migrated::kComplete;
  if (!m.can_continue()) {  // the engine sent no token ids: nothing to continue from
    fault_metrics.migration(pool.name(), "failed", 0);
    co_return Migrated::kFailed;
  }
  const int max_migrations = pool.config().max_migrations;
  if (route::after_failure(config.retries, max_migrations, /*began=*/true, /*tried=*/1,
                           job.migrations) != route::FailoverAction::kMigrate) {
    fault_metrics.migration(pool.name(), "exhausted", 0);
    co_return Migrated::kFailed;
  }
  ++job.migrations;
  // Routed like any request: the original prompt's blocks (the streamed tokens are in no
  // other engine's cache), so an endpoint holding the prefix is preferred.
  route::RouteRequest rr;
  rr.id = next_request_id.fetch_add(1);
  rr.keys = job.keys;
  rr.prompt_tokens = static_cast<uint32_t>(m.prompt_tokens() + m.generated());
  rr.expected_output_tokens = m.remaining().value_or(job.call.request.max_tokens);
  rr.criticality = job.call.criticality;
  io::UpstreamRequest up;
  up.method = "POST";
  up.target = "/v1/completions";
  up.fixed_headers = "Content-Type: application/json\r\nAccept: text/event-stream\r\n";
  up.body = m.continuation_body();
  up.cancel = job.cancel.get();
  // The continuation is a new leg: its endpoints are retried as the first leg's are
  // (route::after_failure), the endpoint the stream left excluded from the start.
  std::vector<route::EndpointId> excluded{failed};
  bool retry = true;
  for (int tried = 1; retry; ++tried) {
    std::optional<Pick> now = pool.pick_now(rr, excluded, clock.now());
    if (!now) now = co_await pool.pick(rr, excluded);
    if (!now->decision.accepted()) break;
    RouteLease lease(pool, rr.id, pools_alive);
    std::shared_ptr<const EndpointAddress> endpoint = std::move(now->endpoint);
    set_rank_header(up.headers, *endpoint);
    // Traced: the continuation is a hop of its own (a span, its id in the traceparent).
    TracedHop traced(job.call.trace.get(), "kvgate.migration", endpoint->url, up);
    auto result = co_await upstream->send(endpoint->host, endpoint->port, up);
    traced.end_with_answer(result, /*continuation=*/true);
    if (!result && result.code() == ErrorCode::kCancelled) {
      lease.finish(true);  // the client left: no failure of this endpoint's
      co_return Migrated::kCancelled;
    }
    if (!result || route::failed_status((*result)->status(), /*continuation=*/true)) {
      const std::string kind = result ? fmt::format("status_{}", (*result)->status())
                                      : std::string(io::upstream_failure(result.code()));
      metrics.upstream_error(pool.name(), endpoint->url, kind);
      lease.done(endpoint->id, false, clock.now());
      excluded.push_back(endpoint->id);
      retry = route::after_failure(config.retries, max_migrations, /*began=*/false, tried,
                                   job.migrations) == route::FailoverAction::kRetry;
      continue;
    }
    fault_metrics.migration(pool.name(), "resumed", m.generated());
    spdlog::info("pool {}: stream migrated from endpoint {} to {} after {} tokens", pool.name(),
                 failed, endpoint->url, m.generated());
    m.begin_leg();
    job.exchange = std::move(*result);
    job.endpoint = std::move(endpoint);
    job.lease = std::move(lease);
    co_return Migrated::kResumed;
  }
  fault_metrics.migration(pool.name(), "failed", 0);
  co_return Migrated::kFailed;
}

asio::awaitable<void> DataPlane::relay(ProxyCall call) {
  metrics.request_started();
  PoolRuntime& pool = *call.pool;
  auto respond = [&](int status, HttpResponse r) {
    record_done(call, status);
    shape(call.dialect, r);  // count_tokens: its errors are Anthropic's
    call.stream->respond(std::move(r));
  };
  io::UpstreamRequest up;
  up.method = "POST";
  up.target = std::move(call.target);
  up.fixed_headers = "Content-Type: application/json\r\nAccept: application/json\r\n";
  up.body = std::move(call.body);
  const asio::any_io_executor here = co_await asio::this_coro::executor;
  auto cancel = cancel_when_client_leaves(*call.stream, up, here);
  std::vector<route::EndpointId> tried;
  std::string last_error = "no endpoint available";
  // A relayed answer is passed on whole and generates nothing (e.g. /tokenize): whatever
  // failed, its answer had not begun, and route::after_failure retries it elsewhere.
  bool retry = true;
  auto may_retry = [this, &tried] {
    return route::after_failure(config.retries, /*max_migrations=*/0, /*began=*/false,
                                static_cast<int>(tried.size()),
                                /*migrations=*/0) == route::FailoverAction::kRetry;
  };
  while (retry) {
    std::shared_ptr<const EndpointAddress> endpoint = co_await pool.tokenize_endpoint(tried);
    if (!endpoint) break;
    tried.push_back(endpoint->id);
    set_rank_header(up.headers, *endpoint);
    TracedHop traced(call.trace.get(), "kvgate.relay", endpoint->url, up);
    auto sent = co_await upstream->send(endpoint->host, endpoint->port, up);
    traced.end_with_answer(sent);
    if (!sent && sent.code() == ErrorCode::kCancelled) break;
    if (!sent) {
      last_error = sent.error();
      metrics.upstream_error(pool.name(), endpoint->url, io::upstream_failure(sent.code()));
      retry = may_retry();
      continue;
    }
    const int status = (*sent)->status();
    std::string content_type((*sent)->headers().find("content-type").value_or("application/json"));
    auto body = co_await (*sent)->read_all(config.timeouts.stream, 64 << 20);
    if (!body && body.code() == ErrorCode::kCancelled) break;
    if (!body || route::failed_status(status, /*continuation=*/false)) {
      last_error = body ? fmt::format("{} answered 503", endpoint->url) : body.error();
      metrics.upstream_error(pool.name(), endpoint->url,
                             body ? "status_503" : io::upstream_failure(body.code()));
      retry = may_retry();
      continue;
    }
    HttpResponse r{status, std::move(content_type), {}, std::move(*body)};
    r.headers.push_back({"x-kvgate-endpoint", endpoint->url});
    respond(status, std::move(r));
    co_return;
  }
  if (cancel->cancelled()) {
    finish_client_left(call);
    co_return;
  }
  respond(502, json_error(502, fmt::format("Upstream failed: {}", last_error), {},
                          "upstream_unavailable"));
}

std::optional<EndpointAddress> DataPlane::stored_endpoint(const ProxyCall& call, std::string& id) {
  const std::string_view target = call.target;
  id = std::string(
      target.substr(kResponsesPrefix.size(), target.find('?') - kResponsesPrefix.size()));
  const std::optional<route::EndpointId> held = call.pool->responses().find(id);
  return held ? call.pool->endpoint(*held) : std::optional<EndpointAddress>();
}

asio::awaitable<void> DataPlane::fetch_stored(ProxyCall call) {
  PoolRuntime& pool = *call.pool;
  auto respond = [&](HttpResponse r) {
    const Nanos at = answered_at(call, r.status);
    metrics.request_done({}, pool.name(), call.tenant, r.status, to_seconds(at - call.received));
    call.stream->respond(std::move(r));
  };
  std::string id;
  const std::optional<EndpointAddress> endpoint = stored_endpoint(call, id);
  if (!endpoint) {  // gone since the front door looked
    respond(response_not_found(id));
    co_return;
  }
  io::UpstreamRequest up;
  up.method = "GET";
  up.target = call.target;
  up.fixed_headers = "Accept: application/json\r\n";
  const asio::any_io_executor here = co_await asio::this_coro::executor;
  auto cancel = cancel_when_client_leaves(*call.stream, up, here);
  auto client_left = [&] {
    fault_metrics.cancelled(pool.name(), /*after_first_byte=*/false);
    const int status = client_left_status(*call.stream);
    const Nanos at = answered_at(call, status);
    metrics.request_done({}, pool.name(), call.tenant, status, to_seconds(at - call.received));
  };
  set_rank_header(up.headers, *endpoint);
  TracedHop traced(call.trace.get(), "kvgate.stored", endpoint->url, up);
  auto sent = co_await upstream->send(endpoint->host, endpoint->port, up);
  traced.end_with_answer(sent);
  if (!sent && sent.code() == ErrorCode::kCancelled) {
    client_left();
    co_return;
  }
  if (!sent) {
    metrics.upstream_error(pool.name(), endpoint->url, io::upstream_failure(sent.code()));
    respond(json_error(502, fmt::format("Upstream failed: {}", sent.error()), {},
                       "upstream_unavailable"));
    co_return;
  }
  const int status = (*sent)->status();
  std::string content_type((*sent)->headers().find("content-type").value_or("application/json"));
  auto body = co_await (*sent)->read_all(config.timeouts.stream, 64 << 20);
  if (!body && body.code() == ErrorCode::kCancelled) {
    client_left();
    co_return;
  }
  if (!body) {
    metrics.upstream_error(pool.name(), endpoint->url, io::upstream_failure(body.code()));
    respond(json_error(502, "Upstream failed: " + body.error(), {}, "upstream_error"));
    co_return;
  }
  // A tenant reads only the responses of its own models: another's is not found to it.
  if (status == 200 && call.limited_tenant) {
    boost::system::error_code ec;
    const boost::json::value v = boost::json::parse(*body, ec);
    const boost::json::value* m =
        !ec && v.is_object() ? v.as_object().if_contains("model") : nullptr;
    const std::string_view served = m && m->is_string() ? std::string_view(m->as_string()) : "";
    bool allowed = false;
    for (const ModelConfig& model : config.models) {
      if (model.pool == pool.name() && (model.served_name == served || model.name == served) &&
          call.limited_tenant->allows(model.name)) {
        allowed = true;
        break;
      }
    }
    if (!allowed) {
      respond(response_not_found(id));
      co_return;
    }
  }
  HttpResponse r{status, std::move(content_type), {}, std::move(*body)};
  r.headers.push_back({"x-kvgate-endpoint", endpoint->url});
  respond(std::move(r));
}

int DataPlane::finish_client_left(const ProxyCall& call) {
  const std::string_view pool = call.pool->name();
  fault_metrics.cancelled(pool, /*after_first_byte=*/false);
  const int status = client_left_status(*call.stream);
  record_done(call, status);
  return status;
}

void DataPlane::record_done(const ProxyCall& call, int status) {
  const Nanos at = answered_at(call, status);
  metrics.request_finished({.model = call.model->name,
                            .pool = call.pool->name(),
                            .tenant = call.tenant,
                            .status = status,
                            .seconds = to_seconds(at - call.received),
                            .routing_seconds = call.routing_seconds});
}

Nanos DataPlane::answered_at(const ProxyCall& call, int status, Nanos at) const {
  if (at == 0) at = clock.now();
  if (call.trace) [[unlikely]] {
    call.trace->set_status(status);
    call.trace->set_end(at);
  }
  return at;
}

void DataPlane::slo_outcome(const ProxyCall& call, Nanos first_token, Nanos end, uint64_t tokens) {
  const bool ttft_met = call.ttft_target <= 0 || first_token - call.received <= call.ttft_target;
  const bool tpot_met = call.tpot_target <= 0 || tokens < 2 ||
                        (end - first_token) / static_cast<Nanos>(tokens - 1) <= call.tpot_target;
  metrics.slo_outcome(call.pool->name(), ttft_met && tpot_met ? "met" : "missed");
}

void DataPlane::charge(const Tenant* tenant, std::string_view model, const openai::Usage& u) {
  if (!tenant) return;
  limiter->charge_async(
      *tenant, model, {.prompt_tokens = u.prompt_tokens, .completion_tokens = u.completion_tokens},
      clock.wall_now());
}

}  // namespace kvgate::gateway
