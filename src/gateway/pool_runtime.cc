// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "gateway/pool_runtime.h"

#include <fmt/format.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <fstream>
#include <sstream>

namespace kvgate::gateway {
namespace asio = boost::asio;

namespace {

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "http://host:port[/]" -> host, port (validated by the config parser).
void split_url(const std::string& url, std::string& host, uint16_t& port) {
  std::string_view rest = std::string_view(url).substr(7);
  rest = rest.substr(0, rest.find('/'));
  size_t colon = rest.rfind(':');
  host = std::string(rest.substr(0, colon));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  port = static_cast<uint16_t>(std::stoi(std::string(rest.substr(colon + 1))));
}

}  // namespace

Nanos monotonic_now() {
  static const auto origin = std::chrono::steady_clock::now();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              origin)
      .count();
}

PoolRuntime::PoolRuntime(const PoolConfig& config, const BreakerConfig& breaker,
                         asio::any_io_executor executor, GatewayMetrics& metrics)
    : config_(config),
      breaker_(breaker),
      metrics_(metrics),
      strand_(asio::make_strand(std::move(executor))),
      precise_({.model = config.name, .block_size = config.router.block_size}),
      approx_({}),
      rng_(std::hash<std::string>{}(config.name) ^ 0x6b76676174650001ULL) {}

PoolRuntime::~PoolRuntime() = default;

Result<std::unique_ptr<PoolRuntime>> PoolRuntime::create(const PoolConfig& config,
                                                         const BreakerConfig& breaker,
                                                         asio::any_io_executor executor,
                                                         GatewayMetrics& metrics) {
  std::unique_ptr<PoolRuntime> p(new PoolRuntime(config, breaker, std::move(executor), metrics));
  if (!config.tokenizer_file.empty()) {
    auto text = read_file(config.tokenizer_file);
    if (!text)
      return Error(fmt::format("pool {}: cannot read {}", config.name, config.tokenizer_file));
    auto tok = tokenizer::Tokenizer::load(*text);
    if (!tok)
      return Error(fmt::format("pool {}: {}: {}", config.name, config.tokenizer_file, tok.error()));
    p->tokenizer_ = std::move(*tok);
  }
  if (!config.chat_template_file.empty()) {
    auto text = read_file(config.chat_template_file);
    if (!text) {
      return Error(fmt::format("pool {}: cannot read {}", config.name, config.chat_template_file));
    }
    auto tpl = tokenizer::ChatTemplate::load(*text);
    if (!tpl) {
      return Error(
          fmt::format("pool {}: {}: {}", config.name, config.chat_template_file, tpl.error()));
    }
    p->chat_template_ = std::move(*tpl);
  }
  auto router =
      route::Router::create(config.router, {.precise = &p->precise_, .approx = &p->approx_});
  if (!router) return Error(fmt::format("pool {}: {}", config.name, router.error()));
  p->router_ = std::move(*router);
  Nanos now = monotonic_now();
  for (const route::EndpointSpec& spec : config.endpoints) {
    auto id = p->router_->add_endpoint(spec, now);
    if (!id) return Error(fmt::format("pool {}: {}", config.name, id.error()));
    EndpointAddress addr{.id = *id, .url = spec.url};
    split_url(spec.url, addr.host, addr.port);
    if (p->endpoints_.size() <= *id) {
      p->endpoints_.resize(*id + 1);
      p->breakers_.resize(*id + 1);
    }
    p->endpoints_[*id] = std::move(addr);
  }
  return p;
}

void PoolRuntime::keys_for(const InspectedRequest& request, std::string_view body, ApiKind kind,
                           std::string_view served_model, std::vector<kv::BlockKey>& keys,
                           uint32_t& prompt_tokens) const {
  const uint32_t block_size = config_.router.block_size;
  // Keys only meet the pool's own indexes, and the precise index seeds the chains it
  // rebuilds from events with the pool's name: the request side must use the same seed.
  (void)served_model;
  const uint64_t seed = kv::block_seed(config_.name, "", "");
  std::vector<uint32_t> ids;
  bool tokenized = false;
  if (tokenizer_) {
    std::string text;
    bool have_text = false;
    if (kind == ApiKind::kChat && chat_template_) {
      auto chat = tokenizer::parse_chat_request(body);
      if (chat) {
        auto rendered = chat_template_->render(*chat);
        if (rendered) {
          text = std::move(*rendered);
          have_text = true;
        }
      }
    } else if (kind == ApiKind::kCompletion) {
      text = request.prompt_text;
      have_text = true;
    }
    if (have_text && tokenizer_->encode_into(text, ids).ok()) tokenized = true;
  }
  if (!tokenized) {
    // Byte-level fallback: 4 bytes per pseudo-token, so a shared text prefix still
    // gives shared block keys (and a token count of the right order).
    ids.clear();
    const std::string& t = request.prompt_text;
    for (size_t i = 0; i < t.size(); i += 4) {
      uint32_t v = 0;
      for (size_t j = i; j < std::min(t.size(), i + 4); ++j) {
        v = v << 8 | static_cast<uint8_t>(t[j]);
      }
      ids.push_back(v);
    }
  }
  prompt_tokens = static_cast<uint32_t>(ids.size());
  keys.clear();
  kv::hash_blocks(ids, block_size, seed, keys);
}

