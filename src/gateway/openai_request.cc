#include "gateway/openai_request.h"

#include <boost/json.hpp>

#include "gateway/openai_json_dom.h"
#include "gateway/openai_json_fast.h"

namespace kvgate::gateway {
namespace json = boost::json;

namespace {

std::string_view error_type(int status) {
  switch (status) {
    case 400:
    case 404:
    case 413:
    case 422:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 429:
      return "rate_limit_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

}  // namespace

std::string openai_error_json(int status, std::string_view message, std::string_view param,
                              std::string_view code) {
  json::object err;
  err["message"] = message;
  err["type"] = error_type(status);
  err["param"] = param.empty() ? json::value(nullptr) : json::value(param);
  err["code"] = code.empty() ? json::value(nullptr) : json::value(code);
  json::object root;
  root["error"] = std::move(err);
  return json::serialize(root);
}

Inspection inspect_request(std::string_view body, ApiKind kind) {
  Inspection out;
  if (fast::inspect_request(body, kind, out.request)) return out;
  return dom::inspect_request(body, kind);
}

std::string rewrite_request(std::string_view body, std::string_view served_model, bool stream) {
  json::value v = json::parse(body);
  json::object& o = v.as_object();
  o["model"] = served_model;
  if (stream) {
    json::value& so = o["stream_options"];
    if (!so.is_object()) so = json::object();
    so.as_object()["include_usage"] = true;
  }
  return json::serialize(v);
}

bool sent_unchanged(const InspectedRequest& request, std::string_view served_model) {
  return request.model == served_model && (!request.stream || request.client_wants_usage);
}

std::string upstream_body(std::string_view body, const InspectedRequest& request,
                          std::string_view served_model) {
  if (sent_unchanged(request, served_model)) return std::string(body);
  if (request.model == served_model) {
    if (!request.has_stream_options) {
      // A JSON object with at least one member (`model`): a member after its '{' keeps it
      // valid, and there is no other stream_options to clash with.
      const size_t brace = body.find('{');
      constexpr std::string_view kUsage = R"("stream_options":{"include_usage":true},)";
      std::string out;
      out.reserve(body.size() + kUsage.size());
      out.append(body.substr(0, brace + 1));
      out.append(kUsage);
      out.append(body.substr(brace + 1));
      return out;
    }
  }
  return rewrite_request(body, served_model, request.stream);
}

}  // namespace kvgate::gateway
