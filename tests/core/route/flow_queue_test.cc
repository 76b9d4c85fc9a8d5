// FlowQueue in virtual time: band order, VTC fairness between tenants, EDF within a
// tenant, bounds, timeouts, deadlines, removal, configuration.
#include "core/route/flow_queue.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace kvgate::route {
namespace {

using C = Criticality;

FlowQueueConfig enabled_config() {
  FlowQueueConfig c;
  c.enabled = true;
  c.max_wait.fill(0);
  c.input_weight = 1;
  c.output_weight = 1;
  return c;
}

class FlowQueueTest : public ::testing::Test {
 protected:
  std::vector<FlowQueue::Removed> evicted_;
  RequestId next_ = 1;

  FlowRefusal push(FlowQueue& q, std::string_view tenant, C band = C::kStandard,
                   uint32_t prompt = 100, Nanos now = 0, std::optional<Nanos> deadline = {},
                   double weight = 1, uint32_t output = 100) {
    return q.enqueue({.id = next_++,
                      .tenant = tenant,
                      .weight = weight,
                      .band = band,
                      .prompt_tokens = prompt,
                      .expected_output_tokens = output,
                      .deadline = deadline},
                     now, evicted_);
  }
  // Pops everything; "tenant:id" in order.
  std::vector<std::string> drain(FlowQueue& q, Nanos now = 0) {
    std::vector<std::string> out;
    while (auto r = q.pop(now)) out.push_back(std::string(r->tenant) + ":" + std::to_string(r->id));
    return out;
  }
};

TEST_F(FlowQueueTest, FcfsWithinOneTenant) {
  FlowQueue q(enabled_config());
  for (int i = 0; i < 4; ++i) ASSERT_EQ(push(q, "a", C::kStandard, 100, i), FlowRefusal::kNone);
  EXPECT_EQ(q.size(), 4u);
  EXPECT_EQ(q.queued_tokens(), 800u);
  EXPECT_EQ(drain(q), (std::vector<std::string>{"a:1", "a:2", "a:3", "a:4"}));
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.queued_tokens(), 0u);
}

TEST_F(FlowQueueTest, StrictBandsServeCriticalFirst) {
  FlowQueue q(enabled_config());
  push(q, "a", C::kSheddable);
  push(q, "a", C::kStandard);
  push(q, "a", C::kCritical);
  push(q, "a", C::kStandard);
  EXPECT_EQ(q.band_size(C::kStandard), 2u);
  EXPECT_EQ(drain(q), (std::vector<std::string>{"a:3", "a:2", "a:4", "a:1"}));
}

TEST_F(FlowQueueTest, WeightedBandsShareByWeight) {
  FlowQueueConfig c = enabled_config();
  c.band_order = BandOrder::kWeighted;
  c.band_weights = {3, 1, 1};
  FlowQueue q(c);
  for (int i = 0; i < 40; ++i) {
    push(q, "a", C::kCritical);
    push(q, "a", C::kStandard);
  }
  int critical = 0;
  for (int i = 0; i < 40; ++i) critical += q.pop(0)->band == C::kCritical;
  EXPECT_EQ(critical, 30);  // 3:1
}

TEST_F(FlowQueueTest, StarvationBoundLetsALowBandThrough) {
  FlowQueueConfig c = enabled_config();
  c.starvation_bound = 5 * kSecond;
  FlowQueue q(c);
  push(q, "a", C::kSheddable, 100, 0);
  for (int i = 0; i < 5; ++i) push(q, "a", C::kCritical, 100, kSecond);
  EXPECT_EQ(q.pop(2 * kSecond)->band, C::kCritical);   // not starving yet
  EXPECT_EQ(q.pop(5 * kSecond)->band, C::kSheddable);  // waited 5 s: goes first
  EXPECT_EQ(q.pop(5 * kSecond)->band, C::kCritical);
}

TEST_F(FlowQueueTest, TenantsShareTokensEquallyWhateverTheirBacklog) {
  FlowQueue q(enabled_config());
  // A has 100 requests queued, B 10; equal costs: they alternate until B runs out.
  for (int i = 0; i < 100; ++i) push(q, "A");
  for (int i = 0; i < 10; ++i) push(q, "B");
  std::map<std::string, int> served;
  for (int i = 0; i < 20; ++i) ++served[std::string(q.pop(0)->tenant)];
  EXPECT_EQ(served["A"], 10);
  EXPECT_EQ(served["B"], 10);
}

