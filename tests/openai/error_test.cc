#include "openai/error.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace kvgate::openai {
namespace {

namespace json = boost::json;

TEST(OpenAiError, OpenAisDialectNamesTypeParamAndCode) {
  EXPECT_EQ(error_json(404, "no such model", "model", "model_not_found"),
            R"({"error":{"message":"no such model","type":"invalid_request_error",)"
            R"("param":"model","code":"model_not_found"}})");
  auto w = json::parse(error_json(401, "bad key")).at("error").as_object();
  EXPECT_TRUE(w.at("param").is_null());
  EXPECT_TRUE(w.at("code").is_null());
  EXPECT_EQ(w.at("type").as_string(), "authentication_error");
  EXPECT_EQ(json::parse(error_json(503, "x")).at("error").at("type").as_string(), "server_error");
  EXPECT_EQ(json::parse(error_json(429, "x")).at("error").at("type").as_string(),
            "rate_limit_error");
}

TEST(OpenAiError, VllmsDialectNamesTheExceptionAndTheStatus) {
  EXPECT_EQ(vllm_error_json(400, "bad \"body\""),
            R"({"error":{"message":"bad \"body\"","type":"BadRequestError","param":null,)"
            R"("code":400}})");
  auto e = json::parse(vllm_error_json(404, "Not Found: /x")).at("error").as_object();
  EXPECT_EQ(e.at("type").as_string(), "NotFoundError");
  EXPECT_EQ(e.at("code").as_int64(), 404);
  EXPECT_EQ(json::parse(vllm_error_json(503, "starting")).at("error").at("type").as_string(),
            "ServiceUnavailableError");
  EXPECT_EQ(json::parse(vllm_error_json(502, "x")).at("error").at("type").as_string(),
            "InternalServerError");
}

}  // namespace
}  // namespace kvgate::openai
