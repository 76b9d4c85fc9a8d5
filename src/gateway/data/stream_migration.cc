#include "gateway/data/stream_migration.h"

#include <boost/json.hpp>

namespace kvgate::gateway {
namespace json = boost::json;

namespace {

// Sampling parameters a continuation keeps (vLLM's names); everything else of the
// original body (messages, tools, templates, logprobs) belongs to the first leg only.
constexpr std::string_view kKept[] = {"temperature",
                                      "top_p",
                                      "top_k",
                                      "min_p",
                                      "seed",
                                      "stop",
                                      "stop_token_ids",
                                      "frequency_penalty",
                                      "presence_penalty",
                                      "repetition_penalty",
                                      "ignore_eos",
                                      "skip_special_tokens",
                                      "spaces_between_special_tokens",
                                      "include_stop_str_in_output",
                                      "priority",
                                      "user",
                                      "logit_bias",
                                      "bad_words",
                                      "allowed_token_ids"};

bool read_ids(const json::value* v, std::vector<kv::TokenId>& out) {
  if (!v || !v->is_array()) return false;
  for (const json::value& t : v->as_array()) {
    if (t.is_int64() && t.as_int64() >= 0) {
      out.push_back(static_cast<kv::TokenId>(t.as_int64()));
    } else if (t.is_uint64()) {
      out.push_back(static_cast<kv::TokenId>(t.as_uint64()));
    } else {
      return false;
    }
  }
  return true;
}

std::optional<uint32_t> positive(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (!v) return std::nullopt;
  if (v->is_int64() && v->as_int64() > 0) return static_cast<uint32_t>(v->as_int64());
  if (v->is_uint64()) return static_cast<uint32_t>(v->as_uint64());
  return std::nullopt;
}

std::string event_of(const json::object& o) { return "data: " + json::serialize(o) + "\n\n"; }

}  // namespace

std::optional<MigratingStream> MigratingStream::start(std::string_view upstream_body,
                                                      openai::ApiKind kind) {
  boost::system::error_code ec;
  json::value v = json::parse(upstream_body, ec);
  if (ec || !v.is_object()) return std::nullopt;
  MigratingStream m;
  m.kind_ = kind;
  m.original_ = std::move(v.as_object());
  if (const json::value* r = m.original_.if_contains("return_token_ids"); r && r->is_bool()) {
    m.client_wants_ids_ = r->as_bool();
  }
  m.max_tokens_ = positive(m.original_, "max_completion_tokens");
  if (!m.max_tokens_) m.max_tokens_ = positive(m.original_, "max_tokens");
  return m;
}

std::string MigratingStream::first_body() const {
  json::object o = original_;
  o["return_token_ids"] = true;
  return json::serialize(o);
}

bool MigratingStream::complete() const {
  return finished_ || (max_tokens_ && generated_.size() >= *max_tokens_);
}

std::optional<uint32_t> MigratingStream::remaining() const {
  if (!max_tokens_) return std::nullopt;
  return *max_tokens_ - static_cast<uint32_t>(std::min<size_t>(generated_.size(), *max_tokens_));
}

void MigratingStream::feed(std::string_view data, std::string& out) {
  partial_.append(data);
  size_t start = 0;
  while (true) {
    const size_t lf = partial_.find("\n\n", start);
    const size_t crlf = partial_.find("\r\n\r\n", start);
    if (lf == std::string::npos && crlf == std::string::npos) break;
    const bool is_crlf = crlf != std::string::npos && (lf == std::string::npos || crlf < lf);
    const size_t end = (is_crlf ? crlf : lf) + (is_crlf ? 4 : 2);
    relay(std::string_view(partial_).substr(start, end - start), out);
    start = end;
  }
  partial_.erase(0, start);
}

void MigratingStream::learn_identity(const json::object& chunk) {
  if (identity_known_) return;
  const json::value* id = chunk.if_contains("id");
  if (!id) return;
  identity_known_ = true;
  id_ = *id;
  if (const json::value* v = chunk.if_contains("created")) created_ = *v;
  if (const json::value* v = chunk.if_contains("model")) model_ = *v;
  if (const json::value* v = chunk.if_contains("object")) object_ = *v;
  usage_null_ = chunk.contains("usage");
}

void MigratingStream::relay(std::string_view event, std::string& out) {
  std::string_view payload = event;
  if (!payload.starts_with("data:")) {
    out.append(event);  // comments, other fields: as they came
    return;
  }
  payload.remove_prefix(5);
  if (payload.starts_with(" ")) payload.remove_prefix(1);
  while (!payload.empty() && (payload.back() == '\n' || payload.back() == '\r')) {
    payload.remove_suffix(1);
  }
  boost::system::error_code ec;
  json::value v = json::parse(payload, ec);
  if (ec || !v.is_object() || v.as_object().contains("error")) {
    out.append(event);  // [DONE], an engine's error event
    return;
  }
  json::object& o = v.as_object();
  if (const json::value* u = o.if_contains("usage"); u && u->is_object()) usage_sent_ = true;
  if (leg_ > 0) {
    out += rewrite_continuation(o);
    return;
  }
  learn_identity(o);
  bool changed = false;
  if (json::value* p = o.if_contains("prompt_token_ids")) {  // a chat's, top level
    prompt_ids_.clear();
    prompt_known_ = read_ids(p, prompt_ids_);
    if (!client_wants_ids_) changed = o.erase("prompt_token_ids") > 0;
  }
  json::value* choices = o.if_contains("choices");
  if (choices && choices->is_array() && !choices->as_array().empty() &&
      choices->as_array()[0].is_object()) {
    json::object& c = choices->as_array()[0].as_object();
    if (json::value* p = c.if_contains("prompt_token_ids")) {  // a completion's, in its choice
      prompt_ids_.clear();
      prompt_known_ = read_ids(p, prompt_ids_);
      if (!client_wants_ids_) changed = c.erase("prompt_token_ids") > 0 || changed;
    }
    if (json::value* t = c.if_contains("token_ids")) {
      read_ids(t, generated_);
      if (!client_wants_ids_) changed = c.erase("token_ids") > 0 || changed;
    }
    if (const json::value* f = c.if_contains("finish_reason"); f && !f->is_null()) {
      finished_ = true;
    }
  }
  if (changed) {
    out += event_of(o);
  } else {
    out.append(event);
  }
}

json::object MigratingStream::usage_of_whole(const json::object* leg_usage) const {
  // The leg's prompt was the original prompt plus the `carried_` tokens before it.
  uint64_t leg_completion = 0, cached = 0;
  if (leg_usage) {
    if (const json::value* c = leg_usage->if_contains("completion_tokens"); c && c->is_number()) {
      leg_completion = c->to_number<uint64_t>();
    }
    if (const json::value* d = leg_usage->if_contains("prompt_tokens_details");
        d && d->is_object()) {
      if (const json::value* c = d->as_object().if_contains("cached_tokens"); c && c->is_number()) {
        cached = c->to_number<uint64_t>();
      }
    }
  }
  const uint64_t prompt = prompt_ids_.size();
  const uint64_t completion = leg_usage ? carried_ + leg_completion : generated_.size();
  json::object u;
  u["prompt_tokens"] = prompt;
  u["total_tokens"] = prompt + completion;
  u["completion_tokens"] = completion;
  u["prompt_tokens_details"] = json::object{{"cached_tokens", std::min(cached, prompt)}};
  return u;
}

std::string MigratingStream::rewrite_continuation(json::object& chunk) {
  json::object o;
  o["id"] = id_;
  o["object"] = object_;
  o["created"] = created_;
  o["model"] = model_;
  json::array choices;
  const json::value* in = chunk.if_contains("choices");
  if (in && in->is_array() && !in->as_array().empty() && in->as_array()[0].is_object()) {
    const json::object& c = in->as_array()[0].as_object();
    std::vector<kv::TokenId> ids;
    read_ids(c.if_contains("token_ids"), ids);
    generated_.insert(generated_.end(), ids.begin(), ids.end());
    json::value text = c.contains("text") ? c.at("text") : json::value("");
    json::value finish = c.contains("finish_reason") ? c.at("finish_reason") : json::value();
    if (!finish.is_null()) finished_ = true;
    json::object choice;
    choice["index"] = 0;
    if (kind_ == openai::ApiKind::kChat) {
      choice["delta"] = json::object{{"content", std::move(text)}};
    } else {
      choice["text"] = std::move(text);
    }
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = std::move(finish);
    if (kind_ == openai::ApiKind::kCompletion) {
      choice["stop_reason"] = c.contains("stop_reason") ? c.at("stop_reason") : json::value();
    }
    if (client_wants_ids_) {
      json::array a;
      for (kv::TokenId t : ids) a.push_back(t);
      choice["token_ids"] = std::move(a);
    }
    choices.push_back(std::move(choice));
    o["choices"] = std::move(choices);
    if (usage_null_) o["usage"] = nullptr;
    return event_of(o);
  }
  // The usage chunk ("choices": []): the whole answer's.
  o["choices"] = json::array();
  const json::value* u = chunk.if_contains("usage");
  o["usage"] = usage_of_whole(u && u->is_object() ? &u->as_object() : nullptr);
  return event_of(o);
}

std::string MigratingStream::continuation_body() const {
  json::object o;
  if (const json::value* m = original_.if_contains("model")) o["model"] = *m;
  json::array prompt;
  prompt.reserve(prompt_ids_.size() + generated_.size());
  for (kv::TokenId t : prompt_ids_) prompt.push_back(t);
  for (kv::TokenId t : generated_) prompt.push_back(t);
  o["prompt"] = std::move(prompt);
  if (const auto left = remaining()) o["max_tokens"] = *left;
  for (std::string_view key : kKept) {
    if (const json::value* v = original_.if_contains(key)) o[key] = *v;
  }
  if (const auto min = positive(original_, "min_tokens")) {
    const size_t done = generated_.size();
    if (*min > done) o["min_tokens"] = *min - static_cast<uint32_t>(done);
  }
  o["stream"] = true;
  o["stream_options"] = json::object{{"include_usage", true}};
  o["return_token_ids"] = true;
  return json::serialize(o);
}

void MigratingStream::begin_leg() {
  partial_.clear();  // an event cut by the failure never reaches the client
  ++leg_;
  carried_ = generated_.size();
}

std::string MigratingStream::closing_events() const {
  if (usage_sent_) return "data: [DONE]\n\n";
  json::object o;
  o["id"] = id_;
  o["object"] = object_;
  o["created"] = created_;
  o["model"] = model_;
  o["choices"] = json::array();
  o["usage"] = usage_of_whole(nullptr);
  return event_of(o) + "data: [DONE]\n\n";
}

}  // namespace kvgate::gateway
