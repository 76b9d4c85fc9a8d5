// Fleet fairness with real processes (docs/flow-control.md, "Fleet fairness"): two
// `kvgate serve` replicas with flow control, sharing their tenants' service through a real
// redis-server (cluster: sync on). A tenant served through replica A is ordered behind on
// replica B: B's queue counts A's service in its counters. Redis killed: B falls back to
// its own counters, and says so.
//
// Each replica has an engine of its own (their pools name different endpoints; the
// routing events for the other's engine are counted as unknown), so that replica A serves
// the noisy tenant at once while replica B's one-sequence engine is held by two long
// requests and B's queue fills.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/eventually.h"
#include "support/flow_fixture.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace gateway_fleet_fairness_test {

using namespace std::chrono_literals;
constexpr const char* kToken = "fleet-fairness-token";

std::string keys_file() {
  return tenant_keys_file(
      "fleet-keys.yaml",
      {{"key-noisy", "noisy"}, {"key-quiet", "quiet"}, {"key-filler", "filler"}});
}

// Replica `id` (gw-a, gw-b) of pool "main" on `engine_url`, flow control on (no sparse
// reserve: a request leaves the queue only when the engine has room), sync on. Each
// replica's pool names an engine of its own, so their rooms are not one pool's: room
// sharing is off (room_share: none) and each takes the room of its engine.
std::string replica_yaml(const std::string& id, const std::string& engine_url, int redis_port,
                         const std::string& keys) {
  return "listeners:\n  - address: 127.0.0.1\n    port: 0\nthreads: 1\n"
         "keys_file: " +
         keys + "\nadmin: {address: 127.0.0.1, port: 0, token: " + kToken +
         "}\n"
         "timeouts: {header_ms: 5000, drain_ms: 1500, connect_ms: 1000}\n"
         "cluster:\n  redis: {host: 127.0.0.1, port: " +
         std::to_string(redis_port) + ", timeout_ms: 100}\n  replica_id: " + id +
         "\n  sync: on\n  flush_ms: 2\n  poll_ms: 2\n  stream_prefix: fair" +
         std::to_string(::getpid()) +
         "\npools:\n  main:\n    block_size: 16\n    scrape_interval_ms: 50\n"
         "    router: {policy: least-request, filters: [saturation], "
         "saturation: {queue_threshold: 1}}\n"
         "    flow_control: {max_requests: 100, max_wait_s: 60, sparse_reserve: 0, "
         "room_share: none}\n"
         "    endpoints:\n      - " +
         engine_url + "\nmodels:\n  - name: sim\n    pool: main\n";
}

// Posts a completion of `tenant` with its key ("key-" + tenant).
void post_as(RequestBatch& batch, const std::string& url, const std::string& tenant,
             std::string body) {
  batch.post(url, std::move(body), tenant_headers("key-" + tenant), 60s, tenant);
}

// testing::eventually() polling every 20 ms: each poll here asks a gateway child.
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout) {
  return testing::eventually(pred, timeout, 20ms);
}

