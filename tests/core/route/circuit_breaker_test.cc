#include "core/route/circuit_breaker.h"

#include <gtest/gtest.h>

namespace kvgate::route {
namespace {

using T = CircuitBreakers::Transition;

TEST(CircuitBreakers, OpensAfterConsecutiveFailuresOnly) {
  CircuitBreakers b({.failures = 3, .open_for = 5 * kSecond});
  b.reset(0);
  EXPECT_EQ(b.on_result(0, false, 0), T::kNone);
  EXPECT_EQ(b.on_result(0, false, 1), T::kNone);
  EXPECT_EQ(b.on_result(0, true, 2), T::kNone);  // a success starts the count over
  EXPECT_EQ(b.on_result(0, false, 3), T::kNone);
  EXPECT_EQ(b.on_result(0, false, 4), T::kNone);
  EXPECT_EQ(b.on_result(0, false, 5), T::kOpened);
  EXPECT_TRUE(b.state(0).open());
  EXPECT_EQ(b.state(0).open_until, 5 + 5 * kSecond);
  // Results of requests still in flight while open change nothing.
  EXPECT_EQ(b.on_result(0, false, 6), T::kNone);
  EXPECT_EQ(b.on_result(0, true, 7), T::kNone);
  EXPECT_TRUE(b.state(0).open());
}

TEST(CircuitBreakers, HalfOpensWhenThePeriodEndsThenOneFailureReopens) {
  CircuitBreakers b({.failures = 2, .open_for = kSecond});
  b.reset(0);
  b.on_result(0, false, 0);
  ASSERT_EQ(b.on_result(0, false, 0), T::kOpened);
  EXPECT_TRUE(b.expire(kSecond - 1).empty());
  EXPECT_EQ(b.expire(kSecond), std::vector<EndpointId>{0});
  EXPECT_TRUE(b.state(0).half_open);
  EXPECT_FALSE(b.state(0).open());
  EXPECT_TRUE(b.expire(kSecond).empty());  // once
  // Half-open: the first failure opens it again at once.
  EXPECT_EQ(b.on_result(0, false, 2 * kSecond), T::kOpened);
  EXPECT_EQ(b.state(0).open_until, 3 * kSecond);
}

TEST(CircuitBreakers, ASuccessWhileHalfOpenCloses) {
  CircuitBreakers b({.failures = 1, .open_for = kSecond});
  b.reset(3);
  ASSERT_EQ(b.on_result(3, false, 0), T::kOpened);
  ASSERT_EQ(b.expire(kSecond), std::vector<EndpointId>{3});
  EXPECT_EQ(b.on_result(3, true, kSecond + 1), T::kClosed);
  EXPECT_FALSE(b.state(3).half_open);
  EXPECT_EQ(b.state(3).consecutive_failures, 0u);
}

TEST(CircuitBreakers, EndpointsAreIndependentAndExpireInTheirOwnTime) {
  CircuitBreakers b({.failures = 1, .open_for = 10 * kSecond});
  b.reset(0);
  b.reset(1);
  ASSERT_EQ(b.on_result(0, false, 0), T::kOpened);
  ASSERT_EQ(b.on_result(1, false, 4 * kSecond), T::kOpened);
  EXPECT_EQ(b.expire(10 * kSecond), std::vector<EndpointId>{0});
  EXPECT_TRUE(b.state(1).open());
  EXPECT_TRUE(b.expire(13 * kSecond).empty());
  EXPECT_EQ(b.expire(14 * kSecond), std::vector<EndpointId>{1});
}

TEST(CircuitBreakers, ResetForgetsAReusedId) {
  CircuitBreakers b({.failures = 1, .open_for = kSecond});
  ASSERT_EQ(b.on_result(2, false, 0), T::kOpened);
  b.reset(2);
  EXPECT_FALSE(b.state(2).open());
  EXPECT_EQ(b.state(2).consecutive_failures, 0u);
  EXPECT_TRUE(b.expire(5 * kSecond).empty());
}

}  // namespace
}  // namespace kvgate::route
