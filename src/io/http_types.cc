#include "io/http_types.h"

#include <boost/json.hpp>

namespace kvgate::io {

namespace {

// ASCII case-insensitive (field names are ASCII tokens; no locale lookup per character).
bool iequals(std::string_view a, std::string_view b) {
  const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

}  // namespace

const std::string* find_header(const std::vector<HttpHeader>& headers, std::string_view name) {
  for (const HttpHeader& h : headers) {
    if (iequals(h.name, name)) return &h.value;
  }
  return nullptr;
}

std::optional<std::string_view> HeaderFields::find(std::string_view name) const {
  for (size_t i = 0; i < size(); ++i) {
    if (iequals(this->name(i), name)) return value(i);
  }
  return std::nullopt;
}

void HeaderFields::clear() {
  text_.clear();
  refs_.clear();
}

void HeaderFields::add(std::string_view name, std::string_view value) {
  const auto at = static_cast<uint32_t>(text_.size());
  text_.append(name).append(value);
  refs_.push_back(Ref{at, static_cast<uint32_t>(name.size()),
                      at + static_cast<uint32_t>(name.size()),
                      static_cast<uint32_t>(value.size())});
}

std::string openai_error_body(std::string_view message, std::string_view type, int code) {
  boost::json::object error;
  error["message"] = message;
  error["type"] = type;
  error["param"] = nullptr;
  if (code != 0) {
    error["code"] = code;
  } else {
    error["code"] = nullptr;
  }
  boost::json::object body;
  body["error"] = std::move(error);
  return boost::json::serialize(body);
}

std::string_view openai_error_type(int status) {
  switch (status) {
    case 400:
    case 413:
    case 422:
      return "BadRequestError";
    case 401:
      return "AuthenticationError";
    case 403:
      return "PermissionDeniedError";
    case 404:
      return "NotFoundError";
    case 429:
      return "RateLimitError";
    case 503:
      return "ServiceUnavailableError";
    default:
      return status >= 500 ? "InternalServerError" : "BadRequestError";
  }
}

HttpResponse error_response(int status, std::string_view message) {
  HttpResponse r;
  r.status = status;
  r.body = openai_error_body(message, openai_error_type(status), status);
  return r;
}

}  // namespace kvgate::io
