#include "core/route/failover.h"

#include <gtest/gtest.h>

namespace kvgate::route {
namespace {

using Action = FailoverAction;

TEST(Failover, BeforeTheAnswerBeganRetriesUntilMaxAttemptsEndpointsWereTried) {
  const RetryConfig retries{.max_attempts = 3};
  // tried counts the endpoint that just failed: 1 and 2 leave another try, 3 does not.
  EXPECT_EQ(after_failure(retries, 0, /*began=*/false, 1, 0), Action::kRetry);
  EXPECT_EQ(after_failure(retries, 0, false, 2, 0), Action::kRetry);
  EXPECT_EQ(after_failure(retries, 0, false, 3, 0), Action::kLost);
  EXPECT_EQ(after_failure(retries, 0, false, 4, 0), Action::kLost);
}

TEST(Failover, OneAttemptMeansNoRetry) {
  EXPECT_EQ(after_failure({.max_attempts = 1}, 0, false, 1, 0), Action::kLost);
}

TEST(Failover, BeforeTheAnswerBeganMigrationDoesNotMatter) {
  // A pool that migrates still retries a request whose answer had not begun, and a
  // continuation leg (migrations > 0) retries its own endpoints the same way.
  const RetryConfig retries{.max_attempts = 2};
  EXPECT_EQ(after_failure(retries, 2, false, 1, 0), Action::kRetry);
  EXPECT_EQ(after_failure(retries, 2, false, 1, 1), Action::kRetry);
  EXPECT_EQ(after_failure(retries, 2, false, 2, 1), Action::kLost);
  EXPECT_EQ(after_failure(retries, 2, false, 1, 2),
            Action::kRetry);  // moves used up: still a retry
}

TEST(Failover, AfterTheAnswerBeganNothingIsRetried) {
  // Without migration (a whole answer, or a pool that does not migrate) it is lost,
  // however many endpoints are left to try.
  const RetryConfig retries{.max_attempts = 16};
  EXPECT_EQ(after_failure(retries, 0, /*began=*/true, 1, 0), Action::kLost);
}

TEST(Failover, AfterTheAnswerBeganAStreamMigratesUpToMaxMigrationsTimes) {
  const RetryConfig retries;
  EXPECT_EQ(after_failure(retries, 2, true, 1, 0), Action::kMigrate);
  EXPECT_EQ(after_failure(retries, 2, true, 1, 1), Action::kMigrate);
  EXPECT_EQ(after_failure(retries, 2, true, 1, 2), Action::kLost);
  // The endpoints tried for the leg do not count against its moves.
  EXPECT_EQ(after_failure({.max_attempts = 1}, 1, true, 5, 0), Action::kMigrate);
}

TEST(Failover, OnlyA503FailsAFirstLegAndAnythingBut200AContinuation) {
  EXPECT_TRUE(failed_status(503, /*continuation=*/false));
  for (int status : {200, 400, 404, 429, 500, 502, 504}) {
    EXPECT_FALSE(failed_status(status, false)) << status;  // the client gets it as it is
  }
  EXPECT_FALSE(failed_status(200, /*continuation=*/true));
  for (int status : {400, 429, 500, 503}) {
    EXPECT_TRUE(failed_status(status, true)) << status;
  }
}

TEST(Failover, TheDefaultsAreTheGatewaysDefaults) { EXPECT_EQ(RetryConfig{}.max_attempts, 3); }

}  // namespace
}  // namespace kvgate::route
