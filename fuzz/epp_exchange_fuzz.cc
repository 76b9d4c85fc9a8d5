// The Endpoint Picker's ext_proc message handling (epp/exchange.h): one stream of
// serialized ProcessingRequest messages, as the data plane sends them, fed to an Exchange
// whose Picker is a fake standing for the gateway (as in tests/epp/exchange_test.cc).
//
// The input: two option bytes, then records of a 2-byte little-endian length and that
// many bytes of one serialized ProcessingRequest (the last record takes what is left).
// Option byte 0: bits 0-1 the fallbacks asked for, bits 2-3 the picker's answer (pick,
// refuse with 429, no endpoint), bit 4 a 64-byte body limit, bit 5 the objective and
// fairness mapping, bit 6 the usage chunk stripped, bit 7 a streamed answer; byte 1,
// bits 0-1: the answer's dialect. As the server, a record that does not parse, or a
// message the exchange refuses, ends the stream.
//
// What must hold: every answer is one response of the kind its message calls for (the
// request path: nothing while the body is held, then the pick's headers and body, or one
// ImmediateResponse; the response path: one response of the message's own kind), and
// serializes and parses back; the pick goes in the destination header and in the envoy.lb
// metadata, identical, as the pick and its fallbacks; the picker sees the body as it came
// and the body it returned goes upstream; refusals carry the picker's or the limit's
// status; the response body passes through (unstripped: exactly the bytes that came in,
// all of them at each end of stream before any response trailers); a pick is settled
// exactly once, at the latest when the stream ends.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "epp/exchange.h"
#include "epp/request_class.h"
#include "fuzz/fuzz_support.h"
#include "gateway/data/route_lease.h"

// The gateway's RouteLease is not linked (route_lease.cc needs the whole gateway): the
// fake picker's picks hold no lease, so releasing one has nothing to do.
void kvgate::gateway::RouteLease::release_as_failed() {
  KVGATE_FUZZ_CHECK(!held(), "the fuzz target's picks hold no lease");
}

namespace {

using namespace kvgate;
namespace pb = ::envoy::service::ext_proc::v3;
namespace core_pb = ::envoy::config::core::v3;

constexpr size_t kMaxMessages = 64;
const std::function<bool()> kNever = [] { return false; };
constexpr const char* kPicked = "10.0.0.7:8000";
const std::vector<std::string> kRunnersUp = {"10.0.0.8:8000", "[fd00::9]:8000", "10.0.0.10:8000"};

enum class Mode : uint8_t { kPick, kRefuse, kNoEndpoint };

struct FakePicker final : epp::Picker {
  Mode mode = Mode::kPick;
  bool strip_usage = false;
  bool stream = false;
  openai::Dialect dialect = openai::Dialect::kOpenAi;
  std::vector<gateway::ExternalRequest> asked;
  size_t picks = 0;  // accepted: an endpoint and no answer
  size_t settled = 0;
  std::string upstream_body;  // the body the last pick sends upstream

