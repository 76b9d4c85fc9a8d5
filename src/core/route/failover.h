// Failover: what the gateway does with a request whose exchange with an endpoint failed
// (the connection failed or dropped, the endpoint answered 503, it went silent). One
// rule for both shells: `kvgate serve` (gateway/data/proxy.cc: the attempt loop, the stream
// pump and its migration) and `kvgate sim` (sim/cluster_sim.cc), with the same config
// (`retries:` and a pool's `migration:`).
//
// A request's answer comes in legs: the first one, and after each migration a
// continuation on another endpoint. What matters is whether the failed leg's answer had
// begun: its response head had reached the gateway. A stream's engine sends its head
// (200, text/event-stream) when it accepts the request, before any token, as vLLM and
// `kvgate engine` do, and the gateway passes it on to the client at once; a whole answer's
// head comes with the answer.
//
//  - The leg's answer had not begun: nothing of this leg reached the client, and the
//    request may go elsewhere. Retry on another endpoint, the endpoints that failed this
//    leg excluded (RouteRequest::excluded; a continuation also excludes the endpoint its
//    stream left), up to `max_attempts` endpoints per leg; then the request is lost (a
//    502, or a migrated stream's error event).
//  - It had begun: sending the request again would start the answer over (and a whole
//    answer's engine did the work already). A stream moves to another endpoint if it can
//    (the pool migrates streams, the engine gave the token ids: gateway/
//    stream_migration.h) and has moved fewer than `max_migrations` times; else it is lost
//    (a whole answer: a 502; a stream: an error event and `data: [DONE]`).
// Each failure also counts against the endpoint's circuit breaker (circuit_breaker.h).
//
//   const bool failed = !sent || failed_status(sent->status(), /*continuation=*/false);
//   switch (after_failure(config.retries, can_migrate ? pool.max_migrations : 0,
//                         began, tried_this_leg, migrations)) {
//     case FailoverAction::kRetry: excluded.push_back(endpoint); /* route again */ break;
//     case FailoverAction::kMigrate: /* a new leg elsewhere, tried_this_leg = 0 */ break;
//     case FailoverAction::kLost: /* 502, or the stream's error event */ break;
//   }
//
// Pure and stateless; thread-safe.
#pragma once

#include <cstdint>

namespace kvgate::route {

struct RetryConfig {
  int max_attempts = 3;  // endpoints tried per leg before its answer began (1..16)
};

enum class FailoverAction : uint8_t {
  kRetry,    // route again, the endpoints that failed this leg excluded
  kMigrate,  // continue the stream on another endpoint (a new leg)
  kLost,     // the request fails at the client
};

// `began`: the failed leg's answer had begun (its response head reached the gateway).
// `tried`: endpoints tried for this leg so far, the failed one included (>= 1).
// `migrations`: times the stream has moved already. `max_migrations`: the pool's, or 0
// when this request cannot migrate (a whole answer, a stream without token ids, a pool
// that does not migrate).
FailoverAction after_failure(const RetryConfig& retries, int max_migrations, bool began, int tried,
                             int migrations);

// Whether an endpoint's response head with `status` is a failure after_failure decides
// on (else it is the answer, passed to the client as it is). A 503 is (overloaded or
// starting: another endpoint may serve it); a 400 or a 500 is the engine's answer. On a
// continuation leg, whose client already has its 200, anything but 200 is.
bool failed_status(int status, bool continuation);

}  // namespace kvgate::route
