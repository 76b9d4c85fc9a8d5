#include "core/scale/autoscaler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvgate::scale {
namespace {

// A toy pool for driving the autoscaler by hand: replicas boot in `startup` and the load
// is a fixed number of waiting requests spread over the ready replicas.
struct ToyPool {
  Nanos startup = 200 * kSecond;
  std::vector<ReplicaSignal> replicas;
  int next_id = 0;
  double waiting = 0;

  void add_ready(int n, Nanos at) {
    for (int i = 0; i < n; ++i) {
      replicas.push_back(
          {.id = id(), .phase = ReplicaPhase::kReady, .launched_at = at - startup, .ready_at = at});
    }
  }
  std::string id() {
    char buf[16];
    std::snprintf(buf, sizeof buf, "r%03d", next_id++);
    return buf;
  }
  PoolSignals signals(Nanos now) {
    for (ReplicaSignal& r : replicas) {
      if (r.phase == ReplicaPhase::kStarting && now - r.launched_at >= startup) {
        r.phase = ReplicaPhase::kReady;
        r.ready_at = r.launched_at + startup;
      }
    }
    PoolSignals s;
    s.waiting = waiting;
    s.replicas = replicas;
    return s;
  }
  void apply(const Decision& d, Nanos now) {
    std::erase_if(replicas, [&](const ReplicaSignal& r) {
      return std::find(d.drain.begin(), d.drain.end(), r.id) != d.drain.end();
    });
    int32_t active = 0;
    for (const ReplicaSignal& r : replicas) active += r.phase != ReplicaPhase::kDraining;
    for (; active < d.desired_replicas; ++active) {
      replicas.push_back({.id = id(), .phase = ReplicaPhase::kStarting, .launched_at = now});
    }
  }
};

AutoscaleConfig waiting_target(bool aware) {
  AutoscaleConfig c;
  c.policy = PolicyKind::kTarget;
  c.signal = Signal::kWaiting;
  c.target = 2;
  c.min_replicas = 1;
  c.max_replicas = 20;
  c.cold_start_aware = aware;
  c.startup_time = 200 * kSecond;
  return c;
}

// Runs 400 s of 15 s ticks with 12 waiting requests; returns the largest pool size.
int32_t peak_during_cold_start(bool aware) {
  auto a = Autoscaler::make(waiting_target(aware));
  EXPECT_TRUE(a.ok());
  ToyPool pool;
  pool.add_ready(2, 0);
  pool.waiting = 12;  // 6 per ready replica, 3 x the target: the pool needs 6 replicas
  int32_t peak = 0;
  for (Nanos now = 0; now <= 400 * kSecond; now += 15 * kSecond) {
    const Decision d = a->decide(pool.signals(now), now);
    pool.apply(d, now);
    peak = std::max(peak, d.desired_replicas);
  }
  return peak;
}

TEST(Autoscaler, DoesNotOverScaleWhileReplicasBoot) {
  EXPECT_EQ(peak_during_cold_start(/*aware=*/true), 6);
  // The naive loop multiplies the per-ready value by every replica, booting or not, and
  // runs to the maximum during one 200 s cold start.
  EXPECT_EQ(peak_during_cold_start(/*aware=*/false), 20);
}

TEST(Autoscaler, FirstDecisionReadsLikeTheHpa) {
  auto a = Autoscaler::make(waiting_target(true));
  ToyPool pool;
  pool.add_ready(2, 0);
  pool.waiting = 12;
  const Decision d = a->decide(pool.signals(0), 0);
  EXPECT_EQ(d.current_replicas, 2);
  EXPECT_EQ(d.needed, 6);
  EXPECT_EQ(d.desired_replicas, 6);
  EXPECT_DOUBLE_EQ(d.demand, 6);
  EXPECT_TRUE(d.drain.empty());
  EXPECT_EQ(d.horizon, 200 * kSecond);
  EXPECT_NE(d.reason.find("waiting 6/replica vs target 2"), std::string::npos) << d.reason;
}

TEST(Autoscaler, ScaleDownWaitsThenDrainsOldReplicasFirst) {
  AutoscaleConfig c = waiting_target(true);
  c.young_age = 600 * kSecond;
  auto a = Autoscaler::make(c);
  ToyPool pool;
  pool.add_ready(4, 0);  // r000..r003, ready since 0
  pool.waiting = 8;
  Nanos now = 1000 * kSecond;
  pool.apply(a->decide(pool.signals(now), now), now);  // 4 is right
  // Two more come up under a short burst...
  pool.waiting = 12;
  now += 15 * kSecond;
  Decision d = a->decide(pool.signals(now), now);
  EXPECT_EQ(d.desired_replicas, 6);
  pool.apply(d, now);
  for (int i = 0; i < 13; ++i) {  // while r004 and r005 boot, the pool holds at 6
    now += 15 * kSecond;
    d = a->decide(pool.signals(now), now);
    ASSERT_EQ(d.desired_replicas, 6);
  }
  now += 5 * kSecond;  // 1215 s: r004 and r005 are ready, and young
  // ...and the load falls to 1 replica's worth.
  pool.waiting = 2;
  for (int i = 0; i < 19; ++i, now += 15 * kSecond) {
    d = a->decide(pool.signals(now), now);
    ASSERT_EQ(d.desired_replicas, 6) << "stabilization holds for 300 s";
    ASSERT_TRUE(d.drain.empty());
  }
  now += 100 * kSecond;
  d = a->decide(pool.signals(now), now);
  EXPECT_EQ(d.desired_replicas, 1);
  // The four old replicas go first; of the young two, one (the older id on a tie) goes.
  EXPECT_EQ(d.drain, (std::vector<std::string>{"r000", "r001", "r002", "r003", "r004"}));
}

TEST(Autoscaler, IsDeterministic) {
  auto run = [] {
    auto a = Autoscaler::make(waiting_target(true));
    ToyPool pool;
    pool.add_ready(3, 0);
    std::vector<std::string> log;
    for (int i = 0; i < 100; ++i) {
      const Nanos now = i * 15 * kSecond;
      pool.waiting = (i * 37) % 40;
      const Decision d = a->decide(pool.signals(now), now);
      pool.apply(d, now);
      log.push_back(d.reason);
      for (const std::string& v : d.drain) log.push_back(v);
    }
    return log;
  };
  EXPECT_EQ(run(), run());
}

TEST(Autoscaler, StuckReplicaDoesNotCountAndGoesFirst) {
  auto a = Autoscaler::make(waiting_target(true));
  ToyPool pool;
  pool.add_ready(2, 0);
  const Nanos now = 2000 * kSecond;
  pool.replicas.push_back(
      {.id = "stuck", .phase = ReplicaPhase::kStarting, .launched_at = now - 700 * kSecond});
  pool.waiting = 6;  // 3 replicas' worth: the stuck one does not provide the third
  PoolSignals s = pool.signals(now);
  s.replicas.back().phase = ReplicaPhase::kStarting;
  Decision d = a->decide(s, now);
  EXPECT_EQ(d.capacity.stuck, 1);
  EXPECT_EQ(d.desired_replicas, 4);  // 3 healthy + the stuck slot, until it is drained
}

TEST(Autoscaler, GpuUtilizationPolicyRunsToTheMaximumOnAnIdlePool) {
  AutoscaleConfig c;
  c.policy = PolicyKind::kGpuUtilization;
  c.target = 0.8;
  c.max_replicas = 16;
  auto a = Autoscaler::make(c);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->config().signal, Signal::kGpuUtilization);
  ToyPool pool;
  pool.startup = 0;
  pool.add_ready(2, 0);
  int32_t last = 0;
  for (int i = 0; i < 20; ++i) {
    const Nanos now = i * 15 * kSecond;
    PoolSignals s = pool.signals(now);
    s.running = 4;            // four requests across the whole pool...
    s.gpu_utilization = 1.0;  // ...and every GPU reads busy: a decode step is a kernel
    const Decision d = a->decide(s, now);
    pool.apply(d, now);
    last = d.desired_replicas;
  }
  EXPECT_EQ(last, 16);
}

