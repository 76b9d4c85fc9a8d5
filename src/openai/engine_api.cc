// GCC 12 at -O3 reports a false -Wrestrict inside std::string's inlined replace (GCC bug
// 105329); the code here only appends and concatenates strings.
#pragma GCC diagnostic ignored "-Wrestrict"

#include "openai/engine_api.h"

#include <boost/json.hpp>
#include <variant>

namespace kvgate::openai {
namespace {

namespace json = boost::json;

ApiError bad(std::string message) { return ApiError{400, std::move(message)}; }

// "'key' what" (built by appending: GCC 12 -O3 warns falsely on "'" + std::string).
ApiError field_error(std::string_view key, std::string_view what) {
  std::string m;
  m.reserve(key.size() + what.size() + 3);
  m += '\'';
  m += key;
  m += "' ";
  m += what;
  return bad(std::move(m));
}

std::optional<std::string> opt_string(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (!v || !v->is_string()) return std::nullopt;
  return std::string(v->as_string());
}

// Reads an integer field; error when present but not a non-negative integer.
std::variant<std::optional<int64_t>, ApiError> opt_int(const json::object& o,
                                                       std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (!v || v->is_null()) return std::optional<int64_t>();
  if (v->is_int64()) return std::optional<int64_t>(v->as_int64());
  if (v->is_uint64() && v->as_uint64() <= INT64_MAX) {
    return std::optional<int64_t>(static_cast<int64_t>(v->as_uint64()));
  }
  if (v->is_double() &&
      v->as_double() == static_cast<double>(static_cast<int64_t>(v->as_double()))) {
    return std::optional<int64_t>(static_cast<int64_t>(v->as_double()));
  }
  return field_error(key, "must be an integer");
}

// Reads a boolean field into `out` when present (null leaves it); an error otherwise.
std::optional<ApiError> opt_bool(const json::object& o, std::string_view key, bool& out) {
  const json::value* v = o.if_contains(key);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_bool()) return field_error(key, "must be a boolean");
  out = v->as_bool();
  return std::nullopt;
}

std::variant<KvTransferParams, ApiError> parse_kv_transfer(const json::value& v) {
  if (!v.is_object()) return bad("'kv_transfer_params' must be an object");
  const json::object& o = v.as_object();
  KvTransferParams p;
  if (const json::value* d = o.if_contains("do_remote_decode"))
    p.do_remote_decode = d->is_bool() && d->as_bool();
  if (const json::value* d = o.if_contains("do_remote_prefill"))
    p.do_remote_prefill = d->is_bool() && d->as_bool();
  p.remote_engine_id = opt_string(o, "remote_engine_id");
  p.remote_host = opt_string(o, "remote_host");
  p.remote_rack = opt_string(o, "remote_rack");
  p.remote_zone = opt_string(o, "remote_zone");
  auto port = opt_int(o, "remote_port");
  if (auto* e = std::get_if<ApiError>(&port)) return *e;
  p.remote_port = std::get<0>(port);
  if (const json::value* ids = o.if_contains("remote_block_ids"); ids && ids->is_array()) {
    for (const json::value& id : ids->as_array()) {
      if (id.is_int64()) p.remote_block_ids.push_back(id.as_int64());
      if (id.is_uint64()) p.remote_block_ids.push_back(static_cast<int64_t>(id.as_uint64()));
    }
  }
  return p;
}

std::variant<json::object, ApiError> parse_object(std::string_view body) {
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (ec) return bad("request body is not valid JSON: " + ec.message());
  if (!v.is_object()) return bad("request body must be a JSON object");
  return std::move(v.as_object());
}

json::object usage_json(const Usage& u) {
  json::object usage;
  usage["prompt_tokens"] = u.prompt_tokens;
  usage["total_tokens"] = u.prompt_tokens + u.completion_tokens;
  usage["completion_tokens"] = u.completion_tokens;
  json::object details;
  details["cached_tokens"] = u.cached_tokens;
  usage["prompt_tokens_details"] = std::move(details);
  return usage;
}

json::object head(ApiKind kind, const ResponseIds& ids, bool chunk) {
  json::object o;
  o["id"] = ids.id;
  if (kind == ApiKind::kChat) {
    o["object"] = chunk ? "chat.completion.chunk" : "chat.completion";
  } else {
    o["object"] = "text_completion";
  }
  o["created"] = ids.created;
  o["model"] = ids.model;
  return o;
}

json::value finish_value(std::string_view finish_reason) {
  if (finish_reason.empty()) return nullptr;
  return json::string(finish_reason);
}

json::array id_array(std::span<const kv::TokenId> ids) {
  json::array a;
  a.reserve(ids.size());
  for (kv::TokenId t : ids) a.push_back(t);
  return a;
}

// Reads a list of token ids into `out`; false when an item is not an id in [0, 2^32).
bool token_ids(const json::array& a, std::vector<kv::TokenId>& out) {
  out.reserve(a.size());
  for (const json::value& t : a) {
    if (t.is_int64() && t.as_int64() >= 0 && t.as_int64() <= UINT32_MAX) {
      out.push_back(static_cast<kv::TokenId>(t.as_int64()));
    } else if (t.is_uint64() && t.as_uint64() <= UINT32_MAX) {
      out.push_back(static_cast<kv::TokenId>(t.as_uint64()));
    } else {
      return false;
    }
  }
  return true;
}

// Adds return_token_ids' fields to an answer `o` whose (only) choice is `choice`.
void add_token_ids(ApiKind kind, const TokenIdFields& t, json::object& o, json::object& choice) {
  if (t.prompt) {
    (kind == ApiKind::kChat ? o : choice)["prompt_token_ids"] = id_array(*t.prompt);
  }
  choice["token_ids"] = id_array(t.tokens);
}

std::string sse(const json::object& o) {
  std::string out = "data: ";
  out += json::serialize(o);
  out += "\n\n";
  return out;
}

}  // namespace

