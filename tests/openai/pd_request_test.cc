#include "openai/pd_request.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace kvgate::openai {
namespace {
namespace json = boost::json;

json::object obj(const std::string& text) { return json::parse(text).as_object(); }

TEST(PdRequest, PrefillBodyAsVllmProxySendsIt) {
  auto p = prefill_body(
      R"({"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":50,)"
      R"("max_completion_tokens":50,"stream":true,"stream_options":{"include_usage":true},)"
      R"("min_tokens":5,"min_completion_tokens":5,"temperature":0.5})");
  ASSERT_TRUE(p) << p.error();
  json::object o = obj(*p);
  EXPECT_EQ(o.at("max_tokens"), 1);
  EXPECT_EQ(o.at("max_completion_tokens"), 1);
  EXPECT_EQ(o.at("stream"), false);
  EXPECT_FALSE(o.contains("stream_options"));
  EXPECT_FALSE(o.contains("min_tokens"));
  EXPECT_FALSE(o.contains("min_completion_tokens"));
  EXPECT_EQ(o.at("temperature"), 0.5);
  EXPECT_EQ(o.at("model"), "m");
  EXPECT_EQ(o.at("kv_transfer_params"), obj(R"({"do_remote_decode":true,"do_remote_prefill":false,
      "remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null})"));
}

TEST(PdRequest, PrefillBodyAddsNoMaxCompletionTokensWhenAbsent) {
  auto p = prefill_body(R"({"model":"m","prompt":"x"})");
  ASSERT_TRUE(p);
  json::object o = obj(*p);
  EXPECT_EQ(o.at("max_tokens"), 1);
  EXPECT_FALSE(o.contains("max_completion_tokens"));
  EXPECT_EQ(o.at("stream"), false);
}

TEST(PdRequest, PrefillBodyRejectsNonObjects) {
  EXPECT_FALSE(prefill_body("[1,2]"));
  EXPECT_FALSE(prefill_body("{bad"));
  EXPECT_FALSE(prefill_body(""));
}

TEST(PdRequest, TransferParamsFromThePrefillAnswer) {
  auto kt = transfer_params_of(
      R"({"id":"c","choices":[],"kv_transfer_params":{"do_remote_prefill":true,)"
      R"("do_remote_decode":false,"remote_block_ids":[0,1],"remote_engine_id":"e1",)"
      R"("remote_host":"10.0.0.1","remote_port":5600,"tp_size":1}})");
  ASSERT_TRUE(kt) << kt.error();
  ASSERT_TRUE(kt->has_value());
  json::object o = obj(**kt);
  EXPECT_EQ(o.at("remote_engine_id"), "e1");
  EXPECT_EQ(o.at("remote_port"), 5600);

  auto none = transfer_params_of(R"({"id":"c","kv_transfer_params":null})");
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
  auto missing = transfer_params_of(R"({"id":"c"})");
  ASSERT_TRUE(missing);
  EXPECT_FALSE(missing->has_value());

  EXPECT_FALSE(transfer_params_of(R"({"kv_transfer_params":[1]})"));
  EXPECT_FALSE(transfer_params_of("not json"));
  EXPECT_FALSE(transfer_params_of("\"a string\""));
}

TEST(PdRequest, DecodeBodyIsTheOriginalWithTheTransferParams) {
  const std::string body = R"({"model":"m","prompt":"x","max_tokens":7,"stream":true,)"
                           R"("stream_options":{"include_usage":true}})";
  auto d = decode_body(body, R"({"do_remote_prefill":true,"remote_engine_id":"e1"})");
  ASSERT_TRUE(d) << d.error();
  json::object o = obj(*d);
  EXPECT_EQ(o.at("max_tokens"), 7);
  EXPECT_EQ(o.at("stream"), true);
  EXPECT_EQ(o.at("stream_options").at("include_usage"), true);
  EXPECT_EQ(o.at("kv_transfer_params").at("remote_engine_id"), "e1");

  auto unchanged = decode_body(body, "");
  ASSERT_TRUE(unchanged);
  EXPECT_EQ(*unchanged, body);
  EXPECT_FALSE(decode_body(body, "[1]"));
}

}  // namespace
}  // namespace kvgate::openai
