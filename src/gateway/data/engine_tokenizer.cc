// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "gateway/data/engine_tokenizer.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "core/kv/pseudo_tokens.h"
#include "gateway/data/tracer.h"
#include "io/upstream_client.h"

namespace kvgate::gateway {
namespace asio = boost::asio;

namespace {

constexpr std::string_view kResults[] = {
    "hit",     "prefix",       "engine",      "prompt_ids",  "timeout",       "engine_error",
    "refused", "bad_response", "no_endpoint", "bad_request", "batched_prompt"};
constexpr std::string_view kBackgroundResults[] = {"stored", "failed", "skipped"};

constexpr size_t kMaxAnswerBytes = size_t{64} << 20;

}  // namespace

std::shared_ptr<EngineTokenizer> EngineTokenizer::create(PoolRouting& pool,
                                                         io::UpstreamClient& upstream,
                                                         asio::any_io_executor executor,
                                                         GatewayMetrics& metrics) {
  std::shared_ptr<EngineTokenizer> t(
      new EngineTokenizer(pool, upstream, std::move(executor), metrics));
  return t;
}

EngineTokenizer::EngineTokenizer(PoolRouting& pool, io::UpstreamClient& upstream,
                                 asio::any_io_executor executor, GatewayMetrics& metrics)
    : pool_(pool),
      upstream_(upstream),
      executor_(std::move(executor)),
      timeout_(pool.config().tokenize.timeout),
      cache_(pool.config().tokenize.cache_bytes) {
  for (std::string_view r : kResults)
    counters_.emplace_back(r, &metrics.engine_tokenize_counter(pool.name(), r));
  for (std::string_view r : kBackgroundResults)
    background_counters_.emplace_back(r, &metrics.engine_tokenize_counter(pool.name(), r, true));
}

void EngineTokenizer::count(std::string_view result, bool background) {
  for (auto& [label, counter] : background ? background_counters_ : counters_) {
    if (label == result) {
      counter->fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
}

size_t EngineTokenizer::cached_bytes() const {
  std::lock_guard lock(mu_);
  return cache_.bytes();
}

asio::awaitable<EngineTokenizer::Ids> EngineTokenizer::ids_for(
    const openai::InspectedRequest& request, std::string_view body, openai::ApiKind kind,
    std::string_view served_model, RequestTrace* trace) {
  Ids out;
  tokenizer::TokenizeCall call =
      tokenizer::build_tokenize_call(body, kind == openai::ApiKind::kChat, served_model);
  auto approximate = [&](std::string_view reason) {
    out.ids.clear();
    kv::append_pseudo_tokens(request.prompt_text, out.ids);
    out.exact = false;
    out.result = reason;
    count(reason);
  };
  if (!call.approximate.empty()) {
    approximate(call.approximate);
    co_return out;
  }
  if (call.given_ids) {
    out.ids = std::move(*call.given_ids);
    out.exact = true;
    out.result = "prompt_ids";
    count(out.result);
    co_return out;
  }
  size_t found = 0;
  {
    std::lock_guard lock(mu_);
    found = cache_.lookup(call.chain, out.ids);
  }
  if (found == call.chain.size()) {
    out.exact = true;
    out.result = "hit";
    count(out.result);
    co_return out;
  }
  if (found > 0) {
    // A follow-up: the conversation so far as the engine cut it, the new messages as
    // pseudo-tokens (no engine holds them yet), and the whole for the next turn later.
    kv::append_pseudo_tokens(std::string_view(call.text).substr(call.text_end[found - 1]), out.ids);
    out.result = "prefix";
    count(out.result);
    out.later = std::move(call);
    co_return out;
  }
  Answer a = co_await ask(std::move(call.body), trace);
  if (!a.failure.empty()) {
    approximate(a.failure);
    co_return out;
  }
  {
    std::lock_guard lock(mu_);
    cache_.insert(call.chain, a.ids);
  }
  out.ids = std::move(a.ids);
  out.exact = true;
  out.result = "engine";
  count(out.result);
  co_return out;
}

void EngineTokenizer::fetch_later(tokenizer::TokenizeCall call) {
  if (in_background_.fetch_add(1, std::memory_order_relaxed) < kMaxBackground) {
    asio::co_spawn(executor_, fetch_in_background(shared_from_this(), std::move(call)),
                   asio::detached);
  } else {
    in_background_.fetch_sub(1, std::memory_order_relaxed);
    count("skipped", true);
  }
}

asio::awaitable<void> EngineTokenizer::fetch_in_background(std::shared_ptr<EngineTokenizer> self,
                                                           tokenizer::TokenizeCall call) {
  Answer a = co_await self->ask(std::move(call.body));
  if (a.failure.empty()) {
    std::lock_guard lock(self->mu_);
    self->cache_.insert(call.chain, a.ids);
  }
  self->count(a.failure.empty() ? "stored" : "failed", true);
  self->in_background_.fetch_sub(1, std::memory_order_relaxed);
}

std::vector<route::EndpointId> EngineTokenizer::cooling(Nanos now) {
  std::lock_guard lock(mu_);
  std::erase_if(cooling_, [now](const auto& c) { return c.second <= now; });
  std::vector<route::EndpointId> ids;
  for (const auto& [id, until] : cooling_) ids.push_back(id);
  return ids;
}

void EngineTokenizer::cool(route::EndpointId id, Nanos now, std::string_view failure,
                           const std::string& error) {
  {
    std::lock_guard lock(mu_);
    for (const auto& c : cooling_) {
      if (c.first == id) return;  // another request saw it first
    }
    cooling_.emplace_back(id, now + kCooldown);
  }
  spdlog::warn("pool {}: POST /tokenize failed ({}: {}); that engine is not asked for {} ms",
               pool_.name(), failure, error, kCooldown / kMillisecond);
}

asio::awaitable<EngineTokenizer::Answer> EngineTokenizer::ask(std::string body,
                                                              RequestTrace* trace) {
  std::shared_ptr<const EndpointAddress> endpoint =
      co_await pool_.tokenize_endpoint(cooling(pool_.clock().now()));
  if (!endpoint) co_return Answer{.failure = "no_endpoint"};
  // On a strand of its own: the timeout's cancel and the exchange never run at once.
  Answer a =
      co_await asio::co_spawn(asio::make_strand(executor_),
                              exchange(endpoint, std::move(body), trace), asio::use_awaitable);
  if (a.failure == "timeout" || a.failure == "engine_error") {
    cool(endpoint->id, pool_.clock().now(), a.failure, a.error);
  }
  co_return a;
}

asio::awaitable<EngineTokenizer::Answer> EngineTokenizer::exchange(
    std::shared_ptr<const EndpointAddress> endpoint, std::string body, RequestTrace* trace) {
  const Nanos start = pool_.clock().now();
  auto cancel = std::make_shared<io::UpstreamCancel>();
  auto over = std::make_shared<bool>(false);
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(timeout_);
  timer.async_wait([cancel, over](boost::system::error_code ec) {
    if (!ec && !*over) cancel->cancel();
  });
  io::UpstreamRequest req;
  req.method = "POST";
  req.target = "/tokenize";
  req.fixed_headers = "Content-Type: application/json\r\nAccept: application/json\r\n";
  req.body = std::move(body);
  req.cancel = cancel.get();
  Answer a;
  auto failed = [&](const Error& e) {
    a.failure =
        cancel->cancelled() || e.code == ErrorCode::kDeadlineExceeded ? "timeout" : "engine_error";
    a.error = e.message;
    *over = true;
    return a;
  };
  // Traced: the call is a hop of the request's (the request's coroutine awaits it, so the
  // trace is used by one thread at a time).
  TracedHop traced(trace, "kvgate.tokenize", endpoint->url, req);
  auto sent = co_await upstream_.send(endpoint->host, endpoint->port, req);
  traced.end(sent);
  if (!sent) co_return failed(sent.failure());
  const auto left = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(
                                 timeout_ - std::chrono::nanoseconds(pool_.clock().now() - start)),
                             std::chrono::milliseconds(1));
  auto text = co_await (*sent)->read_all(left, kMaxAnswerBytes);
  *over = true;
  timer.cancel();
  if (!text) co_return failed(text.failure());
  if ((*sent)->status() != 200) {
    // 4xx: the engine refused this request (it will refuse the request itself too);
    // anything else is the engine's trouble.
    const int status = (*sent)->status();
    a.failure = status >= 400 && status < 500 ? "refused" : "engine_error";
    a.error = fmt::format("{} answered {}: {}", endpoint->url, status,
                          std::string_view(*text).substr(0, 200));
    co_return a;
  }
  auto ids = tokenizer::parse_tokenize_response(*text);
  if (!ids) {
    a.failure = "bad_response";
    a.error = ids.error();
    co_return a;
  }
  a.ids = std::move(*ids);
  co_return a;
}

}  // namespace kvgate::gateway
