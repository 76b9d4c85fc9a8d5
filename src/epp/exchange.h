// Exchange: one ext_proc stream of the Endpoint Picker protocol (docs/epp.md), as the
// data plane (Envoy) runs it for one HTTP request and its response, in
// FULL_DUPLEX_STREAMED body mode. Knows the protocol's messages, not gRPC: the server
// (epp_server.cc) feeds it what it reads and sends what it returns; a test feeds it
// messages directly.
//
// The request path: the headers and the body's chunks are held until the body's end of
// stream; then the whole request is routed by the Picker (the gateway's front door and
// router, gateway/data/external.h) and answered with a headers response that sets
// x-gateway-destination-endpoint (and the same value in the dynamic metadata
// envoy.lb / x-gateway-destination-endpoint) and x-data-parallel-rank when the pick is
// one rank of a data-parallel engine, and x-prefiller-host-port when the router chose a
// remote prefill (each removed when not: only the router's choices reach the engine and
// its sidecar, as in serve), followed by the body as it goes upstream
// (a streamed body response, end of stream). A refusal is an ImmediateResponse with the
// status and body `kvgate serve` would have answered (503 no endpoint, 429 shed or rate
// limited, 400, 401, 404 ...). The subset hint (metadata envoy.lb.subset_hint /
// x-gateway-destination-endpoint-subset) limits the pick to its endpoints. The
// objective and fairness headers (x-gateway-inference-objective, -fairness-id) are read
// through RequestClasses (request_class.h) into the request's priority and tenant.
//
// The response path: headers and body chunks pass through unchanged (CONTINUE; each body
// chunk back as a streamed response), except a stream's usage-only chunk the gateway
// asked for itself, which is dropped as serve drops it. On the way the answer's usage is
// read (the SSE stream's usage chunk, a whole answer's `usage`) and, at its end, the
// pick is settled: the router's load released, tokens charged, metrics recorded.
//
// Two ways to drive it. on_request() routes inline, blocking on Picker::pick (tests, the
// fuzz target). A server whose threads must not wait (epp_server.cc, on gRPC's async
// API) uses on_message(): when the request is whole, the Step hands over the request to
// route; the caller starts the pick (Picker::start_pick) and, once decided, gives it to
// on_pick(), whose responses go first, then the Step's own. The two produce the same
// responses for the same messages.
//
//   Exchange x(picker, max_body_bytes);
//   auto out = x.on_request(message, cancelled);   // responses to send, maybe none
//   if (!out) ... close the stream with INVALID_ARGUMENT: out.error()
//   x.end();                                       // the stream is over
//
//   auto step = x.on_message(message);             // or, not waiting for the pick:
//   if (step && step->pick) picker.start_pick(std::move(*step->pick), [&](ExternalPick p) {
//     send(x.on_pick(std::move(p))); send(step->responses); });
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"
#include "core/common/time.h"
#include "envoy/service/ext_proc/v3/external_processor.pb.h"
#include "epp/request_class.h"
#include "gateway/data/external.h"
#include "openai/sse_tap.h"

namespace kvgate::epp {

namespace pb = ::envoy::service::ext_proc::v3;

// The protocol's names.
inline constexpr std::string_view kDestinationHeader = "x-gateway-destination-endpoint";
inline constexpr std::string_view kDestinationNamespace = "envoy.lb";
inline constexpr std::string_view kServedKey = "x-gateway-destination-endpoint-served";
inline constexpr std::string_view kSubsetNamespace = "envoy.lb.subset_hint";
inline constexpr std::string_view kSubsetKey = "x-gateway-destination-endpoint-subset";
// The data-parallel rank for the engine (route::kDataParallelRankHeader, vLLM's; in lower
// case, as HTTP/2 carries header names).
inline constexpr std::string_view kRankHeader = "x-data-parallel-rank";
// llm-d's P/D: the prefill endpoint ("ip:port") the decode side's sidecar prefills on.
inline constexpr std::string_view kPrefillerHeader = "x-prefiller-host-port";

// What routes a whole request: the running gateway (gateway_picker.h), or a test's fake.
class Picker {
 public:
  virtual ~Picker() = default;
  // Routes `request`, blocking until decided; `cancelled` says the data plane left (the
  // pick then ends soon, with an answer).
  virtual gateway::ExternalPick pick(gateway::ExternalRequest request,
                                     const std::function<bool()>& cancelled) = 0;
  // Routes `request` without waiting: `decided` runs exactly once with the pick, on any
  // thread, maybe before start_pick returns; it must not block. Returns the cancel (the
  // data plane left: the pick then ends soon, `decided` still runs, with an answer), which
  // may be called from any thread, also after `decided` ran (then it does nothing), and
  // holds nothing of the caller's. The default decides inline through pick(), never
  // cancelled: for a picker that does not wait (a test's fake).
  virtual std::function<void()> start_pick(gateway::ExternalRequest request,
                                           std::function<void(gateway::ExternalPick)> decided) {
    static const std::function<bool()> kNever = [] { return false; };
    decided(pick(std::move(request), kNever));
    return [] {};
  }
  // The end of a picked request's answer (gateway::Gateway::external_done).
  virtual void done(gateway::ExternalPick pick, gateway::ExternalOutcome outcome) = 0;
  // The gateway's clock, in which ExternalPick::received is read.
  virtual Nanos now() const = 0;
  // The data plane says `endpoint` ("ip:port") served `pick`, not its destination (a
  // fallback): the pick's load follows it (gateway::external_served). Before done().
  virtual void served(gateway::ExternalPick& pick, const std::string& endpoint) {
    (void)pick;
    (void)endpoint;
  }
};

struct ExchangeOptions {
  // A request body longer than this is refused (413), as serve's limits.max_body_bytes.
  size_t max_body_bytes = 8u << 20;
  // The objective and fairness headers' mapping (request_class.h), shared by every
  // stream; null: the headers are not read.
  RequestClasses* classes = nullptr;
  // Fallbacks listed after the pick in x-gateway-destination-endpoint (the router's
  // runners-up; at most route::Decision::kMaxRunnersUp).
  uint8_t fallbacks = 0;
};

class Exchange {
 public:
  Exchange(Picker& picker, const ExchangeOptions& options)
      : picker_(picker),
        max_body_(options.max_body_bytes),
        classes_(options.classes),
        fallbacks_(options.fallbacks) {}
  Exchange(Picker& picker, size_t max_body_bytes)
      : Exchange(picker, ExchangeOptions{.max_body_bytes = max_body_bytes}) {}
  ~Exchange() { end(); }
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  // The responses to send for `request`, in order (none while the request body is held).
  // An error for a message the protocol does not allow here (no request set, a body
  // before the headers, a second request): the stream must end with INVALID_ARGUMENT.
  Result<std::vector<pb::ProcessingResponse>> on_request(const pb::ProcessingRequest& request,
                                                         const std::function<bool()>& cancelled);
  // The stream is over: a pick whose answer did not end is settled as a client that left.
  // Idempotent.
  void end();