  gateway::ExternalPick pick(gateway::ExternalRequest request,
                             const std::function<bool()>&) override {
    asked.push_back(request);
    gateway::ExternalPick p;
    if (mode == Mode::kRefuse) {
      p.answer = io::HttpResponse{429, "application/json", {{"Retry-After", "3"}}, "{}", {}};
      return p;
    }
    if (mode == Mode::kNoEndpoint) return p;  // neither answer nor endpoint: 503
    auto e = std::make_shared<gateway::EndpointAddress>();
    e->host = "10.0.0.7";
    e->port = 8000;
    p.destination = kPicked;
    p.endpoint = std::move(e);
    p.body = request.http.body + " ";  // as it goes upstream: not the bytes that came
    upstream_body = p.body;
    p.stream = stream;
    p.strip_usage_chunk = strip_usage;
    p.dialect = dialect;
    const size_t asked_for = request.fallbacks;
    for (size_t i = 0; i < asked_for && i < kRunnersUp.size(); ++i) {
      p.fallbacks.push_back(kRunnersUp[i]);
    }
    ++picks;
    return p;
  }
  void done(gateway::ExternalPick, gateway::ExternalOutcome outcome) override {
    ++settled;
    KVGATE_FUZZ_CHECK(settled <= picks, "settled more picks than were made");
    KVGATE_FUZZ_CHECK(outcome.status >= 0 && outcome.status <= 999, std::to_string(outcome.status));
  }
  Nanos now() const override { return 0; }
};

std::string header_of(const pb::HeaderMutation& m, std::string_view key) {
  for (const core_pb::HeaderValueOption& o : m.set_headers()) {
    if (o.header().key() == key) return o.header().raw_value();
  }
  return "<absent>";
}

std::string metadata_destination(const pb::ProcessingResponse& r) {
  const auto& ns = r.dynamic_metadata().fields();
  const auto it = ns.find(std::string(epp::kDestinationNamespace));
  if (it == ns.end() || !it->second.has_struct_value()) return "<absent>";
  const auto& f = it->second.struct_value().fields();
  const auto d = f.find(std::string(epp::kDestinationHeader));
  if (d == f.end() || !d->second.has_string_value()) return "<absent>";
  return d->second.string_value();
}

const std::string& streamed_body(const pb::BodyResponse& b) {
  return b.response().body_mutation().streamed_response().body();
}

// One stream of the input through one Exchange.
struct Run {
  FakePicker picker;
  std::string expected_destination;
  std::string fed;          // the request body as it came
  std::string response_in;  // the response body as it came, and as it went on
  std::string response_out;
  bool picked = false;
  // Response trailers end the body without its end of stream: an SSE event still held
  // unfinished then is not passed on (TrailersResponse carries no body).
  bool response_trailers = false;
  size_t max_body = 0;

  void check_immediate(const pb::ImmediateResponse& i) {
    const int code = static_cast<int>(i.status().code());
    KVGATE_FUZZ_CHECK(code == 413 || code == 429 || code == 503, std::to_string(code));
    if (code == 429) {
      KVGATE_FUZZ_CHECK(picker.mode == Mode::kRefuse, "a 429 the picker did not give");
      KVGATE_FUZZ_CHECK(header_of(i.headers(), "Retry-After") == "3", i.DebugString());
    }
    if (code == 503) {
      KVGATE_FUZZ_CHECK(picker.mode == Mode::kNoEndpoint, "a 503 with an endpoint to pick");
    }
    if (code == 413) {
      KVGATE_FUZZ_CHECK(fed.size() > max_body, "413 for a body within the limit");
    }
  }

  // The request path's answer to a message: nothing, the pick, or a refusal; `trailers`:
  // followed by the trailers' own response.
  void check_request_path(const std::vector<pb::ProcessingResponse>& out, size_t asked_before,
                          bool trailers) {
    size_t n = out.size();
    if (trailers) {
      KVGATE_FUZZ_CHECK(n >= 1 && out.back().has_request_trailers(), "no trailers response");
      --n;
    }
    if (n == 0) {
      KVGATE_FUZZ_CHECK(picker.asked.size() == asked_before, "the picker's answer was not sent");
      return;
    }
    if (out[0].has_immediate_response()) {
      KVGATE_FUZZ_CHECK(n == 1, "more after an ImmediateResponse");
      check_immediate(out[0].immediate_response());
      return;
    }
    // The pick: asked once, for the body as it came.
    KVGATE_FUZZ_CHECK(!picked, "a second pick on one stream");
    picked = true;
    KVGATE_FUZZ_CHECK(picker.asked.size() == asked_before + 1 && picker.asked.size() == 1,
                      "a pick without asking the picker once");
    const gateway::ExternalRequest& asked = picker.asked.back();
    KVGATE_FUZZ_CHECK(asked.http.body == fed, "the picker saw another body than came in");
    KVGATE_FUZZ_CHECK(asked.http.body.size() <= max_body, "a body past the limit was routed");
    KVGATE_FUZZ_CHECK(out[0].has_request_headers(), out[0].DebugString());
    const pb::CommonResponse& c = out[0].request_headers().response();
    KVGATE_FUZZ_CHECK(c.clear_route_cache(), "the route cache is kept");
    const std::string header = header_of(c.header_mutation(), epp::kDestinationHeader);
    KVGATE_FUZZ_CHECK(header == expected_destination,
                      header + " but expected " + expected_destination);
    KVGATE_FUZZ_CHECK(metadata_destination(out[0]) == header, out[0].DebugString());
    if (n == 2) {
      KVGATE_FUZZ_CHECK(out[1].has_request_body(), out[1].DebugString());
      const pb::StreamedBodyResponse& s =
          out[1].request_body().response().body_mutation().streamed_response();
      KVGATE_FUZZ_CHECK(s.end_of_stream(), "the upstream body does not end");
      KVGATE_FUZZ_CHECK(s.body() == picker.upstream_body, "another body went upstream");
      KVGATE_FUZZ_CHECK(
          header_of(c.header_mutation(), "content-length") == std::to_string(s.body().size()),
          out[0].DebugString());
    } else {
      KVGATE_FUZZ_CHECK(n == 1, "more than the pick's headers and body");
    }
  }