std::variant<CompletionRequest, ApiError> parse_completion_request(std::string_view body,
                                                                   ApiKind kind) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json::object& o = std::get<json::object>(parsed);
  CompletionRequest r;
  r.kind = kind;
  if (const json::value* m = o.if_contains("model")) {
    if (!m->is_string() && !m->is_null()) return bad("'model' must be a string");
    if (m->is_string()) r.model = std::string(m->as_string());
  }
  if (kind == ApiKind::kChat) {
    if (!o.contains("messages")) return bad("'messages' is required");
    auto chat = tokenizer::parse_chat_request(o);
    if (!chat) return bad(chat.error());
    r.chat = std::move(*chat);
    r.add_special_tokens = false;
  } else {
    const json::value* p = o.if_contains("prompt");
    if (!p) return bad("'prompt' is required");
    if (p->is_string()) {
      r.prompt_text = std::string(p->as_string());
    } else if (p->is_array()) {
      const json::array& a = p->as_array();
      if (a.size() == 1 && a[0].is_string()) {
        r.prompt_text = std::string(a[0].as_string());
      } else if (!a.empty() && (a[0].is_int64() || a[0].is_uint64())) {
        std::vector<kv::TokenId> ids;
        if (!token_ids(a, ids)) return bad("'prompt' token ids must be non-negative integers");
        r.prompt_tokens = std::move(ids);
      } else {
        return bad(
            "'prompt' must be a string, one string in an array, or token ids "
            "(batched prompts are not supported)");
      }
    } else {
      return bad("'prompt' must be a string or an array");
    }
  }
  for (std::string_view key : {"max_completion_tokens", "max_tokens"}) {
    auto v = opt_int(o, key);
    if (auto* e = std::get_if<ApiError>(&v)) return *e;
    if (auto mt = std::get<0>(v)) {
      if (*mt < 1 || *mt > UINT32_MAX) return field_error(key, "must be at least 1");
      r.max_tokens = static_cast<uint32_t>(*mt);
      break;
    }
  }
  auto n = opt_int(o, "n");
  if (auto* e = std::get_if<ApiError>(&n)) return *e;
  if (auto nv = std::get<0>(n); nv && *nv != 1) return bad("only n=1 is supported");
  if (const json::value* s = o.if_contains("stream")) {
    if (!s->is_bool() && !s->is_null()) return bad("'stream' must be a boolean");
    r.stream = s->is_bool() && s->as_bool();
  }
  if (const json::value* so = o.if_contains("stream_options"); so && so->is_object()) {
    if (const json::value* iu = so->as_object().if_contains("include_usage")) {
      r.include_usage = iu->is_bool() && iu->as_bool();
    }
  }
  if (const json::value* t = o.if_contains("return_token_ids"); t && !t->is_null()) {
    if (!t->is_bool()) return bad("'return_token_ids' must be a boolean");
    r.return_token_ids = t->as_bool();
  }
  if (const json::value* t = o.if_contains("temperature"); t && !t->is_null()) {
    if (!t->is_number()) return bad("'temperature' must be a number");
    const double v = t->to_number<double>();
    if (v < 0) return bad("'temperature' must be at least 0");
    r.temperature = v;
  }
  if (const json::value* salt = o.if_contains("cache_salt"); salt && !salt->is_null()) {
    if (!salt->is_string() || salt->as_string().empty()) {
      return bad("Parameter 'cache_salt' must be a non-empty string if provided.");
    }
    r.cache_salt = std::string(salt->as_string());
  }
  if (auto st = opt_bool(o, "add_special_tokens", r.add_special_tokens)) return *st;
  auto prio = opt_int(o, "priority");
  if (auto* e = std::get_if<ApiError>(&prio)) return *e;
  if (auto pv = std::get<0>(prio)) r.priority = static_cast<int32_t>(*pv);
  if (const json::value* kt = o.if_contains("kv_transfer_params"); kt && !kt->is_null()) {
    auto p = parse_kv_transfer(*kt);
    if (auto* e = std::get_if<ApiError>(&p)) return *e;
    r.kv_transfer = std::get<0>(p);
  }
  return r;
}

