// `kvgate engine` over HTTP: OpenAI API (whole and streamed), usage and cached tokens,
// metrics parsed as Prometheus text, vLLM-style errors, P/D handshake, fault injection.
#include <gtest/gtest.h>

#include <fstream>

#include "core/metrics/prometheus_text.h"
#include "support/engine_fixture.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace engine_api_test {

namespace json = boost::json;

const std::vector<std::string> kFast = {"--time-scale", "0.01", "--model", "sim"};

TEST(EngineApi, CompletionUsageAndCachedTokensOnRepeat) {
  EngineProcess e(kFast);
  ASSERT_FALSE(e.url.empty());
  const std::string body =
      R"({"model":"sim","prompt":")" + words_prompt("w", 100) + R"(","max_tokens":7})";
  auto first = parse_json(e.post("/v1/completions", body).body).as_object();
  EXPECT_EQ(first.at("object").as_string(), "text_completion");
  const auto& u1 = first.at("usage").as_object();
  EXPECT_EQ(u1.at("prompt_tokens").as_int64(), 100);
  EXPECT_EQ(u1.at("completion_tokens").as_int64(), 7);
  EXPECT_EQ(u1.at("total_tokens").as_int64(), 107);
  EXPECT_EQ(u1.at("prompt_tokens_details").at("cached_tokens").as_int64(), 0);
  const auto& choice = first.at("choices").as_array()[0].as_object();
  EXPECT_EQ(choice.at("finish_reason").as_string(), "length");
  // Exactly 7 output tokens: 7 words.
  const std::string text(choice.at("text").as_string());
  EXPECT_EQ(std::count(text.begin(), text.end(), ' '), 7);
  auto second = parse_json(e.post("/v1/completions", body).body).as_object();
  // 100 tokens, blocks of 16: the 6 full blocks (96 tokens) come from the prefix cache.
  EXPECT_EQ(second.at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64(), 96);
  // SIGTERM stops it cleanly (under ASan, a leak or error would give a non-zero status).
  EXPECT_EQ(e.proc->stop(), 0) << e.proc->errors();
}

TEST(EngineApi, ChatStreamWithUsage) {
  EngineProcess e(kFast);
  ASSERT_FALSE(e.url.empty());
  const std::string body =
      R"({"model":"sim","messages":[{"role":"user","content":"hello there"}],)"
      R"("max_completion_tokens":5,"stream":true,"stream_options":{"include_usage":true}})";
  auto r = e.post("/v1/chat/completions", body);
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.header("content-type")->find("text/event-stream"), std::string::npos);
  auto events = sse_events(r.body);
  // role chunk, 5 content chunks, usage chunk, [DONE]
  ASSERT_EQ(events.size(), 8u) << r.body;
  EXPECT_EQ(events.back(), "[DONE]");
  auto role = parse_json(events[0]).as_object();
  EXPECT_EQ(role.at("object").as_string(), "chat.completion.chunk");
  EXPECT_EQ(role.at("choices").at(0).at("delta").at("role").as_string(), "assistant");
  EXPECT_TRUE(role.at("usage").is_null());
  for (int i = 1; i <= 5; ++i) {
    auto c = parse_json(events[i]).as_object();
    EXPECT_EQ(c.at("id"), role.at("id"));
    const auto& fr = c.at("choices").at(0).at("finish_reason");
    EXPECT_EQ(fr.is_null(), i < 5);
  }
  auto usage = parse_json(events[6]).as_object();
  EXPECT_TRUE(usage.at("choices").as_array().empty());
  EXPECT_EQ(usage.at("usage").at("completion_tokens").as_int64(), 5);
  // Without include_usage: no usage anywhere.
  auto plain = e.post("/v1/completions", R"({"prompt":"a b c","max_tokens":2,"stream":true})");
  auto pe = sse_events(plain.body);
  ASSERT_EQ(pe.size(), 3u) << plain.body;
  EXPECT_FALSE(parse_json(pe[0]).as_object().contains("usage"));
}