TEST_F(FlowQueueTest, FairnessIsOnTokensNotRequests) {
  FlowQueue q(enabled_config());
  // A's requests cost 4x B's: B gets 4 requests per A request.
  for (int i = 0; i < 20; ++i) push(q, "A", C::kStandard, 700, 0, {}, 1, 100);
  for (int i = 0; i < 40; ++i) push(q, "B", C::kStandard, 100, 0, {}, 1, 100);
  std::map<std::string, int> served;
  for (int i = 0; i < 25; ++i) ++served[std::string(q.pop(0)->tenant)];
  EXPECT_EQ(served["A"], 5);
  EXPECT_EQ(served["B"], 20);
}

TEST_F(FlowQueueTest, WeightsScaleTheShare) {
  FlowQueue q(enabled_config());
  for (int i = 0; i < 60; ++i) push(q, "gold", C::kStandard, 100, 0, {}, 2.0);
  for (int i = 0; i < 60; ++i) push(q, "free", C::kStandard, 100, 0, {}, 1.0);
  std::map<std::string, int> served;
  for (int i = 0; i < 30; ++i) ++served[std::string(q.pop(0)->tenant)];
  EXPECT_EQ(served["gold"], 20);
  EXPECT_EQ(served["free"], 10);
}

TEST_F(FlowQueueTest, ReturningTenantCannotBankCredit) {
  FlowQueue q(enabled_config());
  // B was served once, then idled while A was served alone for a long time.
  q.charge("B", 1, 100, 100, 0);
  for (int i = 0; i < 50; ++i) push(q, "A");
  for (int i = 0; i < 40; ++i) q.pop(0);
  // B arrives with a burst: it is lifted to A's counter, so they alternate instead of B
  // taking 40 requests in a row.
  for (int i = 0; i < 20; ++i) push(q, "B");
  std::map<std::string, int> served;
  for (int i = 0; i < 10; ++i) ++served[std::string(q.pop(0)->tenant)];
  EXPECT_EQ(served["A"], 5);
  EXPECT_EQ(served["B"], 5);
}

TEST_F(FlowQueueTest, ReturningTenantWinsTheTieWithTheBacklog) {
  FlowQueue q(enabled_config());
  for (int i = 0; i < 10; ++i) push(q, "A");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(q.pop(0)->tenant, "A");
  // B arrives and is lifted to A's counter. On the tie the tenant served least recently
  // goes first: B at the next dispatch, not after one more of A's (which would double
  // a light tenant's wait behind a heavy one's backlog).
  push(q, "B");
  auto stats = q.tenants();
  EXPECT_EQ(stats[0].counter, stats[1].counter);
  EXPECT_EQ(q.pop(0)->tenant, "B");
  // Then round robin among equals: A (served before B), and B again after A.
  push(q, "B");
  EXPECT_EQ(q.pop(0)->tenant, "A");
  EXPECT_EQ(q.pop(0)->tenant, "B");
}

TEST_F(FlowQueueTest, PeekShowsTheNextRequestAndWhetherItIsSparse) {
  FlowQueue q(enabled_config());
  EXPECT_FALSE(q.peek(0).has_value());
  push(q, "A");
  // Alone in the queue: not sparse (there is no one else's backlog to wait behind).
  EXPECT_EQ(q.peek(0)->id, 1u);
  EXPECT_FALSE(q.peek(0)->sparse);
  push(q, "A");
  q.pop(0);
  push(q, "B");  // id 3: B's only request, A's waits too
  auto next = q.peek(0);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->id, 3u);
  EXPECT_TRUE(next->sparse);
  EXPECT_EQ(q.pop(0)->id, 3u);  // peek left it where pop finds it
  push(q, "B");
  push(q, "B");
  EXPECT_EQ(q.peek(0)->id, 2u);  // A's last: A has nothing else queued, B's wait
  EXPECT_TRUE(q.peek(0)->sparse);
  q.pop(0);
  EXPECT_FALSE(q.peek(0)->sparse);  // B has two queued
}

