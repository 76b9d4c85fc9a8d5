// No secret ever leaves the gateway: a real `kvgate serve` with API keys and an admin
// token, driven with the right key, wrong keys, keys in the wrong form, the right and
// wrong admin tokens and rate-limited tenants; then neither its stdout and stderr (the
// whole run, through a drain), nor /metrics, nor the admin API, nor `serve --check`
// holds any key, token, or the SHA-256 of one.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gateway/data/keys.h"
#include "support/gateway_fixture.h"

namespace kvgate::testing {
namespace {

struct Secret {
  std::string what;
  std::string text;
};

TEST(GatewaySecrets, NoKeyTokenOrHashInLogsMetricsOrAdmin) {
  EngineProcess engine({"--time-scale", "0.01", "--model", "sim"});
  ASSERT_FALSE(engine.url.empty());
  const std::string key = "kvg-secret-key-7d1f0c3a9b52e846";
  const std::string other_key = "kvg-second-key-0a9e5c7d31b4f268";  // a tenant that is limited
  const std::string wrong_key = "kvg-wrong-key-5e2b8f1c6a0d9374";
  const std::string admin_token = "admin-secret-token-4c8e1a7f";
  const std::string wrong_token = "admin-wrong-token-9b3d6e2a";
  const std::string keys = write_temp_file(
      "secrets-keys.yaml", "keys:\n  - sha256: " + gateway::to_hex(gateway::sha256(key)) +
                               "\n    tenant: acme\n" +
                               "  - sha256: " + gateway::to_hex(gateway::sha256(other_key)) +
                               "\n    tenant: tiny\n    limits: {requests_per_minute: 1}\n");
  const std::string yaml = gateway_yaml({engine.url}, "round-robin",
                                        "keys_file: " + keys +
                                            "\nadmin: {address: 127.0.0.1, "
                                            "port: 0, token: " +
                                            admin_token + "}\n");
  GatewayProcess gw(yaml);
  ASSERT_FALSE(gw.url.empty());
  auto admin_url = gw.proc->wait_for_admin_url();
  ASSERT_TRUE(admin_url) << admin_url.error();
  const std::string admin = *admin_url;

  const std::string chat = R"({"model":"sim","messages":[{"role":"user","content":"hi"}]})";
  const std::string stream =
      R"({"model":"sim","stream":true,"messages":[{"role":"user","content":"hi"}]})";
  auto with = [](std::string value) {
    return std::vector<io::HttpHeader>{{"Authorization", std::move(value)}};
  };
  EXPECT_EQ(gw.post("/v1/chat/completions", chat, with("Bearer " + key)).status, 200);
  EXPECT_EQ(gw.post("/v1/chat/completions", stream, with("Bearer " + key)).status, 200);
  EXPECT_EQ(gw.post("/v1/chat/completions", chat, with("Bearer " + wrong_key)).status, 401);
  EXPECT_EQ(gw.post("/v1/chat/completions", chat, with("Basic " + key)).status, 401);
  EXPECT_EQ(gw.post("/v1/chat/completions", chat, with(key)).status, 401);
  EXPECT_EQ(
      gw.post("/v1/completions", R"({"model":"sim","prompt":"x"})", with("Bearer " + key)).status,
      200);
  // A wrong key with a body that may not have arrived whole with the head.
  EXPECT_EQ(gw.post("/v1/completions", std::string(60000, ' ') + R"({"model":"sim"})",
                    with("Bearer " + wrong_key))
                .status,
            401);
  EXPECT_EQ(gw.post("/v1/chat/completions", chat, with("Bearer " + other_key)).status, 200);
  EXPECT_EQ(gw.post("/v1/chat/completions", chat, with("Bearer " + other_key)).status, 429);
  EXPECT_EQ(gw.post("/v1/chat/completions", chat, with("Bearer " + key + "\t")).status, 200);
  auto models = io::http_fetch("GET", gw.url + "/v1/models", {}, with("Bearer " + wrong_key));
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 401);

  std::vector<std::string> seen;
  for (const char* path : {"/admin", "/admin/pools", "/admin/pools/main/policy"}) {
    auto ok = io::http_fetch("GET", admin + path, {}, with("Bearer " + admin_token));
    ASSERT_TRUE(ok) << ok.error();
    EXPECT_EQ(ok->status, 200) << path;
    seen.push_back(std::string(path) + ": " + ok->body);
  }
  for (int i = 0; i < 11; ++i) {  // past the admin's failure limit: 401s, then 429s
    auto bad = io::http_fetch("GET", admin + "/admin/pools", {}, with("Bearer " + wrong_token));
    ASSERT_TRUE(bad) << bad.error();
    EXPECT_EQ(bad->status, i < 10 ? 401 : 429) << i;
    seen.push_back("admin refusal: " + bad->body);
  }
  auto metrics = io::http_fetch("GET", gw.url + "/metrics");
  ASSERT_TRUE(metrics);
  seen.push_back("/metrics: " + metrics->body);
  EXPECT_NE(metrics->body.find("tenant=\"acme\""), std::string::npos);  // tenants, not keys

  EXPECT_EQ(gw.proc->stop(), 0);
  seen.push_back("stdout: " + gw.proc->output());
  seen.push_back("stderr: " + gw.proc->errors());

  std::string config = write_temp_file("secrets-gateway.yaml", yaml);
  auto check = ChildProcess::spawn(kvgate_bin(), {"serve", "--check", config});
  ASSERT_TRUE(check) << check.error();
  for (int i = 0; i < 2000 && (*check)->running(); ++i) {
    // Waits for the kvgate serve --check child to exit by itself.
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ((*check)->stop(), 0);
  seen.push_back("serve --check: " + (*check)->output() + (*check)->errors());

  std::vector<Secret> secrets;
  for (const auto& [what, text] : {std::pair<std::string, std::string>{"API key", key},
                                   {"second API key", other_key},
                                   {"wrong API key", wrong_key},
                                   {"admin token", admin_token},
                                   {"wrong admin token", wrong_token}}) {
    secrets.push_back({what, text});
    const std::string hex = gateway::to_hex(gateway::sha256(text));
    secrets.push_back({what + " SHA-256", hex});
    secrets.push_back({what + " SHA-256 (prefix)", hex.substr(0, 16)});
  }
  for (const std::string& text : seen) {
    for (const Secret& s : secrets) {
      EXPECT_EQ(text.find(s.text), std::string::npos)
          << s.what << " found in " << text.substr(0, text.find(':')) << ":\n"
          << text;
    }
  }
}

}  // namespace
}  // namespace kvgate::testing
