// Three `kvgate serve` replicas in front of four `kvgate engine`s, sharing their routing
// events through a real redis-server (cluster: sync on), kv-cost on the approximate
// index: shared-prefix traffic spread round-robin over the replicas lands where the
// group's first request went, whichever replica it passes (the engines' cached_tokens
// say the prefix was there); with sync off it scatters. Redis killed mid-run: every
// replica keeps serving on its own view (counted); restarted: sync resumes (counted).
#include <gtest/gtest.h>
#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>

#include "core/cluster/peer_sync.h"
#include "core/cluster/routing_event.h"
#include "io/redis_async.h"
#include "support/eventually.h"
#include "support/gateway_fixture.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace gateway_replicas_test {

const std::vector<std::string> kFast = {"--time-scale", "0.01", "--model", "sim"};
constexpr int kGroups = 12;

std::string replica_yaml(const std::vector<std::string>& engines, int redis_port, int replica,
                         bool sync, const std::string& cluster_extra = "", int poll_ms = 2,
                         int threads = 1) {
  std::string y =
      "listeners:\n  - address: 127.0.0.1\n    port: 0\nthreads: " + std::to_string(threads) +
      "\n"
      "timeouts: {header_ms: 2000, drain_ms: 2000, connect_ms: 1000}\n"
      "cluster:\n  redis: {host: 127.0.0.1, port: " +
      std::to_string(redis_port) + ", timeout_ms: 100}\n  replica_id: gw-" +
      std::to_string(replica) + "\n  sync: " + (sync ? "on" : "off") +
      "\n  flush_ms: 2\n  poll_ms: " + std::to_string(poll_ms) + "\n" + cluster_extra +
      "  stream_prefix: t" + std::to_string(::getpid()) + (sync ? "" : "off") +
      "\npools:\n  main:\n    block_size: 16\n    router:\n      policy: kv-cost\n"
      "      params: {temperature: 0.05}\n      overlap: approx\n    endpoints:\n";
  for (const std::string& u : engines) y += "      - " + u + "\n";
  return y + "models:\n  - name: sim\n    pool: main\n";
}

// A group's prompt: 400 shared words, then a question of its own.
std::string body(int group, int question) {
  return R"({"model":"sim","prompt":")" + words_prompt("g" + std::to_string(group) + "w", 400) +
         words_prompt("q" + std::to_string(question) + "x", 20) + R"(","max_tokens":2})";
}

// Waits for the kvgate serve child's /ready (its start's reads caught the stream up).
bool becomes_ready(GatewayProcess& gw) {
  return eventually([&] {
    auto r = io::http_fetch("GET", gw.url + "/ready");
    return r && r->status == 200;
  });
}

struct Fleet {
  std::vector<std::unique_ptr<GatewayProcess>> replicas;
  explicit Fleet(const std::vector<std::string>& engines, int redis_port, bool sync) {
    // The blocking reads (sync_mode: blocking); the default, cycle mode, has tests of its
    // own below.
    for (int i = 0; i < 3; ++i) {
      replicas.push_back(std::make_unique<GatewayProcess>(
          replica_yaml(engines, redis_port, i, sync, "  sync_mode: blocking\n")));
    }
  }
  bool ok() const {
    for (const auto& r : replicas) {
      if (r->url.empty()) return false;
    }
    return true;
  }
  double metric(int i, const std::string& name) {
    return replicas[i]->metric(name, {{"pool", "main"}});
  }
  // Waits until every replica applied at least `events[i]` of its peers' events.
  bool wait_applied(const std::vector<double>& events) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < give_up) {
      bool all = true;
      for (int i = 0; i < 3; ++i) {
        all = all && metric(i, "kvgate_cluster_events_applied_total") >= events[i];
      }
      if (all) return true;
      // Waits for the three kvgate serve children to apply the cluster events.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
};

// `n` fast engines, kept in `engines`; their URLs (fewer when one failed to start).
std::vector<std::string> start_engines(int n,
                                       std::vector<std::unique_ptr<EngineProcess>>& engines) {
  std::vector<std::string> urls;
  for (int i = 0; i < n; ++i) {
    engines.push_back(std::make_unique<EngineProcess>(kFast));
    if (!engines.back()->url.empty()) urls.push_back(engines.back()->url);
  }
  return urls;
}

// Appends one entry to `stream` as a replica would (field "b": an encoded batch), with a
// connection of the test's own; whether Redis took it.
bool xadd(int redis_port, const std::string& stream, const std::string& wire) {
  boost::asio::io_context io;
  io::RedisAsync redis(io.get_executor(), {.port = redis_port, .command_timeout = kSecond});
  bool done = false, added = false;
  redis.command(std::vector<std::string>{"XADD", stream, "*", "b", wire},
                [&](const redisReply* r, std::string_view) {
                  added = r != nullptr;
                  done = true;
                });
  while (!done && io.run_one_for(std::chrono::seconds(2)) > 0) {
  }
  redis.close();
  return added;
}

