// The export-only actuator (kind none): what the autoscaler asked for counts as starting,
// then ready after the expected startup, until endpoints take its place; so a decision
// exported for KEDA stays put instead of flipping back every interval.
#include "gateway/control/actuator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>

#include "core/scale/autoscaler.h"
#include "env/system_clock.h"
#include "gateway/data/pool_runtime.h"

namespace kvgate::gateway {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace actuator_test {

route::EndpointView ready_endpoint(route::EndpointId id) {
  return {.id = id, .url = "http://127.0.0.1:" + std::to_string(9000 + id)};
}

// Pool "main", round-robin over one endpoint.
PoolConfig one_endpoint_pool() {
  PoolConfig config;
  config.name = "main";
  config.router.policy.name = "round-robin";
  config.endpoints.push_back({.url = "http://127.0.0.1:9000"});
  return config;
}

size_t count(const std::vector<scale::ReplicaSignal>& r, scale::ReplicaPhase phase) {
  return static_cast<size_t>(
      std::count_if(r.begin(), r.end(), [&](const auto& s) { return s.phase == phase; }));
}

TEST(ExportOnlyActuator, AskedForReplicasStartThenServeUntilEndpointsReplaceThem) {
  boost::asio::io_context io;
  GatewayMetrics metrics;
  const PoolConfig config = one_endpoint_pool();
  PoolAutoscaleConfig autoscale;
  autoscale.policy.startup_time = 60 * kSecond;
  auto pool = PoolRuntime::create(config, {}, io.get_executor(), metrics, env::system_clock());
  ASSERT_TRUE(pool) << pool.error();
  Nanos now = 1000 * kSecond;
  auto a = make_actuator(autoscale, {.pool = **pool, .now = [&] { return now; }});
  ASSERT_TRUE(a) << a.error();
  Actuator& act = **a;

  std::vector<route::EndpointView> one = {ready_endpoint(0)};
  EXPECT_EQ((*a)->replicas(one).size(), 1u);

  // The autoscaler wants 3: two are asked for and count as starting from now.
  scale::Decision up;
  up.desired_replicas = 3;
  act.apply(up);
  auto r = act.replicas(one);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(count(r, scale::ReplicaPhase::kReady), 1u);
  EXPECT_EQ(count(r, scale::ReplicaPhase::kStarting), 2u);
  EXPECT_EQ(r[1].launched_at, now);

  // One endpoint arrives; after the expected startup the other counts as ready too.
  std::vector<route::EndpointView> two = {ready_endpoint(0), ready_endpoint(1)};
  now += 61 * kSecond;
  r = act.replicas(two);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(count(r, scale::ReplicaPhase::kReady), 3u);

  // All three are endpoints: nothing is made up any more.
  std::vector<route::EndpointView> three = {ready_endpoint(0), ready_endpoint(1),
                                            ready_endpoint(2)};
  r = act.replicas(three);
  EXPECT_EQ(r.size(), 3u);
  for (const auto& s : r) EXPECT_EQ(s.id.rfind("requested-", 0), std::string::npos) << s.id;

  // Scale-down to 1: the endpoints stay until someone removes them; no asks are left.
  scale::Decision down;
  down.desired_replicas = 1;
  act.apply(down);
  EXPECT_EQ(act.replicas(three).size(), 3u);
  EXPECT_EQ(act.replicas(one).size(), 1u);
}

TEST(ExportOnlyActuator, TheExportedDecisionHoldsWhileItIsCarriedOut) {
  boost::asio::io_context io;
  GatewayMetrics metrics;
  const PoolConfig config = one_endpoint_pool();
  auto pool = PoolRuntime::create(config, {}, io.get_executor(), metrics, env::system_clock());
  ASSERT_TRUE(pool) << pool.error();
  PoolAutoscaleConfig autoscale;
  autoscale.policy.signal = scale::Signal::kRunning;
  autoscale.policy.target = 1;
  autoscale.policy.max_replicas = 5;
  Nanos now = 1000 * kSecond;
  auto a = make_actuator(autoscale, {.pool = **pool, .now = [&] { return now; }});
  ASSERT_TRUE(a) << a.error();
  auto scaler = scale::Autoscaler::make(autoscale.policy);
  ASSERT_TRUE(scaler) << scaler.error();
  std::vector<route::EndpointView> one = {ready_endpoint(0)};
  // One endpoint running 3 against a target of 1: 3 replicas, every interval, while the
  // new ones are not there yet.
  for (int i = 0; i < 20; ++i) {
    scale::PoolSignals s;
    s.running = 3;
    s.replicas = (*a)->replicas(one);
    scale::Decision d = scaler->decide(s, now);
    EXPECT_EQ(d.desired_replicas, 3) << "interval " << i << ": " << d.reason;
    (*a)->apply(d);
    now += kSecond;
  }
}

}  // namespace actuator_test
}  // namespace kvgate::gateway
