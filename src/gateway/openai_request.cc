#include "gateway/openai_request.h"

#include <boost/json.hpp>

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

void append_content(const json::value& content, std::string& out) {
  if (content.is_string()) {
    out.append(content.as_string().data(), content.as_string().size());
  } else if (content.is_array()) {
    for (const auto& part : content.as_array()) {
      if (!part.is_object()) continue;
      if (auto* t = part.as_object().if_contains("text"); t && t->is_string()) {
        out.append(t->as_string().data(), t->as_string().size());
      }
    }
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
  auto fail = [&](std::string message, std::string param, int status = 400) {
    out.error = RequestError{status, std::move(message), std::move(param)};
    return out;
  };
  boost::system::error_code ec;
  json::parse_options opts;
  opts.max_depth = 64;
  // The tree lives only for this call: a bump allocator (a small body needs no malloc).
  unsigned char scratch[4096];
  json::monotonic_resource arena(scratch, sizeof(scratch));
  json::value v = json::parse(body, ec, &arena, opts);
  if (ec) return fail("The request body is not valid JSON: " + ec.message(), "");
  if (!v.is_object()) return fail("The request body must be a JSON object", "");
  const json::object& o = v.as_object();
  InspectedRequest& r = out.request;

  const json::value* model = o.if_contains("model");
  if (!model || model->is_null()) return fail("you must provide a model parameter", "model");
  if (!model->is_string()) return fail("'model' must be a string", "model");
  r.model = std::string(model->as_string());

  if (const json::value* s = o.if_contains("stream"); s && !s->is_null()) {
    if (!s->is_bool()) return fail("'stream' must be a boolean", "stream");
    r.stream = s->as_bool();
  }
  r.has_stream_options = o.contains("stream_options");
  if (const json::value* so = o.if_contains("stream_options"); so && !so->is_null()) {
    if (!so->is_object()) return fail("'stream_options' must be an object", "stream_options");
    if (const json::value* iu = so->as_object().if_contains("include_usage"); iu) {
      if (!iu->is_bool() && !iu->is_null()) {
        return fail("'stream_options.include_usage' must be a boolean",
                    "stream_options.include_usage");
      }
      r.client_wants_usage = iu->is_bool() && iu->as_bool();
    }
  }
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    if (const json::value* m = o.if_contains(name); m && !m->is_null()) {
      if (!m->is_int64() && !m->is_uint64()) {
        return fail(std::string("'") + name + "' must be an integer", name);
      }
      int64_t n = m->is_int64() ? m->as_int64() : static_cast<int64_t>(m->as_uint64());
      if (n < 1) return fail(std::string("'") + name + "' must be at least 1", name);
      r.max_tokens = static_cast<uint32_t>(std::min<int64_t>(n, UINT32_MAX));
    }
  }

  if (kind == ApiKind::kChat) {
    const json::value* messages = o.if_contains("messages");
    if (!messages || messages->is_null()) {
      return fail("you must provide a messages parameter", "messages");
    }
    if (!messages->is_array()) return fail("'messages' must be an array", "messages");
    if (messages->as_array().empty()) {
      return fail("'messages' must contain at least one message", "messages");
    }
    size_t i = 0;
    for (const auto& m : messages->as_array()) {
      std::string param = "messages[" + std::to_string(i++) + "]";
      if (!m.is_object()) return fail("each message must be an object", param);
      const json::value* role = m.as_object().if_contains("role");
      if (!role || !role->is_string()) return fail("each message needs a string 'role'", param);
      r.prompt_text.append(role->as_string().data(), role->as_string().size());
      r.prompt_text += '\n';
      if (const json::value* c = m.as_object().if_contains("content")) {
        if (!c->is_string() && !c->is_array() && !c->is_null()) {
          return fail("'content' must be a string or an array of parts", param + ".content");
        }
        append_content(*c, r.prompt_text);
      }
      r.prompt_text += '\n';
    }
  } else {
    const json::value* prompt = o.if_contains("prompt");
    if (!prompt || prompt->is_null()) return fail("you must provide a prompt parameter", "prompt");
    if (prompt->is_string()) {
      r.prompt_text = std::string(prompt->as_string());
    } else if (prompt->is_array() && !prompt->as_array().empty()) {
      const auto& first = prompt->as_array().front();
      if (first.is_string()) r.prompt_text = std::string(first.as_string());
    } else {
      return fail("'prompt' must be a string or a non-empty array", "prompt");
    }
  }
  return out;
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

std::string upstream_body(std::string_view body, const InspectedRequest& request,
                          std::string_view served_model) {
  if (request.model == served_model) {
    if (!request.stream || request.client_wants_usage) return std::string(body);
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