std::string endpoint_of(const io::HttpClientResponse& r) {
  const std::string* e = r.header("x-kvgate-endpoint");
  return e ? *e : std::string();
}

struct Outcome {
  int follow_ups = 0;
  int on_first_engine = 0;
  int cached = 0;  // follow-ups whose engine had the prefix cached
};

// Each group's first request through replica g % 3, then one follow-up through each
// replica. `wait` (sync on) lets the peers apply the first requests before.
Outcome run_traffic(Fleet& fleet, int first_group, bool wait) {
  Outcome out;
  std::vector<std::string> first_engine(kGroups);
  std::vector<double> applied(3);
  for (int i = 0; i < 3; ++i) applied[i] = fleet.metric(i, "kvgate_cluster_events_applied_total");
  for (int g = 0; g < kGroups; ++g) {
    auto r = fleet.replicas[g % 3]->post("/v1/completions", body(first_group + g, 0));
    EXPECT_EQ(r.status, 200) << r.body;
    first_engine[g] = endpoint_of(r);
    // routed + prefill done + finished, for each peer but the one that served it.
    for (int i = 0; i < 3; ++i) applied[i] += i == g % 3 ? 0 : 3;
  }
  if (wait) {
    EXPECT_TRUE(fleet.wait_applied(applied));
  }
  for (int g = 0; g < kGroups; ++g) {
    for (int i = 0; i < 3; ++i) {
      const int replica = (g + 1 + i) % 3;
      auto r = fleet.replicas[replica]->post("/v1/completions", body(first_group + g, i + 1));
      EXPECT_EQ(r.status, 200) << r.body;
      if (wait) {
        // The next follow-up goes to another replica: it routes on a view that has this
        // one's events (the first engine busy until its "finished" arrives, otherwise).
        for (int p = 0; p < 3; ++p) applied[p] += p == replica ? 0 : 3;
        EXPECT_TRUE(fleet.wait_applied(applied));
      }
      ++out.follow_ups;
      if (endpoint_of(r) == first_engine[g]) ++out.on_first_engine;
      auto usage = parse_json(r.body).at("usage");
      if (usage.at("prompt_tokens_details").at("cached_tokens").as_int64() >= 384) ++out.cached;
    }
  }
  return out;
}

TEST(GatewayReplicas, SyncedReplicasRouteAsOneAndSurviveARedisOutage) {
  const int port = free_port();
  auto redis = start_redis(port);
  ASSERT_TRUE(redis) << redis.error();
  std::vector<std::unique_ptr<EngineProcess>> engines;
  const std::vector<std::string> urls = start_engines(4, engines);
  ASSERT_EQ(urls.size(), 4u);

  {
    Fleet off(urls, port, /*sync=*/false);
    ASSERT_TRUE(off.ok());
    const Outcome o = run_traffic(off, 0, /*wait=*/false);
    std::printf("[ replicas ] sync off: %d of %d follow-ups on the group's first engine\n",
                o.on_first_engine, o.follow_ups);
    // Only the replica that routed the group knows where its prefix is; the others
    // spread it over the four engines.
    EXPECT_LT(o.on_first_engine, o.follow_ups * 2 / 3) << o.on_first_engine;  // 18 of 36 seen
    EXPECT_EQ(off.metric(1, "kvgate_cluster_events_applied_total"), 0);
  }

  Fleet fleet(urls, port, /*sync=*/true);
  ASSERT_TRUE(fleet.ok());
  const Outcome o = run_traffic(fleet, 100, /*wait=*/true);
  std::printf("[ replicas ] sync on: %d of %d follow-ups on the group's first engine, %d cached\n",
              o.on_first_engine, o.follow_ups, o.cached);
  // Each follow-up routes on a view that has every earlier request's events: the group's
  // first engine (at least 90% of them; the rest may go elsewhere for load, as kv-cost
  // weighs both) and a cache hit. Without the wait, a follow-up sent the moment the
  // previous one ends can find the first engine still busy in its replica's view (its
  // "finished" not yet applied): 24 of 36 were seen so beside a busy ctest.
  EXPECT_GE(o.on_first_engine, o.follow_ups * 9 / 10) << o.on_first_engine;
  EXPECT_GE(o.cached, o.follow_ups * 9 / 10) << o.cached;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(fleet.replicas[i]->metric("kvgate_cluster_redis_up"), 1);
    EXPECT_GT(fleet.metric(i, "kvgate_cluster_events_published_total"), 0);
    EXPECT_EQ(fleet.metric(i, "kvgate_cluster_decode_errors_total"), 0);
  }

  // Redis dies: every replica keeps serving, on its own view, and says so.
  (*redis)->signal(SIGKILL);
  (*redis)->stop();
  for (int n = 0; n < 6; ++n) {
    EXPECT_EQ(fleet.replicas[n % 3]->post("/v1/completions", body(200 + n, 0)).status, 200);
  }
  for (int i = 0; i < 3; ++i) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (fleet.replicas[i]->metric("kvgate_cluster_redis_up") != 0 &&
           std::chrono::steady_clock::now() < give_up) {
      // Waits for the kvgate serve child to see that redis-server stopped.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_EQ(fleet.replicas[i]->metric("kvgate_cluster_redis_up"), 0);
    EXPECT_GE(fleet.replicas[i]->metric("kvgate_cluster_redis_outages_total"), 1);
  }
  // Replica 0's events of its two requests above go out within flush_max_ms (25 ms by
  // default) of them, or with its next heartbeat, and fail.
  EXPECT_TRUE(eventually([&] {
    return fleet.replicas[0]->metric("kvgate_cluster_publish_failures_total", {{"pool", "main"}}) >=
           1;
  }));

  // Redis is back: sync resumes (counted), and a new group routes as one again.
  auto again = start_redis(port);
  ASSERT_TRUE(again) << again.error();
  redis = std::move(again);
  for (int i = 0; i < 3; ++i) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (fleet.replicas[i]->metric("kvgate_cluster_redis_up") != 1 &&
           std::chrono::steady_clock::now() < give_up) {
      // Waits for the kvgate serve child to reconnect to the restarted redis-server.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_EQ(fleet.replicas[i]->metric("kvgate_cluster_redis_up"), 1);
    EXPECT_GE(fleet.replicas[i]->metric("kvgate_cluster_redis_recoveries_total"), 2);
  }
  const Outcome after = run_traffic(fleet, 300, /*wait=*/true);
  EXPECT_GE(after.on_first_engine, after.follow_ups * 3 / 4) << after.on_first_engine;
  for (auto& r : fleet.replicas) EXPECT_EQ(r->proc->stop(), 0) << r->proc->errors();
}

