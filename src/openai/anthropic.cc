#include "openai/anthropic.h"

#include <boost/json.hpp>
#include <optional>
#include <vector>

#include "openai/json_dom.h"

namespace kvgate::openai::anthropic {
namespace {

namespace json = boost::json;

// A body error: kInvalidArgument (400), `field` the path the message names
// ("messages.0.content"), empty for the body as a whole.
Error bad(std::string message, std::string field = {}) {
  return Error(ErrorCode::kInvalidArgument, std::move(message), std::move(field));
}

// The text of a content given as a string or as blocks (the text blocks', joined).
Result<std::string> text_of(const json::value& content, std::string_view field) {
  if (content.is_string()) return std::string(content.as_string());
  if (!content.is_array())
    return bad(std::string(field) + ": must be a string or a list of blocks", std::string(field));
  std::string out;
  for (const json::value& b : content.as_array()) {
    const json::object* o = b.if_object();
    if (!o) return bad(std::string(field) + ": every block must be an object", std::string(field));
    const json::value* type = o->if_contains("type");
    if (type && type->is_string() && type->as_string() == "text") {
      const json::value* t = o->if_contains("text");
      if (!t || !t->is_string())
        return bad(std::string(field) + ": a text block needs 'text'", std::string(field));
      out.append(t->as_string().data(), t->as_string().size());
    }
  }
  return out;
}

// One Anthropic message as chat messages, appended to `out`.
Status convert_message(const json::value& m, size_t i, json::array& out) {
  const std::string at = "messages." + std::to_string(i);
  const json::object* o = m.if_object();
  if (!o) return bad(at + ": must be an object", at);
  const json::value* role = o->if_contains("role");
  if (!role || !role->is_string() ||
      (role->as_string() != "user" && role->as_string() != "assistant" &&
       role->as_string() != "system")) {
    return bad(at + ".role: must be 'user' or 'assistant'", at + ".role");
  }
  const json::value* content = o->if_contains("content");
  if (!content) return bad(at + ".content: Field required", at + ".content");
  if (content->is_string()) {
    out.push_back(json::object{{"role", role->as_string()}, {"content", content->as_string()}});
    return {};
  }
  if (!content->is_array())
    return bad(at + ".content: must be a string or a list of blocks", at + ".content");
  json::array parts;
  json::array tool_calls;
  std::vector<json::object> tool_results;
  size_t j = 0;
  for (const json::value& b : content->as_array()) {
    const std::string bat = at + ".content." + std::to_string(j++);
    const json::object* block = b.if_object();
    const json::value* type = block ? block->if_contains("type") : nullptr;
    if (!type || !type->is_string()) return bad(bat + ": a block needs a 'type'", bat);
    const json::string_view kind = type->as_string();
    if (kind == "text") {
      const json::value* t = block->if_contains("text");
      if (!t || !t->is_string()) return bad(bat + ".text: Field required", bat + ".text");
      parts.push_back(json::object{{"type", "text"}, {"text", t->as_string()}});
    } else if (kind == "image") {
      const json::value* src = block->if_contains("source");
      const json::object* s = src ? src->if_object() : nullptr;
      if (!s) return bad(bat + ".source: Field required", bat + ".source");
      std::string url;
      if (const json::value* u = s->if_contains("url"); u && u->is_string()) {
        url = std::string(u->as_string());
      } else {
        const json::value* media = s->if_contains("media_type");
        const json::value* data = s->if_contains("data");
        if (!media || !media->is_string() || !data || !data->is_string()) {
          return bad(bat + ".source: needs 'url', or 'media_type' and 'data'", bat + ".source");
        }
        url =
            "data:" + std::string(media->as_string()) + ";base64," + std::string(data->as_string());
      }
      parts.push_back(
          json::object{{"type", "image_url"}, {"image_url", json::object{{"url", url}}}});
    } else if (kind == "tool_use") {
      const json::value* id = block->if_contains("id");
      const json::value* name = block->if_contains("name");
      if (!id || !id->is_string() || !name || !name->is_string()) {
        return bad(bat + ": a tool_use block needs 'id' and 'name'", bat);
      }
      const json::value* input = block->if_contains("input");
      tool_calls.push_back(json::object{
          {"id", id->as_string()},
          {"type", "function"},
          {"function",
           json::object{{"name", name->as_string()},
                        {"arguments", input ? json::serialize(*input) : std::string("{}")}}}});
    } else if (kind == "tool_result") {
      const json::value* id = block->if_contains("tool_use_id");
      if (!id || !id->is_string())
        return bad(bat + ".tool_use_id: Field required", bat + ".tool_use_id");
      std::string text;
      if (const json::value* c = block->if_contains("content")) {
        auto got = text_of(*c, bat + ".content");
        if (!got) return got.failure();
        text = std::move(*got);
      }
      tool_results.push_back(
          json::object{{"role", "tool"}, {"tool_call_id", id->as_string()}, {"content", text}});
    }
    // thinking and redacted_thinking blocks carry no prompt text of the turn: left out.
  }
  // Tool results answer the calls before them: they come first, then the user's words.
  for (json::object& r : tool_results) out.push_back(std::move(r));
  if (!parts.empty() || !tool_calls.empty() || tool_results.empty()) {
    json::object msg{{"role", role->as_string()}, {"content", std::move(parts)}};
    if (!tool_calls.empty()) msg["tool_calls"] = std::move(tool_calls);
    out.push_back(std::move(msg));
  }
  return {};
}

json::object usage_json(const Usage& u) {
  return json::object{{"input_tokens", u.prompt_tokens},
                      {"cache_read_input_tokens", u.cached_tokens},
                      {"output_tokens", u.completion_tokens}};
}

std::string event(std::string_view name, const json::object& data) {
  std::string out = "event: ";
  out.append(name);
  out += "\ndata: ";
  out += json::serialize(data);
  out += "\n\n";
  return out;
}

using dom::count;

// The chat request of a Messages body (`counting`: a count_tokens body, whose max_tokens
// and stream are not read).
Result<std::string> to_chat(std::string_view body, bool counting) {
  boost::system::error_code ec;
  json::parse_options opts;
  opts.max_depth = 64;
  json::value v = json::parse(body, ec, {}, opts);
  if (ec) return bad("The request body is not valid JSON: " + ec.message());
  const json::object* o = v.if_object();
  if (!o) return bad("The request body must be a JSON object");
  json::object chat;
  const json::value* model = o->if_contains("model");
  if (!model || !model->is_string()) return bad("model: Field required (a string)", "model");
  chat["model"] = model->as_string();
  if (!counting) {
    const json::value* max_tokens = o->if_contains("max_tokens");
    if (!max_tokens || !(max_tokens->is_int64() || max_tokens->is_uint64()) ||
        (max_tokens->is_int64() && max_tokens->as_int64() < 1) ||
        (max_tokens->is_uint64() && max_tokens->as_uint64() > UINT32_MAX)) {
      return bad("max_tokens: Field required (an integer of at least 1)", "max_tokens");
    }
    chat["max_tokens"] = *max_tokens;
  }
  const json::value* messages = o->if_contains("messages");
  if (!messages || !messages->is_array())
    return bad("messages: Field required (a list)", "messages");
  json::array out;
  if (const json::value* system = o->if_contains("system"); system && !system->is_null()) {
    auto text = text_of(*system, "system");
    if (!text) return text.failure();
    out.push_back(json::object{{"role", "system"}, {"content", *text}});
  }
  size_t i = 0;
  for (const json::value& m : messages->as_array()) {
    if (Status st = convert_message(m, i++, out); !st) return st.failure();
  }
  if (out.empty()) return bad("messages: at least one message is required", "messages");
  chat["messages"] = std::move(out);
  if (const json::value* s = o->if_contains("stream"); s && !s->is_null() && !counting) {
    if (!s->is_bool()) return bad("stream: must be a boolean", "stream");
    chat["stream"] = s->as_bool();
  }
  if (const json::value* stop = o->if_contains("stop_sequences"); stop && !stop->is_null()) {
    if (!stop->is_array())
      return bad("stop_sequences: must be a list of strings", "stop_sequences");
    chat["stop"] = *stop;
  }
  for (std::string_view key : {"temperature", "top_p", "top_k"}) {
    if (const json::value* x = o->if_contains(key); x && !x->is_null()) {
      if (!x->is_number()) return bad(std::string(key) + ": must be a number", std::string(key));
      chat[key] = *x;
    }
  }
  if (const json::value* tools = o->if_contains("tools"); tools && !tools->is_null()) {
    if (!tools->is_array()) return bad("tools: must be a list", "tools");
    json::array fns;
    for (const json::value& t : tools->as_array()) {
      const json::object* to = t.if_object();
      const json::value* name = to ? to->if_contains("name") : nullptr;
      if (!name || !name->is_string()) return bad("tools: every tool needs a 'name'", "tools");
      json::object fn{{"name", name->as_string()}};
      if (const json::value* d = to->if_contains("description")) fn["description"] = *d;
      if (const json::value* s = to->if_contains("input_schema")) fn["parameters"] = *s;
      fns.push_back(json::object{{"type", "function"}, {"function", std::move(fn)}});
    }
    chat["tools"] = std::move(fns);
  }
  return json::serialize(chat);
}

}  // namespace

Result<std::string> messages_to_chat(std::string_view body) {
  return to_chat(body, /*counting=*/false);
}

Result<std::string> count_tokens_to_chat(std::string_view body) {
  return to_chat(body, /*counting=*/true);
}

std::string render_count_tokens(uint32_t input_tokens) {
  json::object o{{"input_tokens", input_tokens},
                 {"context_management", json::object{{"original_input_tokens", input_tokens}}}};
  return json::serialize(o);
}

std::string_view error_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 402:
      return "billing_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    case 504:
      return "timeout_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

std::string error_json(int status, std::string_view message) {
  return json::serialize(
      json::object{{"type", "error"},
                   {"error", json::object{{"type", error_type(status)}, {"message", message}}}});
}

std::string error_from_openai(int status, std::string_view body) {
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (!ec && v.is_object()) {
    const json::object& o = v.as_object();
    if (const json::value* t = o.if_contains("type");
        t && t->is_string() && t->as_string() == "error") {
      return std::string(body);  // Anthropic's already
    }
    if (const json::value* e = o.if_contains("error"); e && e->is_object()) {
      if (const json::value* m = e->as_object().if_contains("message"); m && m->is_string()) {
        return error_json(status, m->as_string());
      }
    }
  }
  return error_json(status, "HTTP " + std::to_string(status));
}

Usage parse_usage(std::string_view message_json) {
  Usage u;
  boost::system::error_code ec;
  json::value v = json::parse(message_json, ec);
  if (ec || !v.is_object()) return u;
  const json::object* o = &v.as_object();
  // A stream's message_start nests the message.
  if (const json::value* m = o->if_contains("message"); m && m->is_object()) o = &m->as_object();
  const json::value* usage = o->if_contains("usage");
  if (!usage || !usage->is_object()) return u;
  u.seen = true;
  u.prompt_tokens = count(usage->as_object(), "input_tokens");
  u.completion_tokens = count(usage->as_object(), "output_tokens");
  u.cached_tokens = count(usage->as_object(), "cache_read_input_tokens");
  return u;
}

std::string render_message(std::string_view id, std::string_view model, std::string_view text,
                           std::string_view stop_reason, const Usage& usage) {
  json::object o{{"id", id},
                 {"type", "message"},
                 {"role", "assistant"},
                 {"model", model},
                 {"content", json::array{json::object{{"type", "text"}, {"text", text}}}},
                 {"stop_reason", stop_reason},
                 {"stop_sequence", nullptr},
                 {"usage", usage_json(usage)}};
  return json::serialize(o);
}

std::string render_stream_start(std::string_view id, std::string_view model,
                                uint32_t input_tokens) {
  json::object message{
      {"id", id},
      {"type", "message"},
      {"role", "assistant"},
      {"model", model},
      {"content", json::array()},
      {"stop_reason", nullptr},
      {"stop_sequence", nullptr},
      {"usage", json::object{{"input_tokens", input_tokens}, {"output_tokens", 0}}}};
  std::string out =
      event("message_start", json::object{{"type", "message_start"}, {"message", message}});
  out += event("content_block_start",
               json::object{{"type", "content_block_start"},
                            {"index", 0},
                            {"content_block", json::object{{"type", "text"}, {"text", ""}}}});
  out += event("ping", json::object{{"type", "ping"}});
  return out;
}

std::string render_text_delta(std::string_view text) {
  return event("content_block_delta",
               json::object{{"type", "content_block_delta"},
                            {"index", 0},
                            {"delta", json::object{{"type", "text_delta"}, {"text", text}}}});
}

std::string render_stream_end(std::string_view stop_reason, const Usage& usage) {
  std::string out =
      event("content_block_stop", json::object{{"type", "content_block_stop"}, {"index", 0}});
  out += event("message_delta", json::object{{"type", "message_delta"},
                                             {"delta", json::object{{"stop_reason", stop_reason},
                                                                    {"stop_sequence", nullptr}}},
                                             {"usage", usage_json(usage)}});
  out += event("message_stop", json::object{{"type", "message_stop"}});
  return out;
}

std::string render_error_event(int status, std::string_view message) {
  std::string out = "event: error\ndata: ";
  out += error_json(status, message);
  out += "\n\n";
  return out;
}

}  // namespace kvgate::openai::anthropic
