// Failover: what the gateway does with a request whose exchange with an endpoint failed
// (the connection failed or dropped, the endpoint answered 503, it went silent). One
// rule for both shells: `kvgate serve` (gateway/proxy.cc) and `kvgate sim`
// (sim/cluster_sim.cc), with the same config (`retries:` and a pool's `migration:`).
//
//  - Nothing reached the client yet: retry on another endpoint. The endpoints that
//    failed this request are excluded from the next decision (RouteRequest::excluded),
//    up to `max_attempts` endpoints in all; then the client gets a 502.
//  - The answer had begun (a streamed token reached the client): a retry would repeat
//    what the client already has. The stream moves to another endpoint if the pool
//    migrates streams and this one has moved fewer than `max_migrations` times
//    (gateway/stream_migration.h; only the endpoint that just failed is excluded); else
//    it is lost (an error event and `data: [DONE]`).
// Each failure also counts against the endpoint's circuit breaker (circuit_breaker.h).
//
//   switch (after_failure(config.retries, pool.max_migrations, streamed, tried, moved)) {
//     case FailoverAction::kRetry: excluded.push_back(failed); /* route again */ break;
//     case FailoverAction::kMigrate: /* continue the stream elsewhere */ break;
//     case FailoverAction::kLost: /* 502, or the stream's error event */ break;
//   }
//
// Pure and stateless; thread-safe.
#pragma once

#include <cstdint>

namespace kvgate::route {

struct RetryConfig {
  int max_attempts = 3;  // endpoints tried per request before any byte reached the client
};

enum class FailoverAction : uint8_t {
  kRetry,    // route again, the failed endpoints excluded
  kMigrate,  // continue the stream on another endpoint
  kLost,     // the request fails at the client
};

// `streamed`: part of the answer reached the client. `attempts`: endpoints tried for
// the request so far, the failed one included (>= 1). `migrations`: times its stream
// has moved already. `max_migrations`: the pool's (0: it does not migrate).
FailoverAction after_failure(const RetryConfig& retries, int max_migrations, bool streamed,
                             int attempts, int migrations);

}  // namespace kvgate::route
