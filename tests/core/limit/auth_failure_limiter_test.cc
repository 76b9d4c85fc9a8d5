#include "core/limit/auth_failure_limiter.h"

#include <gtest/gtest.h>

#include <string>

namespace kvgate::limit {
namespace {

TEST(AuthFailureLimiter, LocksAClientOutForTheRestOfItsWindow) {
  AuthFailureLimiter l({.max_failures = 3, .window = 60 * kSecond});
  const Nanos t0 = 1000 * kSecond;
  EXPECT_FALSE(l.locked_out("10.0.0.1", t0));
  EXPECT_FALSE(l.failed("10.0.0.1", t0));
  EXPECT_FALSE(l.failed("10.0.0.1", t0 + kSecond));
  EXPECT_FALSE(l.locked_out("10.0.0.1", t0 + kSecond));
  EXPECT_TRUE(l.failed("10.0.0.1", t0 + 2 * kSecond));  // the third: locked out now
  EXPECT_EQ(l.locked_out("10.0.0.1", t0 + 2 * kSecond), 58 * kSecond);
  EXPECT_EQ(l.locked_out("10.0.0.1", t0 + 59 * kSecond), kSecond);
  // Others are not affected.
  EXPECT_FALSE(l.locked_out("10.0.0.2", t0 + 2 * kSecond));
  // The window over, the client may try again, with a fresh count.
  EXPECT_FALSE(l.locked_out("10.0.0.1", t0 + 60 * kSecond));
  EXPECT_FALSE(l.failed("10.0.0.1", t0 + 60 * kSecond));
  EXPECT_FALSE(l.locked_out("10.0.0.1", t0 + 61 * kSecond));
}

TEST(AuthFailureLimiter, FailuresSpreadOverWindowsNeverLockOut) {
  AuthFailureLimiter l({.max_failures = 3, .window = 10 * kSecond});
  for (int i = 0; i < 20; ++i) {
    const Nanos t = i * 6 * kSecond;  // two failures per window at most
    EXPECT_FALSE(l.locked_out("c", t)) << i;
    l.failed("c", t);
  }
}

TEST(AuthFailureLimiter, ClientsPastTheTableShareOneCount) {
  AuthFailureLimiter l({.max_failures = 2, .window = 10 * kSecond, .max_clients = 4});
  for (int i = 0; i < 4; ++i) l.failed("known" + std::to_string(i), 0);
  EXPECT_EQ(l.tracked(), 4u);
  // Newcomers while the table is full: counted together, and locked out together.
  l.failed("new-a", kSecond);
  EXPECT_FALSE(l.locked_out("new-b", kSecond));
  EXPECT_TRUE(l.failed("new-b", kSecond));
  EXPECT_TRUE(l.locked_out("new-c", kSecond));
  EXPECT_FALSE(l.locked_out("known0", kSecond));  // one failure of two
  EXPECT_LE(l.tracked(), 5u);
  // Once the known clients' windows are over, a newcomer gets a count of its own.
  EXPECT_FALSE(l.failed("new-d", 10 * kSecond));
  EXPECT_FALSE(l.locked_out("new-e", 10 * kSecond));
  EXPECT_LE(l.tracked(), 4u);
}

}  // namespace
}  // namespace kvgate::limit
