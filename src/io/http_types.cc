#include "io/http_types.h"

#include <boost/json.hpp>

namespace kvgate::io {

const std::string* find_header(const std::vector<HttpHeader>& headers, std::string_view name) {
  for (const HttpHeader& h : headers) {
    if (h.name.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < name.size() && same; ++i) {
      same = std::tolower(static_cast<unsigned char>(h.name[i])) ==
             std::tolower(static_cast<unsigned char>(name[i]));
    }
    if (same) return &h.value;
  }
  return nullptr;
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