TEST_F(FlowQueueTest, ServiceOutsideTheQueueCountsAndLiftsAnIdleTenant) {
  FlowQueue q(enabled_config());
  q.charge("B", 1, 100, 100, 0);                               // B: 200
  for (int i = 0; i < 10; ++i) q.charge("A", 1, 100, 100, 0);  // A: 200 .. 2200
  q.charge("B", 1, 100, 100, 0);  // B was idle: lifted to 2200 first, then charged
  auto stats = q.tenants();
  EXPECT_EQ(stats[0].counter, 2200);
  EXPECT_EQ(stats[1].counter, 2400);
  EXPECT_EQ(stats[0].dispatched, 10u);
  EXPECT_EQ(stats[1].served_tokens, 400u);
}

TEST_F(FlowQueueTest, CorrectOutputChargesActualService) {
  FlowQueue q(enabled_config());
  for (int i = 0; i < 10; ++i) {
    push(q, "A");
    push(q, "B");
  }
  auto a = q.pop(0);
  ASSERT_EQ(a->tenant, "A");
  EXPECT_EQ(a->charged_output_tokens, 100u);
  // A's answer was 900 tokens, not 100: A is 800 tokens of service further ahead.
  q.correct_output("A", a->charged_output_tokens, 900);
  std::vector<std::string> order;
  for (int i = 0; i < 6; ++i) order.push_back(std::string(q.pop(0)->tenant));
  EXPECT_EQ(order, (std::vector<std::string>{"B", "B", "B", "B", "B", "A"}));
}

TEST_F(FlowQueueTest, EarliestDeadlineFirstWithinATenant) {
  FlowQueue q(enabled_config());
  push(q, "a", C::kStandard, 100, 0);               // 1: no deadline
  push(q, "a", C::kStandard, 100, 0, 9 * kSecond);  // 2
  push(q, "a", C::kStandard, 100, 0, 3 * kSecond);  // 3
  EXPECT_EQ(drain(q), (std::vector<std::string>{"a:3", "a:2", "a:1"}));
}

TEST_F(FlowQueueTest, PoolOverflowEvictsTheLowestBandsNewest) {
  FlowQueueConfig c = enabled_config();
  c.max_requests = 3;
  FlowQueue q(c);
  push(q, "a", C::kSheddable);  // 1
  push(q, "a", C::kSheddable);  // 2
  push(q, "a", C::kStandard);   // 3
  // A standard request evicts sheddable #2 (the newest of the lowest band).
  ASSERT_EQ(push(q, "b", C::kStandard), FlowRefusal::kNone);
  ASSERT_EQ(evicted_.size(), 1u);
  EXPECT_EQ(evicted_[0].id, 2u);
  EXPECT_EQ(evicted_[0].refusal, FlowRefusal::kQueueFull);
  // Another sheddable one finds no lower band: refused, nothing evicted.
  evicted_.clear();
  EXPECT_EQ(push(q, "b", C::kSheddable), FlowRefusal::kQueueFull);
  EXPECT_TRUE(evicted_.empty());
  EXPECT_EQ(q.size(), 3u);
  // A critical one takes #1, the last sheddable.
  ASSERT_EQ(push(q, "b", C::kCritical), FlowRefusal::kNone);
  ASSERT_EQ(evicted_.size(), 1u);
  EXPECT_EQ(evicted_[0].id, 1u);
  auto stats = q.tenants();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].name, "a");
  EXPECT_EQ(stats[0].evicted, 2u);
  EXPECT_EQ(stats[1].evicted, 1u);  // b's refused sheddable
}

