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

Inspection inspect_aux_request(std::string_view body, AuxApi api) {
  Inspection out;
  auto fail = [&](std::string message, std::string param) {
    out.error = Error(ErrorCode::kInvalidArgument, std::move(message), std::move(param));
    return out;
  };
  boost::system::error_code ec;
  json::parse_options opts;
  opts.max_depth = 64;
  json::value v = json::parse(body, ec, {}, opts);
  if (ec) return fail("The request body is not valid JSON: " + ec.message(), "");
  if (!v.is_object()) return fail("The request body must be a JSON object", "");
  const json::object& o = v.as_object();
  InspectedRequest& r = out.request;
  if (const json::value* m = o.if_contains("model"); m && !m->is_null()) {
    if (!m->is_string()) return fail("'model' must be a string", "model");
    r.model = std::string(m->as_string());
  }
  if (api == AuxApi::kTokenize) {
    if (!o.contains("prompt") && !o.contains("messages")) {
      return fail("'prompt' or 'messages' is required", "prompt");
    }
  } else if (api == AuxApi::kCountTokens) {
    const json::value* m = o.if_contains("messages");
    if (!m || !m->is_array()) return fail("messages: Field required (a list)", "messages");
  } else if (api == AuxApi::kDetokenize) {
    const json::value* t = o.if_contains("tokens");
    if (!t || !t->is_array()) return fail("'tokens' must be a list of token ids", "tokens");
  } else if (api == AuxApi::kScore || api == AuxApi::kRerank) {
    const bool rerank = api == AuxApi::kRerank;
    const char* first_key = rerank ? "query" : "text_1";
    const char* second_key = rerank ? "documents" : "text_2";
    // A string or a non-empty list of strings (rerank: a string, then a list).
    auto strings = [](const json::value* v, bool list_only, std::vector<std::string_view>& out) {
      if (v && v->is_string() && !list_only) {
        out.push_back(v->as_string());
        return true;
      }
      if (!v || !v->is_array() || v->as_array().empty()) return false;
      for (const json::value& s : v->as_array()) {
        if (!s.is_string()) return false;
        out.push_back(s.as_string());
      }
      return true;
    };
    std::vector<std::string_view> first, second;
    const json::value* head = o.if_contains(first_key);
    if (!strings(head, false, first) || (rerank && !head->is_string())) {
      return fail(std::string("'") + first_key +
                      "' is required: " + (rerank ? "a string" : "a string or a list of strings"),
                  first_key);
    }
    if (!strings(o.if_contains(second_key), rerank, second)) {
      return fail(std::string("'") + second_key + "' is required: " +
                      (rerank ? "a list of strings" : "a string or a list of strings"),
                  second_key);
    }
    if (first.size() != 1 && first.size() != second.size()) {
      return fail("'text_1' and 'text_2' must have the same number of items (or 'text_1' one)",
                  "text_2");
    }
    // Each pair is one input of the engine's: its two texts.
    for (size_t i = 0; i < second.size(); ++i) {
      if (!r.prompt_text.empty()) r.prompt_text += '\n';
      r.prompt_text.append(first[first.size() == 1 ? 0 : i]);
      r.prompt_text += '\n';
      r.prompt_text.append(second[i]);
    }
  } else {
    const json::value* in = o.if_contains("input");
    if (!in || in->is_null()) return fail("'input' is required", "input");
    auto add = [&](const json::value& item) {
      if (item.is_string()) {
        if (!r.prompt_text.empty()) r.prompt_text += '\n';
        r.prompt_text.append(item.as_string().data(), item.as_string().size());
        return true;
      }
      if (item.is_int64() || item.is_uint64()) {
        ++r.given_tokens;
        return true;
      }
      if (!item.is_array()) return false;
      for (const json::value& id : item.as_array()) {
        if (!id.is_int64() && !id.is_uint64()) return false;
        ++r.given_tokens;
      }
      return true;
    };
    bool ok = in->is_string() || (in->is_array() && !in->as_array().empty());
    if (ok && in->is_array()) {
      for (const json::value& item : in->as_array()) ok = ok && add(item);
    } else if (ok) {
      add(*in);
    }
    if (!ok) {
      return fail(
          "'input' must be a string, a list of strings, a list of token ids or a list of lists "
          "of token ids",
          "input");
    }
    if (const json::value* s = o.if_contains("stream"); s && s->is_bool() && s->as_bool()) {
      return fail("Embeddings cannot be streamed", "stream");
    }
  }
  return out;
}

std::string rewrite_request(std::string_view body, std::string_view served_model, bool stream) {
  // As deep as the inspections allow (the default, 32, would throw on a body they passed).
  json::parse_options opts;
  opts.max_depth = 64;
  json::value v = json::parse(body, {}, opts);
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