void PoolRuntime::close_expired_breakers(Nanos now) {
  for (size_t id = 0; id < breakers_.size(); ++id) {
    Breaker& b = breakers_[id];
    if (b.open_until > 0 && now >= b.open_until) {
      // Half-open: let requests probe it; the next failure opens it again at once.
      b.open_until = 0;
      b.consecutive_failures = breaker_.failures - 1;
      router_->pool().set_health(static_cast<route::EndpointId>(id), route::Health::kHealthy);
      metrics_.breaker(config_.name, endpoints_[id].url, false);
    }
  }
}

asio::awaitable<Pick> PoolRuntime::pick(route::RouteRequest request,
                                        std::vector<route::EndpointId> excluded) {
  // co_spawn on the strand: the decision runs there, the caller resumes on its own
  // executor with the result. (A coroutine with by-value parameters, not a capturing
  // lambda: the lambda object would not outlive the frame.)
  co_return co_await asio::co_spawn(strand_, decide_task(request, std::move(excluded)),
                                    asio::use_awaitable);
}

asio::awaitable<Pick> PoolRuntime::decide_task(route::RouteRequest request,
                                               std::vector<route::EndpointId> excluded) {
  co_return decide_on_strand(request, excluded);
}

Pick PoolRuntime::decide_on_strand(const route::RouteRequest& request,
                                   const std::vector<route::EndpointId>& excluded) {
  Nanos now = monotonic_now();
  close_expired_breakers(now);
  std::vector<route::EndpointId> hidden;
  for (route::EndpointId id : excluded) {
    const route::Endpoint* e = router_->pool().get(id);
    if (e && e->health == route::Health::kHealthy) {
      router_->pool().set_health(id, route::Health::kUnhealthy);
      hidden.push_back(id);
    }
  }
  Pick pick;
  pick.decision = router_->route(request, now, rng_);
  for (route::EndpointId id : hidden) router_->pool().set_health(id, route::Health::kHealthy);
  metrics_.decision(config_.name, config_.router.policy.name,
                    route::to_string(pick.decision.reason));
  if (pick.decision.accepted() && pick.decision.endpoint < endpoints_.size()) {
    pick.endpoint = endpoints_[pick.decision.endpoint];
  }
  return pick;
}

void PoolRuntime::first_token(route::RequestId id) {
  asio::post(strand_, [this, id] { router_->pool().on_first_token(id, monotonic_now()); });
}

void PoolRuntime::finished(route::RequestId id, bool ok) {
  asio::post(strand_, [this, id, ok] {
    if (ok) {
      router_->pool().on_finished(id, monotonic_now());
    } else {
      router_->pool().on_failed(id, monotonic_now());
    }
  });
}

void PoolRuntime::endpoint_result(route::EndpointId endpoint, bool ok) {
  asio::post(strand_, [this, endpoint, ok] {
    if (endpoint >= breakers_.size()) return;
    Breaker& b = breakers_[endpoint];
    if (ok) {
      b.consecutive_failures = 0;
      return;
    }
    if (b.open_until > 0) return;
    if (++b.consecutive_failures >= breaker_.failures) {
      b.open_until =
          monotonic_now() +
          std::chrono::duration_cast<std::chrono::nanoseconds>(breaker_.open_for).count();
      router_->pool().set_health(endpoint, route::Health::kUnhealthy);
      metrics_.breaker(config_.name, endpoints_[endpoint].url, true);
    }
  });
}

void PoolRuntime::post(std::function<void(route::Router&, kv::PreciseIndex&)> fn) {
  asio::post(strand_, [this, fn = std::move(fn)] { fn(*router_, precise_); });
}

asio::awaitable<void> PoolRuntime::with_router(std::function<void(route::Router&)> fn) {
  co_await asio::co_spawn(strand_, router_task(std::move(fn)), asio::use_awaitable);
}

asio::awaitable<void> PoolRuntime::router_task(std::function<void(route::Router&)> fn) {
  fn(*router_);
  co_return;
}

}  // namespace kvgate::gateway
