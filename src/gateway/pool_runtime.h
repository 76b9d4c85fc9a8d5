// PoolRuntime: one pool of endpoints as the running gateway drives it.
//
// Owns the pool's Router (router core) and its kv indexes, and the strand they live on:
// every call that reads or changes router state (route, first token, finished, failed,
// breaker) runs on that strand, so the core needs no locks. Tokenization for routing
// happens before, on the caller's thread (the tokenizer is immutable and thread-safe).
//
// A circuit breaker per endpoint: after `failures` consecutive failures the endpoint is
// marked unhealthy in the router for `open_for`; after that, it is put back (half-open)
// and the next failure opens it again, a success closes it.
//
// Retries exclude endpoints that already failed for this request: pick() hides them
// from the router for the one decision.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/strand.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/common/rng.h"
#include "core/kv/approx_index.h"
#include "core/kv/block_hash.h"
#include "core/kv/precise_index.h"
#include "core/route/router.h"
#include "core/tokenizer/chat_template.h"
#include "core/tokenizer/tokenizer.h"
#include "gateway/config.h"
#include "gateway/metrics.h"
#include "gateway/openai_request.h"

namespace kvgate::gateway {

struct EndpointAddress {
  route::EndpointId id = 0;
  std::string url;
  std::string host;
  uint16_t port = 0;
};

struct Pick {
  route::Decision decision;
  std::optional<EndpointAddress> endpoint;  // set when accepted
};

// Nanoseconds on a monotonic clock since process start (the `now` the core is given).
Nanos monotonic_now();

class PoolRuntime {
 public:
  static Result<std::unique_ptr<PoolRuntime>> create(const PoolConfig& config,
                                                     const BreakerConfig& breaker,
                                                     boost::asio::any_io_executor executor,
                                                     GatewayMetrics& metrics);
  ~PoolRuntime();

  const std::string& name() const { return config_.name; }
  const PoolConfig& config() const { return config_; }

  // Block keys of the prompt for routing, and its token count. With a tokenizer the
  // chat template (when configured) and tokenizer.json give real tokens; without, a
  // byte-level fallback (4 bytes per pseudo-token) keeps prefix locality.
  // Runs on the caller's thread.
  void keys_for(const InspectedRequest& request, std::string_view body, ApiKind kind,
                std::string_view served_model, std::vector<kv::BlockKey>& keys,
                uint32_t& prompt_tokens) const;

  // Routes on the strand; endpoints in `excluded` are skipped for this decision.
  boost::asio::awaitable<Pick> pick(route::RouteRequest request,
                                    std::vector<route::EndpointId> excluded);
  // Lifecycle, posted to the strand (fire and forget).
  void first_token(route::RequestId id);
  void finished(route::RequestId id, bool ok);
  // Breaker bookkeeping for one endpoint exchange.
  void endpoint_result(route::EndpointId endpoint, bool ok);

  // The configured endpoints, by EndpointId (constant after create).
  const std::vector<EndpointAddress>& endpoints() const { return endpoints_; }
  // Control plane (scrapes, KV events): posts `fn(router, precise index)` to the strand.
  void post(std::function<void(route::Router&, kv::PreciseIndex&)> fn);

  // Test and admin access: runs `fn(router)` on the strand.
  boost::asio::awaitable<void> with_router(std::function<void(route::Router&)> fn);

 private:
  PoolRuntime(const PoolConfig& config, const BreakerConfig& breaker,
              boost::asio::any_io_executor executor, GatewayMetrics& metrics);
  void close_expired_breakers(Nanos now);
  boost::asio::awaitable<Pick> decide_task(route::RouteRequest request,
                                           std::vector<route::EndpointId> excluded);
  boost::asio::awaitable<void> router_task(std::function<void(route::Router&)> fn);
  Pick decide_on_strand(const route::RouteRequest& request,
                        const std::vector<route::EndpointId>& excluded);

  const PoolConfig config_;
  const BreakerConfig breaker_;
  GatewayMetrics& metrics_;
  std::optional<tokenizer::Tokenizer> tokenizer_;
  std::optional<tokenizer::ChatTemplate> chat_template_;

  // State below is touched only on strand_.
  boost::asio::strand<boost::asio::any_io_executor> strand_;
  kv::PreciseIndex precise_;
  kv::ApproxIndex approx_;
  std::unique_ptr<route::Router> router_;
  Rng rng_;
  struct Breaker {
    int consecutive_failures = 0;
    Nanos open_until = 0;  // > 0 while open
  };
  std::vector<EndpointAddress> endpoints_;  // by EndpointId
  std::vector<Breaker> breakers_;           // by EndpointId
};

}  // namespace kvgate::gateway