std::variant<TokenizeRequest, ApiError> parse_tokenize_request(std::string_view body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json::object& o = std::get<json::object>(parsed);
  TokenizeRequest r;
  if (auto m = opt_string(o, "model")) r.model = *m;
  if (const json::value* p = o.if_contains("prompt")) {
    if (!p->is_string()) return bad("'prompt' must be a string");
    r.prompt = std::string(p->as_string());
    r.add_special_tokens = true;
  } else if (o.contains("messages")) {
    auto chat = tokenizer::parse_chat_request(o);
    if (!chat) return bad(chat.error());
    r.chat = std::move(*chat);
  } else {
    return bad("'prompt' or 'messages' is required");
  }
  if (auto st = opt_bool(o, "add_special_tokens", r.add_special_tokens)) return *st;
  if (auto st = opt_bool(o, "return_token_strs", r.return_token_strs)) return *st;
  return r;
}

std::string render_tokenize_response(std::span<const kv::TokenId> tokens, uint32_t max_model_len,
                                     const std::vector<std::string>* token_strs) {
  json::object body;
  body["count"] = tokens.size();
  body["max_model_len"] = max_model_len;
  body["tokens"] = id_array(tokens);
  if (token_strs) {
    json::array strs;
    for (const std::string& t : *token_strs) strs.emplace_back(t);
    body["token_strs"] = std::move(strs);
  } else {
    body["token_strs"] = nullptr;
  }
  return json::serialize(body);
}

std::variant<DetokenizeRequest, ApiError> parse_detokenize_request(std::string_view body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json::object& o = std::get<json::object>(parsed);
  DetokenizeRequest r;
  if (auto m = opt_string(o, "model")) r.model = *m;
  const json::value* t = o.if_contains("tokens");
  if (!t) return bad("'tokens' is required");
  if (!t->is_array() || !token_ids(t->as_array(), r.tokens)) {
    return bad("'tokens' must be a list of non-negative integers");
  }
  return r;
}

std::string render_detokenize_response(std::string_view prompt) {
  json::object body;
  body["prompt"] = prompt;
  return json::serialize(body);
}

