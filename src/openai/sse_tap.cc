#include "openai/sse_tap.h"

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

}  // namespace kvgate::openai
