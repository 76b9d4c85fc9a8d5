#include "core/route/failover.h"

namespace kvgate::route {

FailoverAction after_failure(const RetryConfig& retries, int max_migrations, bool streamed,
                             int attempts, int migrations) {
  if (!streamed)
    return attempts < retries.max_attempts ? FailoverAction::kRetry : FailoverAction::kLost;
  return migrations < max_migrations ? FailoverAction::kMigrate : FailoverAction::kLost;
}

}  // namespace kvgate::route