TEST(EngineApi, MetricsFollowVllmNamesAndCountTokens) {
  EngineProcess e({"--time-scale", "0.01", "--model", "sim", "--deprecated-gpu-cache-metric",
                   "--num-gpu-blocks", "1000"});
  ASSERT_FALSE(e.url.empty());
  int prompt = 0, generated = 0;
  for (int i = 0; i < 3; ++i) {
    auto r = parse_json(
        e.post("/v1/completions", R"({"prompt":")" + words_prompt("m", 40) + R"(","max_tokens":4})")
            .body);
    prompt += static_cast<int>(r.at("usage").at("prompt_tokens").as_int64());
    generated += static_cast<int>(r.at("usage").at("completion_tokens").as_int64());
  }
  auto text = e.get("/metrics");
  EXPECT_NE(text.header("content-type")->find("text/plain"), std::string::npos);
  auto m = metrics::parse_prometheus_text(text.body);
  ASSERT_TRUE(m) << m.error();
  const metrics::Labels l = {{"model_name", "sim"}, {"engine", "0"}};
  // As in vLLM, prompt tokens count whole prompts, cached or not.
  EXPECT_EQ(m->value("vllm:prompt_tokens_total", l), prompt);
  EXPECT_EQ(m->value("vllm:prefix_cache_hits_total", l), 2 * 32);
  EXPECT_EQ(m->value("vllm:prefix_cache_queries_total", l), prompt);
  EXPECT_EQ(m->value("vllm:generation_tokens_total", l), generated);
  EXPECT_EQ(m->value("vllm:num_requests_running", l), 0);
  EXPECT_EQ(m->value("vllm:num_requests_waiting", l), 0);
  EXPECT_EQ(m->value("vllm:num_preemptions_total", l), 0);
  EXPECT_TRUE(m->value("vllm:kv_cache_usage_perc", l));
  EXPECT_TRUE(m->value("vllm:gpu_cache_usage_perc", l));
  EXPECT_EQ(m->type_of("vllm:time_to_first_token_seconds"), "histogram");
  EXPECT_EQ(m->value("vllm:time_to_first_token_seconds_count", l), 3);
  EXPECT_EQ(
      m->value("vllm:time_to_first_token_seconds_bucket", {{"model_name", "sim"}, {"le", "+Inf"}}),
      3);
  EXPECT_EQ(m->value("vllm:e2e_request_latency_seconds_count", l), 3);
  EXPECT_EQ(m->value("vllm:request_queue_time_seconds_count", l), 3);
  EXPECT_EQ(m->value("vllm:inter_token_latency_seconds_count", l), 3 * 3);
  EXPECT_EQ(m->value("vllm:cache_config_info", {{"block_size", "16"}, {"num_gpu_blocks", "1000"}}),
            1);
}

TEST(EngineApi, BadRequestsGetOpenAiErrorsAndNothingBreaks) {
  EngineProcess e({"--time-scale", "0.01", "--model", "sim", "--max-model-len", "64"});
  ASSERT_FALSE(e.url.empty());
  struct Case {
    std::string path, body;
    int status;
  };
  const std::vector<Case> cases = {
      {"/v1/completions", "{not json", 400},
      {"/v1/completions", "[1,2]", 400},
      {"/v1/completions", R"({"model":"other","prompt":"x"})", 404},
      {"/v1/completions", R"({"prompt":"x","n":2})", 400},
      {"/v1/completions", R"({"prompt":"x","max_tokens":0})", 400},
      {"/v1/completions", R"({"prompt":"x","max_tokens":"many"})", 400},
      {"/v1/completions", R"({"prompt":""})", 400},
      {"/v1/completions", R"({"max_tokens":3})", 400},
      {"/v1/completions", R"({"prompt":")" + words_prompt("l", 80) + R"("})", 400},
      {"/v1/chat/completions", R"({"messages":[]})", 400},
      {"/v1/chat/completions", R"({"messages":[{"content":"no role"}]})", 400},
      {"/v1/chat/completions", R"({"messages":"x"})", 400},
      {"/tokenize", R"({})", 400},
      {"/nope", "{}", 404},
  };
  for (const Case& c : cases) {
    auto r = e.post(c.path, c.body);
    EXPECT_EQ(r.status, c.status) << c.body << " -> " << r.body;
    auto err = parse_json(r.body);
    ASSERT_TRUE(err.is_object()) << r.body;
    EXPECT_TRUE(err.at("error").at("message").is_string());
    EXPECT_EQ(err.at("error").at("code").as_int64(), c.status);
  }
  EXPECT_EQ(e.get("/v1/completions").status, 405);
  EXPECT_EQ(e.get("/health").status, 200);
  auto tok = parse_json(e.post("/tokenize", R"({"prompt":"one two three"})").body);
  EXPECT_EQ(tok.at("count").as_int64(), 3);
  EXPECT_EQ(tok.at("max_model_len").as_int64(), 64);
  auto models = parse_json(e.get("/v1/models").body);
  EXPECT_EQ(models.at("data").at(0).at("id").as_string(), "sim");
}

