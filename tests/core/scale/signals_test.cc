#include "core/scale/signals.h"

#include <gtest/gtest.h>

namespace kvgate::scale {
namespace {

PoolSignals two_ready_one_starting() {
  PoolSignals s;
  s.waiting = 6;
  s.running = 10;
  s.kv_usage = 0.5;
  s.prompt_tokens_per_s = 4000;
  s.replicas = {{.id = "a", .phase = ReplicaPhase::kReady},
                {.id = "b", .phase = ReplicaPhase::kReady},
                {.id = "c", .phase = ReplicaPhase::kStarting},
                {.id = "d", .phase = ReplicaPhase::kDraining}};
  return s;
}

TEST(SignalValue, SumsArePerReadyReplicaMeansAsTheyAre) {
  const PoolSignals s = two_ready_one_starting();
  EXPECT_EQ(s.ready(), 2u);
  EXPECT_EQ(s.active(), 3u);
  EXPECT_DOUBLE_EQ(*signal_value(s, Signal::kWaiting), 3);
  EXPECT_DOUBLE_EQ(*signal_value(s, Signal::kRunning), 5);
  EXPECT_DOUBLE_EQ(*signal_value(s, Signal::kConcurrency), 8);  // (6 + 10) / 2
  EXPECT_DOUBLE_EQ(*signal_value(s, Signal::kKvUsage), 0.5);
  EXPECT_DOUBLE_EQ(*signal_value(s, Signal::kPromptTokensPerS), 2000);
  EXPECT_FALSE(signal_value(s, Signal::kTtftP90)) << "no latency sample";
}

TEST(SignalValue, NoReadyReplicaIsNoMeasurement) {
  PoolSignals s;
  s.waiting = 5;
  EXPECT_FALSE(signal_value(s, Signal::kWaiting));
  EXPECT_FALSE(signal_value(s, Signal::kConcurrency));
}

TEST(SignalNames, RoundTrip) {
  for (Signal sig : {Signal::kWaiting, Signal::kRunning, Signal::kConcurrency, Signal::kKvUsage,
                     Signal::kItlP99, Signal::kGpuUtilization}) {
    EXPECT_EQ(parse_signal(signal_name(sig)), sig) << signal_name(sig);
  }
  EXPECT_EQ(signal_name(Signal::kConcurrency), "concurrency");
  EXPECT_FALSE(parse_signal("queue"));
}

}  // namespace
}  // namespace kvgate::scale