// One autoscaler actor: three replicas of an autoscaled pool (actuator none, deciding
// every 100 ms) compete for a 1 s lease; exactly one leads and actuates, the others
// decide and refuse to act. The leader is killed: another takes over within the lease
// time, and at no poll do two lead at once. Every replica exports the leader's desired
// count: their configurations differ on purpose (replica i has min_replicas i + 1, as
// during a rolling change of the config), so each would want a count of its own.
TEST(GatewayReplicas, OneAutoscalerLeaderAndAFastTakeOver) {
  const int port = free_port();
  auto redis = start_redis(port);
  ASSERT_TRUE(redis) << redis.error();
  EngineProcess engine(kFast);
  ASSERT_FALSE(engine.url.empty());
  std::vector<std::unique_ptr<GatewayProcess>> gw;
  for (int i = 0; i < 3; ++i) {
    gw.push_back(std::make_unique<GatewayProcess>(
        "listeners:\n  - address: 127.0.0.1\n    port: 0\nthreads: 1\n"
        "cluster:\n  redis: {host: 127.0.0.1, port: " +
        std::to_string(port) + "}\n  replica_id: lead-" + std::to_string(i) +
        "\n  lease_ms: 1000\n  stream_prefix: l" + std::to_string(::getpid()) +
        "\npools:\n  main:\n    router: {policy: kv-cost, overlap: approx}\n"
        "    endpoints: [" +
        engine.url +
        "]\n    autoscale:\n      signal: waiting\n      target: 2\n      min_replicas: " +
        std::to_string(i + 1) +
        "\n      max_replicas: 3\n      interval: 100ms\n      window: 2s\n"
        "models:\n  - name: sim\n    pool: main\n"));
    ASSERT_FALSE(gw.back()->url.empty());
  }
  auto leaders = [&](std::vector<int>& who) {
    who.clear();
    for (int i = 0; i < 3; ++i) {
      if (gw[i] && gw[i]->metric("kvgate_cluster_leader", {{"pool", "main"}}) == 1) {
        who.push_back(i);
      }
    }
  };
  std::vector<int> who;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (leaders(who); who.size() != 1 && std::chrono::steady_clock::now() < give_up; leaders(who)) {
    // Waits for the kvgate serve children to agree on one leader through redis-server.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(who.size(), 1u);
  const int first = who[0];
  // Every live replica exports the leader's count (read back at its next renewal).
  auto all_export = [&](int count) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (true) {
      int same = 0, live = 0;
      for (auto& g : gw) {
        if (!g) continue;
        ++live;
        same += g->metric("kvgate_autoscaler_desired_replicas", {{"pool", "main"}}) == count;
      }
      if (same == live) return true;
      if (std::chrono::steady_clock::now() > until) return false;
      // Waits for every kvgate serve child to read the leader's count back.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  };
  EXPECT_TRUE(all_export(first + 1)) << "leader " << first;
  // The leader actuates; the others refuse.
  const auto acted = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (gw[first]->metric("kvgate_cluster_actuations_total", {{"pool", "main"}}) < 3 &&
         std::chrono::steady_clock::now() < acted) {
    // Waits for the leading kvgate serve child to actuate.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GE(gw[first]->metric("kvgate_cluster_actuations_total", {{"pool", "main"}}), 3);
  for (int i = 0; i < 3; ++i) {
    if (i == first) continue;
    EXPECT_EQ(gw[i]->metric("kvgate_cluster_actuations_total", {{"pool", "main"}}), 0);
    EXPECT_GE(gw[i]->metric("kvgate_cluster_actuations_refused_total", {{"pool", "main"}}), 1);
  }

  gw[first]->proc->signal(SIGKILL);
  gw[first]->proc->stop();
  const auto killed = std::chrono::steady_clock::now();
  gw[first].reset();
  int next = -1;
  while (std::chrono::steady_clock::now() - killed < std::chrono::seconds(5)) {
    leaders(who);
    ASSERT_LE(who.size(), 1u);  // never two at once
    if (who.size() == 1) {
      next = who[0];
      break;
    }
    // Waits for a kvgate serve child left to take the lease over.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GE(next, 0);
  // Within the lease (1 s) plus one renewal period (1/3 s) and the polling's slack.
  EXPECT_LT(std::chrono::steady_clock::now() - killed, std::chrono::milliseconds(2000));
  const double before = gw[next]->metric("kvgate_cluster_actuations_total", {{"pool", "main"}});
  const auto acts = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (gw[next]->metric("kvgate_cluster_actuations_total", {{"pool", "main"}}) <= before &&
         std::chrono::steady_clock::now() < acts) {
    // Waits for the new leading kvgate serve child to actuate.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GT(gw[next]->metric("kvgate_cluster_actuations_total", {{"pool", "main"}}), before);
  EXPECT_TRUE(all_export(next + 1)) << "new leader " << next;
  for (int i = 0; i < 3; ++i) {
    leaders(who);
    EXPECT_EQ(who.size(), 1u);
  }
  for (auto& g : gw) {
    if (g) {
      EXPECT_EQ(g->proc->stop(), 0) << g->proc->errors();
    }
  }
}

// Start after the stream is gone: Redis restarts empty (no persistence), the running
// replicas write their index snapshots again, and a replica that starts only then loads
// one: /ready waits for it, and the groups' follow-ups through the new replica land on
// the engines that served the groups first (without the snapshot it would know nothing,
// and pick one of four).
TEST(GatewayReplicas, AReplicaStartingAfterRedisLostTheStreamLoadsAPeersSnapshot) {
  const int port = free_port();
  auto redis = start_redis(port);
  ASSERT_TRUE(redis) << redis.error();
  std::vector<std::unique_ptr<EngineProcess>> engines;
  const std::vector<std::string> urls = start_engines(4, engines);
  ASSERT_EQ(urls.size(), 4u);
  const std::string snapshots = "  snapshot_ms: 200\n";
  std::vector<std::unique_ptr<GatewayProcess>> gw;
  for (int i = 0; i < 2; ++i) {
    gw.push_back(std::make_unique<GatewayProcess>(replica_yaml(urls, port, i, true, snapshots)));
    ASSERT_FALSE(gw.back()->url.empty());
  }
  auto metric = [&](int i, const std::string& name) {
    return gw[i]->metric(name, {{"pool", "main"}});
  };
  std::vector<std::string> first(kGroups);
  for (int g = 0; g < kGroups; ++g) {
    auto r = gw[g % 2]->post("/v1/completions", body(500 + g, 0));
    ASSERT_EQ(r.status, 200) << r.body;
    first[g] = endpoint_of(r);
  }
  // Each replica has the other's groups in its index before Redis loses the stream: a
  // request's events go out within flush_max_ms (25 ms by default) of it, and the snapshot
  // the new replica loads is either one's. Six groups each, three events per request.
  ASSERT_TRUE(eventually([&] {
    return metric(0, "kvgate_cluster_events_applied_total") >= 3 * kGroups / 2 &&
           metric(1, "kvgate_cluster_events_applied_total") >= 3 * kGroups / 2;
  })) << metric(0, "kvgate_cluster_events_applied_total")
      << " and " << metric(1, "kvgate_cluster_events_applied_total") << " events applied";

  // Redis loses everything; the replicas keep their indexes and write them again.
  (*redis)->signal(SIGKILL);
  (*redis)->stop();
  auto again = start_redis(port);
  ASSERT_TRUE(again) << again.error();
  redis = std::move(again);
  const double written = metric(0, "kvgate_cluster_snapshots_written_total");
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (metric(0, "kvgate_cluster_snapshots_written_total") < written + 2 &&
         std::chrono::steady_clock::now() < give_up) {
    // Waits for the kvgate serve child to write two snapshots to the new redis-server.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GE(metric(0, "kvgate_cluster_snapshots_written_total"), written + 2)
      << gw[0]->proc->errors();

  gw.push_back(std::make_unique<GatewayProcess>(replica_yaml(urls, port, 2, true, snapshots)));
  ASSERT_FALSE(gw[2]->url.empty());
  int ready = 0;
  for (int i = 0; i < 200 && ready != 200; ++i) {
    auto r = io::http_fetch("GET", gw[2]->url + "/ready");
    ready = r ? r->status : 0;
    // Waits for the new kvgate serve child to load the snapshot and be ready.
    if (ready != 200) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(ready, 200);
  EXPECT_GE(metric(2, "kvgate_cluster_snapshots_loaded_total"), 1);
  EXPECT_GT(metric(2, "kvgate_cluster_snapshot_pairs_restored_total"), 0);

  int on_first = 0;
  for (int g = 0; g < kGroups; ++g) {
    auto r = gw[2]->post("/v1/completions", body(500 + g, 1));
    ASSERT_EQ(r.status, 200) << r.body;
    on_first += endpoint_of(r) == first[g];
  }
  std::printf(
      "[ replicas ] new replica after a Redis restart: %d of %d follow-ups on the "
      "group's first engine\n",
      on_first, kGroups);
  EXPECT_GE(on_first, kGroups * 9 / 10);
  for (auto& g : gw) EXPECT_EQ(g->proc->stop(), 0) << g->proc->errors();
}

// Warm-ups follow the fleet's hot prefixes: traffic passes replica A only; an engine
// that joins replica B is warmed by B with A's hot prefixes (B alone has none), shared
// through Redis every snapshot_ms.
TEST(GatewayReplicas, AWarmUpOnOneReplicaUsesThePeersHotPrefixes) {
  const int port = free_port();
  auto redis = start_redis(port);
  ASSERT_TRUE(redis) << redis.error();
  EngineProcess first(kFast), joining(kFast);
  ASSERT_FALSE(first.url.empty());
  ASSERT_FALSE(joining.url.empty());
  auto yaml = [&](int replica) {
    std::string y = replica_yaml({first.url}, port, replica, true, "  snapshot_ms: 200\n");
    const std::string pool = "  main:\n";
    y.insert(y.find(pool) + pool.size(),
             "    warmup: {prefixes: 8, budget_ms: 10000, concurrency: 2}\n");
    return "admin: {address: 127.0.0.1, port: 0}\n" + y;
  };
  GatewayProcess a(yaml(0)), b(yaml(1));
  ASSERT_FALSE(a.url.empty());
  ASSERT_FALSE(b.url.empty());
  auto admin_url = b.proc->wait_for_admin_url();
  ASSERT_TRUE(admin_url) << admin_url.error();
  const std::string admin = *admin_url;
  // Three groups, each prompt twice (a prefix is worth warming from its second hit).
  for (int g = 0; g < 3; ++g) {
    for (int k = 0; k < 2; ++k) ASSERT_EQ(a.post("/v1/completions", body(700 + g, k)).status, 200);
  }
  // A publishes twice after the traffic (the list then holds all three), then B reads
  // twice (it reads the peers' lists where it publishes its own).
  auto published_twice_more = [&](GatewayProcess& gw) {
    const metrics::Labels pool = {{"pool", "main"}};
    const double from = gw.metric("kvgate_cluster_hot_prefixes_published_total", pool);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (gw.metric("kvgate_cluster_hot_prefixes_published_total", pool) < from + 2 &&
           std::chrono::steady_clock::now() < until) {
      // Waits for the kvgate serve child to publish its hot prefixes twice more.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return gw.metric("kvgate_cluster_hot_prefixes_published_total", pool) >= from + 2;
  };
  ASSERT_TRUE(published_twice_more(a)) << a.proc->errors();
  ASSERT_TRUE(published_twice_more(b)) << b.proc->errors();
  ASSERT_EQ(b.metric("kvgate_cluster_peer_hot_prefix_lists", {{"pool", "main"}}), 1);

  auto added =
      io::http_fetch("POST", admin + "/admin/pools/main/endpoints",
                     R"({"url":")" + joining.url + R"("})", {{"Content-Type", "application/json"}});
  ASSERT_TRUE(added) << added.error();
  ASSERT_EQ(added->status, 201) << added->body;
  const metrics::Labels complete = {{"pool", "main"}, {"outcome", "complete"}};
  const auto warmed = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (b.metric("kvgate_warmups_total", complete) < 1 &&
         std::chrono::steady_clock::now() < warmed) {
    // Waits for the kvgate serve child to warm the joining kvgate engine up.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(b.metric("kvgate_warmups_total", complete), 1) << b.proc->errors();
  const double tokens = b.metric("kvgate_warmup_prompt_tokens_total", {{"pool", "main"}});
  std::printf(
      "[ replicas ] replica B warmed the joining engine with %.0f prompt tokens of "
      "replica A's hot prefixes\n",
      tokens);
  EXPECT_GE(tokens, 3 * 300);  // most of the three groups' shared 400-word prefixes
  EXPECT_GE(b.metric("kvgate_warmup_requests_total", {{"pool", "main"}, {"result", "ok"}}), 3);
  EXPECT_EQ(a.proc->stop(), 0) << a.proc->errors();
  EXPECT_EQ(b.proc->stop(), 0) << b.proc->errors();
}

// The peers' entries come as they are published: the read blocks in Redis (XREAD ...
// BLOCK) instead of polling. One replica with poll_ms 800 (a read every 800 ms would take
// 400 ms on average, up to 800) and a fake peer, the test, that appends one heartbeat
// batch: the replica applies it well within 250 ms. A quiet replica's own heartbeats come
// a second apart, more than poll_ms, so its read is blocked when the entry comes. Then
// the replica stops promptly although its read is blocked in Redis: stopping closes the
// reading connection, which ends the read.
TEST(GatewayReplicas, APeersEntryArrivesAtOnceAndABlockedReadDoesNotHoldTheStop) {
  const int port = free_port();
  auto redis = start_redis(port);
  ASSERT_TRUE(redis) << redis.error();
  EngineProcess engine(kFast);
  ASSERT_FALSE(engine.url.empty());
  GatewayProcess gw(
      replica_yaml({engine.url}, port, 0, true, "  sync_mode: blocking\n", /*poll_ms=*/800));
  ASSERT_FALSE(gw.url.empty());
  const metrics::Labels pool = {{"pool", "main"}};
  // Started (the start's reads are done) and two heartbeats out: its reads now block.
  ASSERT_TRUE(becomes_ready(gw));
  ASSERT_TRUE(
      eventually([&] { return gw.metric("kvgate_cluster_batches_published_total", pool) >= 2; }));
  ASSERT_EQ(gw.metric("kvgate_cluster_live_peers", pool), 0);
  const double applied = gw.metric("kvgate_cluster_batches_applied_total", pool);

  cluster::Outbox peer("peer-x", "main");
  const std::optional<cluster::EventBatch> heartbeat = peer.take(0, /*heartbeat=*/true);
  ASSERT_TRUE(heartbeat);
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_TRUE(
      xadd(port, "t" + std::to_string(::getpid()) + ":routing:main", cluster::encode(*heartbeat)));
  // Waits for the kvgate serve child to apply the fake peer's batch.
  ASSERT_TRUE(
      eventually([&] { return gw.metric("kvgate_cluster_batches_applied_total", pool) > applied; },
                 std::chrono::seconds(5), std::chrono::milliseconds(5)));
  const auto took = std::chrono::steady_clock::now() - sent;
  std::printf("[ replicas ] a peer's entry applied %.1f ms after its XADD (poll_ms 800)\n",
              std::chrono::duration<double, std::milli>(took).count());
  EXPECT_LT(took, std::chrono::milliseconds(250));
  EXPECT_EQ(gw.metric("kvgate_cluster_live_peers", pool), 1);
  EXPECT_EQ(gw.metric("kvgate_cluster_decode_errors_total", pool), 0);
  EXPECT_EQ(gw.metric("kvgate_cluster_read_failures_total", pool), 0);

  // Stopping with the read blocked: a read left blocked would hold the I/O thread until
  // stop() kills the child after its 5 s grace (exit status -9).
  const auto stopping = std::chrono::steady_clock::now();
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, std::chrono::seconds(3));
}

// sync_mode: cycle (docs/replicas.md, "One cycle per tick"): two replicas that publish
// and read in one pipelined round trip per tick (flush_max_ms, 25 ms here), their wait
// doubling up to cycle_idle_max_ms (200 ms) while nothing moves. Idle, both reach the
// bound; a request through A snaps A's wait back (an own event) and B's (it reads A's
// event), B applies A's events and routes the group's follow-up to the engine A chose;
// idle again, the waits lengthen again. Redis killed: both keep serving, count the
// outage and the failed publish and read; restarted: sync resumes and B applies A's
// events again.
// Run with the replies read as they come, and deferred to the next cycle (`cycle_replies`).
void cycle_mode_applies_peers_events_and_idles(const std::string& replies) {
  const int port = free_port();
  auto redis = start_redis(port);
  ASSERT_TRUE(redis) << redis.error();
  std::vector<std::unique_ptr<EngineProcess>> engines;
  const std::vector<std::string> urls = start_engines(2, engines);
  ASSERT_EQ(urls.size(), 2u);
  const std::string extra =
      "  sync_mode: cycle\n  cycle_idle_max_ms: 200\n  cycle_replies: " + replies + "\n";
  GatewayProcess a(replica_yaml(urls, port, 0, true, extra));
  GatewayProcess b(replica_yaml(urls, port, 1, true, extra));
  ASSERT_FALSE(a.url.empty());
  ASSERT_FALSE(b.url.empty());
  ASSERT_TRUE(becomes_ready(a));
  ASSERT_TRUE(becomes_ready(b));
  const metrics::Labels pool = {{"pool", "main"}};
  auto idle = [](GatewayProcess& gw) {
    return gw.metric("kvgate_cluster_cycle_wait_seconds") > 0.19;
  };
  // Heartbeats do not count as something moving: both waits reach the bound.
  ASSERT_TRUE(eventually([&] { return idle(a) && idle(b); })) << a.proc->errors();
  EXPECT_GT(a.metric("kvgate_cluster_cycles_total"), 0);

  int on_first = 0;
  constexpr int kCycleGroups = 6;
  for (int g = 0; g < kCycleGroups; ++g) {
    const double a_snaps = a.metric("kvgate_cluster_cycle_snaps_total");
    const double b_snaps = b.metric("kvgate_cluster_cycle_snaps_total");
    const double applied = b.metric("kvgate_cluster_events_applied_total", pool);
    auto first = a.post("/v1/completions", body(900 + g, 0));
    ASSERT_EQ(first.status, 200) << first.body;
    const auto sent = std::chrono::steady_clock::now();
    // routed + prefill done + finished. Waits for the kvgate serve child B to apply them.
    ASSERT_TRUE(eventually(
        [&] { return b.metric("kvgate_cluster_events_applied_total", pool) >= applied + 3; },
        std::chrono::seconds(5), std::chrono::milliseconds(5)));
    const double took_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - sent).count();
    std::printf("[ replicas ] cycle mode: A's events applied by B %.1f ms after A answered\n",
                took_ms);
    if (g == 0) {
      // Both were idle: A's own event and B's read of it snapped the waits back.
      EXPECT_GT(a.metric("kvgate_cluster_cycle_snaps_total"), a_snaps);
      EXPECT_GT(b.metric("kvgate_cluster_cycle_snaps_total"), b_snaps);
    }
    auto follow = b.post("/v1/completions", body(900 + g, 1));
    ASSERT_EQ(follow.status, 200) << follow.body;
    if (endpoint_of(follow) == endpoint_of(first)) ++on_first;
  }
  std::printf("[ replicas ] cycle mode: %d of %d follow-ups on the group's first engine\n",
              on_first, kCycleGroups);
  EXPECT_GE(on_first, kCycleGroups - 1);
  // Idle again: the waits lengthen again.
  EXPECT_TRUE(eventually([&] { return idle(a) && idle(b); }));
  for (GatewayProcess* gw : {&a, &b}) {
    EXPECT_EQ(gw->metric("kvgate_cluster_redis_up"), 1);
    EXPECT_EQ(gw->metric("kvgate_cluster_decode_errors_total", pool), 0);
    EXPECT_EQ(gw->metric("kvgate_cluster_read_failures_total", pool), 0);
    EXPECT_EQ(gw->metric("kvgate_cluster_publish_failures_total", pool), 0);
    EXPECT_GT(gw->metric("kvgate_cluster_live_peers", pool), 0);
  }

  // Redis dies: both keep serving on their own views, and count it.
  (*redis)->signal(SIGKILL);
  (*redis)->stop();
  EXPECT_EQ(a.post("/v1/completions", body(950, 0)).status, 200);
  for (GatewayProcess* gw : {&a, &b}) {
    // Waits for the kvgate serve child to see that redis-server stopped.
    EXPECT_TRUE(eventually([&] { return gw->metric("kvgate_cluster_redis_up") == 0; }));
    EXPECT_GE(gw->metric("kvgate_cluster_redis_outages_total"), 1);
    EXPECT_TRUE(
        eventually([&] { return gw->metric("kvgate_cluster_read_failures_total", pool) >= 1; }));
  }
  // A's events of that request went out at its next cycle, and failed.
  EXPECT_TRUE(
      eventually([&] { return a.metric("kvgate_cluster_publish_failures_total", pool) >= 1; }));

  // Redis is back: sync resumes (counted), and B applies A's events again.
  auto again = start_redis(port);
  ASSERT_TRUE(again) << again.error();
  redis = std::move(again);
  for (GatewayProcess* gw : {&a, &b}) {
    // Waits for the kvgate serve child to reconnect to the restarted redis-server.
    EXPECT_TRUE(eventually([&] { return gw->metric("kvgate_cluster_redis_up") == 1; }));
    EXPECT_GE(gw->metric("kvgate_cluster_redis_recoveries_total"), 2);
  }
  const double applied = b.metric("kvgate_cluster_events_applied_total", pool);
  EXPECT_EQ(a.post("/v1/completions", body(960, 0)).status, 200);
  // Waits for the kvgate serve child B to apply A's events after the outage.
  EXPECT_TRUE(eventually(
      [&] { return b.metric("kvgate_cluster_events_applied_total", pool) >= applied + 3; }));
  EXPECT_EQ(a.proc->stop(), 0) << a.proc->errors();
  EXPECT_EQ(b.proc->stop(), 0) << b.proc->errors();
}

TEST(GatewayReplicas, CycleModeAppliesThePeersEventsAndAnIdleWaitLengthensAndSnapsBack) {
  cycle_mode_applies_peers_events_and_idles("prompt");
}

// The same with each cycle's replies taken at the next (docs/replicas.md, "Deferred
// replies"): the replica's thread never wakes for them, and the rest holds.
TEST(GatewayReplicas, CycleModeWithDeferredRepliesAppliesThePeersEventsAndSurvivesRedis) {
  cycle_mode_applies_peers_events_and_idles("deferred");
}

// sync_mode: cycle on two I/O threads (the default `threads: 2`: the cycles run on a strand,
// the routing hooks on the pools' strands, on either thread). While requests flow through
// A, its due cycles are run by its own routing events (kvgate_cluster_cycles_on_event_total,
// docs/replicas.md "Cycles run by own events"), and B applies every event A routed.
TEST(GatewayReplicas, CycleModeOnTwoThreadsRunsDueCyclesOnOwnEvents) {
  const int port = free_port();
  auto redis = start_redis(port);
  ASSERT_TRUE(redis) << redis.error();
  std::vector<std::unique_ptr<EngineProcess>> engines;
  const std::vector<std::string> urls = start_engines(2, engines);
  ASSERT_EQ(urls.size(), 2u);
  const std::string extra = "  sync_mode: cycle\n";
  GatewayProcess a(replica_yaml(urls, port, 0, true, extra, /*poll_ms=*/2, /*threads=*/2));
  GatewayProcess b(replica_yaml(urls, port, 1, true, extra, /*poll_ms=*/2, /*threads=*/2));
  ASSERT_FALSE(a.url.empty());
  ASSERT_FALSE(b.url.empty());
  ASSERT_TRUE(becomes_ready(a));
  ASSERT_TRUE(becomes_ready(b));
  const metrics::Labels pool = {{"pool", "main"}};
  const double applied = b.metric("kvgate_cluster_events_applied_total", pool);
  // Requests one after another for up to ~3 s: each is three own events on A (routed, its
  // first token, its end), a few milliseconds apart, so some come after a cycle is due.
  int sent = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (std::chrono::steady_clock::now() < until) {
    auto r = a.post("/v1/completions", body(1000 + sent % kGroups, sent / kGroups));
    ASSERT_EQ(r.status, 200) << r.body;
    ++sent;
    if (sent >= 40 && a.metric("kvgate_cluster_cycles_on_event_total") > 0) break;
  }
  const double on_event = a.metric("kvgate_cluster_cycles_on_event_total");
  std::printf(
      "[ replicas ] cycle mode, 2 threads: %d requests, %.0f of %.0f cycles run by own events\n",
      sent, on_event, a.metric("kvgate_cluster_cycles_total"));
  EXPECT_GT(on_event, 0);
  // Waits for the kvgate serve child B to apply all of them.
  EXPECT_TRUE(eventually([&] {
    return b.metric("kvgate_cluster_events_applied_total", pool) >= applied + 3.0 * sent;
  }));
  for (GatewayProcess* gw : {&a, &b}) {
    EXPECT_EQ(gw->metric("kvgate_cluster_decode_errors_total", pool), 0);
    EXPECT_EQ(gw->metric("kvgate_cluster_publish_failures_total", pool), 0);
    EXPECT_EQ(gw->metric("kvgate_cluster_read_failures_total", pool), 0);
  }
  EXPECT_EQ(a.proc->stop(), 0) << a.proc->errors();
  EXPECT_EQ(b.proc->stop(), 0) << b.proc->errors();
}

}  // namespace gateway_replicas_test
}  // namespace kvgate::testing
