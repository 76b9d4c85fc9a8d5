// Plain HTTP message types shared by kvgate's HTTP server and client (no Beast here:
// this header is included widely).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvgate::io {

struct HttpHeader {
  std::string name;
  std::string value;
};

// Case-insensitive lookup; nullptr when absent.
const std::string* find_header(const std::vector<HttpHeader>& headers, std::string_view name);

// A request as the server read it. Its header fields are kept as one copy of their text
// and each field's place in it (no string per field): field_text and fields are the
// server's to fill (add_header), header() and header_at() read them.
struct HttpRequest {
  // Where a field's name and value sit in field_text.
  struct FieldRef {
    uint32_t name_at = 0, name_size = 0, value_at = 0, value_size = 0;
  };

  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: "/v1/models?x=1"
  std::string path;    // target without the query: "/v1/models"
  std::string query;   // after '?', may be empty
  std::string field_text;
  std::vector<FieldRef> fields;
  std::string body;
  std::string remote;  // peer address "ip:port"

  // Case-insensitive lookup of the first field named `name`; nullopt when absent.
  std::optional<std::string_view> header(std::string_view name) const;
  size_t header_count() const { return fields.size(); }
  std::string_view header_name(size_t i) const {
    return std::string_view(field_text).substr(fields[i].name_at, fields[i].name_size);
  }
  std::string_view header_value(size_t i) const {
    return std::string_view(field_text).substr(fields[i].value_at, fields[i].value_size);
  }
  void add_header(std::string_view name, std::string_view value);
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

// The OpenAI-style JSON error body: {"error":{"message":..,"type":..,"param":null,
// "code":..}}. `code` is written as a number (vLLM's habit) when non-zero, else null.
std::string openai_error_body(std::string_view message, std::string_view type, int code = 0);

// The error type OpenAI clients expect for an HTTP status ("invalid_request_error",
// "authentication_error", "not_found_error", "rate_limit_error", "server_error", ...).
std::string_view openai_error_type(int status);

// A whole error response in OpenAI's format.
HttpResponse error_response(int status, std::string_view message);

}  // namespace kvgate::io
