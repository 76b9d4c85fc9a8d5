// Plain HTTP message types shared by kvgate's HTTP server and client (no Beast here:
// this header is included widely).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"

namespace kvgate::io {

struct HttpHeader {
  std::string name;
  std::string value;
};

// Case-insensitive lookup; nullptr when absent.
const std::string* find_header(const std::vector<HttpHeader>& headers, std::string_view name);

// Header fields as received: one copy of their text, each field placed in it by offsets
// (no string per field). Requests (the server) and responses (the upstream client) keep
// their fields so.
class HeaderFields {
 public:
  size_t size() const { return refs_.size(); }
  std::string_view name(size_t i) const { return text(refs_[i].name_at, refs_[i].name_size); }
  std::string_view value(size_t i) const { return text(refs_[i].value_at, refs_[i].value_size); }
  // Case-insensitive lookup of the first field named `name`; nullopt when absent.
  std::optional<std::string_view> find(std::string_view name) const;

  void clear();
  void add(std::string_view name, std::string_view value);
  // All fields at once, as views into one stretch of text (a parsed head): that stretch is
  // copied, from the first name to the end of the last value.
  template <class Fields>  // a range of {name, value} views in order
  void assign(const Fields& fields) {
    refs_.clear();
    if (fields.empty()) {
      text_.clear();
      return;
    }
    const char* first = fields.front().name.data();
    const std::string_view last = fields.back().value;
    // One resize and copy (the fields' text is never a view of text_ itself).
    const size_t size = static_cast<size_t>(last.data() + last.size() - first);
    text_.resize(size);
    std::memcpy(text_.data(), first, size);
    refs_.reserve(fields.size());
    for (const auto& [n, v] : fields) {
      refs_.push_back(Ref{offset(first, n), static_cast<uint32_t>(n.size()), offset(first, v),
                          static_cast<uint32_t>(v.size())});
    }
  }

 private:
  struct Ref {
    uint32_t name_at = 0, name_size = 0, value_at = 0, value_size = 0;
  };
  std::string_view text(uint32_t at, uint32_t size) const {
    return std::string_view(text_).substr(at, size);
  }
  static uint32_t offset(const char* first, std::string_view v) {
    return static_cast<uint32_t>(v.data() - first);
  }

  std::string text_;
  std::vector<Ref> refs_;
};

// A request as the server read it.
struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: "/v1/models?x=1"
  std::string path;    // target without the query: "/v1/models"
  std::string query;   // after '?', may be empty
  HeaderFields fields;
  std::string body;
  std::string remote;  // peer address "ip:port"

  // Case-insensitive lookup; nullopt when absent.
  std::optional<std::string_view> header(std::string_view name) const { return fields.find(name); }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<HttpHeader> headers;  // extra headers
  std::string body;
  // More header lines, written after `headers` as given: each "Name: value\r\n". One
  // string for a handler's several fields, where a field each would cost two strings.
  std::string header_lines;
};

struct Url {
  std::string host;
  std::string port;
  std::string target;  // path and query, "/" at least
};

// Parses "http://host[:port][/path]" (IPv6 hosts in brackets; port 80 when none).
// https is not supported here. A #fragment is dropped (never sent).
Result<Url> parse_url(std::string_view url);

}  // namespace kvgate::io
