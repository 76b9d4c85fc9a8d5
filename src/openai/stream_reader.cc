#include "openai/stream_reader.h"

#include <boost/json.hpp>

namespace kvgate::openai {
namespace json = boost::json;

namespace {

bool nonempty_string(const json::value* v) {
  return v != nullptr && v->is_string() && !v->as_string().empty();
}

}  // namespace

size_t StreamReader::feed(std::string_view bytes) {
  for (char c : bytes) {
    if (c != '\r') buf_ += c;
  }
  size_t content = 0;
  size_t pos;
  while ((pos = buf_.find("\n\n")) != std::string::npos) {
    std::string_view event(buf_.data(), pos);
    size_t start = 0;
    while (start <= event.size()) {
      size_t end = event.find('\n', start);
      if (end == std::string_view::npos) end = event.size();
      std::string_view line = event.substr(start, end - start);
      if (line.starts_with("data:")) {
        line.remove_prefix(5);
        if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
        content += on_data(line);
      }
      start = end + 1;
    }
    buf_.erase(0, pos + 2);
  }
  return content;
}

size_t StreamReader::on_data(std::string_view data) {
  if (data == "[DONE]") {
    done_ = true;
    return 0;
  }
  json::error_code ec;
  json::value v = json::parse(data, ec);
  if (ec || !v.is_object()) return 0;
  const json::object& o = v.as_object();
  size_t content = 0;
  if (const json::value* choices = o.if_contains("choices"); choices && choices->is_array()) {
    for (const json::value& c : choices->as_array()) {
      if (!c.is_object()) continue;
      const json::object& co = c.as_object();
      const json::value* delta = co.if_contains("delta");
      if (nonempty_string(co.if_contains("text")) ||
          (delta && delta->is_object() &&
           nonempty_string(delta->as_object().if_contains("content")))) {
        ++content;
      }
    }
  }
  content_chunks_ += content;
  if (const json::value* u = o.if_contains("usage"); u && u->is_object()) {
    usage_ = parse_usage(data);
  }
  return content;
}

}  // namespace kvgate::openai