TEST(Autoscaler, ScalesFromZeroWhenRequestsWait) {
  AutoscaleConfig c = waiting_target(true);
  c.min_replicas = 0;
  auto a = Autoscaler::make(c);
  PoolSignals s;
  EXPECT_EQ(a->decide(s, 0).desired_replicas, 0);
  s.waiting = 3;
  EXPECT_EQ(a->decide(s, kSecond).desired_replicas, 1);
  // The planner too, though no tokens flow without a replica.
  AutoscaleConfig p;
  p.policy = PolicyKind::kPlanner;
  p.min_replicas = 0;
  p.prefill_profile = *PrefillProfile::make({{1000, 10000, 0.1}});
  auto planner = Autoscaler::make(p);
  ASSERT_TRUE(planner.ok()) << planner.error();
  EXPECT_EQ(planner->decide(PoolSignals{}, 0).desired_replicas, 0);
  EXPECT_EQ(planner->decide(s, kSecond).desired_replicas, 1);
}

TEST(Autoscaler, ScheduleFloorOverridesAnIdlePool) {
  AutoscaleConfig c = waiting_target(true);
  c.schedule.windows = {{.start = hh_mm(8, 0), .end = hh_mm(20, 0), .min_replicas = 5}};
  auto a = Autoscaler::make(c);
  ToyPool pool;
  pool.add_ready(1, 0);
  const Nanos noon = 3 * kDay + hh_mm(12, 0);
  const Decision d = a->decide(pool.signals(noon), noon);
  EXPECT_EQ(d.min_replicas, 5);
  EXPECT_EQ(d.desired_replicas, 5);
}

