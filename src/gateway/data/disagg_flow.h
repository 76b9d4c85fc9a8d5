// The prefill hop of a disaggregated (prefill/decode) request, as `kvgate serve` runs
// vLLM's P/D proxy flow (docs/gateway.md, "Disaggregated prefill/decode").
//
// The router picks both endpoints in one decision (route::Decision: `endpoint` decodes,
// `prefill_endpoint` prefills; nullopt when the remote prefill is skipped). For a
// decision with a prefill endpoint, the gateway first runs the prefill hop here: the
// request as vLLM's proxy sends it (pd_request.h) to the prefill endpoint, and from its
// answer the request for the decode endpoint. The decode hop then goes through the
// gateway's ordinary proxy path (retries before the first byte, streaming, usage,
// TTFT/ITL, router lifecycle), so a two-hop answer reaches the client exactly as a
// one-hop one does.
//
// The router tracks one request on both endpoints (EndpointPool: a P/D placement), so a
// failed hop releases both with one RouteLease::finish(false). A successful
// prefill hop ends the prefill endpoint's part: RouteLease::first_token() releases its
// prefill load there (the decode endpoint's first token later is a no-op for the pool).
//
//   PrefillHop hop = co_await run_prefill_hop({...});
//   switch (hop.outcome) {
//     case PrefillHop::kDone:  send hop.decode_request to the decode endpoint
//     case PrefillHop::kRetry: exclude hop.failed_endpoint, pick again (nothing sent yet)
//     case PrefillHop::kFail:  answer the client hop.response (e.g. the engine's 400)
//   }
#pragma once

#include <boost/asio/awaitable.hpp>
#include <string>

#include "gateway/common/config.h"
#include "gateway/common/metrics.h"
#include "gateway/data/pool_routing.h"
#include "gateway/data/route_lease.h"
#include "gateway/data/tracer.h"
#include "io/http_types.h"
#include "io/upstream_client.h"

namespace kvgate::gateway {

// Whether the pool routes disaggregated, by the router's rule: pd.mode on, or auto with
// at least one prefill-role endpoint in its configuration (endpoints added at run time
// are not looked at: this only decides what kvgate_pd_local_prefills_total counts).
bool disaggregated(const PoolConfig& pool);

struct PrefillHop {
  enum Outcome { kDone, kRetry, kFail };
  Outcome outcome = kFail;
  // kDone: the request for the decode endpoint (the original one with the prefill
  // endpoint's kv_transfer_params), and the prefill endpoint's URL.
  io::UpstreamRequest decode_request;
  std::string prefill_url;
  // kRetry: why, and the endpoint to exclude from the next pick. The router's load
  // for the request is already released.
  std::string error;
  route::EndpointId failed_endpoint = 0;
  // kFail: the answer for the client (the prefill engine's own error for a request it
  // refused, e.g. 400). The router's load is released.
  io::HttpResponse response;
};

// What the prefill hop needs; all borrowed for the duration of the call.
struct PrefillHopContext {
  io::UpstreamClient& upstream;
  PoolRouting& pool;
  GatewayMetrics& metrics;
  const TimeoutConfig& timeouts;
  const route::Decision& decision;  // accepted, with a prefill_endpoint
  // The router's bookkeeping of the request (both endpoints): released here when the hop
  // fails or the engine refuses the request.
  RouteLease& lease;
  // The request as the gateway sends it upstream (model rewritten, include_usage on
  // streams): the prefill body is built from it and the decode request is it plus the
  // kv_transfer_params.
  const io::UpstreamRequest& request;
  // The request's trace (tracer.h), or null when it is not traced: the prefill hop then
  // gets a span and a traceparent of its own.
  RequestTrace* trace;
};

boost::asio::awaitable<PrefillHop> run_prefill_hop(PrefillHopContext ctx);

}  // namespace kvgate::gateway