TEST(EngineApi, FaultInjection) {
  EngineProcess cut({"--time-scale", "0.01", "--abort-after-tokens", "3"});
  ASSERT_FALSE(cut.url.empty());
  std::string got;
  auto r = io::http_fetch_streaming("POST", cut.url + "/v1/completions",
                                    R"({"prompt":"a b","max_tokens":10,"stream":true})", {},
                                    [&](std::string_view d) {
                                      got += d;
                                      return true;
                                    });
  // The connection is cut mid-body: either an error or a body without [DONE].
  EXPECT_EQ(got.find("[DONE]"), std::string::npos);
  EXPECT_EQ(sse_events(got).size(), 3u) << got;
  EngineProcess fail({"--time-scale", "0.01", "--fail-rate", "1"});
  ASSERT_FALSE(fail.url.empty());
  EXPECT_EQ(fail.post("/v1/completions", R"({"prompt":"a","max_tokens":1})").status, 500);
}

TEST(EngineApi, PrefillDecodeHandshake) {
  EngineProcess prefill({"--time-scale", "0.01", "--role", "prefill", "--rack", "r1"});
  EngineProcess decode({"--time-scale", "0.01", "--role", "decode", "--rack", "r1"});
  ASSERT_FALSE(prefill.url.empty());
  ASSERT_FALSE(decode.url.empty());
  const std::string prompt = words_prompt("pd", 50);
  auto p = parse_json(prefill
                          .post("/v1/completions",
                                R"({"prompt":")" + prompt +
                                    R"(","max_tokens":1,"stream":false,"kv_transfer_params":)"
                                    R"({"do_remote_decode":true,"do_remote_prefill":false,)"
                                    R"("remote_engine_id":null,"remote_block_ids":null,)"
                                    R"("remote_host":null,"remote_port":null}})")
                          .body)
               .as_object();
  ASSERT_TRUE(p.at("kv_transfer_params").is_object()) << json::serialize(p);
  const auto& kt = p.at("kv_transfer_params").as_object();
  EXPECT_TRUE(kt.at("do_remote_prefill").as_bool());
  EXPECT_FALSE(kt.at("do_remote_decode").as_bool());
  EXPECT_EQ(kt.at("remote_block_ids").as_array().size(), 4u);  // ceil(50 / 16)
  EXPECT_EQ(kt.at("remote_rack").as_string(), "r1");
  EXPECT_EQ(p.at("usage").at("completion_tokens").as_int64(), 1);
  auto d = parse_json(decode
                          .post("/v1/completions", R"({"prompt":")" + prompt +
                                                       R"(","max_tokens":6,"kv_transfer_params":)" +
                                                       json::serialize(kt) + "}")
                          .body)
               .as_object();
  EXPECT_EQ(d.at("usage").at("completion_tokens").as_int64(), 6);
  // The transferred full blocks count as cached: 3 blocks of 16.
  EXPECT_EQ(d.at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64(), 48);
}

TEST(EngineApi, RealTokenizerWhenGiven) {
  const std::string dir = source_dir() + "/.deps/fixtures/qwen3";
  if (source_dir().empty() || !std::ifstream(dir + "/tokenizer.json")) {
    GTEST_SKIP() << "no Qwen3 tokenizer fixture (run scripts/bootstrap)";
  }
  EngineProcess e({"--time-scale", "0.01", "--tokenizer", dir});
  ASSERT_FALSE(e.url.empty());
  auto t = parse_json(e.post("/tokenize", R"({"prompt":"Hello world, this is kvgate."})").body);
  EXPECT_EQ(t.at("count").as_int64(), 9);
  EXPECT_EQ(t.at("tokens").at(0).as_int64(), 9707);  // "Hello" in Qwen's vocabulary
  // The chat template (Qwen3) frames the conversation with <|im_start|> (151644).
  auto c = parse_json(e.post("/tokenize", R"({"messages":[{"role":"user","content":"Hi"}]})").body);
  EXPECT_EQ(c.at("tokens").at(0).as_int64(), 151644);
  auto r = parse_json(e.post("/v1/chat/completions",
                             R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":2})")
                          .body);
  EXPECT_EQ(r.at("usage").at("prompt_tokens").as_int64(), c.at("count").as_int64());
  EXPECT_EQ(e.post("/tokenize", "{\"prompt\":\"\xff\"}").status, 400);  // invalid UTF-8
}

}  // namespace engine_api_test
}  // namespace kvgate::testing
