// EngineTokenizer: a pool's routing token ids from its own engines, for the models whose
// tokenizer.json or chat template kvgate cannot take (or with `tokenize: engine`): the
// engine fallback (docs/tokenizer.md).
//
// For a request it cannot find cached, it asks one of the pool's healthy engines for the
// ids with vLLM's POST /tokenize (the request's messages and rendering options, or its
// prompt: core/tokenizer/tokenize_call.h), on the gateway's event loop, and routes on the
// answer exactly as on ids a local tokenizer computed. The answers are kept per
// conversation prefix (core/tokenizer/engine_id_cache.h):
//   - the whole request cached (a retry, a repeated prompt): its ids, no call;
//   - an earlier turn of the conversation cached (a follow-up): routed at once on those
//     ids with its new messages as pseudo-tokens; the whole request's ids are then
//     fetched in the background (fetch_later, once the request is routed; at most
//     kMaxBackground at a time) for the next turn;
//   - nothing cached: the request waits for the engine's answer.
// It never holds a request longer than the pool's `tokenize.timeout_ms`: a timeout, an
// engine error, a bad answer or no healthy engine routes the request on pseudo-tokens (as
// a pool without a tokenizer does), counted in kvgate_engine_tokenize_total by reason. An
// engine that timed out or failed is not asked again for a second (on the pool's clock).
//
// Pools without the fallback never reach this (PoolRouting::engine_tokenizer() is null).
//
//   auto et = EngineTokenizer::create(pool, upstream, io.get_executor(), metrics);
//   pool.set_engine_tokenizer(et);
//   ... in the proxy coroutine:
//   EngineTokenizer::Ids got = co_await et->ids_for(request, body, kind, served_model);
//
// Thread-safe; its coroutines run on the executor given (each call on a strand of its own).
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/common/time.h"
#include "core/tokenizer/engine_id_cache.h"
#include "core/tokenizer/tokenize_call.h"
#include "gateway/common/metrics.h"
#include "gateway/data/pool_routing.h"
#include "openai/request.h"

namespace kvgate::io {
class UpstreamClient;
}

namespace kvgate::gateway {

class RequestTrace;

class EngineTokenizer : public std::enable_shared_from_this<EngineTokenizer> {
 public:
  static constexpr int kMaxBackground = 8;  // follow-up fetches in flight per pool
  static constexpr Nanos kCooldown = kSecond;

  // `pool`, `upstream` and `metrics` must outlive every call (the gateway's do).
  static std::shared_ptr<EngineTokenizer> create(PoolRouting& pool, io::UpstreamClient& upstream,
                                                 boost::asio::any_io_executor executor,
                                                 GatewayMetrics& metrics);

  // Whether requests of `kind` get their ids here (else PoolRouting::keys_for).
  bool covers(openai::ApiKind kind) const {
    const TokenizePlan& p = pool_.tokenize_plan();
    return kind == openai::ApiKind::kChat ? p.chat_from_engine : p.completion_from_engine;
  }

  struct Ids {
    std::vector<uint32_t> ids;
    bool exact = false;       // all the engine's (else pseudo-tokens, at least in part)
    std::string_view result;  // the kvgate_engine_tokenize_total label counted
    // A follow-up routed on its cached prefix: the call for its whole ids, to pass to
    // fetch_later() once the request is routed (started earlier, the call's work would
    // share the event loop with the very decision it spares).
    std::optional<tokenizer::TokenizeCall> later;
  };
  // The routing ids of one request (`body` as the client sent it; the engines call its
  // model `served_model`). Never fails; waits at most the pool's tokenize timeout.
  // `request`, `body` and `trace` are borrowed until the awaitable completes. A traced
  // request (`trace` not null, tracer.h) gets a hop span `kvgate.tokenize` for the call
  // to the engine, whose traceparent names it.
  boost::asio::awaitable<Ids> ids_for(const openai::InspectedRequest& request,
                                      std::string_view body, openai::ApiKind kind,
                                      std::string_view served_model, RequestTrace* trace = nullptr);

  // Fetches `call` (Ids::later) in the background and stores its ids for the next turn:
  // at most kMaxBackground at a time per pool (else dropped, counted `skipped`).
  void fetch_later(tokenizer::TokenizeCall call);

  // The cache's size (tests, admin).
  size_t cached_bytes() const;

 private:
  EngineTokenizer(PoolRouting& pool, io::UpstreamClient& upstream,
                  boost::asio::any_io_executor executor, GatewayMetrics& metrics);

  struct Answer {
    std::vector<uint32_t> ids;
    std::string_view failure;  // empty: ids are the engine's
    std::string error;
  };
  // One /tokenize call to a healthy engine, within the timeout (traced when `trace`).
  boost::asio::awaitable<Answer> ask(std::string body, RequestTrace* trace = nullptr);
  boost::asio::awaitable<Answer> exchange(std::shared_ptr<const EndpointAddress> endpoint,
                                          std::string body, RequestTrace* trace);
  static boost::asio::awaitable<void> fetch_in_background(std::shared_ptr<EngineTokenizer> self,
                                                          tokenizer::TokenizeCall call);
  void count(std::string_view result, bool background = false);
  std::vector<route::EndpointId> cooling(Nanos now);
  void cool(route::EndpointId id, Nanos now, std::string_view failure, const std::string& error);

  // Constant after construction.
  PoolRouting& pool_;
  io::UpstreamClient& upstream_;
  boost::asio::any_io_executor executor_;
  const std::chrono::milliseconds timeout_;
  // The labels' counters, created at zero (so every series shows from the start).
  std::vector<std::pair<std::string_view, std::atomic<uint64_t>*>> counters_, background_counters_;

  std::atomic<int> in_background_{0};
  // State below is protected by mu_.
  mutable std::mutex mu_;
  tokenizer::EngineIdCache cache_;
  std::vector<std::pair<route::EndpointId, Nanos>> cooling_;  // endpoint, until
};

}  // namespace kvgate::gateway