std::variant<EmbeddingRequest, ApiError> parse_embedding_request(std::string_view body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json::object& o = std::get<json::object>(parsed);
  EmbeddingRequest r;
  if (auto m = opt_string(o, "model")) r.model = *m;
  const json::value* in = o.if_contains("input");
  if (!in || in->is_null()) return bad("'input' is required");
  constexpr std::string_view kShape =
      "'input' must be a string, a list of strings, a list of token ids or a list of lists of "
      "token ids";
  if (in->is_string()) {
    r.inputs.push_back({.text = std::string(in->as_string())});
  } else if (in->is_array()) {
    const json::array& a = in->as_array();
    if (a.empty()) return bad("'input' must not be empty");
    if (a[0].is_int64() || a[0].is_uint64()) {
      EmbeddingInput one;
      if (!token_ids(a, one.tokens)) return bad(std::string(kShape));
      r.inputs.push_back(std::move(one));
    } else {
      for (const json::value& item : a) {
        EmbeddingInput one;
        if (item.is_string()) {
          one.text = std::string(item.as_string());
        } else if (!item.is_array() || item.as_array().empty() ||
                   !token_ids(item.as_array(), one.tokens)) {
          return bad(std::string(kShape));
        }
        r.inputs.push_back(std::move(one));
      }
    }
  } else {
    return bad(std::string(kShape));
  }
  if (const json::value* f = o.if_contains("encoding_format"); f && !f->is_null()) {
    if (!f->is_string() || (f->as_string() != "float" && f->as_string() != "base64")) {
      return bad("'encoding_format' must be 'float' or 'base64'");
    }
    r.base64 = f->as_string() == "base64";
  }
  auto dimensions = opt_int(o, "dimensions");
  if (auto* e = std::get_if<ApiError>(&dimensions)) return *e;
  if (auto d = std::get<0>(dimensions)) {
    if (*d < 1 || *d > UINT32_MAX) return field_error("dimensions", "must be at least 1");
    r.dimensions = static_cast<uint32_t>(*d);
  }
  auto truncate = opt_int(o, "truncate_prompt_tokens");
  if (auto* e = std::get_if<ApiError>(&truncate)) return *e;
  if (auto t = std::get<0>(truncate)) {
    if (*t < 1 || *t > UINT32_MAX)
      return field_error("truncate_prompt_tokens", "must be at least 1");
    r.truncate_prompt_tokens = static_cast<uint32_t>(*t);
  }
  return r;
}

namespace {

// A string, or a list of strings (at least one), into `out`.
bool texts(const json::value* v, std::vector<std::string>& out) {
  if (!v) return false;
  if (v->is_string()) {
    out.emplace_back(v->as_string());
    return true;
  }
  if (!v->is_array() || v->as_array().empty()) return false;
  for (const json::value& t : v->as_array()) {
    if (!t.is_string()) return false;
    out.emplace_back(t.as_string());
  }
  return true;
}

std::variant<std::optional<uint32_t>, ApiError> truncate_of(const json::object& o) {
  auto t = opt_int(o, "truncate_prompt_tokens");
  if (auto* e = std::get_if<ApiError>(&t)) return *e;
  // -1 is vLLM's "up to the model's length": nothing to cut here.
  if (auto n = std::get<0>(t); n && *n != -1) {
    if (*n < 1 || *n > UINT32_MAX)
      return field_error("truncate_prompt_tokens", "must be at least 1");
    return std::optional<uint32_t>(static_cast<uint32_t>(*n));
  }
  return std::optional<uint32_t>();
}

}  // namespace