  // The asynchronous form of on_request (the header's comment).
  struct Step {
    // Set: the request is whole; route it (Picker::start_pick) and give the pick to
    // on_pick(). No message may come meanwhile (on_message refuses one).
    std::optional<gateway::ExternalRequest> pick;
    // The responses to send: after on_pick()'s when `pick` is set.
    std::vector<pb::ProcessingResponse> responses;
  };
  Result<Step> on_message(const pb::ProcessingRequest& request);
  // The pick of the request the last Step handed over: the request path's answer (the
  // pick's headers and body, or an ImmediateResponse). REQUIRES: a Step's `pick` was set
  // and this is its first call since.
  std::vector<pb::ProcessingResponse> on_pick(gateway::ExternalPick pick);

  // What was picked ("" before, or when refused): for logs and tests. The header and the
  // metadata carry it followed by the fallbacks, comma-separated.
  const std::string& destination() const { return destination_; }
  // The endpoint the data plane says served the answer (envoy.lb metadata), if it said.
  // When it is not the pick (a fallback), the Picker is told (Picker::served).
  const std::string& served() const { return served_; }

 private:
  enum class Phase : uint8_t {
    kRequestHeaders,  // nothing yet
    kRequestBody,     // headers held, body chunks coming
    kPicking,         // the whole request handed over (Step::pick): on_pick() next
    kRouted,          // the request path answered with a pick: its response comes next
    kResponseBody,    // response headers passed, body chunks coming
    kOver,            // answered (ImmediateResponse) or settled
  };

  Result<Step> request_headers(const pb::ProcessingRequest& r);
  Result<Step> request_body(const pb::ProcessingRequest& r);
  // The whole request, handed over to be picked (Phase::kPicking); `body`: it had one.
  gateway::ExternalRequest route(bool body);
  std::vector<pb::ProcessingResponse> response_headers(const pb::ProcessingRequest& r);
  std::vector<pb::ProcessingResponse> response_body(const pb::ProcessingRequest& r);
  void settle(int status);

  Picker& picker_;
  const size_t max_body_;
  RequestClasses* const classes_;
  const uint8_t fallbacks_;
  Phase phase_ = Phase::kRequestHeaders;
  bool routed_body_ = false;  // the request being picked had a body (route())
  gateway::ExternalRequest request_;
  std::optional<gateway::ExternalPick> pick_;
  std::string destination_;
  std::string served_;
  // The response path.
  int status_ = 0;
  bool sse_ = false;
  std::optional<openai::SseTap> tap_;
  std::string held_;         // the raw bytes of an SSE event the tap still holds
  std::string answer_;       // a whole answer, for its usage (up to a cap)
  bool answer_cut_ = false;  // the whole answer was longer than the cap
  std::optional<double> ttft_;
};

// Pure helpers, for the exchange and its tests.
// The subset hint of a request's metadata: nullopt when absent; a list (maybe empty)
// when present (a list of strings, or one string of comma-separated endpoints).
std::optional<std::vector<std::string>> subset_hint(const pb::ProcessingRequest& request);
// The served endpoint of a response's metadata, "" when absent.
std::string served_endpoint(const pb::ProcessingRequest& request);
// An ImmediateResponse of `answer` (status, content type, headers, body).
pb::ProcessingResponse immediate(const io::HttpResponse& answer);

}  // namespace kvgate::epp
