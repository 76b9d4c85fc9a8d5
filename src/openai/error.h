// The error body of OpenAI's API, which every OpenAI-compatible server answers with:
//
//   {"error":{"message":"...","type":"...","param":...,"code":...}}
//
// Two dialects of it reach clients, and both are written here by one writer:
//   - error_json: OpenAI's own, as the gateway answers: `type` in OpenAI's words for the
//     status ("invalid_request_error", "rate_limit_error", ...), `param` the field at
//     fault, `code` a string such as "model_not_found" (each null when empty);
//   - vllm_error_json: vLLM's server's, as the engine simulator and the HTTP server's
//     refusals answer: `type` named after vLLM's exception classes ("BadRequestError",
//     "NotFoundError", ...), `param` null, `code` the HTTP status as a number.
//
//   response.body = error_json(404, "The model 'x' does not exist", "model",
//                              "model_not_found");
#pragma once

#include <string>
#include <string_view>

namespace kvgate::openai {

// OpenAI's error body for `status`.
std::string error_json(int status, std::string_view message, std::string_view param = {},
                       std::string_view code = {});

// vLLM's error body for `status`.
std::string vllm_error_json(int status, std::string_view message);

}  // namespace kvgate::openai
