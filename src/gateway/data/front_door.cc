// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include <array>

#include "gateway/data/data_plane.h"
#include "io/find_headers.h"

namespace kvgate::gateway {
namespace {

// Every path the front door answers, told apart once: by length, then one comparison
// (it runs on every request).
enum class Path : uint8_t {
  kOther,
  kResponse,  // GET /v1/responses/{id}: a stored response (not a POST API)
  kHealth,
  kReady,
  kMetrics,
  kModels,
  kChat,
  kCompletions,
  kEmbeddings,
  kTokenize,
  kDetokenize,
  kMessages,
  kResponses,
  kScore,        // vLLM's /score and /v1/score
  kRerank,       // vLLM's /rerank, /v1/rerank and /v2/rerank
  kCountTokens,  // Anthropic's /v1/messages/count_tokens
};

// The fixed paths.
Path classify_exact(std::string_view p) {
  using namespace std::string_view_literals;
  switch (p.size()) {
    case 6:
      return p == "/ready"sv ? Path::kReady : p == "/score"sv ? Path::kScore : Path::kOther;
    case 7:
      return p == "/health"sv ? Path::kHealth : p == "/rerank"sv ? Path::kRerank : Path::kOther;
    case 8:
      return p == "/metrics"sv ? Path::kMetrics : Path::kOther;
    case 9:
      return p == "/tokenize"sv   ? Path::kTokenize
             : p == "/v1/score"sv ? Path::kScore
                                  : Path::kOther;
    case 10:
      if (p == "/v1/models"sv) return Path::kModels;
      return p == "/v1/rerank"sv || p == "/v2/rerank"sv ? Path::kRerank : Path::kOther;
    case 11:
      return p == "/detokenize"sv ? Path::kDetokenize : Path::kOther;
    case 12:
      return p == "/v1/messages"sv ? Path::kMessages : Path::kOther;
    case 13:
      return p == "/v1/responses"sv ? Path::kResponses : Path::kOther;
    case 14:
      return p == "/v1/embeddings"sv ? Path::kEmbeddings : Path::kOther;
    case 15:
      return p == "/v1/completions"sv ? Path::kCompletions : Path::kOther;
    case 20:
      return p == "/v1/chat/completions"sv ? Path::kChat : Path::kOther;
    case 25:
      return p == "/v1/messages/count_tokens"sv ? Path::kCountTokens : Path::kOther;
    default:
      return Path::kOther;
  }
}

// Every path: the fixed ones, then /v1/responses/{id} (an id without '/'), looked at only
// when no fixed path matched.
Path classify(std::string_view p) {
  const Path exact = classify_exact(p);
  if (exact != Path::kOther) [[likely]]
    return exact;
  if (p.size() > kResponsesPrefix.size() && p.starts_with(kResponsesPrefix) &&
      p.find('/', kResponsesPrefix.size()) == std::string_view::npos) {
    return Path::kResponse;
  }
  return Path::kOther;
}

// The paths whose POST the gateway proxies (the ones an API key guards).
bool is_post_api(Path p) { return p >= Path::kChat; }

// What the gateway does with a proxied path's request.
ApiRoute api_route(Path p) {
  using openai::ApiKind;
  using openai::AuxApi;
  using openai::Dialect;
  switch (p) {
    case Path::kCompletions:
      return {ApiKind::kCompletion, Serve::kGenerate, AuxApi::kEmbeddings, Dialect::kOpenAi};
    case Path::kEmbeddings:
      return {ApiKind::kCompletion, Serve::kEmbed, AuxApi::kEmbeddings, Dialect::kOpenAi};
    case Path::kScore:
      return {ApiKind::kCompletion, Serve::kEmbed, AuxApi::kScore, Dialect::kOpenAi};
    case Path::kRerank:
      return {ApiKind::kCompletion, Serve::kEmbed, AuxApi::kRerank, Dialect::kOpenAi};
    case Path::kTokenize:
      return {ApiKind::kCompletion, Serve::kRelay, AuxApi::kTokenize, Dialect::kOpenAi};
    case Path::kDetokenize:
      return {ApiKind::kCompletion, Serve::kRelay, AuxApi::kDetokenize, Dialect::kOpenAi};
    case Path::kMessages:
      return {ApiKind::kChat, Serve::kGenerate, AuxApi::kEmbeddings, Dialect::kAnthropic};
    case Path::kResponses:
      return {ApiKind::kChat, Serve::kGenerate, AuxApi::kEmbeddings, Dialect::kResponses};
    case Path::kCountTokens:
      return {ApiKind::kChat, Serve::kRelay, AuxApi::kCountTokens, Dialect::kAnthropic};
    default:  // kChat
      return {ApiKind::kChat, Serve::kGenerate, AuxApi::kEmbeddings, Dialect::kOpenAi};
  }
}

}  // namespace

void DataPlane::handle(HttpRequest&& req, std::shared_ptr<ResponseStream> stream,
                       std::optional<ProxyCall>& to_proxy) {
  using namespace std::string_view_literals;  // comparisons by size first, no strlen
  const Nanos received = clock.now();
  const std::string_view path = req.path;
  const std::string_view method = req.method;
  const bool get = method == "GET"sv || method == "HEAD"sv;
  const Path what = classify(path);
  switch (what) {
    case Path::kOther:
      return stream->respond(json_error(404, fmt::format("Not found: {} {}", req.method, path)));
    case Path::kHealth:
      if (!get) return stream->respond(json_error(405, "Method not allowed"));
      return stream->respond(HttpResponse{200, "application/json", {}, "{\"status\":\"ok\"}"});
    case Path::kReady:
      if (!get) return stream->respond(json_error(405, "Method not allowed"));
      if (const std::optional<std::string_view> why = unready(/*discovered=*/false)) {
        return stream->respond(
            HttpResponse{503, "application/json", {}, fmt::format("{{\"status\":\"{}\"}}", *why)});
      }
      return stream->respond(HttpResponse{200, "application/json", {}, "{\"status\":\"ready\"}"});
    case Path::kMetrics:
      if (!get) return stream->respond(json_error(405, "Method not allowed"));
      return stream->respond(
          HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", {}, metrics_text()});
    case Path::kModels:
      if (!get) {
        return stream->respond(
            json_error(405, fmt::format("Method {} not allowed on {}", req.method, path)));
      }
      if (keys) {
        const auto auth = req.header("authorization");
        if (!auth || !keys->authenticate_header(*auth)) {
          return stream->respond(
              json_error(401, "Invalid or missing API key", {}, "invalid_api_key"));
        }
      }
      return stream->respond(HttpResponse{200, "application/json", {}, models_json});
    case Path::kResponse:
      return handle_stored_response(std::move(req), std::move(stream), received, to_proxy);
    default:
      break;
  }
  if (method != "POST"sv) {
    return stream->respond(
        json_error(405, fmt::format("Method {} not allowed on {}", req.method, path)));
  }
  handle_inference(std::move(req), std::move(stream), api_route(what), received, to_proxy);
}

void DataPlane::handle_stored_response(HttpRequest&& req, std::shared_ptr<ResponseStream> stream,
                                       Nanos received, std::optional<ProxyCall>& to_proxy) {
  using namespace std::string_view_literals;
  const Tenant* tenant = nullptr;
  std::string_view tenant_name = "anonymous";
  auto reject = [&](HttpResponse r) {
    metrics.request_done({}, {}, tenant_name, r.status, seconds_since(received));
    stream->respond(std::move(r));
  };
  // vLLM serves GET (and POST .../cancel, for background responses, which kvgate does not
  // relay); it has no DELETE.
  if (req.method != "GET"sv) {
    return reject(
        json_error(405, fmt::format("Method {} not allowed on {}", req.method, req.path)));
  }
  if (keys) {
    if (std::optional<HttpResponse> r = check_key(req, tenant)) return reject(std::move(*r));
    tenant_name = tenant->name;
  }
  const std::string_view id = std::string_view(req.path).substr(kResponsesPrefix.size());
  PoolRuntime* holder = nullptr;
  for (auto& p : pools) {
    if (std::optional<route::EndpointId> e = p->responses().find(id); e && p->endpoint(*e)) {
      holder = p.get();
      break;
    }
  }
  if (!holder) return reject(response_not_found(id));
  ProxyCall& call = to_proxy.emplace();
  call.serve = Serve::kStored;
  call.stream = std::move(stream);
  call.target = std::move(req.target);  // with its query, as vLLM reads it
  call.kind = openai::ApiKind::kChat;
  call.model = nullptr;
  call.pool = holder;
  call.tenant = std::string(tenant_name);
  call.limited_tenant = tenant;  // the tenant whose models the answer must be one of
  call.criticality = route::Criticality::kStandard;
  call.received = received;
  if (tracer) [[unlikely]] {
    call.trace = tracer->begin(req, received);
    if (call.trace) {
      call.trace->set_pool(holder->name());
      call.trace->set_path(call.target);
    }
  }
}

std::optional<HttpResponse> DataPlane::check_key(const HttpRequest& req,
                                                 const Tenant*& tenant) const {
  const auto auth = req.header("authorization");
  if (!auth) {
    // Anthropic's clients send the key alone, in x-api-key.
    if (const auto key = req.header("x-api-key")) {
      tenant = keys->authenticate(*key);
      if (!tenant) return json_error(401, "Incorrect API key provided.", {}, "invalid_api_key");
      return std::nullopt;
    }
    return json_error(401,
                      "You didn't provide an API key. Send it as "
                      "'Authorization: Bearer <key>'.",
                      {}, "invalid_api_key");
  }
  tenant = keys->authenticate_header(*auth);
  if (!tenant) return json_error(401, "Incorrect API key provided.", {}, "invalid_api_key");
  return std::nullopt;
}

std::optional<HttpResponse> DataPlane::refuse_before_body(const HttpRequest& head) {
  using namespace std::string_view_literals;
  const Path what = classify(head.path);
  if (head.method != "POST"sv || !is_post_api(what)) return std::nullopt;
  const Tenant* tenant = nullptr;
  std::optional<HttpResponse> r = check_key(head, tenant);
  if (r) {
    metrics.request_done({}, {}, "anonymous", 401, 0);
    shape(api_route(what).dialect, *r);
  }
  return r;
}

void DataPlane::handle_inference(HttpRequest&& req, std::shared_ptr<ResponseStream> stream,
                                 ApiRoute route, Nanos received,
                                 std::optional<ProxyCall>& to_proxy) {
  using namespace std::string_view_literals;
  // A latency target's largest value in milliseconds (a day; more would be no target).
  constexpr int64_t kMaxTargetMs = 86'400'000;
  std::string tenant_name = "anonymous";
  const Tenant* tenant = nullptr;
  const openai::Dialect dialect = route.dialect;
  const openai::ApiKind kind = route.kind;
  const Serve serve = route.serve;
  auto reject = [&](int status, HttpResponse r, std::string_view model = {},
                    std::string_view pool = {}) {
    metrics.request_done(model, pool, tenant_name, status, seconds_since(received));
    shape(dialect, r);
    stream->respond(std::move(r));
  };
  if (keys) {
    if (std::optional<HttpResponse> r = check_key(req, tenant)) return reject(401, std::move(*r));
    tenant_name = tenant->name;
  }
  if (draining.load()) {
    return reject(503, shutting_down_response());
  }
  // Messages and Responses are inspected as the chat request they stand for.
  // (count_tokens, relayed, is inspected as it is.)
  std::unique_ptr<Translation> translation;
  const bool generate = serve == Serve::kGenerate;
  if (generate && dialect == openai::Dialect::kAnthropic) {
    // A translation's error answers without `param` (null), as it always has.
    auto chat = openai::anthropic::messages_to_chat(req.body);
    if (!chat) {
      const int status = kvgate::http_status(chat.code());
      return reject(status, json_error(status, chat.error()));
    }
    translation = std::make_unique<Translation>();
    translation->route_body = std::move(*chat);
  } else if (generate && dialect == openai::Dialect::kResponses) {
    auto form = openai::responses::to_chat(req.body);
    if (!form) {
      const int status = kvgate::http_status(form.code());
      return reject(status, json_error(status, form.error()));
    }
    auto& f = *form;
    translation = std::make_unique<Translation>(
        Translation{std::move(f.chat), std::move(f.previous_response_id)});
  }
  const bool translated = translation != nullptr;
  openai::Inspection inspection =
      serve != Serve::kGenerate ? openai::inspect_aux_request(req.body, route.aux)
      : translated              ? openai::inspect_request(translation->route_body, kind)
                                : openai::inspect_request(req.body, kind);
  if (inspection.error) {
    const Error& e = *inspection.error;
    const int status = kvgate::http_status(e.code);
    return reject(status, json_error(status, e.message, e.field));
  }
  // Embeddings and (de)tokenize may leave the model out, as vLLM allows: the only one.
  if (inspection.request.model.empty() && config.models.size() == 1) {
    inspection.request.model = config.models.front().name;
  }
  if (inspection.request.model.empty()) {
    return reject(400, json_error(400, "you must provide a model parameter", "model"));
  }
  const ModelConfig* model = config.find_model(inspection.request.model);
  if (!model) {
    return reject(
        404, json_error(404, fmt::format("The model '{}' does not exist", inspection.request.model),
                        "model", "model_not_found"));
  }
  if (tenant && !tenant->allows(model->name)) {
    return reject(403,
                  json_error(403, fmt::format("This key may not use the model '{}'", model->name),
                             "model", "model_not_allowed"),
                  model->name);
  }
  // The headers read below, found in one pass over the request's fields (each the first
  // field of its name, as header() finds it): most requests carry none of them.
  PoolRuntime* const pool = pool_named(model->pool);
  const std::array<std::string_view, 7> names = {"x-kvgate-priority"sv,
                                                 "x-kvgate-deadline-ms"sv,
                                                 "x-slo-ttft-ms"sv,
                                                 "x-slo-tpot-ms"sv,
                                                 "x-kvgate-ttft-ms"sv,
                                                 "x-kvgate-tpot-ms"sv,
                                                 pool->config().router.session_affinity.header};
  std::array<std::optional<std::string_view>, names.size()> found;
  io::find_headers(req.fields, names, found);
  // An integer priority or a criticality name; anything else keeps the default.
  route::Criticality criticality = route::criticality_from_priority(tenant ? tenant->priority : 0);
  if (const auto& p = found[0]; p && tenant && tenant->may_set_priority) {
    int v = 0;
    auto [end, ec] = std::from_chars(p->data(), p->data() + p->size(), v);
    if (ec == std::errc() && end == p->data() + p->size()) {
      criticality = route::criticality_from_priority(v);
    } else if (auto named = route::parse_criticality(*p)) {
      criticality = *named;
    }
  }
  FlowTicketData flow;
  if (tenant) flow.weight = tenant->weight;
  int64_t deadline_ms = tenant ? tenant->deadline_ms : 0;
  if (const auto& d = found[1]) {
    auto [end, ec] = std::from_chars(d->data(), d->data() + d->size(), deadline_ms);
    if (ec != std::errc() || end != d->data() + d->size() || deadline_ms <= 0) {
      return reject(400,
                    json_error(400, "x-kvgate-deadline-ms: expected a positive integer",
                               "x-kvgate-deadline-ms", "invalid_header"),
                    model->name, model->pool);
    }
  }
  if (deadline_ms > 0) flow.deadline = received + deadline_ms * kMillisecond;
  // Latency targets (docs/router.md, "Latency targets"): kvgate's headers, else llm-d's
  // names, else the tenant's defaults; honoured when the pool's router has them enabled.
  int64_t ttft_ms = tenant ? tenant->ttft_ms : 0;
  int64_t tpot_ms = tenant ? tenant->tpot_ms : 0;
  for (size_t i = 2; i < 6; ++i) {
    const std::string_view name = names[i];
    const auto& v = found[i];
    if (!v) continue;
    int64_t ms = 0;
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), ms);
    if (ec != std::errc() || end != v->data() + v->size() || ms <= 0 || ms > kMaxTargetMs) {
      return reject(400,
                    json_error(400, fmt::format("{}: expected a positive integer", name), name,
                               "invalid_header"),
                    model->name, model->pool);
    }
    (name.find("ttft") != std::string_view::npos ? ttft_ms : tpot_ms) = ms;
  }
  ProxyCall& call = to_proxy.emplace();
  call.ttft_target = ttft_ms * kMillisecond;
  call.tpot_target = tpot_ms * kMillisecond;
  call.serve = serve;
  call.flow = flow;
  call.stream = std::move(stream);
  call.target = std::move(req.path);
  // The body goes upstream as it came (moved, not copied) when nothing in it changes.
  call.dialect = dialect;
  call.translation = std::move(translation);
  if (serve != Serve::kGenerate || translated) {
    call.body = inspection.request.model == model->served_name
                    ? std::move(req.body)
                    : openai::rewrite_request(req.body, model->served_name, /*stream=*/false);
  } else {
    call.body = openai::sent_unchanged(inspection.request, model->served_name)
                    ? std::move(req.body)
                    : openai::upstream_body(req.body, inspection.request, model->served_name);
  }
  call.kind = kind;
  call.request = std::move(inspection.request);
  call.model = model;
  call.pool = pool;
  if (serve != Serve::kRelay) call.pool->count_arrival();
  call.tenant = std::move(tenant_name);
  if (tenant && TenantLimiter::limited(*tenant) && serve != Serve::kRelay) {
    call.limited_tenant = tenant;
  }
  call.criticality = criticality;
  // Session affinity: the pool's session header (its name is read from the startup
  // config; the router ignores the session while the pool keeps no affinity).
  if (serve != Serve::kRelay) {
    if (const auto& v = found[6]; v && !v->empty()) {
      call.session = route::session_key(*v, model->name);
    }
  }
  call.received = received;
  // Tracing off: this one branch is all (no header scan, no allocation).
  if (tracer) [[unlikely]] {
    call.trace = tracer->begin(req, received);
    if (call.trace) {
      call.trace->set_model(model->name);
      call.trace->set_pool(model->pool);
      call.trace->set_path(call.target);
    }
  }
}

}  // namespace kvgate::gateway