PrefillProfile prefill_profile() {
  return *PrefillProfile::make({{1000, 10000, 0.1}, {3000, 14000, 0.25}});
}
DecodeProfile decode_profile() {
  return *DecodeProfile::make({{.context_tokens = 1000, .points = {{0.010, 500}, {0.040, 2500}}},
                               {.context_tokens = 3000, .points = {{0.010, 300}, {0.040, 1500}}}});
}

AutoscaleConfig planner(PoolRole role, int32_t gpus) {
  AutoscaleConfig c;
  c.policy = PolicyKind::kPlanner;
  c.role = role;
  c.min_replicas = 1;
  c.max_replicas = 100;
  c.gpus_per_replica = gpus;
  c.planner = {.ttft_s = 0.5, .itl_s = 0.030};
  c.prefill_profile = prefill_profile();
  c.decode_profile = decode_profile();
  return c;
}

PoolSignals traffic(int ready, double in_tps, double out_tps) {
  PoolSignals s;
  for (int i = 0; i < ready; ++i) {
    s.replicas.push_back({.id = "p" + std::to_string(i),
                          .phase = ReplicaPhase::kReady,
                          .launched_at = 0,
                          .ready_at = 0});
  }
  s.prompt_tokens_per_s = in_tps;
  s.generation_tokens_per_s = out_tps;
  s.mean_prompt_tokens = 2000;
  s.mean_generation_tokens = 0;  // context 2000 for decode
  return s;
}

TEST(Autoscaler, PlannerPoolsFollowTheArithmetic) {
  auto p = Autoscaler::make(planner(PoolRole::kPrefill, 1));
  auto d = Autoscaler::make(planner(PoolRole::kDecode, 2));
  ASSERT_TRUE(p.ok() && d.ok());
  // Prefill: 36000 / 12000 = 3. Decode at context 2000, 30 ms: rows give 1833.3 and
  // 1100, mean 1466.7 tok/s; 4400 / 1466.7 = 3.
  EXPECT_EQ(p->decide(traffic(3, 36000, 0), 0).desired_replicas, 3);
  EXPECT_EQ(d->decide(traffic(3, 0, 4400), 0).desired_replicas, 3);
  // Traffic triples: prefill 9, decode ceil(9) = 9 (scale-up limit: 3 + 4 = 7 or 6 -> 7).
  EXPECT_EQ(p->decide(traffic(3, 108000, 0), 20 * kSecond).desired_replicas, 7);
}

