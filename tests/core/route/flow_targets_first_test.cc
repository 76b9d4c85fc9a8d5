// FlowQueueConfig::targets_first: within a band, requests with a TTFT target leave before
// those without, the one due first (enqueued + target) first, whatever their tenants;
// the untargeted keep the VTC order; bands, removal, timeouts, deadlines and evictions
// keep the index consistent; off, the order is the old one exactly. (The flow
// controller's part: FlowControlTest.TargetedRequestsAreDispatchedFirst.)
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/route/flow_queue.h"

namespace kvgate::route::flow_targets_first_test {

constexpr Nanos kMs = kMillisecond;

FlowQueueConfig targets_config(bool targets_first) {
  FlowQueueConfig c;
  c.enabled = true;
  c.max_wait.fill(0);
  c.input_weight = 1;
  c.output_weight = 1;
  c.targets_first = targets_first;
  return c;
}

class FlowTargetsFirstTest : public ::testing::Test {
 protected:
  std::vector<FlowQueue::Removed> evicted_;
  RequestId next_ = 1;

  // Every request costs 200 (100 prompt + 100 output tokens, weights 1).
  FlowRefusal push(FlowQueue& q, std::string_view tenant, Nanos ttft_target = 0, Nanos now = 0,
                   Criticality band = Criticality::kStandard,
                   std::optional<Nanos> deadline = std::nullopt) {
    return q.enqueue({.id = next_++,
                      .tenant = tenant,
                      .band = band,
                      .prompt_tokens = 100,
                      .expected_output_tokens = 100,
                      .deadline = deadline,
                      .ttft_target = ttft_target},
                     now, evicted_);
  }
  // Pops everything; "tenant:id" in order.
  static std::vector<std::string> drain(FlowQueue& q, Nanos now = 0) {
    std::vector<std::string> out;
    while (auto r = q.pop(now)) out.push_back(std::string(r->tenant) + ":" + std::to_string(r->id));
    return out;
  }
  // A: 1, 2 untargeted; B: 3 untargeted; C: 4 targeted (400 ms, at 1 ms); A: 5 targeted
  // (100 ms, at 2 ms): 5 is due at 102 ms, 4 at 401 ms.
  void mixed(FlowQueue& q) {
    ASSERT_EQ(push(q, "A", 0, 0), FlowRefusal::kNone);
    ASSERT_EQ(push(q, "A", 0, 0), FlowRefusal::kNone);
    ASSERT_EQ(push(q, "B", 0, 0), FlowRefusal::kNone);
    ASSERT_EQ(push(q, "C", 400 * kMs, 1 * kMs), FlowRefusal::kNone);
    ASSERT_EQ(push(q, "A", 100 * kMs, 2 * kMs), FlowRefusal::kNone);
  }
};

TEST_F(FlowTargetsFirstTest, TargetedLeaveFirstAcrossTenants) {
  FlowQueue q(targets_config(true));
  mixed(q);
  auto next = q.peek(3 * kMs);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->id, 5u);
  // A's targeted 5 (due first), C's 4, then VTC: A was charged for 5, so B goes before A.
  EXPECT_EQ(drain(q, 3 * kMs), (std::vector<std::string>{"A:5", "C:4", "B:3", "A:1", "A:2"}));
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.queued_tokens(), 0u);
}

TEST_F(FlowTargetsFirstTest, OffKeepsTheOldOrderExactly) {
  FlowQueue q(targets_config(false));
  mixed(q);
  // VTC between tenants (equal counters: the one backlogged longest), FCFS within A.
  const std::vector<std::string> expected = {"A:1", "B:3", "C:4", "A:2", "A:5"};
  EXPECT_EQ(drain(q, 3 * kMs), expected);
  // The same requests without targets: the same order.
  FlowQueue plain(targets_config(false));
  next_ = 1;
  push(plain, "A");
  push(plain, "A");
  push(plain, "B");
  push(plain, "C", 0, 1 * kMs);
  push(plain, "A", 0, 2 * kMs);
  EXPECT_EQ(drain(plain, 3 * kMs), expected);
}

TEST_F(FlowTargetsFirstTest, EarliestDueFirstAmongTargeted) {
  FlowQueue q(targets_config(true));
  push(q, "A", 500 * kMs, 0);          // 1: due 500 ms
  push(q, "B", 200 * kMs, 100 * kMs);  // 2: due 300 ms
  push(q, "C", 100 * kMs, 200 * kMs);  // 3: due 300 ms, after 2 on the tie
  push(q, "A", 50 * kMs, 300 * kMs);   // 4: due 350 ms
  EXPECT_EQ(drain(q, 300 * kMs), (std::vector<std::string>{"B:2", "C:3", "A:4", "A:1"}));
}

TEST_F(FlowTargetsFirstTest, UntargetedKeepTheVtcOrder) {
  FlowQueue q(targets_config(true));
  for (int i = 0; i < 3; ++i) push(q, "A");  // 1-3
  for (int i = 0; i < 3; ++i) push(q, "B");  // 4-6
  push(q, "B", 400 * kMs);                   // 7, targeted
  // 7 first, charged to B; then A (lower counter), then on equal counters the tenant
  // served least recently: they alternate.
  EXPECT_EQ(drain(q), (std::vector<std::string>{"B:7", "A:1", "B:4", "A:2", "B:5", "A:3", "B:6"}));
  const auto tenants = q.tenants();
  ASSERT_EQ(tenants.size(), 2u);
  EXPECT_EQ(tenants[0].counter, 600);  // A: 3 x 200
  EXPECT_EQ(tenants[1].counter, 800);  // B: 4 x 200, the targeted one included
}

