#include "openai/json_dom.h"

#include <boost/json.hpp>

namespace kvgate::openai::dom {
namespace json = boost::json;

namespace {

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

Usage usage_of(const json::value& v) {
  Usage u;
  if (!v.is_object()) return u;
  const json::value* usage = v.as_object().if_contains("usage");
  if (!usage || !usage->is_object()) return u;
  const json::object& o = usage->as_object();
  u.seen = true;
  u.prompt_tokens = count(o, "prompt_tokens");
  u.completion_tokens = count(o, "completion_tokens");
  if (const json::value* d = o.if_contains("prompt_tokens_details"); d && d->is_object()) {
    u.cached_tokens = count(d->as_object(), "cached_tokens");
  }
  return u;
}

}  // namespace

uint64_t count(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (!v) return 0;
  if (v->is_uint64()) return v->as_uint64();
  if (v->is_int64() && v->as_int64() > 0) return static_cast<uint64_t>(v->as_int64());
  return 0;
}

Inspection inspect_request(std::string_view body, ApiKind kind) {
  Inspection out;
  auto fail = [&](std::string message, std::string param) {
    out.error = Error(ErrorCode::kInvalidArgument, std::move(message), std::move(param));
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
  if (const json::value* salt = o.if_contains("cache_salt"); salt && !salt->is_null()) {
    if (!salt->is_string() || salt->as_string().empty()) {
      return fail("Parameter 'cache_salt' must be a non-empty string if provided.", "cache_salt");
    }
    r.cache_salt = std::string(salt->as_string());
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

Usage parse_usage(std::string_view json_text) {
  boost::system::error_code ec;
  // The tree lives only for this call: a bump allocator, no malloc for a small body.
  unsigned char scratch[4096];
  json::monotonic_resource arena(scratch, sizeof(scratch));
  json::value v = json::parse(json_text, ec, &arena);
  if (ec) return {};
  return usage_of(v);
}

}  // namespace kvgate::openai::dom
