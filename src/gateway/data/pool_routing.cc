// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "gateway/data/pool_routing.h"

#include <algorithm>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <functional>

#include "core/kv/pseudo_tokens.h"
#include "core/tokenizer/chat.h"
#include "gateway/data/enterable_executor.h"
#include "gateway/data/pool_flow.h"

namespace kvgate::gateway {
namespace asio = boost::asio;

namespace {

// The pool's strand: none on the context's one thread; else a strand over the io_context's
// executor through an EnterableExecutor (enterable_executor.h), so that a thread which is
// not an I/O thread may run the strand's work itself while the strand is free
// (pick_then from an EnterStrandsHere). Another kind of executor (none in the gateway):
// a plain strand.
asio::any_io_executor pool_strand(const asio::any_io_executor& executor, bool one_thread) {
  if (one_thread) return executor;
  if (const auto* io = executor.target<asio::io_context::executor_type>()) {
    return asio::any_io_executor(
        asio::make_strand(EnterableExecutor<asio::io_context::executor_type>(*io)));
  }
  return asio::any_io_executor(asio::make_strand(executor));
}

}  // namespace

PoolRouting::PoolRouting(const PoolConfig& config, const route::BreakerConfig& breaker,
                         asio::any_io_executor executor, GatewayMetrics& metrics,
                         const Clock& clock, bool one_thread)
    : config_(config),
      metrics_(metrics),
      clock_(clock),
      strand_(pool_strand(executor, one_thread)),
      one_thread_(one_thread),
      precise_({.model = config.name, .block_size = config.router.block_size}),
      approx_({}),
      rng_(std::hash<std::string>{}(config.name) ^ 0x6b76676174650001ULL),
      breakers_(breaker),
      block_seed_(kv::block_seed(config.name, "", "")) {}

// Here, where PoolFlow is complete.
PoolRouting::~PoolRouting() = default;

std::vector<EndpointAddress> PoolRouting::endpoints() const {
  std::lock_guard lock(endpoints_mu_);
  std::vector<EndpointAddress> out;
  for (const auto& e : endpoints_) {
    if (e) out.push_back(*e);
  }
  return out;
}

std::optional<EndpointAddress> PoolRouting::endpoint(route::EndpointId id) const {
  std::lock_guard lock(endpoints_mu_);
  if (id >= endpoints_.size() || !endpoints_[id]) return std::nullopt;
  return *endpoints_[id];
}

bool PoolRouting::removing(route::EndpointId id) const {
  return router_->pool().get(id) && holds_.has(id, route::Hold::kDrain);
}

std::optional<route::Health> PoolRouting::set_hold_on_strand(route::EndpointId id, route::Hold hold,
                                                             bool on) {
  if (!router_->pool().get(id)) return std::nullopt;
  std::optional<route::Health> h = holds_.set(id, hold, on);
  if (h) router_->pool().set_health(id, *h);
  return h;
}

void PoolRouting::keys_for(const openai::InspectedRequest& request, std::string_view body,
                           openai::ApiKind kind, std::string_view adapter,
                           std::vector<kv::BlockKey>& keys, uint32_t& prompt_tokens,
                           std::vector<uint32_t>* token_ids) const {
  const uint32_t block_size = config_.router.block_size;
  // Keys only meet the pool's own indexes, and the precise index seeds the chains it
  // rebuilds from events with the pool's name (and the event's adapter): the request side
  // must use the same seed. A cache salt makes the prompt's blocks its own, as in vLLM.
  const uint64_t seed = seed_for(adapter, request.cache_salt);
  thread_local std::vector<uint32_t> ids;  // scratch: no allocation per request
  ids.clear();
  bool tokenized = false;
  if (tokenizer_) {
    std::string text;
    bool have_text = false;
    bool add_special = false;
    if (kind == openai::ApiKind::kChat && chat_template_) {
      auto chat = tokenizer::parse_chat_request(body);
      tokenizer::ChatRenderOptions options;
      options.now_unix_seconds = clock_.wall_now() / kSecond;  // the template's strftime_now
      options.trust_request_chat_template = config_.trust_request_chat_template;
      options.content_format = config_.chat_template_content_format;
      auto rendered =
          chat ? chat_template_->render(*chat, options) : Result<std::string>(Error(chat.error()));
      if (rendered) {
        text = std::move(*rendered);
        have_text = true;
      } else {
        metrics_.chat_template_fallback(config_.name, tokenizer::fallback_reason(chat, options));
      }
    } else if (kind == openai::ApiKind::kCompletion) {
      text = request.prompt_text;
      have_text = true;
      // vLLM adds the post-processor's special tokens to a completion prompt by default
      // (Llama 2's and Gemma's BOS); a chat template writes its own. (A request's
      // `add_special_tokens: false` is not read here.)
      add_special = true;
    }
    if (have_text) {
      if (add_special)
        ids.assign(tokenizer_->post_prefix().begin(), tokenizer_->post_prefix().end());
      if (tokenizer_->encode_into(text, ids).ok()) {
        tokenized = true;
        if (add_special) {
          ids.insert(ids.end(), tokenizer_->post_suffix().begin(), tokenizer_->post_suffix().end());
        }
      }
    }
  }
  if (!tokenized) {
    // Byte-level fallback: 4 bytes per pseudo-token, so a shared text prefix still
    // gives shared block keys (and a token count of the right order).
    ids.clear();
    kv::append_pseudo_tokens(request.prompt_text, ids);
  }
  prompt_tokens = static_cast<uint32_t>(ids.size());
  keys.clear();
  kv::hash_blocks(ids, block_size, seed, keys);
  if (token_ids) {  // warm-up hook
    token_ids->clear();
    if (tokenized) token_ids->assign(ids.begin(), ids.end());
  }
}

uint32_t PoolRouting::count_tokens(std::string_view text) const {
  if (text.empty()) return 0;
  thread_local std::vector<uint32_t> ids;  // scratch: no allocation per request
  ids.clear();
  if (!tokenizer_ || !tokenizer_->encode_into(text, ids).ok()) {
    ids.clear();
    kv::append_pseudo_tokens(text, ids);
  }
  return static_cast<uint32_t>(ids.size());
}

void PoolRouting::keys_of(std::span<const uint32_t> ids, std::vector<kv::BlockKey>& keys,
                          std::string_view adapter, std::string_view cache_salt) const {
  keys.clear();
  kv::hash_blocks(ids, config_.router.block_size, seed_for(adapter, cache_salt), keys);
}

asio::awaitable<std::shared_ptr<const EndpointAddress>> PoolRouting::tokenize_endpoint(
    std::vector<route::EndpointId> avoid) {
  // As pick(): on the strand (at once when this thread runs it), no coroutine spawned.
  return asio::async_initiate<const asio::use_awaitable_t<>&,
                              void(std::shared_ptr<const EndpointAddress>)>(
      [this, avoid = std::move(avoid)](auto handler) mutable {
        asio::dispatch(strand_, [this, avoid = std::move(avoid), h = std::move(handler)]() mutable {
          std::shared_ptr<const EndpointAddress> chosen;
          const auto ids = router_->pool().ids();
          for (size_t n = 0; n < ids.size() && !chosen; ++n) {
            const route::EndpointId id = ids[(tokenize_turn_ + n) % ids.size()];
            const route::Endpoint* e = router_->pool().get(id);
            if (!e || e->health != route::Health::kHealthy || id >= endpoints_.size()) continue;
            if (std::find(avoid.begin(), avoid.end(), id) != avoid.end()) continue;
            chosen = endpoints_[id];
            tokenize_turn_ = (tokenize_turn_ + n + 1) % ids.size();
          }
          auto ex = asio::get_associated_executor(h);
          asio::dispatch(ex, [h = std::move(h), chosen = std::move(chosen)]() mutable {
            std::move(h)(std::move(chosen));
          });
        });
      },
      asio::use_awaitable);
}

void PoolRouting::close_expired_breakers(Nanos now) {
  for (route::EndpointId id : breakers_.expire(now)) {
    if (removing(id)) continue;
    // Half-open: requests probe it (unless another hold stays: a warm-up, a standby); the
    // next failure opens it again at once.
    set_hold_on_strand(id, route::Hold::kBreaker, false);
    if (auto e = endpoint(id)) metrics_.breaker(config_.name, e->url, false);
  }
}

asio::awaitable<Pick> PoolRouting::pick(const route::RouteRequest& request,
                                        const std::vector<route::EndpointId>& excluded) {
  // The decision runs on the strand: at once when the strand is free and this thread
  // runs its context (dispatch), queued behind the strand's work otherwise; the caller
  // then resumes on its own executor. No coroutine is spawned: this is on every request.
  return asio::async_initiate<const asio::use_awaitable_t<>&, void(Pick)>(
      [this, &request, &excluded](auto handler) {
        asio::dispatch(strand_, [this, &request, &excluded, h = std::move(handler)]() mutable {
          Pick pick = decide_on_strand(request, excluded, clock_.now());
          auto ex = asio::get_associated_executor(h);
          asio::dispatch(ex, [h = std::move(h), pick = std::move(pick)]() mutable {
            std::move(h)(std::move(pick));
          });
        });
      },
      asio::use_awaitable);
}

static_assert(static_cast<size_t>(route::RejectReason::kSloUnattainable) < 9,
              "decision_counters_ holds one counter per RejectReason");
static_assert(static_cast<size_t>(route::SessionOutcome::kMovedTarget) < 6,
              "session_counters_ holds one counter per SessionOutcome");

bool PoolRouting::on_own_thread() const {
  if (!one_thread_) return false;
  const auto* ex = strand_.target<asio::io_context::executor_type>();
  return ex && ex->running_in_this_thread();
}

std::optional<Pick> PoolRouting::pick_now(const route::RouteRequest& request,
                                          const std::vector<route::EndpointId>& excluded,
                                          Nanos now) {
  if (!on_own_thread()) return std::nullopt;
  return decide_on_strand(request, excluded, now);
}

void PoolRouting::count_decision(route::RejectReason reason) {
  std::atomic<uint64_t>*& counter = decision_counters_.at(static_cast<size_t>(reason));
  if (!counter) {
    counter = &metrics_.decision_counter(config_.name, router_->config().policy.name,
                                         route::to_string(reason));
  }
  counter->fetch_add(1, std::memory_order_relaxed);
}

void PoolRouting::count_session(const route::Decision& decision) {
  if (!decision.accepted()) return;
  std::atomic<uint64_t>*& counter = session_counters_.at(static_cast<size_t>(decision.session));
  if (!counter) {
    counter = &metrics_.session_counter(config_.name, route::to_string(decision.session));
  }
  counter->fetch_add(1, std::memory_order_relaxed);
  publish_sessions();
}

void PoolRouting::publish_sessions() {
  const route::SessionAffinity* table = router_->sessions();
  if (!table) return;
  if (!session_table_) session_table_ = &metrics_.session_table(config_.name);
  const route::SessionAffinity::Stats& s = table->stats();
  constexpr auto relaxed = std::memory_order_relaxed;
  session_table_->bound.store(s.bound, relaxed);
  session_table_->rebound.store(s.rebound, relaxed);
  session_table_->evicted.store(s.evicted, relaxed);
  session_table_->expired.store(s.expired, relaxed);
  session_table_->size.store(table->size(), relaxed);
}

Pick PoolRouting::decide_on_strand(const route::RouteRequest& request,
                                   const std::vector<route::EndpointId>& excluded, Nanos now) {
  close_expired_breakers(now);
  Pick pick;
  if (excluded.empty()) {
    pick.decision = router_->route(request, now, rng_);
  } else {
    route::RouteRequest retry = request;  // a retry skips the endpoints that failed it
    retry.excluded = excluded;
    pick.decision = router_->route(retry, now, rng_);
  }
  count_decision(pick.decision.reason);
  if (pick.decision.session != route::SessionOutcome::kNone) [[unlikely]] {
    count_session(pick.decision);
  }
  if (pick.decision.latency_features) {
    if (!predictor_series_) predictor_series_ = &metrics_.predictor(config_.name);
    predictor_series_->predictions.fetch_add(1, std::memory_order_relaxed);
  }
  // endpoints_ is written only here, on the strand: no lock to read it.
  if (pick.decision.accepted() && pick.decision.endpoint < endpoints_.size()) {
    pick.endpoint = endpoints_[pick.decision.endpoint];
  }
  if (hooks_.routed && pick.decision.accepted())
    hooks_.routed(*router_, request, pick.decision, now);
  if (recent_.watched(now) && excluded.empty()) [[unlikely]] {
    recent_.record(request, pick.decision, now);
  }
  return pick;
}

void PoolRouting::first_token(route::RequestId id) {
  on_strand([this, id] {
    const Nanos now = clock_.now();
    router_->on_first_token(id, now);  // teaches the latency predictor when enabled
    publish_predictor();
    if (hooks_.lifecycle) hooks_.lifecycle(id, cluster::EventKind::kPrefillDone, now);
    pump_flow(now);
  });
}

void PoolRouting::finished(route::RequestId id, bool ok, uint32_t output_tokens) {
  on_strand([this, id, ok, output_tokens] {
    const Nanos now = clock_.now();
    finish_on_strand(id, ok, now, output_tokens);
    pump_flow(now);
  });
}

void PoolRouting::endpoint_result(route::EndpointId endpoint, bool ok) {
  on_strand([this, endpoint, ok] { endpoint_result_on_strand(endpoint, ok); });
}

void PoolRouting::moved(route::RequestId id, route::EndpointId to) {
  on_strand([this, id, to] {
    const Nanos now = clock_.now();
    router_->pool().on_moved(id, to, now);
    pump_flow(now);  // the old endpoint has room again
  });
}

void PoolRouting::exchange_done(route::RequestId id, route::EndpointId endpoint, bool ok, Nanos now,
                                bool first_token, uint32_t output_tokens) {
  on_strand([this, id, endpoint, ok, now, first_token, output_tokens] {
    if (first_token) {
      // A whole answer: its first token's time is unknown (this is its end), so the
      // latency predictor learns nothing from it (the pool's load is released alone).
      router_->pool().on_first_token(id, now);
      if (hooks_.lifecycle) hooks_.lifecycle(id, cluster::EventKind::kPrefillDone, now);
    }
    finish_on_strand(id, ok, now, output_tokens);
    endpoint_result_on_strand(endpoint, ok);
    pump_flow(now);
  });
}

void PoolRouting::finish_on_strand(route::RequestId id, bool ok, Nanos now,
                                   uint32_t output_tokens) {
  if (ok) {
    // Teaches the latency predictor the time per output token when enabled (and TTFT
    // already came: a whole answer's first token is its end, so 0 or 1 token teach none).
    router_->on_finished(id, now, output_tokens);
    publish_predictor();
  } else {
    router_->pool().on_failed(id, now);
  }
  if (hooks_.lifecycle) {
    hooks_.lifecycle(id, ok ? cluster::EventKind::kFinished : cluster::EventKind::kFailed, now);
  }
}

void PoolRouting::publish_predictor() {
  const route::LatencyPredictor* p = router_->predictor();
  if (!p) return;
  if (!predictor_series_) predictor_series_ = &metrics_.predictor(config_.name);
  GatewayMetrics::PredictorSeries& s = *predictor_series_;
  s.ttft_mape.store(p->ttft_error().mape(), std::memory_order_relaxed);
  s.tpot_mape.store(p->tpot_error().mape(), std::memory_order_relaxed);
  s.ttft_samples.store(p->ttft_error().count, std::memory_order_relaxed);
  s.tpot_samples.store(p->tpot_error().count, std::memory_order_relaxed);
}

void PoolRouting::endpoint_result_on_strand(route::EndpointId endpoint, bool ok) {
  if (removing(endpoint)) return;
  if (breakers_.on_result(endpoint, ok, clock_.now()) ==
      route::CircuitBreakers::Transition::kOpened) {
    set_hold_on_strand(endpoint, route::Hold::kBreaker, true);
    if (auto e = this->endpoint(endpoint)) metrics_.breaker(config_.name, e->url, true);
  }
}

}  // namespace kvgate::gateway
