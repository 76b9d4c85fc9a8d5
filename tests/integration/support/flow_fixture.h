// Helpers for the flow-control integration tests (docs/flow-control.md), and any test that
// overloads a pool: tenants' API keys, completions sent on their own threads and timed
// from one start (RequestBatch), and a `kvgate serve` whose pool "main" has a queue, read
// through the admin API.
//
//   FlowGateway fg(yaml, kToken);            // the yaml's admin token
//   RequestBatch b;
//   b.post(fg.gw.url, sim_completion("n1", 40), tenant_headers("key-noisy"));
//   ASSERT_TRUE(eventually([&] { return fg.queued() == 1; }, 5s));
//   for (const BatchAnswer& a : b.join()) EXPECT_EQ(a.r.status, 200);
#pragma once

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gateway/data/keys.h"
#include "gateway_fixture.h"

namespace kvgate::testing {

// A keys file (in the test temp dir, named after `name`) with one entry of weight 1 for
// each {key, tenant} pair.
inline std::string tenant_keys_file(const std::string& name,
                                    const std::vector<std::pair<std::string, std::string>>& keys) {
  std::string text = "keys:\n";
  for (const auto& [key, tenant] : keys) {
    text += "  - sha256: " + gateway::to_hex(gateway::sha256(key)) + "\n    tenant: " + tenant +
            "\n    weight: 1\n";
  }
  return write_temp_file(name, text);
}

// A completion for model "sim" of `tokens` tokens (~7 ms each on the default profile),
// its prompt 20 words from `tag`.
inline std::string sim_completion(const std::string& tag, int tokens) {
  return R"({"model":"sim","prompt":")" + words_prompt(tag, 20) + R"(","max_tokens":)" +
         std::to_string(tokens) + "}";
}

// A JSON request's headers with the API key `key`.
inline std::vector<io::HttpHeader> tenant_headers(const std::string& key) {
  return {{"Authorization", "Bearer " + key}, {"Content-Type", "application/json"}};
}

// One request of a RequestBatch.
struct BatchAnswer {
  std::string tenant;  // as given to post(), for the test's own bookkeeping
  io::HttpClientResponse r;
  double seconds = 0;   // answered, from the start of the batch
  bool failed = false;  // no answer: `error` says why
  std::string error;
};

// Completions on their own threads, timed from one start.
class RequestBatch {
 public:
  using Clock = std::chrono::steady_clock;

  RequestBatch() : start_(Clock::now()) {}
  RequestBatch(const RequestBatch&) = delete;
  RequestBatch& operator=(const RequestBatch&) = delete;
  ~RequestBatch() {
    for (auto& t : threads_) t.join();
  }

  // POSTs `body` to `url`/v1/completions with the headers `h`.
  void post(const std::string& url, std::string body, std::vector<io::HttpHeader> h,
            std::chrono::milliseconds timeout = std::chrono::seconds(60),
            const std::string& tenant = "") {
    auto slot = std::make_unique<BatchAnswer>();
    slot->tenant = tenant;
    threads_.emplace_back(
        [this, out = slot.get(), url, body = std::move(body), h = std::move(h), timeout] {
          auto r = io::http_fetch("POST", url + "/v1/completions", body, h, timeout);
          out->seconds = std::chrono::duration<double>(Clock::now() - start_).count();
          if (r) {
            out->r = std::move(*r);
          } else {
            out->failed = true;
            out->error = r.error();
          }
        });
    answers_.push_back(std::move(slot));
  }

  // Waits for every request posted so far; their answers in the order they were posted.
  std::vector<BatchAnswer> join() {
    for (auto& t : threads_) t.join();
    threads_.clear();
    std::vector<BatchAnswer> out;
    for (auto& a : answers_) out.push_back(std::move(*a));
    answers_.clear();
    return out;
  }

 private:
  Clock::time_point start_;
  std::vector<std::thread> threads_;
  std::vector<std::unique_ptr<BatchAnswer>> answers_;
};

// A `kvgate serve` with an admin API (its token `admin_token`), and the queue of its pool
// "main" (GET /admin/pools/main/queue).
struct FlowGateway {
  GatewayProcess gw;
  std::string admin;
  std::string token;

  FlowGateway(const std::string& yaml, std::string admin_token)
      : gw(yaml), admin(gw.wait_for_admin_url()), token(std::move(admin_token)) {}
  // The queue view; null when the admin API does not answer 200.
  boost::json::value queue() {
    auto r = io::http_fetch("GET", admin + "/admin/pools/main/queue", "",
                            {{"Authorization", "Bearer " + token}}, std::chrono::seconds(10));
    if (!r || r->status != 200) return {};
    return parse_json(r->body);
  }
  // How many requests wait in the queue; -1 when the view is not there.
  int64_t queued() {
    auto q = queue();
    return q.is_object() ? q.at("queued").to_number<int64_t>() : -1;
  }
  // A tenant's field in the queue view (counter, peer_service, ...); -1 when not there.
  double tenant(const std::string& name, const std::string& field) {
    auto q = queue();
    if (!q.is_object()) return -1;
    for (const auto& t : q.at("tenants").as_array()) {
      if (t.at("tenant").as_string() == name) return t.at(field).to_number<double>();
    }
    return -1;
  }
  // A metric of the pool (labelled pool="main" only).
  double metric(const std::string& name) { return gw.metric(name, {{"pool", "main"}}); }
};

}  // namespace kvgate::testing
