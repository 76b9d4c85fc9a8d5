// External routing: the gateway's checks and routing decision for a request that another
// data plane carries to the engine (the Endpoint Picker, `kvgate epp`, src/epp/,
// docs/epp.md).
//
// The request goes through what `kvgate serve` runs for its own requests, unchanged: the
// front door (key, body, model, tenant), the tenant's rate limits, the LoRA placement,
// the pool's keys (tokenizer or engine fallback) and warm-up tracking, flow control's
// queue and the router's decision (PoolRuntime::admit / pick). The front door runs on the
// caller's thread, and so does the decision when the request waits for nothing before it
// (no rate limits, LoRA placement, engine token ids or queue) and the pool's strand is
// free (DataPlane::external_now); the rest runs on the gateway's I/O threads, as serve's
// requests do. Where serve would send it
// upstream, the accepted pick comes back instead, with the request's RouteLease: the
// router counts its load until Gateway::external_done says how the answer ended. The
// relayed paths are picked as serve relays them (PickKind). Every
// answer serve would have given instead (401, 404, 429 rate limited or shed, 503 no
// endpoint, even GET /v1/models's 200) comes back as `answer`.
//
//   std::function<void()> cancel = gateway.pick_external(std::move(request),
//       [&](ExternalPick p) { ... });   // once: maybe here, before it returns, else on
//                                        // one of the gateway's I/O threads
//   ...                                  // the data plane sends p.body to p.destination
//   gateway.external_done(std::move(p), {.status = 200, .usage = u, .first_token = true});
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/time.h"
#include "gateway/data/keys.h"
#include "gateway/data/pool_runtime.h"
#include "gateway/data/route_lease.h"
#include "io/http_types.h"
#include "openai/api_kind.h"
#include "openai/usage.h"

namespace kvgate::gateway {

struct ExternalRequest {
  // As the data plane received it: method, target and path, header fields (no HTTP/2
  // pseudo-headers), body.
  io::HttpRequest http;
  // The data plane's subset hint: only these endpoints ("ip:port", as destination_of
  // writes them) may be picked; nullopt: any of the pool's. Empty, or none of them in the
  // pool: 503, as when no endpoint is ready.
  std::optional<std::vector<std::string>> subset;
  // The Inference Extension's objective, as the priority the EPP's config gives it
  // (epp/request_class.h); nullopt: none, the request keeps serve's priority. Applied
  // when the config has no API keys, or the key's tenant has may_set_priority.
  std::optional<int> priority;
  // The Inference Extension's fairness id: the request's tenant in flow control and the
  // metrics when the config has no API keys ("": none, "anonymous" as in serve).
  std::string fairness_id;
  // Fallbacks to list after the pick (the router's runners-up, at most
  // route::Decision::kMaxRunnersUp).
  uint8_t fallbacks = 0;
};

// What a pick is for.
enum class PickKind : uint8_t {
  kRouted,  // an inference request, routed by the router: its lease, usage and metrics
  kRelay,   // tokenize, detokenize, count_tokens: the pool's next healthy endpoint in turn,
            // as serve relays them (no lease, no usage)
  kStored,  // GET /v1/responses/{id}: the endpoint that answered the response
};

struct ExternalPick {
  // Answered by the gateway itself (a refusal, or a path it answers without an engine):
  // what `kvgate serve` would have sent. Unset when a pick was made.
  std::optional<io::HttpResponse> answer;
  PickKind kind = PickKind::kRouted;

  // The pick: its endpoint, as "ip:port" for the data plane.
  std::shared_ptr<const EndpointAddress> endpoint;
  std::string destination;
  // The fallbacks asked for, best first, in the same form: the data plane's retries
  // (fallback_destinations: only those the request's headers are right for).
  std::vector<std::string> fallbacks;
  // The data-parallel rank the request names to the engine (route/data_parallel.h: the
  // header X-data-parallel-rank, as serve sets it on its own hops): the pick's rank;
  // nullopt: none, and a client's header of that name must not reach the engine.
  std::optional<uint32_t> dp_rank;
  // A disaggregated decision (route::Decision::prefill_endpoint): the prefill endpoint,
  // "ip:port", for the decode side's sidecar (x-prefiller-host-port); "": none, the
  // decode endpoint prefills itself.
  std::string prefill;
  // The body as it must go upstream (the model's served name; a stream asks for usage).
  std::string body;
  bool stream = false;
  // The usage-only chunk of a stream is the gateway's, not the client's: strip it.
  bool strip_usage_chunk = false;
  openai::Dialect dialect = openai::Dialect::kOpenAi;

  // What external_done settles.
  RouteLease lease;
  PoolRuntime* pool = nullptr;
  std::string model;
  std::string tenant;
  const Tenant* limited_tenant = nullptr;
  Nanos received = 0;  // in the gateway's clock
  std::optional<double> routing_seconds;
  uint32_t charged_output_tokens = 0;  // flow control's charge, corrected by the usage
  bool embed = false;
};

// How an externally carried answer ended.
struct ExternalOutcome {
  int status = 0;  // the engine's status; 0: no answer came (the client or data plane left)
  openai::Usage usage;
  // Seconds from the pick's `received` to the first token (or the whole answer), if any.
  std::optional<double> ttft;
  // A Responses API answer's id: the picked endpoint holds it, for GET /v1/responses/{id}
  // and previous_response_id ("" when none).
  std::string response_id;
};

// The data plane reports that `served` ("ip:port", x-gateway-destination-endpoint-served)
// answered a routed pick, not its destination: a fallback took it after the pick failed.
// The pick failed there (its circuit breaker is told), and the request's load moves to
// the served endpoint, which the pick then names (its breaker and the Responses record
// get the answer's outcome at external_done). The served endpoint is the pool's at that
// address with the rank the request named (ExternalPick::dp_rank); none (another
// address, an endpoint gone, a data-parallel engine reached without a rank): nothing
// moves. False when nothing moved. Any thread; before external_done.
bool external_served(ExternalPick& pick, std::string_view served);

// "ip:port" of an endpoint, "[ip]:port" for an IPv6 address: the form the Endpoint
// Picker protocol's x-gateway-destination-endpoint carries.
std::string destination_of(const EndpointAddress& endpoint);

// The fallbacks listed after `pick`, from the router's runners-up (best first), at most
// `max`. The data plane tries them with the request's headers as they were set for the
// pick: one value of the rank header (`rank`, ExternalPick::dp_rank) for every try. So a
// runner-up is listed only where those headers are right for it:
// - never at the pick's own address (another rank of the same engine: the same
//   destination, with the same rank header, again), and each address once;
// - with a rank header, only a runner-up of that same rank (another rank would get the
//   wrong one, and an engine that is not data-parallel may refuse it as out of range).
//   Without one, any: a data-parallel engine balances a request that names no rank.
// Fewer than `max` may remain.
//
// The rank named by a pick the data plane carries (ExternalPick::dp_rank): the request
// has one set of headers, which a P/D sidecar also copies to its prefill hop. So the
// (decode) endpoint's rank when there is no prefill endpoint or it is the same rank;
// else none, and each engine balances the request over its own ranks.
std::optional<uint32_t> carried_rank(const EndpointAddress& endpoint,
                                     const EndpointAddress* prefill);
std::vector<std::string> fallback_destinations(const EndpointAddress& pick,
                                               std::optional<uint32_t> rank,
                                               const std::vector<EndpointAddress>& runners_up,
                                               size_t max);

}  // namespace kvgate::gateway
