#include "openai/error.h"

#include <boost/json.hpp>

namespace kvgate::openai {
namespace json = boost::json;

namespace {

// OpenAI's error type for an HTTP status.
std::string_view openai_type(int status) {
  switch (status) {
    case 400:
    case 404:
    case 413:
    case 422:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 429:
      return "rate_limit_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

// vLLM's: the name of the exception class its server raises for the status.
std::string_view vllm_type(int status) {
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

// The one writer of both dialects; an empty `param` is null.
std::string write(std::string_view message, std::string_view type, std::string_view param,
                  json::value code) {
  json::object err;
  err["message"] = message;
  err["type"] = type;
  err["param"] = param.empty() ? json::value(nullptr) : json::value(param);
  err["code"] = std::move(code);
  json::object root;
  root["error"] = std::move(err);
  return json::serialize(root);
}

}  // namespace

std::string error_json(int status, std::string_view message, std::string_view param,
                       std::string_view code) {
  return write(message, openai_type(status), param,
               code.empty() ? json::value(nullptr) : json::value(code));
}

std::string vllm_error_json(int status, std::string_view message) {
  return write(message, vllm_type(status), {},
               status != 0 ? json::value(status) : json::value(nullptr));
}

}  // namespace kvgate::openai
