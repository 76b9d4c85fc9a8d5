// Plain HTTP message types shared by kvgate's HTTP server and client (no Beast here:
// this header is included widely).
#pragma once

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

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: "/v1/models?x=1"
  std::string path;    // target without the query: "/v1/models"
  std::string query;   // after '?', may be empty
  std::vector<HttpHeader> headers;
  std::string body;
  std::string remote;  // peer address "ip:port"

  const std::string* header(std::string_view name) const { return find_header(headers, name); }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<HttpHeader> headers;  // extra headers
  std::string body;
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
