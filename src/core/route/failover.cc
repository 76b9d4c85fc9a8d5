#include "core/route/failover.h"

namespace kvgate::route {

FailoverAction after_failure(const RetryConfig& retries, int max_migrations, bool began, int tried,
                             int migrations) {
  if (!began) return tried < retries.max_attempts ? FailoverAction::kRetry : FailoverAction::kLost;
  return migrations < max_migrations ? FailoverAction::kMigrate : FailoverAction::kLost;
}

bool failed_status(int status, bool continuation) {
  return continuation ? status != 200 : status == 503;
}

}  // namespace kvgate::route