  // False: the stream ends (the message did not parse, or the exchange refused it).
  bool feed(epp::Exchange& x, std::string_view bytes) {
    pb::ProcessingRequest m;
    if (!m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return false;
    using R = pb::ProcessingRequest;
    if (m.request_case() == R::kRequestBody) fed += m.request_body().body();
    if (m.request_case() == R::kResponseBody) response_in += m.response_body().body();
    const size_t asked_before = picker.asked.size();
    Result<std::vector<pb::ProcessingResponse>> out = x.on_request(m, kNever);
    if (!out) {
      KVGATE_FUZZ_CHECK(!out.error().empty(), "a refusal without a reason");
      return false;
    }
    for (const pb::ProcessingResponse& r : *out) {
      KVGATE_FUZZ_CHECK(r.response_case() != pb::ProcessingResponse::RESPONSE_NOT_SET,
                        "a response with nothing set");
      pb::ProcessingResponse back;
      KVGATE_FUZZ_CHECK(back.ParseFromString(r.SerializeAsString()), r.DebugString());
      KVGATE_FUZZ_CHECK(back.response_case() == r.response_case(), r.DebugString());
    }
    switch (m.request_case()) {
      case R::kRequestHeaders:
        check_request_path(*out, asked_before, false);
        if (!m.request_headers().end_of_stream()) {
          KVGATE_FUZZ_CHECK(out->empty(), "headers with a body to come were answered");
        }
        break;
      case R::kRequestBody:
        check_request_path(*out, asked_before, false);
        break;
      case R::kRequestTrailers:
        check_request_path(*out, asked_before, true);
        break;
      case R::kResponseHeaders:
        KVGATE_FUZZ_CHECK(out->size() == 1 && (*out)[0].has_response_headers(),
                          "response headers not answered by one response headers");
        break;
      case R::kResponseBody: {
        KVGATE_FUZZ_CHECK(out->size() == 1 && (*out)[0].has_response_body(),
                          "a response body not answered by one response body");
        const pb::StreamedBodyResponse& s =
            (*out)[0].response_body().response().body_mutation().streamed_response();
        KVGATE_FUZZ_CHECK(s.end_of_stream() == m.response_body().end_of_stream(),
                          "the body's end of stream changed");
        response_out += streamed_body((*out)[0].response_body());
        if (!picker.strip_usage && !response_trailers) {
          // Passed through as it came: what went on is what came in, all of it at an end.
          KVGATE_FUZZ_CHECK(response_in.compare(0, response_out.size(), response_out) == 0,
                            "passed on bytes that did not come in");
          if (s.end_of_stream()) {
            KVGATE_FUZZ_CHECK(response_out == response_in, "an end of stream holds bytes back");
          }
        }
        KVGATE_FUZZ_CHECK(response_out.size() <= response_in.size(), "more out than in");
        break;
      }
      case R::kResponseTrailers:
        response_trailers = true;
        KVGATE_FUZZ_CHECK(out->size() == 1 && (*out)[0].has_response_trailers(),
                          "response trailers not answered by one response trailers");
        break;
      case R::REQUEST_NOT_SET:
        KVGATE_FUZZ_CHECK(false, "an empty message was accepted");
        break;
    }
    if (picked) KVGATE_FUZZ_CHECK(x.destination() == kPicked, x.destination());
    return true;
  }
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  GOOGLE_PROTOBUF_VERIFY_VERSION;
  // The descriptors and default instances, once, outside any input's leak check.
  pb::ProcessingRequest warm;
  warm.mutable_request_headers()->mutable_headers()->add_headers()->set_key(":path");
  (void)(*warm.mutable_metadata_context()->mutable_filter_metadata())["a"];
  pb::ProcessingRequest back;
  (void)back.ParseFromString(warm.SerializeAsString());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t o = data[0];
  const uint8_t fallbacks = o & 3;
  const uint8_t mode = (o >> 2) & 3;
  const bool small_body = (o >> 4) & 1;
  const bool with_classes = (o >> 5) & 1;

  Run run;
  run.picker.mode = mode == 1 ? Mode::kRefuse : mode == 2 ? Mode::kNoEndpoint : Mode::kPick;
  run.picker.strip_usage = (o >> 6) & 1;
  run.picker.stream = (o >> 7) & 1;
  switch (data[1] & 3) {
    case 1:
      run.picker.dialect = openai::Dialect::kAnthropic;
      break;
    case 2:
      run.picker.dialect = openai::Dialect::kResponses;
      break;
    default:
      run.picker.dialect = openai::Dialect::kOpenAi;
      break;
  }
  run.max_body = small_body ? 64 : 1u << 20;
  run.expected_destination = kPicked;
  for (size_t i = 0; i < size_t{fallbacks} && i < kRunnersUp.size(); ++i) {
    run.expected_destination += ',';
    run.expected_destination += kRunnersUp[i];
  }

  epp::RequestClasses classes({{"premium", 100}, {"batch", -1}}, 4);
  {
    epp::Exchange x(run.picker, epp::ExchangeOptions{.max_body_bytes = run.max_body,
                                                     .classes = with_classes ? &classes : nullptr,
                                                     .fallbacks = fallbacks});
    size_t at = 2;
    for (size_t n = 0; at < size && n < kMaxMessages; ++n) {
      size_t len = size - at;
      if (len >= 2) {
        len = std::min<size_t>(data[at] | (size_t{data[at + 1]} << 8), len - 2);
        at += 2;
      }
      const std::string_view bytes(reinterpret_cast<const char*>(data) + at, len);
      at += len;
      if (!run.feed(x, bytes)) break;
    }
    for (const gateway::ExternalRequest& a : run.picker.asked) {
      KVGATE_FUZZ_CHECK(a.fallbacks == fallbacks, std::to_string(a.fallbacks));
      if (a.priority) {
        KVGATE_FUZZ_CHECK(with_classes && (*a.priority == 100 || *a.priority == -1),
                          std::to_string(*a.priority));
      }
      KVGATE_FUZZ_CHECK(with_classes || a.fairness_id.empty(), a.fairness_id);
      KVGATE_FUZZ_CHECK(a.fairness_id.size() <= epp::kMaxFairnessIdBytes, a.fairness_id);
      KVGATE_FUZZ_CHECK(a.http.path.find('?') == std::string::npos, a.http.path);
    }
    x.end();
    KVGATE_FUZZ_CHECK(run.picker.settled == run.picker.picks,
                      "a pick not settled when the stream ended");
  }  // and the exchange's destructor settles nothing twice
  KVGATE_FUZZ_CHECK(run.picker.settled == run.picker.picks, "settled twice");
  KVGATE_FUZZ_CHECK(classes.ids() <= 4, std::to_string(classes.ids()));
  return 0;
}
