#include "gateway/sse_tap.h"

#include <boost/json.hpp>

namespace kvgate::gateway {
namespace json = boost::json;

namespace {

uint64_t count(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (!v) return 0;
  if (v->is_uint64()) return v->as_uint64();
  if (v->is_int64() && v->as_int64() > 0) return static_cast<uint64_t>(v->as_int64());
  return 0;
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

bool has_nonempty_choices(std::string_view e) {
  return e.find("\"choices\":[{") != std::string_view::npos ||
         e.find("\"choices\": [{") != std::string_view::npos;
}

}  // namespace

Usage parse_usage(std::string_view json_text) {
  boost::system::error_code ec;
  // The tree lives only for this call: a bump allocator, no malloc for a small body.
  unsigned char scratch[4096];
  json::monotonic_resource arena(scratch, sizeof(scratch));
  json::value v = json::parse(json_text, ec, &arena);
  if (ec) return {};
  return usage_of(v);
}

SseTap::Step SseTap::feed(std::string_view data, std::string& out) {
  Step step;
  // Fast path: no partial event held and the piece holds whole events only.
  partial_.append(data.data(), data.size());
  size_t start = 0;
  while (true) {
    size_t lf = partial_.find("\n\n", start);
    size_t crlf = partial_.find("\r\n\r\n", start);
    size_t end, sep;
    if (lf == std::string::npos && crlf == std::string::npos) break;
    if (crlf != std::string::npos && (lf == std::string::npos || crlf < lf)) {
      end = crlf;
      sep = 4;
    } else {
      end = lf;
      sep = 2;
    }
    on_event(std::string_view(partial_).substr(start, end + sep - start), out, step);
    start = end + sep;
  }
  partial_.erase(0, start);
  return step;
}

void SseTap::on_event(std::string_view event, std::string& out, Step& step) {
  std::string_view payload = event;
  if (payload.starts_with("data:")) {
    payload.remove_prefix(5);
    if (payload.starts_with(" ")) payload.remove_prefix(1);
    while (!payload.empty() && (payload.back() == '\n' || payload.back() == '\r')) {
      payload.remove_suffix(1);
    }
    if (payload == "[DONE]") {
      step.done = true;
    } else if (payload.starts_with("{")) {
      bool tokens = has_nonempty_choices(payload);
      if (tokens) ++step.token_events;
      if (payload.find("\"usage\":{") != std::string_view::npos ||
          payload.find("\"usage\": {") != std::string_view::npos) {
        Usage u = parse_usage(payload);
        if (u.seen) usage_ = u;
        // The usage-only chunk the gateway asked for on the client's behalf.
        if (u.seen && !tokens && strip_usage_) return;
      }
      if (payload.starts_with("{\"error\"")) saw_error_ = true;
    }
  }
  out.append(event.data(), event.size());
}

}  // namespace kvgate::gateway