TEST(Autoscaler, PlannerPoolsShareAGpuBudget) {
  auto p = Autoscaler::make(planner(PoolRole::kPrefill, 1));
  auto d = Autoscaler::make(planner(PoolRole::kDecode, 2));
  Autoscaler* pools[] = {&*p, &*d};
  // Prefill asks 6 (72000 / 12000), decode 4 x 2 GPUs (5866 / 1466.7 = 4): 14 GPUs of 10.
  const PoolSignals signals[] = {traffic(6, 72000, 0), traffic(4, 0, 5866)};
  const std::vector<Decision> out = decide_with_budget(pools, signals, 10, 0);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].desired_replicas, 4);
  EXPECT_EQ(out[1].desired_replicas, 3);
  EXPECT_EQ(out[0].drain.size(), 2u);
  EXPECT_EQ(out[1].drain.size(), 1u);
  EXPECT_NE(out[0].reason.find("GPU budget"), std::string::npos) << out[0].reason;
}

TEST(Autoscaler, ForecastScalesAheadOfARisingLoad) {
  AutoscaleConfig c = waiting_target(true);
  c.signal = Signal::kPromptTokensPerS;
  c.target = 1000;
  c.max_replicas = 100;
  c.behavior.scale_up.policies.clear();  // no rate limit, to read the forecast directly
  c.forecast = {
      .method = ForecastMethod::kHoltWinters, .season = 2 * 3600 * kSecond, .slot = 60 * kSecond};
  auto with = Autoscaler::make(c);
  c.forecast.method = ForecastMethod::kNone;
  auto without = Autoscaler::make(c);
  // A 2-hour season: the load ramps from 2000 to 10000 tok/s over the first hour.
  auto load = [](Nanos t) {
    const double x = static_cast<double>(t % (2 * 3600 * kSecond)) / (3600.0 * kSecond);
    return x < 1 ? 2000 + 8000 * x : 10000 - 8000 * (x - 1);
  };
  Decision dw, dn;
  for (Nanos t = 0; t <= 4 * 3600 * kSecond + 1800 * kSecond; t += 15 * kSecond) {
    PoolSignals s = traffic(10, 0, 0);
    s.prompt_tokens_per_s = load(t);
    dw = with->decide(s, t);
    dn = without->decide(s, t);
  }
  // At 30 min into the ramp (6000 tok/s), 200 s ahead the load is 6444 tok/s.
  EXPECT_EQ(dn.desired_replicas, 6);
  EXPECT_EQ(dw.desired_replicas, 7);
}

TEST(Autoscaler, NonFiniteSignalsHoldThePoolAndDoNotPoisonTheForecast) {
  AutoscaleConfig c = waiting_target(true);
  c.forecast.method = ForecastMethod::kMovingAverage;
  auto a = Autoscaler::make(c);
  ToyPool pool;
  pool.add_ready(4, 0);
  pool.waiting = std::nan("");
  Decision d = a->decide(pool.signals(kSecond), kSecond);
  EXPECT_EQ(d.desired_replicas, 4);
  EXPECT_NE(d.reason.find("no measurement"), std::string::npos) << d.reason;
  pool.waiting = 8;  // the forecast never saw the NaN: 4 replicas' worth
  EXPECT_EQ(a->decide(pool.signals(2 * kSecond), 2 * kSecond).desired_replicas, 4);

  auto p = Autoscaler::make(planner(PoolRole::kDecode, 1));
  PoolSignals s = traffic(2, 0, std::numeric_limits<double>::infinity());
  s.mean_prompt_tokens = std::nan("");
  s.itl = {.mean = std::nan(""), .samples = 5};
  d = p->decide(s, 0);
  EXPECT_GE(d.desired_replicas, 1);
  EXPECT_LE(d.desired_replicas, 100);
}

TEST(Autoscaler, MakeRejectsBadConfigNamingTheField) {
  AutoscaleConfig c = waiting_target(true);
  c.max_replicas = 0;
  auto a = Autoscaler::make(c);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().rfind("max_replicas", 0), 0u) << a.error();
  AutoscaleConfig p = planner(PoolRole::kDecode, 1);
  p.decode_profile.reset();
  EXPECT_NE(Autoscaler::make(p).error().find("decode_profile"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::scale