TEST(GatewayFleetFairness, ATenantServedThroughOneReplicaIsOrderedBehindOnAnother) {
  const int port = free_port();
  auto redis = start_redis(port);
  ASSERT_TRUE(redis) << redis.error();
  EngineProcess engine_a({"--model", "sim", "--time-scale", "0.1"});
  EngineProcess engine_b({"--model", "sim", "--max-num-seqs", "1"});
  ASSERT_FALSE(engine_a.url.empty());
  ASSERT_FALSE(engine_b.url.empty());
  const std::string keys = keys_file();
  FlowGateway a(replica_yaml("gw-a", engine_a.url, port, keys), kToken);
  FlowGateway b(replica_yaml("gw-b", engine_b.url, port, keys), kToken);
  ASSERT_FALSE(a.admin.empty());
  ASSERT_FALSE(b.admin.empty());

  // B's engine runs one sequence at a time: two long requests hold it (~5.6 s each at
  // ~7 ms a token), one running and one waiting there; then B's pool is saturated.
  RequestBatch fill;
  post_as(fill, b.gw.url, "filler", sim_completion("fill1", 800));
  post_as(fill, b.gw.url, "filler", sim_completion("fill2", 800));
  ASSERT_TRUE(eventually(
      [&] {
        return b.gw.metric("kvgate_flow_dispatched_total",
                           {{"pool", "main"}, {"band", "standard"}, {"tenant", "filler"}}) == 2;
      },
      10s));

  // quiet is backlogged on B first.
  RequestBatch on_b;
  post_as(on_b, b.gw.url, "quiet", sim_completion("q1", 40));
  ASSERT_TRUE(eventually([&] { return b.queued() == 1; }, 5s)) << "B's engine was not held";

  // Meanwhile noisy is served through A, at once (A's engine is fast and free), and B
  // learns of it: the service A gave noisy reaches B's counters.
  {
    RequestBatch on_a;
    for (int i = 0; i < 12; ++i) {
      post_as(on_a, a.gw.url, "noisy", sim_completion("n-a" + std::to_string(i), 50));
    }
    for (const BatchAnswer& s : on_a.join()) {
      ASSERT_FALSE(s.failed);
      ASSERT_EQ(s.r.status, 200) << s.r.body;
    }
  }
  // Every charge and output correction A made is reported: B's view of the service A gave
  // noisy equals A's own counter for it (A served noisy alone, from a counter of 0).
  double served_on_a = -1;
  ASSERT_TRUE(eventually(
      [&] {
        served_on_a = a.tenant("noisy", "counter");
        const double peer = b.tenant("noisy", "peer_service");
        return served_on_a > 0 && std::fabs(peer - served_on_a) < 1e-6;
      },
      10s))
      << "A's counter " << served_on_a << ", B's peer service "
      << b.tenant("noisy", "peer_service");
  EXPECT_EQ(a.tenant("noisy", "peer_service"), 0);  // A never counts its own twice
  EXPECT_EQ(b.metric("kvgate_flow_fleet_peers"), 1);
  EXPECT_GT(a.metric("kvgate_flow_fleet_reports_published_total"), 0);
  EXPECT_GT(b.metric("kvgate_flow_fleet_reports_applied_total"), 0);

  // Now both tenants queue on B, interleaved: q1 (waiting), n1, q2, n2, q3, n3. FCFS and
  // B's own counters alone would alternate them; by the fleet's counters noisy has had
  // its share already, so quiet's three go first.
  const std::vector<std::pair<std::string, std::string>> order = {
      {"noisy", "n1"}, {"quiet", "q2"}, {"noisy", "n2"}, {"quiet", "q3"}, {"noisy", "n3"}};
  int64_t expected = 1;
  for (const auto& [tenant, tag] : order) {
    post_as(on_b, b.gw.url, tenant, sim_completion(tag, 40));
    ++expected;
    ASSERT_TRUE(eventually([&] { return b.queued() == expected; }, 5s))
        << tag << " did not queue: B's engine was freed too early";
  }
  {
    const boost::json::value q = b.queue();
    ASSERT_TRUE(q.is_object());
    ASSERT_GE(q.at("head").as_array().size(), 2u);
    EXPECT_EQ(q.at("head").at(0).at("tenant").as_string(), "quiet") << boost::json::serialize(q);
    EXPECT_GT(b.tenant("noisy", "counter"), b.tenant("quiet", "counter"));
  }

  // B's engine serves one request at a time: the answers come in dispatch order.
  std::vector<BatchAnswer> answers = on_b.join();
  for (const BatchAnswer& s : fill.join()) EXPECT_EQ(s.r.status, 200) << s.r.body;
  double last_quiet = 0, first_noisy = 1e9;
  for (const BatchAnswer& s : answers) {
    ASSERT_FALSE(s.failed) << s.tenant;
    ASSERT_EQ(s.r.status, 200) << s.r.body;
    if (s.tenant == "quiet") last_quiet = std::max(last_quiet, s.seconds);
    if (s.tenant == "noisy") first_noisy = std::min(first_noisy, s.seconds);
  }
  EXPECT_LT(last_quiet, first_noisy)
      << "quiet's last answer at " << last_quiet << " s, noisy's first at " << first_noisy << " s";

  // Redis dies: B orders by its own counters from now on, and says so.
  (*redis)->signal(SIGKILL);
  (*redis)->stop();
  // Another request makes B publish (and fail): the sync is lost.
  EXPECT_EQ(b.gw.post("/v1/completions", sim_completion("after", 2),
                      {{"Authorization", "Bearer key-quiet"}})
                .status,
            200);
  EXPECT_TRUE(eventually([&] { return b.metric("kvgate_flow_fleet_fallbacks_total") == 1; }, 5s));
  EXPECT_TRUE(eventually([&] { return b.metric("kvgate_flow_fleet_peers") == 0; }, 5s));
}

}  // namespace gateway_fleet_fairness_test
}  // namespace kvgate::testing