TEST_F(FlowTargetsFirstTest, EdfWithinATenantStaysForTheUntargeted) {
  FlowQueue q(targets_config(true));
  push(q, "A", 0, 0);                                                // 1
  push(q, "A", 0, 0, Criticality::kStandard, 10 * kSecond);          // 2: deadline
  push(q, "A", 300 * kMs, 0, Criticality::kStandard, 20 * kSecond);  // 3: targeted
  EXPECT_EQ(drain(q), (std::vector<std::string>{"A:3", "A:2", "A:1"}));
}

TEST_F(FlowTargetsFirstTest, AHigherBandStillGoesFirst) {
  FlowQueue q(targets_config(true));
  push(q, "A", 10 * kMs, 0, Criticality::kSheddable);  // 1
  push(q, "B", 0, 0, Criticality::kStandard);          // 2
  push(q, "C", 0, 0, Criticality::kCritical);          // 3
  push(q, "A", 900 * kMs, 0, Criticality::kStandard);  // 4
  EXPECT_EQ(drain(q), (std::vector<std::string>{"C:3", "A:4", "B:2", "A:1"}));
}

TEST_F(FlowTargetsFirstTest, RemovedTargetedRequestsLeaveTheIndex) {
  FlowQueue q(targets_config(true));
  push(q, "A", 100 * kMs);  // 1
  push(q, "B");             // 2
  push(q, "C", 200 * kMs);  // 3
  EXPECT_TRUE(q.remove(1));
  auto next = q.peek(0);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->id, 3u);
  // Nodes of removed entries are reused: a new targeted request sorts right.
  push(q, "A", 50 * kMs);  // 4
  EXPECT_EQ(drain(q), (std::vector<std::string>{"A:4", "C:3", "B:2"}));
}

TEST_F(FlowTargetsFirstTest, TimedOutAndMissedTargetedRequestsLeaveTheIndex) {
  FlowQueueConfig c = targets_config(true);
  c.max_wait[static_cast<size_t>(Criticality::kStandard)] = kSecond;
  FlowQueue q(c);
  push(q, "A", 100 * kMs, 0);                                             // 1: times out
  push(q, "B", 0, 500 * kMs);                                             // 2
  push(q, "C", 5 * kSecond, 900 * kMs);                                   // 3
  push(q, "D", 50 * kMs, 900 * kMs, Criticality::kStandard, 1100 * kMs);  // 4: deadline
  std::vector<FlowQueue::Removed> out;
  q.expire(kSecond, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].id, 1u);
  EXPECT_EQ(out[0].refusal, FlowRefusal::kQueueTimeout);
  q.expire(1100 * kMs, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].id, 4u);
  EXPECT_EQ(out[1].refusal, FlowRefusal::kDeadlineUnmeetable);
  EXPECT_EQ(drain(q, 1100 * kMs), (std::vector<std::string>{"C:3", "B:2"}));
}

TEST_F(FlowTargetsFirstTest, EvictedTargetedRequestsLeaveTheIndex) {
  FlowQueueConfig c = targets_config(true);
  c.max_requests = 2;
  FlowQueue q(c);
  push(q, "A", 100 * kMs, 0, Criticality::kSheddable);  // 1
  push(q, "B", 0, 0, Criticality::kStandard);           // 2
  // Full: the critical newcomer evicts the newest of the lowest band, the targeted 1.
  ASSERT_EQ(push(q, "C", 0, 0, Criticality::kCritical), FlowRefusal::kNone);  // 3
  ASSERT_EQ(evicted_.size(), 1u);
  EXPECT_EQ(evicted_[0].id, 1u);
  EXPECT_EQ(evicted_[0].refusal, FlowRefusal::kQueueFull);
  EXPECT_EQ(q.band_size(Criticality::kSheddable), 0u);
  EXPECT_EQ(drain(q), (std::vector<std::string>{"C:3", "B:2"}));
  // The sheddable band serves its untargeted requests afterwards.
  push(q, "A", 0, 0, Criticality::kSheddable);  // 4
  EXPECT_EQ(drain(q), (std::vector<std::string>{"A:4"}));
}

TEST_F(FlowTargetsFirstTest, SetConfigTurnsItOnAndOffForQueuedRequests) {
  FlowQueue q(targets_config(false));
  push(q, "A");             // 1
  push(q, "B", 100 * kMs);  // 2
  push(q, "C", 50 * kMs);   // 3
  push(q, "D");             // 4
  auto next = q.peek(0);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->id, 1u);
  q.set_config(targets_config(true));
  EXPECT_EQ(q.pop(0)->id, 3u);
  EXPECT_EQ(q.pop(0)->id, 2u);
  q.set_config(targets_config(false));
  EXPECT_EQ(drain(q), (std::vector<std::string>{"A:1", "D:4"}));
}

TEST(FlowTargetsFirstConfigTest, ParsesTheKey) {
  FlowQueueConfig c;
  EXPECT_FALSE(c.targets_first);
  std::vector<std::pair<std::string, std::string>> on = {{"targets_first", "true"}};
  ASSERT_TRUE(apply_flow_entries(on, c).ok());
  EXPECT_TRUE(c.targets_first);
  EXPECT_TRUE(c.validate().ok());
  std::vector<std::pair<std::string, std::string>> bad = {{"targets_first", "yes"}};
  Status s = apply_flow_entries(bad, c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("targets_first"), std::string::npos) << s.error();
}

}  // namespace kvgate::route::flow_targets_first_test