TEST_F(FlowQueueTest, TokenAndTenantLimits) {
  FlowQueueConfig c = enabled_config();
  c.max_tokens = 1000;
  c.tenant_max_requests = 2;
  c.tenant_max_tokens = 500;
  FlowQueue q(c);
  EXPECT_EQ(push(q, "a", C::kStandard, 100), FlowRefusal::kNone);        // 200 tokens
  EXPECT_EQ(push(q, "a", C::kStandard, 100), FlowRefusal::kNone);        // 400
  EXPECT_EQ(push(q, "a", C::kStandard, 10), FlowRefusal::kQueueFull);    // 3rd request
  EXPECT_EQ(push(q, "b", C::kStandard, 500), FlowRefusal::kQueueFull);   // 600 > tenant's 500
  EXPECT_EQ(push(q, "b", C::kStandard, 300), FlowRefusal::kNone);        // 400: pool at 800
  EXPECT_EQ(push(q, "c", C::kStandard, 150), FlowRefusal::kQueueFull);   // pool 1050 > 1000
  EXPECT_EQ(push(q, "c", C::kStandard, 2000), FlowRefusal::kQueueFull);  // larger than the pool
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(q.queued_tokens(), 800u);
}

TEST_F(FlowQueueTest, MaxWaitPerBandTimesOut) {
  FlowQueueConfig c = enabled_config();
  c.max_wait = {0, 10 * kSecond, 2 * kSecond};
  FlowQueue q(c);
  push(q, "a", C::kCritical, 100, 0);         // 1: never times out
  push(q, "a", C::kStandard, 100, 0);         // 2: at 10 s
  push(q, "a", C::kSheddable, 100, kSecond);  // 3: at 3 s
  EXPECT_EQ(q.next_expiry(), 3 * kSecond);
  std::vector<FlowQueue::Removed> out;
  q.expire(3 * kSecond - 1, out);
  EXPECT_TRUE(out.empty());
  q.expire(3 * kSecond, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].id, 3u);
  EXPECT_EQ(out[0].refusal, FlowRefusal::kQueueTimeout);
  EXPECT_EQ(q.next_expiry(), 10 * kSecond);
  q.expire(60 * kSecond, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].id, 2u);
  EXPECT_EQ(q.size(), 1u);
  EXPECT_FALSE(q.next_expiry().has_value());
  EXPECT_EQ(q.tenants()[0].timed_out, 2u);
}

TEST_F(FlowQueueTest, DeadlinesExpireAndUnmeetableOnesAreRefusedAtTheDoor) {
  FlowQueue q(enabled_config());
  EXPECT_EQ(push(q, "a", C::kStandard, 100, 5 * kSecond, 5 * kSecond),
            FlowRefusal::kDeadlineUnmeetable);  // already due
  ASSERT_EQ(push(q, "a", C::kStandard, 100, 0, 2 * kSecond), FlowRefusal::kNone);
  std::vector<FlowQueue::Removed> out;
  q.expire(2 * kSecond, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].refusal, FlowRefusal::kDeadlineUnmeetable);

  // A measured rate of ~1 dispatch/s and 5 requests ahead: a 2 s deadline cannot be met.
  FlowQueue r(enabled_config());
  for (int i = 0; i < 30; ++i) {
    push(r, "a", C::kStandard, 100, i * kSecond);
    r.pop(i * kSecond);
  }
  for (int i = 0; i < 5; ++i) push(r, "a", C::kStandard, 100, 30 * kSecond);
  EXPECT_GT(r.dispatch_rate(30 * kSecond), 0.5);
  EXPECT_EQ(push(r, "b", C::kStandard, 100, 30 * kSecond, 32 * kSecond),
            FlowRefusal::kDeadlineUnmeetable);
  EXPECT_EQ(push(r, "b", C::kStandard, 100, 30 * kSecond, 90 * kSecond), FlowRefusal::kNone);
  // A critical request has nothing ahead in its band: its 2 s deadline is fine.
  EXPECT_EQ(push(r, "b", C::kCritical, 100, 30 * kSecond, 32 * kSecond), FlowRefusal::kNone);
}

TEST_F(FlowQueueTest, RemoveFreesTheSlotAtOnce) {
  FlowQueueConfig c = enabled_config();
  c.max_requests = 2;
  FlowQueue q(c);
  push(q, "a");
  push(q, "b");
  EXPECT_EQ(push(q, "c"), FlowRefusal::kQueueFull);
  EXPECT_TRUE(q.remove(1));
  EXPECT_FALSE(q.remove(1));
  EXPECT_FALSE(q.contains(1));
  EXPECT_EQ(push(q, "c"), FlowRefusal::kNone);
  EXPECT_EQ(drain(q), (std::vector<std::string>{"b:2", "c:4"}));
}

