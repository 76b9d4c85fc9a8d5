// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "gateway/data/disagg_flow.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <random>

#include "gateway/data/rank_header.h"
#include "openai/error.h"
#include "openai/pd_request.h"

namespace kvgate::gateway {

namespace {

// The prefill answer is one token's worth of JSON; anything this large is not one.
constexpr size_t kMaxPrefillAnswerBytes = 16 << 20;

// X-Request-Id for both hops, as vLLM's proxy sends one id to both engines: unique
// across gateway processes (a random prefix drawn once) and requests.
std::string hop_request_id(route::RequestId id) {
  static const uint64_t prefix = [] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd();
  }();
  return fmt::format("kvgate-{:016x}-{}", prefix, id);
}

}  // namespace

bool disaggregated(const PoolConfig& pool) {
  switch (pool.router.pd.mode) {
    case route::PdMode::kOff:
      return false;
    case route::PdMode::kOn:
      return true;
    case route::PdMode::kAuto:
      break;
  }
  for (const route::EndpointSpec& e : pool.endpoints) {
    if (e.role == route::Role::kPrefill) return true;
  }
  return false;
}

boost::asio::awaitable<PrefillHop> run_prefill_hop(PrefillHopContext ctx) {
  PrefillHop hop;
  const std::string& pool_name = ctx.pool.name();
  const route::EndpointId pid = ctx.decision.prefill_endpoint.value_or(ctx.decision.endpoint);
  hop.failed_endpoint = pid;
  const std::optional<EndpointAddress> found = ctx.pool.endpoint(pid);
  if (!found) {  // removed at run time since the decision
    ctx.lease.finish(false);
    hop.outcome = PrefillHop::kRetry;
    hop.error = fmt::format("prefill endpoint {} is gone", pid);
    co_return hop;
  }
  const EndpointAddress& prefill = *found;
  // Nothing reached the client: the request may go to another pair of endpoints.
  auto retry = [&](std::string_view kind, std::string message) {
    ctx.metrics.upstream_error(pool_name, prefill.url, kind);
    ctx.metrics.pd_hop_failure(pool_name, "prefill", kind);
    ctx.lease.finish(false);
    ctx.pool.endpoint_result(pid, false);
    hop.outcome = PrefillHop::kRetry;
    hop.error = fmt::format("prefill {}: {}", prefill.url, message);
  };

  auto body = openai::prefill_body(ctx.request.body);
  if (!body) {  // the gateway validated the body already; cannot happen
    ctx.lease.finish(false);
    hop.response = {500, "application/json", {}, openai::error_json(500, body.error())};
    co_return hop;
  }
  const std::string request_id = hop_request_id(ctx.lease.id());
  io::UpstreamRequest req;
  req.method = "POST";
  req.target = ctx.request.target;
  req.headers = {{"Content-Type", "application/json"},
                 {"Accept", "application/json"},
                 {"X-Request-Id", request_id}};
  req.body = std::move(*body);
  req.cancel = ctx.request.cancel;  // the client leaving ends this hop too
  set_rank_header(req.headers, prefill);
  ctx.metrics.pd_prefill(pool_name, prefill.url);
  TracedHop traced(ctx.trace, "kvgate.prefill", prefill.url, req);
  auto exchange = co_await ctx.upstream.send(prefill.host, prefill.port, req);
  traced.end(exchange);
  // The client left (UpstreamCancel): no failure of the endpoint's; the caller sees it.
  auto cancelled = [&] {
    ctx.lease.finish(true);
    hop.outcome = PrefillHop::kRetry;
    hop.error = "cancelled";
  };
  if (!exchange && exchange.code() == ErrorCode::kCancelled) {
    cancelled();
    co_return hop;
  }
  if (!exchange) {
    retry(io::upstream_failure(exchange.code()), exchange.error());
    co_return hop;
  }
  std::string content_type(
      (*exchange)->headers().find("content-type").value_or("application/json"));
  auto answer =
      co_await (*exchange)->read_all(ctx.timeouts.upstream_header, kMaxPrefillAnswerBytes);
  if (!answer && answer.code() == ErrorCode::kCancelled) {
    cancelled();
    co_return hop;
  }
  if (!answer) {
    retry(io::upstream_failure(answer.code()), answer.error());
    co_return hop;
  }
  const int status = (*exchange)->status();
  if (status == 503) {  // overloaded or starting, as on the one-hop path
    retry("status_503", "answered 503");
    co_return hop;
  }
  if (status != 200) {
    // The engine refused the request itself (bad parameters, too long a prompt): every
    // engine would; pass its answer on, as the one-hop path does.
    ctx.lease.finish(true);
    ctx.pool.endpoint_result(pid, true);
    ctx.metrics.pd_hop_failure(pool_name, "prefill", fmt::format("status_{}", status));
    hop.response = {
        status, content_type, {{"x-kvgate-prefill-endpoint", prefill.url}}, std::move(*answer)};
    co_return hop;
  }
  auto params = openai::transfer_params_of(*answer);
  if (!params) {
    retry("protocol", params.error());
    co_return hop;
  }
  if (!*params) {
    // vLLM's proxy goes on without them: the decode engine then prefills itself.
    ctx.metrics.pd_hop_failure(pool_name, "prefill", "no_kv_transfer_params");
    spdlog::warn("pool {}: prefill endpoint {} answered without kv_transfer_params", pool_name,
                 prefill.url);
  }
  auto decode = openai::decode_body(ctx.request.body, params->value_or(""));
  if (!decode) {
    retry("protocol", decode.error());
    co_return hop;
  }
  ctx.pool.endpoint_result(pid, true);
  // The prefill endpoint's part is done: its prefill load goes.
  ctx.lease.first_token();
  hop.outcome = PrefillHop::kDone;
  hop.prefill_url = prefill.url;
  hop.decode_request = ctx.request;
  hop.decode_request.body = std::move(*decode);
  hop.decode_request.headers.push_back({"X-Request-Id", request_id});
  co_return hop;
}

}  // namespace kvgate::gateway