std::variant<ScoreRequest, ApiError> parse_score_request(std::string_view body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json::object& o = std::get<json::object>(parsed);
  ScoreRequest r;
  if (auto m = opt_string(o, "model")) r.model = *m;
  std::vector<std::string> one, two;
  if (!texts(o.if_contains("text_1"), one)) {
    return bad("'text_1' is required: a string or a list of strings");
  }
  if (!texts(o.if_contains("text_2"), two)) {
    return bad("'text_2' is required: a string or a list of strings");
  }
  if (one.size() == 1) {
    for (std::string& t : two) r.pairs.emplace_back(one[0], std::move(t));
  } else if (one.size() == two.size()) {
    for (size_t i = 0; i < one.size(); ++i)
      r.pairs.emplace_back(std::move(one[i]), std::move(two[i]));
  } else {
    return bad("'text_1' and 'text_2' must have the same number of items (or 'text_1' one)");
  }
  auto t = truncate_of(o);
  if (auto* e = std::get_if<ApiError>(&t)) return *e;
  r.truncate_prompt_tokens = std::get<0>(t);
  return r;
}

std::variant<RerankRequest, ApiError> parse_rerank_request(std::string_view body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json::object& o = std::get<json::object>(parsed);
  RerankRequest r;
  if (auto m = opt_string(o, "model")) r.model = *m;
  const json::value* q = o.if_contains("query");
  if (!q || !q->is_string()) return bad("'query' is required: a string");
  r.query = std::string(q->as_string());
  const json::value* d = o.if_contains("documents");
  if (!d || !d->is_array() || !texts(d, r.documents)) {
    return bad("'documents' is required: a list of strings");
  }
  auto top = opt_int(o, "top_n");
  if (auto* e = std::get_if<ApiError>(&top)) return *e;
  if (auto n = std::get<0>(top)) {
    if (*n < 0 || *n > UINT32_MAX) return field_error("top_n", "must not be negative");
    r.top_n = static_cast<uint32_t>(*n);
  }
  auto t = truncate_of(o);
  if (auto* e = std::get_if<ApiError>(&t)) return *e;
  r.truncate_prompt_tokens = std::get<0>(t);
  return r;
}

std::string render_response(ApiKind kind, const ResponseIds& ids, std::string_view text,
                            std::string_view finish_reason, const Usage& usage,
                            std::string_view kv_transfer_json, const TokenIdFields* token_ids) {
  json::object o = head(kind, ids, false);
  json::object choice;
  choice["index"] = 0;
  if (kind == ApiKind::kChat) {
    json::object message;
    message["role"] = "assistant";
    message["content"] = text;
    message["tool_calls"] = json::array();
    choice["message"] = std::move(message);
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_value(finish_reason);
  choice["stop_reason"] = nullptr;
  if (token_ids) add_token_ids(kind, *token_ids, o, choice);
  json::array choices;
  choices.push_back(std::move(choice));
  o["choices"] = std::move(choices);
  o["usage"] = usage_json(usage);
  if (!kv_transfer_json.empty()) {
    boost::system::error_code ec;
    json::value kt = json::parse(kv_transfer_json, ec);
    o["kv_transfer_params"] = ec ? json::value(nullptr) : std::move(kt);
  } else {
    o["kv_transfer_params"] = nullptr;
  }
  return json::serialize(o);
}

std::string render_chunk(ApiKind kind, const ResponseIds& ids, std::string_view delta,
                         bool role_chunk, std::string_view finish_reason, bool with_usage_null,
                         const TokenIdFields* token_ids) {
  json::object o = head(kind, ids, true);
  json::object choice;
  choice["index"] = 0;
  if (kind == ApiKind::kChat) {
    json::object d;
    if (role_chunk) d["role"] = "assistant";
    d["content"] = delta;
    choice["delta"] = std::move(d);
  } else {
    choice["text"] = delta;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_value(finish_reason);
  if (kind == ApiKind::kCompletion) choice["stop_reason"] = nullptr;
  if (token_ids) add_token_ids(kind, *token_ids, o, choice);
  json::array choices;
  choices.push_back(std::move(choice));
  o["choices"] = std::move(choices);
  if (with_usage_null) o["usage"] = nullptr;
  return sse(o);
}

std::string render_usage_chunk(ApiKind kind, const ResponseIds& ids, const Usage& usage) {
  json::object o = head(kind, ids, true);
  o["choices"] = json::array();
  o["usage"] = usage_json(usage);
  return sse(o);
}

}  // namespace kvgate::openai