TEST_F(FlowQueueTest, DuplicateIdIsRefused) {
  FlowQueue q(enabled_config());
  ASSERT_EQ(q.enqueue({.id = 9, .tenant = "a"}, 0, evicted_), FlowRefusal::kNone);
  EXPECT_EQ(q.enqueue({.id = 9, .tenant = "b"}, 0, evicted_), FlowRefusal::kQueueFull);
  EXPECT_EQ(q.size(), 1u);
}

TEST_F(FlowQueueTest, HeadListsEachTenantsNextRequestInOrder) {
  FlowQueue q(enabled_config());
  for (int i = 0; i < 3; ++i) q.charge("A", 1, 100, 100, 0);
  push(q, "A");                // 1
  push(q, "B");                // 2, starts at A's counter
  push(q, "B");                // 3
  push(q, "A", C::kCritical);  // 4
  auto head = q.head(10);
  ASSERT_EQ(head.size(), 3u);
  EXPECT_EQ(head[0].band, C::kCritical);
  EXPECT_EQ(head[0].id, 4u);
  // Equal counters: B, never served, before A (the tenant served least recently first).
  EXPECT_EQ(head[1].tenant, "B");
  EXPECT_EQ(head[1].id, 2u);
  EXPECT_EQ(head[2].tenant, "A");
  EXPECT_EQ(head[2].id, 1u);
  EXPECT_EQ(q.head(1).size(), 1u);
}

TEST(FlowQueueConfigTest, ParsesKeysAndRejectsTypos) {
  FlowQueueConfig c;
  std::vector<std::pair<std::string, std::string>> e = {
      {"enabled", "true"},           {"band_order", "weighted"}, {"band_weights.critical", "8"},
      {"max_wait.sheddable", "1.5"}, {"max_requests", "50"},     {"tenant_max_tokens", "9000"},
      {"starvation_bound", "2"},     {"output_weight", "3"},     {"sparse_reserve", "0"},
      {"late_binding", "any"}};
  ASSERT_TRUE(apply_flow_entries(e, c).ok());
  EXPECT_TRUE(c.enabled);
  EXPECT_EQ(c.band_order, BandOrder::kWeighted);
  EXPECT_EQ(c.band_weights[0], 8);
  EXPECT_EQ(c.max_wait[2], 1'500'000'000);
  EXPECT_EQ(c.max_requests, 50u);
  EXPECT_EQ(c.tenant_max_tokens, 9000u);
  EXPECT_EQ(c.starvation_bound, 2 * kSecond);
  EXPECT_EQ(c.output_weight, 3);
  EXPECT_EQ(c.sparse_reserve, 0u);
  EXPECT_EQ(c.late_binding, LateBinding::kAny);
  EXPECT_TRUE(c.validate().ok());

  std::vector<std::pair<std::string, std::string>> typo = {{"max_request", "5"}};
  Status s = apply_flow_entries(typo, c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("max_request"), std::string::npos);
  std::vector<std::pair<std::string, std::string>> bad = {{"max_wait.critical", "-1"}};
  EXPECT_FALSE(apply_flow_entries(bad, c).ok());
  std::vector<std::pair<std::string, std::string>> binding = {{"late_binding", "anywhere"}};
  s = apply_flow_entries(binding, c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("late_binding"), std::string::npos);
  c.max_requests = 0;
  EXPECT_FALSE(c.validate().ok());
  c.max_requests = 1;
  c.band_weights[1] = 0;
  EXPECT_FALSE(c.validate().ok());
}

TEST(FlowRefusalTest, NamesAndStatuses) {
  EXPECT_EQ(to_string(FlowRefusal::kQueueFull), "queue_full");
  EXPECT_EQ(to_string(FlowRefusal::kQueueTimeout), "queue_timeout");
  EXPECT_EQ(to_string(FlowRefusal::kDeadlineUnmeetable), "deadline_unmeetable");
  EXPECT_EQ(http_status(FlowRefusal::kQueueFull), 429);
  EXPECT_EQ(http_status(FlowRefusal::kQueueTimeout), 503);
  EXPECT_EQ(http_status(FlowRefusal::kDeadlineUnmeetable), 429);
}

}  // namespace
}  // namespace kvgate::route
