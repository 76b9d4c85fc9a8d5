#include "openai/sse_tap.h"

#include "openai/anthropic.h"
#include "openai/responses.h"

namespace kvgate::openai {

namespace {

bool has_nonempty_choices(std::string_view e) {
  return e.find("\"choices\":[{") != std::string_view::npos ||
         e.find("\"choices\": [{") != std::string_view::npos;
}

}  // namespace

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

void SseTap::on_named_event(std::string_view event, Step& step) {
  // "event: NAME\ndata: {...}\n\n" (either line may come first, CRLF allowed).
  std::string_view name;
  std::string_view payload;
  size_t at = 0;
  while (at < event.size()) {
    size_t eol = event.find('\n', at);
    if (eol == std::string_view::npos) eol = event.size();
    std::string_view line = event.substr(at, eol - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    auto value = [&](size_t prefix) {
      std::string_view v = line.substr(prefix);
      if (v.starts_with(" ")) v.remove_prefix(1);
      return v;
    };
    if (line.starts_with("event:")) name = value(6);
    if (line.starts_with("data:")) payload = value(5);
    at = eol + 1;
  }
  if (dialect_ == Dialect::kResponses) {
    if (name == "response.output_text.delta") {
      ++step.token_events;
    } else if (name == "response.created") {
      response_id_ = responses::response_id(payload);
    } else if (name == "response.completed" || name == "response.incomplete" ||
               name == "response.failed") {
      const Usage u = responses::parse_usage(payload);
      if (u.seen) usage_ = u;
      step.done = true;
    } else if (name == "error") {
      saw_error_ = true;
    }
    return;
  }
  if (name == "content_block_delta") {
    ++step.token_events;
  } else if (name == "message_start" || name == "message_delta") {
    const Usage u = anthropic::parse_usage(payload);
    if (u.seen) {
      // message_delta's counts are the final ones; it may leave input tokens out.
      if (u.prompt_tokens > 0 || name == "message_start") usage_.prompt_tokens = u.prompt_tokens;
      if (u.cached_tokens > 0) usage_.cached_tokens = u.cached_tokens;
      usage_.completion_tokens = u.completion_tokens;
      usage_.seen = true;
    }
  } else if (name == "message_stop") {
    step.done = true;
  } else if (name == "error") {
    saw_error_ = true;
  }
}

void SseTap::on_event(std::string_view event, std::string& out, Step& step) {
  if (dialect_ != Dialect::kOpenAi) {
    on_named_event(event, step);
    out.append(event.data(), event.size());
    return;
  }
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

}  // namespace kvgate::openai
