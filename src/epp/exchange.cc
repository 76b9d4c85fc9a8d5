#include "epp/exchange.h"

#include <fmt/format.h>

#include <utility>

#include "openai/anthropic.h"
#include "openai/responses.h"
#include "openai/usage.h"

namespace kvgate::epp {
namespace {

namespace envoy_core = ::envoy::config::core::v3;

// A whole answer is read for its usage up to this size (serve reads up to 64 MiB; the
// usage of a longer answer is not counted, its bytes still pass).
constexpr size_t kMaxAnswerBytes = 16u << 20;

// A header's value: ext_proc sends raw_value, older data planes value.
std::string_view header_value(const envoy_core::HeaderValue& h) {
  return h.raw_value().empty() ? std::string_view(h.value()) : std::string_view(h.raw_value());
}

void set_header(pb::HeaderMutation& m, std::string_view key, std::string_view value) {
  envoy_core::HeaderValueOption* o = m.add_set_headers();
  o->mutable_header()->set_key(std::string(key));
  o->mutable_header()->set_raw_value(std::string(value));
  o->set_append_action(envoy_core::HeaderValueOption::OVERWRITE_IF_EXISTS_OR_ADD);
}

// The request's HTTP head from the ext_proc headers: pseudo-headers to method and
// target, the others to fields.
void read_head(const envoy_core::HeaderMap& headers, io::HttpRequest& http) {
  for (const envoy_core::HeaderValue& h : headers.headers()) {
    const std::string_view key = h.key();
    const std::string_view value = header_value(h);
    if (key == ":method") {
      http.method = std::string(value);
    } else if (key == ":path") {
      http.target = std::string(value);
    } else if (!key.empty() && key.front() != ':') {
      http.fields.add(key, value);
    }
  }
  const size_t q = http.target.find('?');
  http.path = http.target.substr(0, q);
  http.query = q == std::string::npos ? std::string() : http.target.substr(q + 1);
}

// The extra fields of a gateway answer: `headers`, then `header_lines` ("Name: v\r\n"...).
void answer_headers(const io::HttpResponse& a, pb::HeaderMutation& m) {
  if (!a.content_type.empty()) set_header(m, "content-type", a.content_type);
  for (const io::HttpHeader& h : a.headers) set_header(m, h.name, h.value);
  std::string_view lines = a.header_lines;
  while (!lines.empty()) {
    size_t eol = lines.find("\r\n");
    std::string_view line = lines.substr(0, eol);
    lines = eol == std::string_view::npos ? std::string_view() : lines.substr(eol + 2);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    set_header(m, line.substr(0, colon), value);
  }
}

pb::ProcessingResponse body_chunk(bool request, std::string body, bool end_of_stream) {
  pb::ProcessingResponse r;
  pb::BodyResponse* b = request ? r.mutable_request_body() : r.mutable_response_body();
  pb::StreamedBodyResponse* s =
      b->mutable_response()->mutable_body_mutation()->mutable_streamed_response();
  s->set_body(std::move(body));
  s->set_end_of_stream(end_of_stream);
  return r;
}

}  // namespace

std::optional<std::vector<std::string>> subset_hint(const pb::ProcessingRequest& request) {
  if (!request.has_metadata_context()) return std::nullopt;
  // The maps' keys as strings once (their lookups take a std::string), not per request.
  static const std::string kNamespace(kSubsetNamespace);
  static const std::string kKey(kSubsetKey);
  const auto& ns = request.metadata_context().filter_metadata();
  const auto it = ns.find(kNamespace);
  if (it == ns.end()) return std::nullopt;
  const auto& fields = it->second.fields();
  const auto f = fields.find(kKey);
  if (f == fields.end()) return std::nullopt;
  std::vector<std::string> out;
  const google::protobuf::Value& v = f->second;
  if (v.has_list_value()) {
    for (const google::protobuf::Value& e : v.list_value().values()) {
      if (e.has_string_value()) out.push_back(e.string_value());
    }
  } else if (v.has_string_value()) {
    std::string_view s = v.string_value();
    while (!s.empty()) {
      const size_t comma = s.find(',');
      std::string_view one = s.substr(0, comma);
      while (!one.empty() && one.front() == ' ') one.remove_prefix(1);
      while (!one.empty() && one.back() == ' ') one.remove_suffix(1);
      if (!one.empty()) out.emplace_back(one);
      s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
    }
  }
  return out;
}

std::string served_endpoint(const pb::ProcessingRequest& request) {
  if (!request.has_metadata_context()) return {};
  static const std::string kNamespace(kDestinationNamespace);
  static const std::string kKey(kServedKey);
  const auto& ns = request.metadata_context().filter_metadata();
  const auto it = ns.find(kNamespace);
  if (it == ns.end()) return {};
  const auto f = it->second.fields().find(kKey);
  if (f == it->second.fields().end() || !f->second.has_string_value()) return {};
  return f->second.string_value();
}

pb::ProcessingResponse immediate(const io::HttpResponse& answer) {
  pb::ProcessingResponse r;
  pb::ImmediateResponse* i = r.mutable_immediate_response();
  i->mutable_status()->set_code(static_cast<::envoy::type::v3::StatusCode>(answer.status));
  answer_headers(answer, *i->mutable_headers());
  i->set_body(answer.body);
  i->set_details(fmt::format("kvgate_epp_{}", answer.status));
  return r;
}

Result<std::vector<pb::ProcessingResponse>> Exchange::on_request(
    const pb::ProcessingRequest& request, const std::function<bool()>& cancelled) {
  Result<Step> step = on_message(request);
  if (!step) return step.failure();
  if (!step->pick) return std::move(step->responses);
  std::vector<pb::ProcessingResponse> out =
      on_pick(picker_.pick(std::move(*step->pick), cancelled));
  for (pb::ProcessingResponse& r : step->responses) out.push_back(std::move(r));
  return out;
}

Result<Exchange::Step> Exchange::on_message(const pb::ProcessingRequest& request) {
  using R = pb::ProcessingRequest;
  if (phase_ == Phase::kPicking) return Error("a message while the request's pick is pending");
  switch (request.request_case()) {
    case R::kRequestHeaders:
      return request_headers(request);
    case R::kRequestBody:
      return request_body(request);
    case R::kRequestTrailers: {
      if (phase_ == Phase::kRequestHeaders) return Error("request trailers before the headers");
      Step step;
      // Trailers end a body without its end of stream: the request is whole.
      if (phase_ == Phase::kRequestBody) step.pick = route(/*body=*/true);
      step.responses.emplace_back().mutable_request_trailers();
      return step;
    }
    case R::kResponseHeaders:
      if (phase_ != Phase::kRouted && phase_ != Phase::kOver) {
        return Error("response headers before the request was routed");
      }
      return Step{.pick = std::nullopt, .responses = response_headers(request)};
    case R::kResponseBody:
      if (phase_ != Phase::kResponseBody && phase_ != Phase::kOver) {
        return Error("a response body before the response headers");
      }
      return Step{.pick = std::nullopt, .responses = response_body(request)};
    case R::kResponseTrailers: {
      if (phase_ == Phase::kResponseBody) settle(status_);
      Step step;
      step.responses.emplace_back().mutable_response_trailers();
      return step;
    }
    case R::REQUEST_NOT_SET:
      break;
  }
  return Error("a ProcessingRequest with none of its request fields set");
}

Result<Exchange::Step> Exchange::request_headers(const pb::ProcessingRequest& r) {
  if (phase_ != Phase::kRequestHeaders) return Error("request headers a second time");
  read_head(r.request_headers().headers(), request_.http);
  request_.subset = subset_hint(r);
  request_.fallbacks = fallbacks_;
  if (classes_) {
    if (const auto o = request_.http.header(kObjectiveHeader)) {
      request_.priority = classes_->priority(*o);
    }
    if (const auto f = request_.http.header(kFairnessHeader)) {
      request_.fairness_id = classes_->fairness_id(*f);
    }
  }
  phase_ = Phase::kRequestBody;
  Step step;
  // No body (a GET): routed on the headers alone.
  if (r.request_headers().end_of_stream()) step.pick = route(/*body=*/false);
  return step;
}

Result<Exchange::Step> Exchange::request_body(const pb::ProcessingRequest& r) {
  if (phase_ != Phase::kRequestBody) {
    return Error(phase_ == Phase::kRequestHeaders ? "a request body before the headers"
                                                  : "a request body after its end of stream");
  }
  const std::string& chunk = r.request_body().body();
  Step step;
  if (request_.http.body.size() + chunk.size() > max_body_) {
    phase_ = Phase::kOver;
    io::HttpResponse a;
    a.status = 413;
    a.body = fmt::format(
        R"({{"error":{{"message":"Request body larger than {} bytes","type":"invalid_request_error","param":null,"code":null}}}})",
        max_body_);
    step.responses.push_back(immediate(a));
    return step;
  }
  request_.http.body += chunk;
  if (r.request_body().end_of_stream()) step.pick = route(/*body=*/true);
  return step;
}

gateway::ExternalRequest Exchange::route(bool body) {
  gateway::ExternalRequest whole = std::move(request_);
  request_ = {};
  routed_body_ = body;
  phase_ = Phase::kPicking;
  return whole;
}

std::vector<pb::ProcessingResponse> Exchange::on_pick(gateway::ExternalPick p) {
  const bool body = routed_body_;
  std::vector<pb::ProcessingResponse> out;
  if (p.answer || !p.endpoint) {
    phase_ = Phase::kOver;
    io::HttpResponse a =
        p.answer ? std::move(*p.answer) : io::HttpResponse{503, "application/json", {}, {}, {}};
    out.push_back(immediate(a));
    return out;
  }
  destination_ = p.destination;
  // The protocol's ordered list: the pick, then its fallbacks for the data plane's retries.
  std::string endpoints = destination_;
  for (const std::string& f : p.fallbacks) {
    endpoints += ',';
    endpoints += f;
  }
  pb::ProcessingResponse& h = out.emplace_back();
  pb::CommonResponse* c = h.mutable_request_headers()->mutable_response();
  c->set_clear_route_cache(true);
  pb::HeaderMutation& m = *c->mutable_header_mutation();
  set_header(m, kDestinationHeader, endpoints);
  // One value for every try of the data plane: the fallbacks were chosen to match it.
  if (p.dp_rank) {
    set_header(m, kRankHeader, std::to_string(*p.dp_rank));
  } else {
    m.add_remove_headers(std::string(kRankHeader));
  }
  // Disaggregated: the decode endpoint's sidecar runs the prefill hop there.
  if (!p.prefill.empty()) {
    set_header(m, kPrefillerHeader, p.prefill);
  } else {
    m.add_remove_headers(std::string(kPrefillerHeader));
  }
  if (body) set_header(m, "content-length", std::to_string(p.body.size()));
  // Built in place in the response (no Struct of its own swapped in).
  google::protobuf::Struct* lb =
      (*h.mutable_dynamic_metadata()->mutable_fields())[std::string(kDestinationNamespace)]
          .mutable_struct_value();
  (*lb->mutable_fields())[std::string(kDestinationHeader)].set_string_value(std::move(endpoints));
  // The body goes upstream once, moved: nothing reads the pick's copy after this.
  if (body) out.push_back(body_chunk(/*request=*/true, std::move(p.body), /*end_of_stream=*/true));
  pick_ = std::move(p);
  phase_ = Phase::kRouted;
  return out;
}

std::vector<pb::ProcessingResponse> Exchange::response_headers(const pb::ProcessingRequest& r) {
  std::vector<pb::ProcessingResponse> out;
  out.emplace_back().mutable_response_headers();
  if (phase_ == Phase::kOver) return out;  // an answer of the EPP's own, or settled
  if (std::string s = served_endpoint(r); !s.empty()) served_ = std::move(s);
  // A fallback served it: the router's load follows (the pick failed there).
  if (pick_ && !served_.empty() && served_ != destination_) picker_.served(*pick_, served_);
  std::string_view content_type;
  for (const envoy_core::HeaderValue& h : r.response_headers().headers().headers()) {
    const std::string_view value = header_value(h);
    if (h.key() == ":status") {
      int st = 0;
      for (char ch : value) {
        if (ch < '0' || ch > '9') break;
        st = st * 10 + (ch - '0');
        if (st > 999) break;
      }
      status_ = st;
    } else if (h.key() == "content-type") {
      content_type = value;
    }
  }
  sse_ = pick_ && pick_->stream && status_ == 200 &&
         content_type.find("text/event-stream") != std::string_view::npos;
  if (sse_) tap_.emplace(pick_->strip_usage_chunk, pick_->dialect);
  phase_ = Phase::kResponseBody;
  if (r.response_headers().end_of_stream()) settle(status_);
  return out;
}

std::vector<pb::ProcessingResponse> Exchange::response_body(const pb::ProcessingRequest& r) {
  const std::string& chunk = r.response_body().body();
  const bool eos = r.response_body().end_of_stream();
  std::vector<pb::ProcessingResponse> out;
  if (phase_ == Phase::kOver || !pick_) {
    out.push_back(body_chunk(/*request=*/false, chunk, eos));
    return out;
  }
  std::string pass;
  if (sse_) {
    held_ += chunk;
    openai::SseTap::Step step = tap_->feed(chunk, pass);
    held_.erase(0, held_.size() - tap_->pending());  // what the tap holds of an event
    if (step.token_events > 0 && !ttft_) ttft_ = to_seconds(picker_.now() - pick_->received);
    if (eos) pass += held_;  // an unfinished last event goes as it came
  } else {
    pass = chunk;
    if (!answer_cut_ && pick_->kind == gateway::PickKind::kRouted) {  // read for its usage
      if (answer_.size() + chunk.size() > kMaxAnswerBytes) {
        answer_cut_ = true;
        answer_.clear();
      } else {
        answer_ += chunk;
      }
    }
  }
  out.push_back(body_chunk(/*request=*/false, std::move(pass), eos));
  if (eos) settle(status_);
  return out;
}

void Exchange::settle(int status) {
  if (!pick_) {
    phase_ = Phase::kOver;
    return;
  }
  gateway::ExternalOutcome o;
  o.status = status;
  // A relayed answer (tokenize, a stored response) has no usage, and nothing to time.
  if (status == 200 && pick_->kind == gateway::PickKind::kRouted) {
    if (tap_) {
      o.usage = tap_->usage();
      o.ttft = ttft_;
      o.response_id = tap_->response_id();
    } else if (!answer_cut_) {
      switch (pick_->dialect) {
        case openai::Dialect::kOpenAi:
          o.usage = openai::parse_usage(answer_);
          break;
        case openai::Dialect::kAnthropic:
          o.usage = openai::anthropic::parse_usage(answer_);
          break;
        case openai::Dialect::kResponses: {
          openai::responses::Answered a = openai::responses::read_answer(answer_);
          o.usage = a.usage;
          o.response_id = std::move(a.id);
          break;
        }
      }
      o.ttft = to_seconds(picker_.now() - pick_->received);
    }
  }
  gateway::ExternalPick p = std::move(*pick_);
  pick_.reset();
  phase_ = Phase::kOver;
  picker_.done(std::move(p), std::move(o));
}

void Exchange::end() {
  if (pick_) settle(0);
}

}  // namespace kvgate::epp
