#include "openai/request.h"

#include <boost/json.hpp>

#include "openai/json_dom.h"
#include "openai/json_fast.h"

namespace kvgate::openai {
namespace json = boost::json;

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

}  // namespace kvgate::openai
